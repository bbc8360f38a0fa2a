// Proof bundles (`gatos proof JOB`, `gatos verify --bundle`): one file that
// proves, offline and without a clone of the ledger, that a job's result is
// genuine and is in the ledger's append-only log as the ledger's signed
// checkpoint (and its witnesses) saw it. docs/auditor-guide.md, section 12.
//
// A bundle is canonical JSON (RFC 8785):
//   {"bundle": "gatos-proof-bundle/v1",
//    "job": "blake3:<hex>", "job_commit": <40 hex>, "result_commit": <40 hex>,
//    "checkpoint": <the C2SP tlog-checkpoint note, with any cosignatures>,
//    "entries": [{"role": "job"|"result"|"head", "index": <n>,
//                 "log_commit": <40 hex>, "proof": [<base64 hash>...]}],
//    "objects": <base64 of a GATOSOB1 object batch (result.h)>}
// The objects are the job commit, its tree and job.yaml; the result commit
// and its whole tree; the three log commits; and, from the head log
// commit's tree, the trees on the path to the job's record and the record.
// Entry "job" is the log commit that adopted the job commit (a parent of
// it), "result" the one that recorded the result, "head" the last entry of
// the checkpoint's tree (index size - 1), whose state index holds the job's
// record naming that job commit and that result as final.
//
// Thread-safety: pure functions, except BuildProofBundle, which uses the
// Ledger and LogTree of the calling thread.
#ifndef GATOS_PROOF_BUNDLE_H_
#define GATOS_PROOF_BUNDLE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/audit/log_tree.h"
#include "gatos/crypto/merkle.h"
#include "gatos/crypto/signed_note.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/model/public_key.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kProofBundleFormat[] = "gatos-proof-bundle/v1";
inline constexpr size_t kMaxProofBundleBytes = 8 << 20;

struct ProofBundleEntry {
  std::string role;  // "job", "result", "head"
  uint64_t index = 0;
  std::string log_commit;
  std::vector<MerkleHash> proof;
};

struct ProofBundle {
  std::string job_hex;
  std::string job_commit;
  std::string result_commit;
  std::string checkpoint;
  std::vector<ProofBundleEntry> entries;
  std::vector<GitObject> objects;
};

std::string EncodeProofBundle(const ProofBundle& b);
// Strict: every field once, of its type, known roles once each, ids 40 hex,
// at most kMaxProofBundleBytes. InvalidArgument says what is wrong.
Result<ProofBundle> ParseProofBundle(std::string_view text);

// The bundle of `job_hex`'s final result under `checkpoint` (a signed note
// of this ledger's tree, at most as large as `tree`, whose root it must
// match: DataLoss otherwise). FailedPrecondition when the job has no final
// result in the checkpoint's state; NotFound for an unknown job.
Result<ProofBundle> BuildProofBundle(Ledger& ledger, LogTree& tree, const std::string& job_hex,
                                     const std::string& checkpoint);

struct BundleCheck {
  std::string name;  // stable: bundle, checkpoint, witness_quorum, inclusion_<role>, log_entry_<role>, ...
  bool ok = false;
  std::string detail;
};
struct BundleReport {
  std::string job_hex;
  std::string result_status;
  std::string worker_id;
  uint64_t tree_size = 0;
  std::string origin;
  std::vector<std::string> cosigners;
  std::vector<BundleCheck> checks;
  bool ok() const;
  const BundleCheck* first_failure() const;
};
struct BundleVerifyOptions {
  Ed25519PublicKey ledger_key;
  std::vector<NoteVerifierKey> witnesses;  // type 0x04 cosigner keys
  size_t min_witnesses = 0;
};
// Every check of docs/auditor-guide.md section 12; stops at the first
// failure (later checks depend on earlier ones).
BundleReport VerifyProofBundle(const ProofBundle& b, const BundleVerifyOptions& options);
nlohmann::json BundleReportToJson(const BundleReport& r);

}  // namespace gatos

#endif  // GATOS_PROOF_BUNDLE_H_
