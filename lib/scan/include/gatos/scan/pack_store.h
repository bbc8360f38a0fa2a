// A repository's pack files, read directly: each .idx parsed (version 2)
// and each .pack mapped read-only, so scanning threads can read objects in
// pack order without libgit2's shared pack locks and delta-base cache.
//
// This is a fast path only: an object that is not in a pack this store
// opened (a loose object, an alternate, a pack with a version-1 index) is
// not found here and the caller reads it through libgit2. Every length and
// offset read from the files is checked; a pack or index that is damaged
// or hostile is skipped when opening (its objects then come from libgit2,
// which reports the damage), and reading a damaged entry is an error
// (DataLoss) naming the pack, never a crash.
//
// Thread-safety: immutable after Open; shared by any number of threads.
#ifndef GATOS_SCAN_SRC_PACK_STORE_H_
#define GATOS_SCAN_SRC_PACK_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos::scan {

inline constexpr size_t kOidBytes = 20;

struct PackLocation {
  uint32_t pack = 0;    // index into PackStore's packs
  uint64_t offset = 0;  // of the object's entry header in the .pack
};

class PackStore {
 public:
  // Opens every objects/pack/pack-*.idx of the git directory `git_dir` with
  // its .pack. Packs that cannot be used are skipped (see above) and counted
  // in skipped(). Never fails for a repository without packs.
  static std::unique_ptr<PackStore> Open(const std::string& git_dir);
  ~PackStore();
  PackStore(const PackStore&) = delete;
  PackStore& operator=(const PackStore&) = delete;

  // Where the object with this 20-byte id is, or nullopt.
  std::optional<PackLocation> Find(const unsigned char* oid) const;

  size_t pack_count() const { return packs_.size(); }
  size_t skipped() const { return skipped_; }
  size_t object_count() const;
  // The bytes of pack `pack` (its whole .pack file) and its name for errors.
  std::string_view PackBytes(uint32_t pack) const;
  const std::string& PackName(uint32_t pack) const;

 private:
  struct Pack;
  PackStore() = default;
  std::vector<std::unique_ptr<Pack>> packs_;
  size_t skipped_ = 0;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_PACK_STORE_H_
