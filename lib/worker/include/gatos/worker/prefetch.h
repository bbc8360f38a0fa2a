// How many jobs the worker claims beyond its free slots (docs/worker-
// execution.md, "Prefetch"), so that a slot that frees starts the next job
// at once instead of waiting for a claim round trip: half the concurrency
// (at least one) while recent jobs were short (an exponential average over
// about the last 16 runs under kShortJobMs, after at least
// kPrefetchAfterRuns runs), none otherwise: a worker busy with long jobs
// never holds jobs another worker could start now.
//
// Thread-safety: RunTimes is a value without locks; the worker's mutex
// guards it.
#ifndef GATOS_WORKER_PREFETCH_H_
#define GATOS_WORKER_PREFETCH_H_

#include <cstdint>

namespace gatos::worker {

inline constexpr int64_t kShortJobMs = 500;
inline constexpr int64_t kPrefetchAfterRuns = 8;

// The recent run times of one worker's jobs.
class RunTimes {
 public:
  void Record(int64_t run_ms);
  int64_t runs() const { return runs_; }
  double average_ms() const { return average_ms_; }

 private:
  int64_t runs_ = 0;
  double average_ms_ = 0;
};

// Jobs to claim beyond the free slots of a worker running `concurrency` at once.
int PrefetchCount(int concurrency, const RunTimes& recent);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_PREFETCH_H_
