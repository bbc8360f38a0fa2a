// The ledger: one git repository whose refs under refs/gatos/ are the whole
// state of the job plane (docs/ledger-format.md). This class is the git layer:
// reading job snapshots, writing objects and signed commits, and moving refs
// with compare-and-swap.
//
// Thread-safety: NOT thread-safe. A Ledger owns one git_repository and belongs
// to the thread that opened it. Other processes (git hooks, another gatosd
// thread with its own Ledger) may write the same repository: every ref update
// is a CAS under git's .lock files, so they interleave safely.
#ifndef GATOS_LEDGER_H_
#define GATOS_LEDGER_H_

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/model/job_state.h"
#include "gatos/model/policy.h"
#include "gatos/model/refs.h"
#include "gatos/model/status.h"
#include "gatos/model/trailers.h"

namespace gatos {

class BackgroundCloser;  // gatos/sys/background_closer.h

struct CommitInfo {
  std::string id;
  std::string tree;
  std::vector<std::string> parents;
  std::string message;
  int64_t time_s = 0;           // committer time
  std::string signature;        // gpgsig header (armored), "" if unsigned
  std::string signed_data;      // the commit bytes the signature covers
};

struct RefUpdate {
  std::string name;
  std::string old_id;  // "" = the ref must not exist
  std::string new_id;  // "" = delete
};

// A policy commit built in memory: tree (policy.json, submitters, workers,
// operators, ledger.pub) and a commit with `parent` (when given), signed by
// `signer` (the ledger key in force, which for a key rotation is the old
// key). objects: commit first.
Result<std::vector<GitObject>> BuildPolicyCommit(const Policy& policy, const std::string& parent,
                                                 const std::string& message,
                                                 const Ed25519PrivateKey& signer, int64_t time_ms);

class Ledger {
 public:
  // Creates a bare repository at `path` (or accepts an existing empty one).
  static Status InitRepository(const std::string& path);
  // AlreadyExists... NotFound when `path` is not a git repository.
  static Result<std::unique_ptr<Ledger>> Open(const std::string& path);
  // For git hooks: honours GIT_DIR / GIT_OBJECT_DIRECTORY /
  // GIT_ALTERNATE_OBJECT_DIRECTORIES so that objects still in the push
  // quarantine are visible.
  static Result<std::unique_ptr<Ledger>> OpenFromEnv();
  // For the hooks of the ledger's push front door (<ledger>/push, whose
  // objects directory is the ledger's own): opens the ledger at `path` and,
  // when git runs the hook with a push quarantine (GIT_QUARANTINE_PATH), reads
  // the objects still in it too. Refs are the ledger's.
  static Result<std::unique_ptr<Ledger>> OpenForHook(const std::string& path);
  // libgit2 keeps the objects it reads in one cache per process (256 MB). A
  // pass that reads each object about once, as the auditor's full replay
  // does, gains nothing from it, and once it is full every object read
  // evicts others, which costs more than the read itself (a full replay of
  // 300,000 jobs: 681 us of CPU per job with the cache, 523 without). Turns
  // it off for the whole process: call before other threads read objects.
  static void DisableObjectCache();
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  const std::string& path() const { return path_; }

  // "" when the ref does not exist.
  Result<std::string> ResolveRef(const std::string& name);
  // Calls fn for every job (every refs/gatos/jobs/<hex>/job).
  Status ForEachJob(const std::function<void(std::string_view job_hex)>& fn);
  // Every ref name under `prefix`.
  Result<std::vector<std::string>> ListRefs(const std::string& prefix);

  bool HasObject(const std::string& id);
  Result<CommitInfo> ReadCommit(const std::string& id);
  Result<std::vector<TreeEntry>> ReadTree(const std::string& id);
  // InvalidArgument when the blob is larger than max_bytes.
  Result<std::string> ReadBlob(const std::string& id, size_t max_bytes);
  // The blob at `path` in the commit's tree; NotFound if absent.
  Result<std::string> ReadFileAtCommit(const std::string& commit_id, const std::string& path,
                                       size_t max_bytes);
  // Raw object bytes and type, for shipping objects between repositories.
  Result<std::pair<ObjectType, std::string>> ReadRawObject(const std::string& id);

  Result<std::string> WriteBlob(std::string_view data);
  Result<std::string> WriteTree(std::vector<TreeEntry> entries);
  Result<std::string> WriteRawObject(ObjectType type, std::string_view data);
  // A commit authored and committed by `name <email>` at `time_ms`, signed in
  // git's SSH format with `key` when given. Moves no ref.
  Result<std::string> WriteCommit(const std::string& tree, const std::vector<std::string>& parents,
                                  const std::string& message, const Ed25519PrivateKey* key,
                                  const std::string& name, const std::string& email,
                                  int64_t time_ms);

