// gatos-supervise's command line (SuperviseMain) and its one-job mode,
// --run, with the forked fallback that runs the same supervisor in a copy of
// the worker (supervise_main.h). Both set the process up, become a child
// subreaper and supervise one job (supervision.h); --slot is slot_main.cpp.
//
// The --run main is the exec'd single-threaded program and may allocate
// before the job starts; ForkedSupervisorMain is async-signal-safe.
#include "supervise_main.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/supervise_protocol.h"
#include "job_seccomp.h"
#include "proc_scan.h"
#include "signal_safe.h"
#include "slot_main.h"
#include "supervision.h"

namespace gatos {
namespace exec_internal {

void ForkedSupervisorMain(const ForkedJob& job) {
  static SupCtx c;  // the forked child's own copy
  int keep[3 + exec_protocol::kMaxCgroupFds] = {job.sock, job.out_w, job.err_w};
  const int ncg = job.n_cgroup_fds < exec_protocol::kMaxCgroupFds ? job.n_cgroup_fds
                                                                  : exec_protocol::kMaxCgroupFds;
  for (int i = 0; i < ncg; ++i) keep[3 + i] = job.cgroup_fds[i];
  if (!PrepareProcess(keep, 3 + ncg, &c)) _exit(120);
  c.sock = keep[0];
  c.tracked = job.tracked;
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  JobChildSpec s;
  s.exec_path = job.exec_path;
  s.argv = job.argv;
  s.envp = job.envp;
  s.chdir_path = job.chdir_path;
  s.out_w = keep[1];
  s.err_w = keep[2];
  s.bwrap = job.bwrap;
  s.seccomp = job.seccomp;
  s.cgroup_fds = keep + 3;
  s.n_cgroup_fds = ncg;
  s.fsize_bytes = job.fsize_bytes;
  RunJob(c, s, 0, job.grace_ms);
  _exit(0);
}

}  // namespace exec_internal

using exec_internal::JobChildSpec;
using exec_internal::kMaxTracked;
using exec_internal::ParseUint;
using exec_internal::SupCtx;
using exec_protocol::kProtocolVersion;

// gatos-supervise --slot VERSION ns|plain      (fd 3: the worker's socket)
// gatos-supervise --run VERSION GRACE_MS BWRAP CHDIR EXEC_PATH FSIZE NCG ARGC ARGV... ENV...
//   (fds 3, 4, 5: socket, the job's stdout, stderr; 6.. the NCG cgroup.procs
//   files of the job's cgroup; FSIZE: its RLIMIT_FSIZE, 0 = unchanged)
int SuperviseMain(int argc, char** argv) {
  long version = 0;
  if (argc < 3 || !ParseUint(argv[2], &version) || version != kProtocolVersion) {
    fprintf(stderr,
            "gatos-supervise: this program is started by gatos-worker (protocol %d); "
            "reinstall it together with the worker\n",
            kProtocolVersion);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "--slot" && argc == 4) exec_internal::SlotMain(std::string(argv[3]) == "ns");
  if (mode != "--run" || argc < 11) return 2;
  long grace = 0, fsize = 0, ncg = 0, argc_job = 0;
  if (!ParseUint(argv[3], &grace) || !ParseUint(argv[7], &fsize) || !ParseUint(argv[8], &ncg) ||
      ncg > exec_protocol::kMaxCgroupFds || !ParseUint(argv[9], &argc_job) || 10 + argc_job > argc)
    return 2;
  static SupCtx c;
  static std::vector<pid_t> tracked(kMaxTracked, 0);
  static std::vector<char*> job_argv(argv + 10, argv + 10 + argc_job);
  job_argv.push_back(nullptr);
  static std::vector<char*> job_env(argv + 10 + argc_job, argv + argc);
  job_env.push_back(nullptr);
  int keep[3 + exec_protocol::kMaxCgroupFds] = {3, 4, 5};
  for (long i = 0; i < ncg; ++i) keep[3 + i] = static_cast<int>(6 + i);
  if (!exec_internal::PrepareProcess(keep, static_cast<int>(3 + ncg), &c)) return 120;
  c.sock = keep[0];
  c.tracked = tracked.data();
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  JobChildSpec s;
  s.exec_path = argv[6];
  s.argv = job_argv.data();
  s.envp = job_env.data();
  s.chdir_path = argv[5];
  s.out_w = keep[1];
  s.err_w = keep[2];
  s.bwrap = std::string(argv[4]) == "1";
  s.seccomp = exec_internal::JobSeccompFilter();
  s.cgroup_fds = keep + 3;
  s.n_cgroup_fds = static_cast<int>(ncg);
  s.fsize_bytes = fsize;
  exec_internal::RunJob(c, s, 0, grace);
  return 0;
}

}  // namespace gatos
