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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/keys.h"
#include "gatos/lease.h"
#include "gatos/policy.h"
#include "gatos/status.h"
#include "gatos/trailers.h"

namespace gatos {

inline constexpr char kJobsPrefix[] = "refs/gatos/jobs/";
inline constexpr char kSubmitPrefix[] = "refs/gatos/submit/";
inline constexpr char kZeroOid[] = "0000000000000000000000000000000000000000";

// refs/gatos/jobs/<job_hex>/<leaf>, leaf one of job, lease, result, cancel.
std::string JobRef(std::string_view job_hex, std::string_view leaf);
// refs/gatos/jobs/<job_hex>/claims/<worker_hex>
std::string ClaimRef(std::string_view job_hex, std::string_view worker_hex);

struct CommitInfo {
  std::string id;
  std::string tree;
  std::vector<std::string> parents;
  std::string message;
  int64_t time_s = 0;           // committer time
  std::string signature;        // gpgsig header (armored), "" if unsigned
  std::string signed_data;      // the commit bytes the signature covers
};

struct TreeEntry {
  std::string name;
  std::string id;
  uint32_t mode = 0100644;  // 0100644 blob, 0100755 executable, 040000 tree
  bool is_tree() const { return mode == 040000; }
};

struct RefUpdate {
  std::string name;
  std::string old_id;  // "" = the ref must not exist
  std::string new_id;  // "" = delete
};

enum class ObjectType { kCommit, kTree, kBlob };

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
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  const std::string& path() const { return path_; }

  // "" when the ref does not exist.
  Result<std::string> ResolveRef(const std::string& name);
  // NotFound when refs/gatos/jobs/<hex>/job does not exist.
  Result<JobSnapshot> ReadJob(std::string_view job_hex);
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

  // Policy at refs/gatos/policy (or at a given commit).
  Result<Policy> ReadPolicy();
  Result<Policy> ReadPolicyAt(const std::string& commit_id);
  // Writes a policy commit on top of the current one and moves the ref (CAS).
  Result<std::string> WritePolicy(const Policy& policy, const std::string& message,
                                  const Ed25519PrivateKey& ledger_key, int64_t time_ms);

  // Opaque libgit2 handle for code inside lib/src/git.
  void* raw() { return repo_; }

 private:
  Ledger(void* repo, std::string path) : repo_(repo), path_(std::move(path)) {}
  void* repo_;
  std::string path_;
};

// The empty tree's id (git's well-known constant).
inline constexpr char kEmptyTreeId[] = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

}  // namespace gatos

#endif  // GATOS_LEDGER_H_
