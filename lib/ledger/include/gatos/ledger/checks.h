// What the ledger checks before a request may change anything: job commits
// (from a push, an RPC submit or the CLI), signed worker and user requests,
// and results. Pure functions of their inputs and the policy, so every
// transport (NATS RPC, git push, the CLI) and the auditor apply the same
// rules.
//
// Thread-safety: pure functions.
#ifndef GATOS_LEDGER_CHECKS_H_
#define GATOS_LEDGER_CHECKS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/git/result.h"
#include "gatos/model/decision.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"
#include "gatos/model/status.h"

namespace gatos {

// A validated job commit.
struct JobCommitCheck {
  std::string job_hex;
  std::string commit;
  Manifest manifest;
  std::string signer;         // principal of the submitter key, "" in dev mode when unsigned
  std::string signer_key_hex;  // the key that signed the commit ("" when unsigned)
  int64_t priority = 5;        // its Priority trailer (scheduling.h), 5 without one
};

// Validates a job commit as a push or submit would: job.yaml is a regular
// file (mode 100644 or 100755, not a symlink or a submodule) at the top of
// the tree, parses under the policy's limits, its job id equals
// `expected_hex` when given and the Job-Id trailer, policy_root (if any)
// matches, and the commit is signed by an allowed submitter (unless dev
// mode) that the policy lets use the job's pool; a Priority trailer, if
// any, is one digit 0-9. `lookup` finds the commit's objects (a push quarantine, an RPC
// batch, or the ledger). Errors are InvalidArgument / PermissionDenied with a
// message for the user.
//
// `verified_signer`: the auditor checks job commits' SSH signatures on other
// threads ahead of its replay; when the commit's signature is by this key,
// verified there over this same commit (same id, same bytes), it is not
// verified a second time. Everything else is checked as without it.
Result<JobCommitCheck> CheckJobCommit(const ObjectLookup& lookup, const std::string& commit_id,
                                      std::string_view expected_hex, const Policy& policy,
                                      int64_t now_ms, const Ed25519PublicKey* verified_signer = nullptr);

// What the policy's settings say of a parsed manifest: its timeout under
// max_timeout_seconds, its resources under the job maxima, every git input
// under input_url_prefixes (when set), its policy_root (when set) this
// policy's. CheckJobCommit calls it for a submitted job; the writer and the
// auditor for each schedule's fired job, with the policy in force at the
// fire. InvalidArgument / PermissionDenied with a message for the user.
Status CheckManifestPolicy(const Manifest& m, const Policy& policy);

// A metric label for a refused job commit (gatos_rejected_total{reason}):
// unsigned, untrusted_signer, bad_signature, wrong_job_id, missing_trailer,
// policy_root, not_a_file or bad_manifest.
std::string RejectReasonLabel(const Status& s);

// A signed lease request (claim or renew) as the ledger checks it before
// looking at the job: well-formed ids, requested within kMaxRequestSkewMs of
// `now_ms`, the signature verifies for the worker key, and the worker is
// allowed by `policy`. kInvalid or kUnauthorized otherwise.
Decision VerifyLeaseRequest(const LeaseRequest& req, const Policy& policy, int64_t now_ms);

// A signed user request (cancel or re-run) by `requester_hex` over
// `payload`: well-formed, fresh and verifying. Whether the requester may act
// on the job is decided against the job's record (transition.h).
Decision VerifyUserRequest(std::string_view requester_hex, std::string_view payload,
                          int64_t requested_at_ms, std::string_view sig_hex, int64_t now_ms);

// The self-contained checks of a result commit (CheckResultCommit) with the
// policy's limits, mapped to a Decision: a bad signature is kUnauthorized,
// anything else malformed kInvalid. `expected_job_hex` (a pushed result:
// the job its ref names; "" = any): a result of another job is kInvalid.
Decision CheckResultContent(const ObjectLookup& lookup, const std::string& commit_id,
                           const Policy& policy, ParsedResult* parsed,
                           const std::string& expected_job_hex = "");

}  // namespace gatos

#endif  // GATOS_LEDGER_CHECKS_H_
