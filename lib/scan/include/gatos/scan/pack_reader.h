// Reads objects out of a PackStore: entry headers, zlib inflation, and
// delta chains resolved against a cache of recently produced objects, as
// git's own delta-base cache does. Reading in pack order (bases come before
// the deltas that use them) makes nearly every base a cache hit.
//
// Bounds: every size and offset comes from a possibly hostile pack and is
// checked; a delta chain longer than kMaxDeltaDepth, an object larger than
// the caller's limit, a delta whose base size or result size disagrees with
// its header, or a zlib stream that does not end where its size says are
// errors (DataLoss naming the pack and offset; FailedPrecondition for the
// size limit; NotFound for a REF_DELTA base outside the store), never a
// crash or an unbounded allocation. Callers fall back to libgit2 on error.
//
// Thread-safety: a PackReader belongs to one thread (its zlib stream and
// cache are not shared); several readers may share one PackStore.
#ifndef GATOS_SCAN_SRC_PACK_READER_H_
#define GATOS_SCAN_SRC_PACK_READER_H_

#include <zlib.h>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/scan/pack_store.h"

namespace gatos::scan {

enum class ObjectKind : int { kCommit = 1, kTree = 2, kBlob = 3, kTag = 4 };
// "commit", "tree", "blob", "tag", as git names them.
const char* ObjectKindName(ObjectKind k);

inline constexpr size_t kMaxDeltaDepth = 10000;

class PackReader {
 public:
  // `cache_bytes`: the most the cache of produced objects holds.
  PackReader(const PackStore& store, size_t cache_bytes);
  ~PackReader();
  PackReader(const PackReader&) = delete;
  PackReader& operator=(const PackReader&) = delete;

  // The kind and size of the object at `loc`, reading only entry headers
  // and the first bytes of a delta.
  Status Header(PackLocation loc, ObjectKind* kind, uint64_t* size);

  // The object at `loc`, whole. `max_bytes` bounds it and every base its
  // delta chain produces (FailedPrecondition beyond).
  Status Read(PackLocation loc, uint64_t max_bytes, ObjectKind* kind,
              std::shared_ptr<const std::string>* data);

  struct Stats {
    uint64_t objects = 0;     // Read calls that succeeded
    uint64_t cache_hits = 0;  // bases (or objects) found in the cache
    uint64_t inflated = 0;    // entries inflated
    uint64_t deltas = 0;      // deltas applied
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Entry;
  struct Cached {
    uint64_t key;
    ObjectKind kind;
    std::shared_ptr<const std::string> data;
  };
  Status Parse(PackLocation loc, Entry* e) const;
  Status Inflate(const Entry& e, uint64_t size, std::string* out);
  Status InflatePrefix(const Entry& e, std::string* out, size_t want);
  const Cached* Lookup(uint64_t key);
  void Remember(uint64_t key, ObjectKind kind, std::shared_ptr<const std::string> data);
  Status Damaged(PackLocation loc, const std::string& what) const;

  const PackStore& store_;
  size_t cache_budget_;
  size_t cache_used_ = 0;
  std::list<Cached> lru_;  // most recent first
  std::unordered_map<uint64_t, std::list<Cached>::iterator> index_;
  z_stream zs_{};
  bool zs_ready_ = false;
  Stats stats_;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_PACK_READER_H_
