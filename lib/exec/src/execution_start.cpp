// Execution::Start: one supervisor per job (gatos-supervise --run, or a
// forked copy of the worker without it), and bubblewrap per job when
// sandboxed (gatos/exec/exec.h, "Execution::Start"; the launcher's bubblewrap
// engine). Thread-safe: any number of threads may start jobs at once.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bubblewrap.h"
#include "execution.h"
#include "gatos/exec/exec.h"
#include "gatos/sys/process.h"
#include "job_seccomp.h"
#include "prepare_job.h"
#include "private_devices.h"
#include "proc_scan.h"
#include "supervise_main.h"
#include "supervisor_conn.h"

namespace gatos {
namespace {

namespace fs = std::filesystem;
using namespace ::gatos::exec_internal;  // NOLINT: the steps of a start
using exec_protocol::kProtocolVersion;

std::string Errno(int err) { return std::string(std::strerror(err)); }

Status MakePipe(UniqueFd* r, UniqueFd* w, const char* what) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return InternalError(std::string("exec: pipe for ") + what + " failed: " + Errno(errno) +
                         "; check the worker's open-file limit (ulimit -n)");
  }
  *r = UniqueFd(p[0]);
  *w = UniqueFd(p[1]);
  return OkStatus();
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

// One gatos-supervise (or forked supervisor) per job; bubblewrap per job
// when sandboxed.
Result<std::unique_ptr<Execution>> Execution::Start(const ExecSpec& spec) {
  Status sandbox_ok =
      spec.sandbox == ExecSpec::Sandbox::kOff ? OkStatus() : ProbeSandbox(spec.bwrap_path);
  GATOS_ASSIGN_OR_RETURN(PreparedJob job, PrepareJob(spec, sandbox_ok));

  std::vector<std::string> exec_argv;
  std::string exec_path;
  if (job.sandboxed) {
    // A job runs as this process's user (bwrap maps it so): when that is the
    // owner of the host's device nodes bwrap would bind writable (root), the
    // job gets nodes of its own, made next to its workspace. Without them
    // the job does not start.
    GATOS_ASSIGN_OR_RETURN(
        std::unique_ptr<PrivateDevices> devices,
        PrivateDevices::Make(fs::path(CleanPath(spec.workspace)).parent_path().string()));
    job.devices = std::move(devices);
    exec_argv =
        BwrapArgs(spec.bwrap_path, spec.allow_network, job.binds, job.cwd, job.devices.get(),
                  JobSeccompFilter() != nullptr, DiskLimitBytes(spec.limits));
    exec_argv.push_back("--");
    exec_argv.insert(exec_argv.end(), job.argv.begin(), job.argv.end());
    exec_path = spec.bwrap_path;
  } else {
    exec_argv = job.argv;
    exec_path = job.program;
  }

  UniqueFd out_r, out_w, err_r, err_w;
  GATOS_RETURN_IF_ERROR(MakePipe(&out_r, &out_w, "stdout"));
  GATOS_RETURN_IF_ERROR(MakePipe(&err_r, &err_w, "stderr"));
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    return InternalError("exec: socketpair failed: " + Errno(errno) +
                         "; check the worker's open-file limit (ulimit -n)");
  }
  UniqueFd sock(sp[0]), sock_child(sp[1]);
  GATOS_ASSIGN_OR_RETURN(std::unique_ptr<JobCgroup> cgroup, MakeJobCgroup(spec));
  const std::vector<int> no_fds;
  const std::vector<int>& cgroup_fds = cgroup ? cgroup->procs_fds() : no_fds;

  pid_t pid;
  const std::string& supervise = DefaultSuperviseBinary();
  if (!supervise.empty()) {
    std::vector<std::string> sargs = {supervise,
                                      "--run",
                                      std::to_string(kProtocolVersion),
                                      std::to_string(spec.kill_grace_ms),
                                      job.sandboxed ? "1" : "0",
                                      job.cwd,
                                      exec_path,
                                      std::to_string(DiskLimitBytes(spec.limits)),
                                      std::to_string(cgroup_fds.size()),
                                      std::to_string(exec_argv.size())};
    sargs.insert(sargs.end(), exec_argv.begin(), exec_argv.end());
    sargs.insert(sargs.end(), job.env.begin(), job.env.end());
    std::vector<int> fds = {sock_child.get(), out_w.get(), err_w.get()};
    fds.insert(fds.end(), cgroup_fds.begin(), cgroup_fds.end());
    GATOS_ASSIGN_OR_RETURN(pid, StartSupervisor(sargs, fds));
  } else {
    // No gatos-supervise: fork a supervisor from the worker. Everything it
    // uses is prepared here; the child only makes system calls.
    std::vector<char*> argv_c = CStrings(exec_argv);
    std::vector<std::string> env = job.env;
    std::vector<char*> env_c = CStrings(env);
    std::vector<pid_t> tracked(kMaxTracked, 0);
    ForkedJob fj{exec_path.c_str(),
                 argv_c.data(),
                 env_c.data(),
                 job.cwd.c_str(),
                 spec.kill_grace_ms,
                 job.sandboxed,
                 sock_child.get(),
                 out_w.get(),
                 err_w.get(),
                 tracked.data(),
                 JobSeccompFilter(),
                 cgroup_fds.data(),
                 static_cast<int>(cgroup_fds.size()),
                 DiskLimitBytes(spec.limits)};
    pid = fork();
    if (pid < 0) {
      return InternalError("exec: fork failed: " + Errno(errno) +
                           "; the host may be out of processes or memory");
    }
    if (pid == 0) ForkedSupervisorMain(fj);
  }
  out_w.reset();
  err_w.reset();
  sock_child.reset();
  auto conn = std::make_unique<SupervisorConn>(std::move(sock), pid, false);
  return FinishStart(std::move(conn), 0, std::move(out_r), std::move(err_r), spec, job, nullptr,
                     std::move(cgroup));
}

}  // namespace gatos
