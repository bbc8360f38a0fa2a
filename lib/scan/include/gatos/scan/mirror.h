// Repository targets and their local bare mirrors.
//
// A target is named by its normalized URL (the "repo key"): local paths and
// file:// URLs become "file://" + the absolute, symlink-free path of the
// repository (a trailing "/" or "/.git" dropped); remote URLs lose
// credentials, a trailing "/" and ".git", and get a lowercase scheme and
// host. The mirror lives in <state-dir>/mirrors/<BLAKE3 hex of the key>, so
// the same repository spelled differently shares one mirror and one state.
//
// Thread-safety: pure functions, except SyncMirror, which takes an exclusive
// lock on the mirror (flock) for the duration of the MirrorLock it returns.
#ifndef GATOS_SCAN_MIRROR_H_
#define GATOS_SCAN_MIRROR_H_

#include <string>
#include <string_view>

#include "gatos/model/status.h"

namespace gatos::scan {

struct RepoTarget {
  std::string key;        // normalized, credential-free: safe to print and store
  std::string fetch_url;  // what libgit2 fetches from (may hold credentials: never print)
  bool local = false;
};

// InvalidArgument for an empty argument, a URL with a scheme libgit2 cannot
// fetch, or a local path that does not exist (NotFound).
Result<RepoTarget> NormalizeRepo(std::string_view arg);

// <state_dir>/mirrors/<hex>
std::string MirrorPath(const RepoTarget& target, const std::string& state_dir);

// Holds the exclusive lock on one mirror; releases it on destruction.
class MirrorLock {
 public:
  MirrorLock() = default;
  explicit MirrorLock(int fd) : fd_(fd) {}
  ~MirrorLock();
  MirrorLock(MirrorLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  MirrorLock& operator=(MirrorLock&& o) noexcept;
  MirrorLock(const MirrorLock&) = delete;
  MirrorLock& operator=(const MirrorLock&) = delete;

 private:
  int fd_ = -1;
};

// Locks the mirror, then clones it (bare, all refs: "+refs/*:refs/*") on
// first use or fetches with prune afterwards, so force-pushes and deleted
// refs are reflected. Errors name the repo key, never the fetch URL:
// Unavailable for network/OS failures (retry), NotFound/InvalidArgument when
// the source is not a repository.
Status SyncMirror(const RepoTarget& target, const std::string& state_dir, MirrorLock* lock);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_MIRROR_H_
