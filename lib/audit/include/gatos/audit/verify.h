// The auditor: verifies, offline and from a clone of the ledger alone, that
// every job and result in it is genuine (docs/auditor-guide.md).
//
// For each job, in this order (check names are stable; a report lists every
// check that ran, and the first failed one is the verdict):
//   job_commit        refs/gatos/jobs/<hex>/job is a commit with job.yaml
//   job_id            job.yaml parses and recomputes to <hex>
//   job_trailer       the Job-Id trailer is present once and equals it
//   policy            the policy in force at the job commit (see below) and
//                     the signed chain of policy commits up to it
//   job_signature     SSH signature (namespace git) by a submitter of that
//                     policy; or, when that policy is in dev mode, accepted
//                     unsigned/untrusted and flagged (AuditReport::dev_mode)
//   policy_root       only when job.yaml names one: it is the root of a
//                     trusted policy commit of the chain
//   result_present    only for a job without a result: says "pending",
//                     "claimed" or "aborted (cancelled)"; fails only with
//                     require_results
// then, for a result, every check of CheckResultCommit (commit, trailers,
// tree, poe_present, poe_canonical, poe_hash, poe_matches_trailers,
// tree_matches_outputs, attest_sig, commit_signature), and:
//   result_job_id     the result's Job-Id is this job
//   result_parent_job its first parent is this job's commit
//   worker_allowed    Worker-Id is allowed by the policy in force (or by
//                     VerifyOptions::extra_workers)
//   claim_commit      the second parent is a lease commit of this job:
//                     empty tree, parents [job commit, ...], well-formed
//                     trailers, and a claim or takeover (not a renewal)
//   claim_signature   unsigned (lease commits are): the log head, signed by
//                     a ledger key of the policy chain, names it in the job's
//                     record; signed (ledgers written before): by the ledger
//                     key of the policy in force
//   claim_request_sig its Request-Sig verifies for its Worker-Id over
//                     ClaimPayload, Requested-At within 60 s of the commit
//   claim_matches_result  its Worker-Id and Lease-Epoch are the result's
//   claim_ref         refs/gatos/jobs/<hex>/claims/<worker> is that commit
//   lease_current     the job's lease ref is a lease (vouched for as the
//                     claim is) of the same
//                     worker and epoch whose chain of renewals reaches the
//                     claim (a takeover after the claim means a stale result)
//   attest_program    Attest-Program is in VerifyOptions::trusted_programs
//                     (always ok, "not checked", when no list is given)
//   inputs            only when job.yaml declares git inputs or poe.json
//                     records some: each recorded input is a git input of
//                     job.yaml with the same url and ref, at the pinned commit
//                     when job.yaml pins one; a job that ran records all of them
//   provenance        attestation.intoto.json, when present (or required):
//                     DSSE by Worker-Id, subjects == the tree's files with the
//                     same digests, job, worker, program, epoch, times and
//                     input commits equal the result's
//
// The policy in force for a commit is the newest commit on the first-parent
// chain of refs/gatos/policy whose committer time is <= that commit's
// committer time (the oldest policy commit when none is that old). Every
// policy commit must be signed by the ledger key of its parent (the root: by
// its own ledger.pub, or by VerifyOptions::ledger_key when pinned). Times:
// the job commit's own time picks the policy for the submitter; the claim
// commit's time (the ledger's clock) picks the one for the ledger key; the
// later of the claim and result commit times picks the one for the worker.
// Limits: committer times are the signer's clock, and git records no time of
// acceptance, so a job signed across a policy change, with skew, may be
// judged against the neighbouring policy.
//
// Thread-safety: an Auditor uses its Ledger from the calling thread only and
// is not thread-safe; use one per thread (each with its own Ledger).
#ifndef GATOS_VERIFY_H_
#define GATOS_VERIFY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/model/allowed_signers.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos {

// Result commits a log replay checked completely: CheckResultCommit and the
// provenance check passed, so their Attest-Sig, SSH signature and provenance
// envelope signature verify. Filled by AuditLog (LogAuditOptions::verified),
// read-only afterwards.
struct ReplayVerified {
  std::unordered_set<std::string> results;
};

