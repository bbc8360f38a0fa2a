// The states of a job, as the ledger's records and replies name them.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_MODEL_JOB_STATE_H_
#define GATOS_MODEL_JOB_STATE_H_

#include <optional>
#include <string_view>

namespace gatos {

enum class JobState {
  kPending,    // job ref only
  kClaimed,    // a lease is held (possibly expired: see JobView::lease_expired)
  kSucceeded,  // terminal: result with Status: succeeded
  kFailed,     // terminal
  kTimedOut,   // terminal
  kAborted,    // terminal: result with Status: aborted, or cancelled with no live lease
};

std::string_view JobStateName(
    JobState s);  // "pending", "claimed", "succeeded", "failed", "timed-out", "aborted"
std::optional<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState s);

}  // namespace gatos

#endif  // GATOS_MODEL_JOB_STATE_H_
