// Job states, the error classes of transitions, and the ledger's time format.
// The decisions themselves are pure functions of a job's record
// (job_record.h).
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_LEASE_H_
#define GATOS_LEASE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/status.h"

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
  kRetry,         // transient (I/O, a batch that could not be written, backoff)
  kInternal,      // the ledger cannot apply it (a corrupt object): not worth retrying
};
std::string_view TransitionErrorName(TransitionError e);  // "lost_race", "stale_owner", ...
TransitionError ParseTransitionError(std::string_view name);

struct Decision {
  TransitionError error = TransitionError::kNone;
  std::string message;
  bool ok() const { return error == TransitionError::kNone; }
};
// RFC 3339 UTC with milliseconds: "2026-11-22T02:01:47.123Z".
std::string FormatRfc3339Millis(int64_t unix_ms);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fff...]Z" (UTC only).
Result<int64_t> ParseRfc3339Millis(std::string_view text);

}  // namespace gatos

#endif  // GATOS_LEASE_H_