struct VerifyOptions {
  // Workers trusted in addition to the policy's (gatos verify --allowed-signers).
  std::optional<AllowedSigners> extra_workers;
  // When false, only extra_workers decides which worker keys are trusted.
  bool trust_policy_workers = true;
  // "blake3:<hex>" of worker binaries; when set, Attest-Program must be one.
  std::optional<std::set<std::string>> trusted_programs;
  // Pin the ledger key (obtained out of band): the root policy commit must be
  // signed by it and name it in ledger.pub.
  std::optional<Ed25519PublicKey> ledger_key;
  bool require_results = false;     // a job without a result fails
  bool require_provenance = false;  // a result without kProvenanceFileName fails
  // Threads VerifyAll verifies jobs on, each with a repository handle of its
  // own (0 = one per CPU). The summary is the same for any number.
  size_t threads = 1;
  // VerifyAll calls it after each job (jobs done, jobs in all), on the
  // calling thread; for a progress bar.
  std::function<void(size_t done, size_t total)> progress;
  // What the log replay before this pass verified (gatos verify --all): the
  // signatures of those result commits are not verified a second time (the
  // same bytes, the same function); every other check runs, so the report
  // is the same.
  std::shared_ptr<const ReplayVerified> replay_verified;
};

// One job's verdict. `checks` are ResultCheck {name, ok, detail}.
struct AuditReport {
  std::string job_hex;
  // "succeeded" | "failed" | "timed-out" | "aborted" from the result's Status;
  // without a result: "pending", "claimed" or "aborted" (cancelled).
  std::string state;
  bool has_result = false;
  bool has_provenance = false;
  // The job commit was accepted only because the policy in force was in dev
  // mode (unsigned, or signed by a key that is not a submitter).
  bool dev_mode = false;
  std::string job_commit, result_commit, claim_commit;
  std::string policy_commit;     // policy in force for the job commit
  std::string worker_id;         // "ed25519:<hex>" of the result, "" without one
  std::vector<PoeInput> inputs;  // the commits the job read (poe.json), by input index
  std::vector<ResultCheck> checks;

  bool ok() const;                           // no check failed
  const ResultCheck* first_failure() const;  // nullptr when ok()
};

struct AuditSummary {
  std::vector<AuditReport> jobs;  // sorted by job id
  size_t verified = 0;            // ok, with a result
  size_t without_result = 0;      // ok, no result
  size_t failed = 0;
  bool ok() const { return failed == 0; }
};

// Reads refs and objects of one ledger. Loads and verifies the policy chain
// once, on first use.
class Auditor {
 public:
  Auditor(Ledger* ledger, VerifyOptions options);
  ~Auditor();
  Auditor(const Auditor&) = delete;
  Auditor& operator=(const Auditor&) = delete;

  // `job` is "blake3:<hex>" or "<hex>". InvalidArgument for a malformed id;
  // NotFound when the ledger has no refs/gatos/policy (not a ledger, or a
  // clone without refs/gatos/*); Internal/DataLoss for unreadable
  // repositories. A missing job, a tampered object or an untrusted key is a
  // report with a failed check, not an error.
  Result<AuditReport> VerifyJob(std::string_view job);
  // Every job under refs/gatos/jobs/, in job id order.
  Result<AuditSummary> VerifyAll();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The "provenance" check of one result (attestation.intoto.json, see above),
// shared with the log replay (log_audit.h). *present: the result has one.
// `tree`: the blobs CheckResultCommit read for `p` (read and hashed there,
// under the same `max_file_bytes`), used instead of reading them again;
// without it they are read from `ledger`.
ResultCheck CheckResultProvenance(Ledger& ledger, const ParsedResult& p,
                                  const std::string& job_commit, size_t max_file_bytes,
                                  bool require, bool* present, const ResultTreeData* tree = nullptr,
                                  bool signature_verified = false);

// One-shot wrappers around Auditor.
Result<AuditReport> VerifyJob(Ledger& ledger, std::string_view job, const VerifyOptions& options);
Result<AuditSummary> VerifyAll(Ledger& ledger, const VerifyOptions& options);

// A list of trusted worker binaries: one per line, "blake3:<hex>" or b3sum
// output ("<hex>  NAME"); '#' comments and blank lines are ignored.
// InvalidArgument "source_name:LINE: ..." for anything else.
Result<std::set<std::string>> ParseTrustedPrograms(std::string_view text,
                                                   std::string_view source_name);

// The report as JSON: {job_id, state, ok, dev_mode, has_result,
// has_provenance, job_commit, result_commit, claim_commit, policy_commit,
// worker_id, inputs: [{index, url, ref, commit}], checks: [{name, ok, detail}]}.
nlohmann::json AuditReportToJson(const AuditReport& report);

}  // namespace gatos

#endif  // GATOS_VERIFY_H_
