#include "gatos/worker/prefetch.h"

#include <algorithm>

namespace gatos::worker {

void RunTimes::Record(int64_t run_ms) {
  // An exponential average over about the last 16 runs.
  average_ms_ =
      runs_ == 0 ? static_cast<double>(run_ms) : average_ms_ + (run_ms - average_ms_) / 16.0;
  ++runs_;
}

int PrefetchCount(int concurrency, const RunTimes& recent) {
  if (recent.runs() < kPrefetchAfterRuns) return 0;
  return recent.average_ms() < kShortJobMs ? std::max(1, concurrency / 2) : 0;
}

}  // namespace gatos::worker
