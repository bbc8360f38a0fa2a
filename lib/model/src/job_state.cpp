#include "gatos/model/job_state.h"

namespace gatos {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "pending";
    case JobState::kClaimed:
      return "claimed";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kTimedOut:
      return "timed-out";
    case JobState::kAborted:
      return "aborted";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kPending, JobState::kClaimed, JobState::kSucceeded,
                     JobState::kFailed, JobState::kTimedOut, JobState::kAborted}) {
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) { return s != JobState::kPending && s != JobState::kClaimed; }

}  // namespace gatos
