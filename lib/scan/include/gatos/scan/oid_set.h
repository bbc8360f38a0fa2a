// A set of object ids: the walk's record of every tree and blob it has
// seen (millions in a large history), in one flat table. Open addressing
// with linear probing, at most half full; the slot of an id is mixed with a
// per-process random key, so a repository whose ids were ground to share a
// slot cannot turn lookups quadratic.
//
// Thread-safety: none; one owner.
#ifndef GATOS_SCAN_SRC_OID_SET_H_
#define GATOS_SCAN_SRC_OID_SET_H_

#include <git2.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace gatos::scan {

class OidSet {
 public:
  OidSet() : slots_(kInitial), used_(kInitial, 0) {}

  // True when `oid` was not in the set (and is now).
  bool Insert(const git_oid& oid) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    return Place(oid, &slots_, &used_);
  }
  bool Contains(const git_oid& oid) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = Slot(oid) & mask;; i = (i + 1) & mask) {
      if (!used_[i]) return false;
      if (std::memcmp(slots_[i].id, oid.id, GIT_OID_RAWSZ) == 0) return true;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInitial = 1024;  // a power of two

  static uint64_t Key() {
    static const uint64_t key = [] {
      std::random_device rd;
      return ((uint64_t{rd()} << 32) ^ rd()) | 1;
    }();
    return key;
  }
  static size_t Slot(const git_oid& oid) {
    uint64_t h;
    std::memcpy(&h, oid.id, sizeof h);
    h ^= h >> 29;
    h *= Key();
    return static_cast<size_t>(h ^ (h >> 32));
  }
  bool Place(const git_oid& oid, std::vector<git_oid>* slots, std::vector<uint8_t>* used) {
    const size_t mask = slots->size() - 1;
    for (size_t i = Slot(oid) & mask;; i = (i + 1) & mask) {
      if (!(*used)[i]) {
        (*used)[i] = 1;
        (*slots)[i] = oid;
        ++size_;
        return true;
      }
      if (std::memcmp((*slots)[i].id, oid.id, GIT_OID_RAWSZ) == 0) return false;
    }
  }
  void Grow() {
    std::vector<git_oid> slots(slots_.size() * 2);
    std::vector<uint8_t> used(slots_.size() * 2, 0);
    size_ = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (used_[i]) Place(slots_[i], &slots, &used);
    }
    slots_.swap(slots);
    used_.swap(used);
  }

  std::vector<git_oid> slots_;
  std::vector<uint8_t> used_;
  size_t size_ = 0;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_OID_SET_H_
