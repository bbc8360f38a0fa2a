// A slot: gatos-supervise --slot, the long-lived supervisor that runs one
// job at a time for the JobLauncher (docs/worker-execution.md, "Job
// launcher"). Unsandboxed, it is a child subreaper; sandboxed ("ns"), it
// clones the init of a new user and PID namespace, which makes the slot's
// empty network namespace and its SandboxLayout and then serves the jobs.
#ifndef GATOS_EXEC_SRC_SLOT_MAIN_H_
#define GATOS_EXEC_SRC_SLOT_MAIN_H_

namespace gatos::exec_internal {

// The slot's main, in the exec'd single-threaded gatos-supervise, with the
// worker's socket at fd 3: reports 'Y' (or 'F' and exits) and serves 'J'
// frames until the worker closes the socket; then exits. Allocates between
// jobs; the job's own start and supervision (supervision.h) do not.
[[noreturn]] void SlotMain(bool ns);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SLOT_MAIN_H_
