// Where a scanning thread reads objects from: the packs directly
// (PackReader, in the order the caller asks: pack order is fastest), and
// libgit2 for anything the packs cannot give (loose objects, alternates,
// an entry the fast path rejects). libgit2 is the reference: when both
// fail, its error is the one reported.
//
// Thread-safety: one ObjectSource per thread (it owns a libgit2 repository
// handle and a PackReader); the PackStore is shared.
#ifndef GATOS_SCAN_SRC_OBJECT_SOURCE_H_
#define GATOS_SCAN_SRC_OBJECT_SOURCE_H_

#include <git2.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/status.h"
#include "gatos/scan/pack_reader.h"
#include "gatos/scan/pack_store.h"

namespace gatos::scan {

class ObjectSource {
 public:
  // Opens the git directory `git_dir` for libgit2; `store` (may be null)
  // for direct reads, with a cache of `cache_bytes`.
  static Result<std::unique_ptr<ObjectSource>> Open(const std::string& git_dir,
                                                    const PackStore* store, size_t cache_bytes);
  ~ObjectSource();
  ObjectSource(const ObjectSource&) = delete;
  ObjectSource& operator=(const ObjectSource&) = delete;

  // Where the object is in the packs, for ordering reads (nullopt: not in a
  // pack read directly).
  std::optional<PackLocation> Locate(const git_oid& oid) const;

  // The size of the object `oid` of kind `want`. `loc`: from Locate, if
  // known. NotFound/DataLoss from libgit2 as GitError says.
  Status Size(const git_oid& oid, const std::optional<PackLocation>& loc, ObjectKind want,
              uint64_t* size);

  // The object's bytes, valid until the next Read on this source.
  Status Read(const git_oid& oid, const std::optional<PackLocation>& loc, ObjectKind want,
              uint64_t max_bytes, std::string_view* data);

  // The same, shared: stays valid as long as the caller holds it (a copy
  // when libgit2 served it).
  Status ReadShared(const git_oid& oid, const std::optional<PackLocation>& loc, ObjectKind want,
                    uint64_t max_bytes, std::shared_ptr<const std::string>* data);

  // Reads the fast path could not serve (for the profile in docs/scan.md).
  uint64_t fallbacks() const { return fallbacks_; }
  const PackReader::Stats* pack_stats() const { return reader_ ? &reader_->stats() : nullptr; }

 private:
  ObjectSource() = default;
  git_repository* repo_ = nullptr;  // owned
  git_odb* odb_ = nullptr;          // owned
  const PackStore* store_ = nullptr;
  std::unique_ptr<PackReader> reader_;
  std::shared_ptr<const std::string> held_;  // the last Read from the packs
  git_odb_object* held_obj_ = nullptr;       // or from libgit2
  uint64_t fallbacks_ = 0;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_OBJECT_SOURCE_H_
