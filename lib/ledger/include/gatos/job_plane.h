// JobPlane: the ledger's transitions (submit, claim, renew, cancel) applied
// to a Ledger with compare-and-swap, following the pure rules of lease.h.
// Every transport (git push hooks, the worker RPC, the CLI) goes through this
// class, so they all apply one state machine (docs/protocol.md).
//
// Thread-safety: NOT thread-safe; it uses its Ledger from one thread. Two
// JobPlanes in different processes over the same repository are safe: a CAS
// loser gets TransitionError::kRetry or kLostRace, never a corrupt ledger.
#ifndef GATOS_JOB_PLANE_H_
#define GATOS_JOB_PLANE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "gatos/clock.h"
#include "gatos/keys.h"
#include "gatos/lease.h"
#include "gatos/ledger.h"
#include "gatos/manifest.h"
#include "gatos/policy.h"
#include "gatos/result.h"
#include "gatos/rpc.h"

namespace gatos {

struct Outcome {
  TransitionError error = TransitionError::kNone;
  std::string message;
  bool ok() const { return error == TransitionError::kNone; }
  static Outcome Error(TransitionError e, std::string m) { return Outcome{e, std::move(m)}; }
  static Outcome FromStatus(const Status& s);  // maps codes to error classes
};

// A validated job commit.
struct JobCommitCheck {
  std::string job_hex;
  Manifest manifest;
  std::string signer;  // principal of the submitter key, "" in dev mode when unsigned
};

class JobPlane {
 public:
  JobPlane(Ledger* ledger, Ed25519PrivateKey ledger_key, ClockFn clock);

  // (Re)reads refs/gatos/policy. Call after a policy change.
  Status LoadPolicy();
  const Policy& policy() const { return policy_; }
  Ledger* ledger() { return ledger_; }
  int64_t Now() const { return clock_(); }

  // Validates a job commit as a push or submit would: job.yaml parses under
  // the policy's limits, its job-id equals `expected_hex` when given and the
  // Job-Id trailer, policy_root (if any) matches, and the commit is signed by
  // an allowed submitter (unless dev mode). `view` is the repository that
  // holds the commit's objects (the push quarantine, or the ledger itself).
  // Errors are InvalidArgument / PermissionDenied with a message for the user.
  Result<JobCommitCheck> CheckJobCommit(Ledger& view, const std::string& commit_id,
                                        std::string_view expected_hex) const;

  // Creates refs/gatos/jobs/<id>/job -> commit_id after CheckJobCommit.
  // *existing is set when the job was already in the ledger (a no-op).
  Outcome AdoptJob(const std::string& commit_id, std::string* job_hex, bool* existing);
  // The ref update of AdoptJob for a commit the caller has just checked with
  // CheckJobCommit (so a caller that needs the check's Status does not pay
  // for it twice).
  Outcome AdoptCheckedJob(const std::string& commit_id, const JobCommitCheck& check, bool* existing);

  Outcome Claim(const LeaseRequest& req, LeaseGrant* grant);
  Outcome Renew(const LeaseRequest& req, LeaseGrant* grant);
  // requester_hex: key of an allowed submitter (or the ledger's own key for
  // the CLI run on the ledger host). *already when a cancel exists.
  Outcome Cancel(std::string_view job_hex, std::string_view requester_hex, bool* already);

  // A result shipped as an object batch (worker RPC). Checks it completely
  // (CheckResultCommit, then: it is a result of this job, its second parent
  // is the claim commit of the worker's current lease, the worker is allowed
  // by policy, DecideResult with the policy's grace) before writing any
  // object, then writes the objects and moves `result` zero->commit while
  // `lease` is unchanged. Re-sending an accepted result is a success with
  // *existing = true, so a worker's outbox may retry blindly.
  Outcome AcceptResult(const std::vector<GitObject>& objects, const std::string& commit_id,
                       ParsedResult* accepted, bool* existing);
  // The same checks for a result pushed with git to refs/gatos/jobs/<job>/result;
  // `view` sees the push quarantine. Moves nothing (git does, after the hook).
  Outcome CheckResultPush(Ledger& view, std::string_view job_hex, const std::string& commit_id);

 private:
  Outcome VerifyWorkerRequest(const LeaseRequest& req, const std::string& payload) const;
  Outcome CheckResult(const ObjectLookup& lookup, const std::string& commit_id,
                      std::string_view expected_job_hex, JobSnapshot* snap, ParsedResult* parsed);
  Result<std::string> WriteLeaseCommit(const JobSnapshot& snap, const LeaseRequest& req,
                                       int64_t epoch, int64_t expires_ms,
                                       const std::string& parent_lease, const char* kind);

  Ledger* ledger_;
  Ed25519PrivateKey ledger_key_;
  ClockFn clock_;
  Policy policy_;
};

}  // namespace gatos

#endif  // GATOS_JOB_PLANE_H_
