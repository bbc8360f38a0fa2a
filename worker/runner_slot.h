// A runner's slot directory, <state>/jobs/slot-<n>, kept for job after job:
// work/ (the job's HOME) and out/ (GATOS_OUTPUT_DIR) are emptied after each
// job rather than created and removed (on this project's VM, with ext4
// without a journal, every mkdir costs a scan for a free inode: a third of
// the worker's CPU per trivial job). docs/worker-execution.md, "Running".
//
// Thread-safety: each slot belongs to one runner thread; no process of the
// job that used it is left (the supervisor killed them all) when it is reset.
#ifndef GATOS_WORKER_RUNNER_SLOT_H_
#define GATOS_WORKER_RUNNER_SLOT_H_

#include <string>

namespace gatos::worker {

// Leaves `slot` with empty work/ and out/ and nothing else. Whatever the job
// left that cannot be emptied (a symlink in place of a directory, a file it
// made unremovable) goes with the whole slot directory, moved aside first.
// Failures are logged; the next job's start reports a workspace it cannot use.
void ResetSlot(const std::string& slot);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RUNNER_SLOT_H_
