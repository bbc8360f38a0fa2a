// A job's state as the ledger records it (docs/ledger-format.md, "Job
// record"): one record per job, kept in the log's state index, from which the
// job's refs, its state and every transition decision are derived.
//
// The record is the truth; the refs under refs/gatos/jobs/<job>/ are a view of
// it (JobRefs), rewritten by the ledger in the same batch as the record.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_JOB_RECORD_H_
#define GATOS_JOB_RECORD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/job_state.h"
#include "gatos/model/decision.h"
#include "gatos/model/policy.h"
#include "gatos/model/status.h"

namespace gatos {

// One finished attempt that was not the last (its result is kept at
// refs/gatos/jobs/<job>/attempts/<n>).
struct AttemptRecord {
  int64_t n = 0;
  std::string result_commit;
  std::string status;  // the result's Status trailer
  int64_t epoch = 0;
  int64_t finished_ms = 0;  // when the ledger accepted the result
  bool operator==(const AttemptRecord&) const = default;
};

struct JobRecord {
  std::string job_hex;
  std::string job_commit;
  std::string submitter_hex;  // key that signed the job commit ("" = unsigned, dev mode)
  int64_t submitted_ms = 0;   // when the ledger adopted the job
  int64_t attempt = 1;        // the current attempt, from 1
  // The current lease. `lease_commit` stays after an attempt ends (the next
  // claim replaces it with a CAS); `worker_hex` is set only while the current
  // attempt holds a lease.
  int64_t epoch = 0;  // epoch of lease_commit (0 = never claimed)
  std::string lease_commit;
  std::string worker_hex;
  int64_t expires_ms = 0;
  int64_t requested_at_ms = 0;  // of the last accepted claim/renew: renewals must be newer
  std::string claim_commit;     // the commit that opened the current epoch
  std::map<std::string, std::string> claims;  // worker hex -> its latest claim commit
  std::string cancel_commit;
  std::string retry_commit;  // the latest deliberate re-run (gatos retry)
  std::string result_commit;  // the final result
  std::string result_status;
  std::vector<AttemptRecord> attempts;  // earlier attempts, in order
  int64_t not_before_ms = 0;            // a retried job is not offered before this
  int64_t finished_ms = 0;              // when the final result or the abort was recorded
  int64_t pruned_ms = 0;                // refs removed from the ref namespace (0 = live refs)
  // From the job commit: its manifest's pool ("" = the default pool) and its
  // Priority trailer (scheduling.h).
  std::string pool;
  int64_t priority = 5;
  bool operator==(const JobRecord&) const = default;
};

// The state at `now_ms`: the result's status when there is a final result;
// aborted when cancelled with no live lease; claimed while the current
// attempt holds a lease (expired or not); else pending.
JobState RecordState(const JobRecord& r, int64_t now_ms);
// Whether `result_commit` is `r`'s final result or that of an earlier
// attempt.
bool HoldsResult(const JobRecord& r, const std::string& result_commit);
// The state a record was left in by its last transition, independent of the
// clock: what the index's stats and live/ count, and what an auditor
// replaying the log counts. (A cancelled job whose lease runs out becomes
// aborted through an abort transition, so the two converge.)
JobState RecordedState(const JobRecord& r);
// Whether the current attempt holds a lease that is past its deadline, or
// one that is not: the only two tests of a lease's life.
bool LeaseExpired(const JobRecord& r, int64_t now_ms);
bool LeaseLive(const JobRecord& r, int64_t now_ms);
// Terminal (has a final result, or aborted).
bool RecordTerminal(const JobRecord& r, int64_t now_ms);
// A terminal failed or timed-out job: no attempt is left (listed as "dead").
bool RecordDead(const JobRecord& r, int64_t now_ms);

// The refs the record implies, name -> commit id. Empty once pruned.
std::map<std::string, std::string> JobRefs(const JobRecord& r);

// Canonical JSON of the record (the blob in the state index). Decode is
// strict: unknown fields, wrong types, bad ids are InvalidArgument.
std::string EncodeJobRecord(const JobRecord& r);
Result<JobRecord> DecodeJobRecord(std::string_view json);

// ---- transitions: pure decisions on a record (decision.h error classes) ----

struct ClaimPlan {
  int64_t epoch = 0;           // epoch of the new lease
  bool takeover = false;       // replaces an expired lease of this attempt
  std::string expected_lease;  // old value of `lease` ("" = must not exist)
};

// A claim of epoch `want_epoch` by `worker_hex` at `now_ms`. The epoch a
// claim asks for is the one it would open (current epoch + 1), so a recorded
// claim request can never be granted twice. Errors: kTerminal, kCancelled,
// kLostRace (a live lease held by anyone; or `want_epoch` is not the next
// epoch: someone else took it first), kRetry (a retried job whose backoff has
// not elapsed).
Decision DecideClaim(const JobRecord& r, std::string_view worker_hex, int64_t want_epoch,
                     int64_t now_ms, ClaimPlan* out);

// A renewal by the holder at `epoch`, requested at `requested_at_ms`, which
// must be later than the last accepted request of the lease (a replayed renew
// is refused). kStaleOwner unless the caller holds the live lease at `epoch`;
// kTerminal after a final result.
Decision DecideRenew(const JobRecord& r, std::string_view worker_hex, int64_t epoch,
                     int64_t requested_at_ms, int64_t now_ms);

// A result from `worker_hex` at `epoch`: accepted only from the holder of the
// current attempt's lease at that epoch while the lease is live or within
// `grace_ms` after it expired.
Decision DecideResult(const JobRecord& r, std::string_view worker_hex, int64_t epoch,
                      int64_t now_ms, int64_t grace_ms);

// A cancel. kTerminal when the job finished; a job already cancelled is a
// no-op success (*already = true).
Decision DecideCancel(const JobRecord& r, int64_t now_ms, bool* already);

// Whether a result accepted for the current attempt, with `status` and its
// proof of execution's `reason`, opens the next attempt (after a backoff)
// rather than ending the job: never for a job with a cancel request, only
// while r.attempt < s.max_attempts, and only as RetriesAttempt allows. The
// ledger decides with the policy in force when it accepts the result; an
// auditor replaying the log decides the same way.
bool RetryAfterResult(const JobRecord& r, const PolicySettings& s, std::string_view status,
                      std::string_view reason, bool transient = false);

// A deliberate re-run of a terminal job at attempt `want_attempt` (the one it
// would open: current + 1), so a recorded request cannot re-open the job
// twice. kInvalid unless the job ended failed or timed-out; kLostRace when
// `want_attempt` is not the next attempt.
Decision DecideRetry(const JobRecord& r, int64_t want_attempt, int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_JOB_RECORD_H_
