// The job state machine: pure decisions over a snapshot of one job's refs.
//
// Nothing here touches git or a clock: callers pass the snapshot they read and
// the ledger's current time, and apply the decision with a compare-and-swap
// on the refs they read (ledger.h). The same functions serve the push hooks,
// the worker RPC and the tests, so every transport applies one set of rules
// (docs/protocol.md, "Transitions").
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_LEASE_H_
#define GATOS_LEASE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/status.h"

namespace gatos {

enum class JobState {
  kPending,    // job ref only
  kClaimed,    // a lease is held (possibly expired: see JobView::lease_expired)
  kSucceeded,  // terminal: result with Status: succeeded
  kFailed,     // terminal
  kTimedOut,   // terminal
  kAborted,    // terminal: result with Status: aborted, or cancelled with no live lease
};

std::string_view JobStateName(JobState s);  // "pending", "claimed", "succeeded", "failed", "timed-out", "aborted"
std::optional<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState s);

// The lease as recorded in the current `lease` commit's trailers.
struct LeaseInfo {
  std::string commit;      // 40-hex id of the lease commit
  std::string worker_hex;  // 64-hex Ed25519 key of the holder
  int64_t epoch = 0;       // 1 for the first claim, +1 per takeover
  int64_t expires_ms = 0;  // unix milliseconds, decided by the ledger's clock
};

// What the refs of one job say. Fields are empty where the ref is absent.
struct JobSnapshot {
  std::string job_hex;
  std::string job_commit;
  std::optional<LeaseInfo> lease;
  std::string result_commit;
  std::string result_status;  // the result's Status trailer
  std::string cancel_commit;
};

// Derived view: the state, plus whether a held lease has expired.
struct JobView {
  JobState state = JobState::kPending;
  bool lease_expired = false;
  bool cancel_requested = false;
};

// A cancelled job whose lease is absent or expired is aborted; a cancelled job
// with a live lease stays claimed until its holder reports (or the lease runs
// out), so a running job is told to stop rather than forgotten.
JobView DeriveView(const JobSnapshot& snap, int64_t now_ms);

// Error reasons carried in RPC replies and push rejections, so that the
// worker can branch on Retryable / Permanent / StaleOwner (PROTOCOL 4).
enum class TransitionError {
  kNone,
  kLostRace,      // another worker holds a live lease (normal, quiet)
  kStaleOwner,    // the caller no longer holds the lease: stop, write nothing
  kTerminal,      // the job already has a result or was aborted
  kCancelled,     // cancel requested: do not start
  kInvalid,       // malformed request or result: permanent
  kUnauthorized,  // bad or untrusted signature
  kRetry,         // transient (I/O, CAS conflict with a concurrent writer)
};
std::string_view TransitionErrorName(TransitionError e);  // "lost_race", "stale_owner", ...
TransitionError ParseTransitionError(std::string_view name);

struct ClaimDecision {
  int64_t epoch = 0;            // epoch of the new lease
  bool takeover = false;        // replaces an expired lease
  std::string expected_lease;   // old value of `lease` for the CAS ("" = must not exist)
};

// A claim by `worker_hex` at `now_ms`. Errors: kTerminal, kCancelled,
// kLostRace (live lease held by anyone, the caller included: a worker that
// already holds the lease must renew, not claim).
struct Decision {
  TransitionError error = TransitionError::kNone;
  std::string message;
  bool ok() const { return error == TransitionError::kNone; }
};
Decision DecideClaim(const JobSnapshot& snap, std::string_view worker_hex, int64_t now_ms,
                     ClaimDecision* out);

// A renewal by the holder. kStaleOwner unless `worker_hex` holds the lease at
// `epoch` and it has not expired; kTerminal if a result exists.
Decision DecideRenew(const JobSnapshot& snap, std::string_view worker_hex, int64_t epoch,
                     int64_t now_ms);

// A result from `worker_hex` at `epoch`. Accepted only from the current
// holder at the current epoch while the lease is live or within `grace_ms`
// after it expired (a result built just before expiry is not lost to network
// delay; a takeover ends the grace because the epoch moves on).
Decision DecideResult(const JobSnapshot& snap, std::string_view worker_hex, int64_t epoch,
                      int64_t now_ms, int64_t grace_ms);

// A cancel request. kTerminal when the job has finished; already-cancelled
// jobs are a no-op success (*already = true).
Decision DecideCancel(const JobSnapshot& snap, bool* already);

// RFC 3339 UTC with milliseconds: "2026-11-22T02:01:47.123Z".
std::string FormatRfc3339Millis(int64_t unix_ms);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fff...]Z" (UTC only).
Result<int64_t> ParseRfc3339Millis(std::string_view text);

}  // namespace gatos

#endif  // GATOS_LEASE_H_
