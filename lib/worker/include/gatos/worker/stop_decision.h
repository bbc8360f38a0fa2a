// What becomes of a job that something stopped, or asked to stop: the
// ledger's cancel, a lost lease (StaleOwner) or the worker's shutdown
// (docs/worker-execution.md; PROTOCOL section 4):
//
//   the lease was lost (at any point)      discarded: nothing is reported, ever
//                                          (the new owner's result is the one)
//   stopped, not cancelled: a shutdown     discarded: the lease runs out and the
//                                          job is taken over, by this worker
//                                          after a restart or by another
//   cancelled by the ledger                reported `aborted`
//   not stopped                            reported as it ended
//
// and when the worker stops: it takes no new job, gives running jobs
// kShutdownGraceMs to finish, then stops the rest.
//
// Thread-safety: pure functions.
#ifndef GATOS_WORKER_STOP_DECISION_H_
#define GATOS_WORKER_STOP_DECISION_H_

#include <cstdint>

namespace gatos::worker {

inline constexpr int64_t kShutdownGraceMs = 10000;

enum class RunDisposition {
  kReport,            // build and report its result
  kDiscardLeaseLost,  // StaleOwner: stop at once, write nothing
  kDiscardShutdown,   // the worker is stopping: let the lease run out
};

// For a job whose lease may have been lost (`lease_lost`), which the ledger
// may have cancelled (`cancelled`), and whose command or input fetch was
// stopped before it ended (`stopped`).
RunDisposition DisposeOfRun(bool lease_lost, bool cancelled, bool stopped);

// Whether a job about to start (or just started) must be stopped at once:
// a stop that arrived before its command could be told.
inline bool StopBeforeItRuns(bool lease_lost, bool cancelled, bool shutting_down) {
  return lease_lost || cancelled || shutting_down;
}

}  // namespace gatos::worker

#endif  // GATOS_WORKER_STOP_DECISION_H_
