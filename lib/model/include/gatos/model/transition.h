// The one rule for what each transition does to a job's record
// (docs/ledger-format.md, "Job record").
//
// Every party that changes or checks a record calls ApplyTransition and
// nothing else decides: the ledger writer on requests (LedgerWriter), the
// auditor on what the log records (log_audit.cpp's replay), a follower
// replica on its leader's batches, and JobService's timers ask DecideAbort
// and DecidePrune what they may do. leveldb's VersionSet::Builder::Apply
// serves LogAndApply and Recover the same way: a second copy of a rule is a
// bug waiting for the first change.
//
// What is not here, and why: signatures, commit parsing and object lookups
// (the callers have the objects; the rule needs only their facts), and
// building the commits the ledger writes (the writer asks for a plan with
// an empty commit id, builds the commit, then applies with its id: the
// function is pure, so both calls decide the same).
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_TRANSITION_H_
#define GATOS_TRANSITION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gatos/model/job_record.h"
#include "gatos/model/decision.h"
#include "gatos/model/log_format.h"
#include "gatos/model/policy.h"

namespace gatos {

// A job adopted from a checked job commit (the caller checked its signature
// and manifest: ledger_checks.h CheckJobCommit).
struct SubmitTransition {
  std::string job_hex, job_commit, submitter_hex;
  std::string pool;      // its manifest's pool; "" = the default pool
  int64_t priority = 5;  // its Priority trailer
  // A fire (docs/scheduling.md, "Firing"): the job the ledger created for
  // tick `fired_at_ms` of schedule `schedule`, whose last fire so far was
  // at `last_fired_ms` (0 = none). `submitter_hex` is the schedule's signer.
  std::string schedule;
  int64_t fired_at_ms = 0;
  int64_t last_fired_ms = 0;
  // A trigger's fire (a moved ref, not a tick): several may be fired in one
  // batch at the same time, so its Fired-At may equal the last fire's.
  bool trigger = false;
};

// A claim (or takeover) of epoch `epoch`, or a renewal at `epoch`, by
// `worker_hex`, requested at `requested_at_ms`. `lease_commit` is the lease
// commit the ledger writes for it ("" to ask for the plan first).
struct LeaseTransition {
  bool renew = false;
  std::string worker_hex;
  int64_t epoch = 0;
  int64_t requested_at_ms = 0;
  std::string lease_commit;
};

// A result commit of the current attempt (its facts: ledger_checks.h
// ParsedResult). When it opens the next attempt, the job waits
// `backoff_ms` before it is offered again: the writer draws it
// (DrawRetryBackoffMs), a reader takes it from the log's state index; it
// must lie within the policy's range (RetryBackoffMinMs..RetryBackoffMs).
struct ResultTransition {
  std::string commit;
  std::string worker_hex;
  int64_t epoch = 0;
  std::vector<std::string> parents;  // of the result commit
  std::string status;                // its Status trailer
  std::string reason;                // its proof of execution's reason
  bool transient = false;            // its proof of execution's mark
  int64_t backoff_ms = 0;
};

// A signed cancel request by `requester_hex`, recorded as `commit`.
struct CancelTransition {
  std::string requester_hex;
  std::string commit;
};

// A deliberate re-run of attempt `attempt` by `requester_hex` (gatos retry).
struct RetryTransition {
  std::string requester_hex;
  int64_t attempt = 0;
  std::string commit;
};

// A cancelled job whose lease ran out ends (no ref moves).
struct AbortTransition {};
// A live lease whose worker the policy in force no longer allows ends now.
struct RevokeTransition {};
// A finished job's refs leave the ref namespace after the retention.
struct PruneTransition {};

using Transition = std::variant<SubmitTransition, LeaseTransition, ResultTransition, CancelTransition,
                                RetryTransition, AbortTransition, RevokeTransition, PruneTransition>;

// What a transition is decided against besides the record.
struct TransitionRules {
  const Policy* policy = nullptr;  // the policy in force at `now_ms`
  int64_t now_ms = 0;              // the ledger's clock (the batch time)
};

struct AppliedTransition {
  JobRecord record;   // the record after the transition
  LogKind kind = LogKind::kSubmit;  // as the log records it (claim or takeover, result or attempt, ...)
  // Nothing changes and nothing is logged: the job exists already (submit),
  // is cancelled already (cancel), or is pruned already (prune).
  bool unchanged = false;
  // A claim or takeover: the lease commit it replaces ("" = none), the
  // second parent of the new lease commit. A renewal: the current one.
  std::string replaced_lease;
};

// The rule for job `job_hex`. `old` is its record before (nullopt: no such
// job). On success
// *out holds the result; otherwise the decision says why, with the error
// class the requester sees (decision.h):
//   submit   ok (unchanged when the job exists)
//   fire     (a submit with `schedule`) ok, unchanged when the tick's job
//            exists; kInvalid when the tick is not after the schedule's last
//            fire (a trigger's: before it); kUnauthorized when its signer may no longer submit to the
//            template's pool (an allowed submitter, an operator, the ledger key)
//   lease    kInvalid (no job), kTerminal (finished or pruned), kUnauthorized
//            (worker not allowed by the policy or not in the job's pool, a
//            replayed renew), kLostRace,
//            kCancelled, kRetry (backoff not over), kStaleOwner (renew)
//   result   kInvalid (no job, first parent not the job commit), kUnauthorized
//            (worker not allowed), kTerminal, kStaleOwner (not the holder, or
//            second parent not the current claim), kInvalid (backoff out of
//            the policy's range)
//   cancel   kInvalid (no job), kUnauthorized (requester may not control the
//            job), kTerminal (finished); unchanged when cancelled already
//   retry    kInvalid (no job, or the job did not end failed or timed-out),
//            kUnauthorized, kTerminal (pruned), kLostRace (not the next attempt)
//   abort    kInvalid unless the job is cancelled, holds an expired lease and
//            has no result (DecideAbort)
//   revoke   kInvalid unless a live lease's worker is no longer allowed
//   prune    kInvalid unless finished and past the retention (DecidePrune);
//            unchanged when pruned already
Decision ApplyTransition(std::string_view job_hex, const std::optional<JobRecord>& old, const Transition& t,
                         const TransitionRules& rules, AppliedTransition* out);

// The batch lines that record a transition of kind `kind` from `old` to
// `now` (docs/ledger-format.md, "Batch record"): one line per ref the
// record's view (JobRefs) creates, moves or deletes, in ref order, created
// and moved ones first; one line without a ref when no ref moves (abort,
// revoke). What the writer writes and the auditor expects.
std::vector<LogEntry> TransitionEntries(LogKind kind, const std::optional<JobRecord>& old, const JobRecord& now);

// The batch lines of a fire: TransitionEntries(kFire, ...) and the line
// moving refs/gatos/fires/<schedule> from `previous_fire` ("" = none) to the
// job commit. What the writer writes and the auditor expects.
std::vector<LogEntry> FireEntries(const std::optional<JobRecord>& old, const JobRecord& now,
                                  const std::string& schedule, const std::string& previous_fire);

// Whether `key_hex` may have its schedule fire jobs in `pool` now: an
// allowed submitter, an operator or the ledger key, who may use the pool.
bool ScheduleSignerAllowed(const Policy& policy, std::string_view key_hex, std::string_view pool, int64_t now_ms);

// Whether an abort may end the job now (JobService's timer asks; the abort
// transition applies the same test).
bool DecideAbort(const JobRecord& r, int64_t now_ms);

// Whether the job may be pruned now under `settings`.
bool DecidePrune(const JobRecord& r, const PolicySettings& settings, int64_t now_ms);

// Whether `worker_hex` is a worker the policy allows at `now_ms`.
bool WorkerAllowed(const Policy& policy, std::string_view worker_hex, int64_t now_ms);

// Whether the policy lets `worker_hex` serve `pool` ("" = the default pool).
bool WorkerServesPool(const Policy& policy, std::string_view worker_hex, std::string_view pool);

// Whether `requester_hex` may cancel or re-run a job submitted by
// `submitter_hex`: its submitter, an operator of the policy, or the ledger key.
bool MayControlJob(std::string_view requester_hex, std::string_view submitter_hex, const Policy& policy,
                   int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_TRANSITION_H_
