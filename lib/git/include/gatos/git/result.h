// Result commits (PROTOCOL section 5): building them on a worker that has no
// repository, shipping their objects as a batch, and checking them.
//
// A result commit has parents [job commit, lease commit of the winning
// claim], a tree holding poe.json, stdout, stderr and outputs/..., the
// trailers Job-Id, Proof-Of-Execution, Worker-Id, Attest-Program,
// Attest-Sig, Status and Lease-Epoch, and a gpgsig header (SSHSIG, namespace
// "git") by the worker key. docs/ledger-format.md is the contract.
//
// The same CheckResultCommit serves the ledger (worker RPC and git push) and
// the auditor, so a result the ledger accepts is one the auditor verifies.
//
// Thread-safety: pure functions on value types; ObjectLookup callbacks are
// called on the calling thread only.
#ifndef GATOS_RESULT_H_
#define GATOS_RESULT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos {

// Object batch wire format: "GATOSOB1", u32 count, then per object u8 type
// (1 commit, 2 tree, 3 blob), u32 length, data (integers big-endian). Ids are
// not sent: the receiver recomputes them, so an object cannot lie about its id.
std::string EncodeObjectBatch(const std::vector<GitObject>& objects);
struct BatchLimits {
  size_t max_bytes = 4 << 20;  // sum of object sizes
  size_t max_objects = 4096;
};
// InvalidArgument for a malformed or truncated batch, an unknown type, or
// one over `limits` (the message says which object and which limit).
Result<std::vector<GitObject>> DecodeObjectBatch(std::string_view bytes, const BatchLimits& limits);

// One file of a tree to build, path '/'-separated ("stdout", "outputs/a/b").
struct ResultFile {
  std::string path;
  std::string data;
  bool executable = false;
};

// Trees and blobs for `files`. InvalidArgument for a path CheckResultPath
// refuses (result_path.h: the rule the ledger applies), a path given twice,
// or a path that is both a file and a directory.
// Returns the root tree id; objects are appended to *objects.
Result<std::string> BuildTreeObjects(const std::vector<ResultFile>& files,
                                     std::vector<GitObject>* objects);

struct ResultBuildInput {
  std::string job_commit;
  std::string lease_commit;  // the claim commit of the lease the worker holds
  Poe poe;                   // everything but outputs, which the builder fills
  std::vector<ResultFile> files;
  std::string committer_name = "gatos worker";
  std::string committer_email = "worker@gatos.invalid";
  int64_t time_ms = 0;
};

struct BuiltResult {
  std::string commit_id;
  std::string poe_json;
  std::vector<GitObject> objects;  // commit, trees and blobs, commit first
};

// Hashes every file into poe.outputs, serializes poe.json, signs it (DSSE,
// Attest-Sig) and the commit (SSHSIG) with `worker_key`. `attest_program` is
// "blake3:<hex>" of the worker binary. InvalidArgument for a bad path
// (CheckResultPath, "poe.json" at the top, a file that is also a directory).
Result<BuiltResult> BuildResult(const ResultBuildInput& in, const Ed25519PrivateKey& worker_key);

// Reads objects by id: NotFound when absent.
using ObjectLookup = std::function<Result<std::pair<ObjectType, std::string>>(const std::string& id)>;

// A lookup over a batch first, then `fallback` (may be empty).
ObjectLookup BatchLookup(const std::vector<GitObject>* batch, ObjectLookup fallback);
// A lookup over a ledger's repository.
ObjectLookup LedgerLookup(Ledger* ledger);

struct ResultCheck {
  std::string name;    // stable check name, e.g. "poe_hash", "tree_matches_outputs"
  bool ok = false;
  std::string detail;  // why it failed (or what it checked)
};

// What a result commit says, once its self-contained checks passed.
struct ParsedResult {
  std::string commit_id;
  std::string tree;
  std::vector<std::string> parents;
  std::string job_hex;
  std::string worker_hex;
  int64_t epoch = 0;
  std::string status;
  std::string attest_program;  // "blake3:<hex>"
  std::string attest_sig_hex;
  std::string poe_json;
  Poe poe;
  int64_t commit_time_s = 0;
  std::vector<PoeOutput> tree_files;  // every blob of the tree but poe.json
};

struct ResultReport {
  std::vector<ResultCheck> checks;  // in order; stops after a check later ones depend on
  ParsedResult parsed;              // filled as far as the checks got
  bool ok() const;
  // The first failed check, or nullptr.
  const ResultCheck* first_failure() const;
};

struct ResultCheckLimits {
  size_t max_file_bytes = 4 << 20;
  size_t max_files = 4096;
  size_t max_depth = 16;
};

// Checks what a result commit proves by itself: it is a commit with two
// parents; every trailer is present once and well-formed; poe.json is
// canonical, its BLAKE3 equals Proof-Of-Execution and its job, worker,
// epoch and status agree with the trailers; the tree holds exactly
// poe.json plus the files listed in the PoE outputs, with matching sizes and
// hashes; Attest-Sig verifies over PAE(poe.json) for Worker-Id; the commit's
// SSH signature verifies (namespace git) and was made by Worker-Id's key.
// Not checked here (the caller's context): whether parents are this job's
// commit and a lease of this worker and epoch, and policy membership.
//
// `tree`, when given, receives the blobs of the tree as read and checked
// here (path -> blob id and bytes, poe.json included), so that a caller that
// checks more of the result (the provenance envelope) reads no object twice.
struct ResultTreeBlob {
  std::string id;
  std::string data;
};
using ResultTreeData = std::map<std::string, ResultTreeBlob>;
//
// `signatures_verified`: the caller verified Attest-Sig and the SSH signature
// of this very commit before (an auditor's log replay, then its per-job
// pass): they are not verified again; every other check runs.
ResultReport CheckResultCommit(const ObjectLookup& lookup, const std::string& commit_id,
                               const ResultCheckLimits& limits = {}, ResultTreeData* tree = nullptr,
                               bool signatures_verified = false);

}  // namespace gatos

#endif  // GATOS_RESULT_H_