  // Applies every update or none. Aborted when any ref's current value is not
  // the expected old value (someone else moved it first).
  Status UpdateRefs(const std::vector<RefUpdate>& updates, std::string_view why);

  // ---- the ledger's batch write path (gatos_ledger's writer) ----

  // Directory syncs a durable pack write left to the CasRef that publishes
  // the pack: the pack and the ref's next value are created in the same
  // spool directory, whose one sync then covers both (a batch's commit is
  // six syncs instead of seven).
  struct DeferredSyncs {
    std::string spool;              // the spool directory the pack came from ("" = none)
    std::vector<std::string> dirs;  // to sync, in order
  };

  // Writes the objects as one pack (pack_writer.h) and makes them visible to
  // this handle's object database. With `remember`, they are also kept for
  // reads soon after (see Remember). With `fsync` and `defer`, the pack and
  // its index are durable on return but their directory entries only once
  // CasRef(..., defer) has synced the directories: give the same `defer` to
  // the CasRef that makes the pack reachable.
  Status WriteObjectsPacked(const std::vector<const GitObject*>& objects, bool fsync, bool remember = true,
                            DeferredSyncs* defer = nullptr);
  // Keeps an object this handle wrote (up to 64 MiB of them, oldest out
  // first), so that reading it back soon needs no rescan of the pack
  // directory by libgit2. For objects written with remember = false that
  // the caller expects to read back.
  void Remember(GitObject&& o);
  // Moves one ref with a compare-and-swap under git's lock protocol
  // (<ref>.lock, O_EXCL), durably when `fsync` (the lock file is fdatasync'ed
  // before the rename and the directory after it). The next value is
  // written in the spool (SetSpool) and linked as the lock, with or
  // without fsync. Aborted when the ref is
  // locked or not at `old_id` ("" = must not exist). The log ref moves this
  // way: it is the commit point of a batch.
  // With `deferred` (from WriteObjectsPacked), the ref's next value is
  // created in the pack's spool directory and the deferred directories are
  // synced before the ref moves, whatever this returns.
  Status CasRef(const std::string& name, const std::string& old_id, const std::string& new_id,
                bool fsync, DeferredSyncs* deferred = nullptr);
  // Sets refs to the given values ("" = delete) without checking old values
  // and without fsync: the refs under refs/gatos/jobs/ are a view of the log,
  // repaired from it after a crash. Each ref is replaced atomically (lock
  // file + rename). Refs held in packed-refs are deleted through libgit2.
  Status SetViewRefs(const std::vector<std::pair<std::string, std::string>>& refs);

  // Files the writer creates only to rename them into place (its packs and
  // their indexes, the next value of a ref moved by CasRef) are
  // created in `dirs`, one directory per call in turn, instead of next to
  // their final names. On ext4 without a journal a new inode costs a check
  // of every inode its block group freed in the last minutes, and the
  // ledger frees packs (the background repack) and log ref values at the
  // rate it writes them: allocated in objects/pack and refs/gatos, each new
  // file cost over a millisecond. Spread over directories of their own
  // (dir_layout.h), that cost stays small. Every dir must be on the
  // ledger's file system (else this returns false and changes nothing).
  bool SetSpool(std::vector<std::string> dirs);

  // From now on CasRef and SetViewRefs keep a ref file they replace or
  // delete (and a ref directory they remove) open across the rename, unlink
  // or rmdir, and close it on a thread of its own (background_closer.h):
  // where the file system discards freed blocks synchronously, freeing them
  // is then off the caller's path. For the ledger writer's threads.
  void CloseReplacedInBackground();

  // Adds `value` to the repository's multi-valued config `name` (in its own
  // config file) unless present.
  Status AddConfigValue(const std::string& name, const std::string& value);

  // Policy at refs/gatos/policy (or at a given commit).
  Result<Policy> ReadPolicy();
  Result<Policy> ReadPolicyAt(const std::string& commit_id);

  // Opaque libgit2 handle for code inside lib/src/git.
  void* raw() { return repo_; }

 private:
  Ledger(void* repo, std::string path);
  // Objects this handle wrote lately (WriteObjectsPacked), served without
  // asking libgit2, which would have to rescan the pack directory first.
  const GitObject* Recent(const std::string& id) const;
  // Next directory of the spool ("" without one).
  std::string NextSpoolDir();

  void* repo_;
  std::string path_;
  std::unordered_map<std::string, GitObject> recent_;
  std::deque<std::string> recent_order_;
  size_t recent_bytes_ = 0;
  std::vector<std::string> spool_;  // SetSpool
  size_t spool_next_ = 0;
  std::unique_ptr<BackgroundCloser> closer_;  // CloseReplacedInBackground
};

}  // namespace gatos

#endif  // GATOS_LEDGER_H_
