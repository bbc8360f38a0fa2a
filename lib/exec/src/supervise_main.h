// The supervisor of one job (Execution::Start's path): gatos-supervise --run,
// and the same supervisor in a forked copy of the worker when the program is
// missing. gatos-supervise's command line (SuperviseMain, gatos/exec/exec.h) is
// in supervise_main.cpp too; its --slot mode is slot_main.h.
#ifndef GATOS_EXEC_SRC_SUPERVISE_MAIN_H_
#define GATOS_EXEC_SRC_SUPERVISE_MAIN_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>

namespace gatos::exec_internal {

// Runs the supervisor of one job in a forked copy of the worker (the
// fallback when gatos-supervise is missing). Async-signal-safe: everything
// it uses is made before the fork, and it makes system calls only.
struct ForkedJob {
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* chdir_path;
  int64_t grace_ms;
  bool bwrap;  // the job is bwrap's monitor: spare it from SIGTERM
  int sock, out_w, err_w;
  pid_t* tracked;               // kMaxTracked entries (proc_scan.h)
  const ::sock_fprog* seccomp;  // JobSeccompFilter(), built before the fork
  const int* cgroup_fds;        // the job cgroup's cgroup.procs files
  int n_cgroup_fds;
  int64_t fsize_bytes;  // RLIMIT_FSIZE, 0 = unchanged
};
[[noreturn]] void ForkedSupervisorMain(const ForkedJob& job);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SUPERVISE_MAIN_H_
