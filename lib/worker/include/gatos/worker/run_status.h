// The status a job's run ends with (PROTOCOL section 5: succeeded, failed,
// timed-out or aborted), from what the launcher reports of it (ExecResult)
// and whether the ledger cancelled it. In order:
//
//   stopped, and the ledger cancelled the job   aborted, "cancelled by the ledger"
//   the timeout fired                           timed-out
//   exit code 0                                 succeeded
//   any other exit code, or a signal            failed
//
// Under bubblewrap a job killed by signal N is reported as exit code 128+N
// (exec.h: bwrap does not pass the signal through). It is `failed` like any
// other non-zero exit, and the proof of execution records what was reported
// (exit code 137, no signal): the worker never claims a signal it did not see.
//
// A run that was stopped without a cancel (its lease was lost, the worker is
// shutting down) has no status: it is discarded, never reported
// (stop_decision.h), and callers do not ask.
//
// Thread-safety: pure functions.
#ifndef GATOS_WORKER_RUN_STATUS_H_
#define GATOS_WORKER_RUN_STATUS_H_

#include <string>

#include "gatos/exec/exec.h"

namespace gatos::worker {

struct RunStatus {
  std::string status;  // succeeded | failed | timed-out | aborted
  std::string reason;  // why it was aborted, or the limit that ended it; "" otherwise
  bool operator==(const RunStatus&) const = default;
};

RunStatus StatusOfRun(const ExecResult& run, bool cancelled);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RUN_STATUS_H_
