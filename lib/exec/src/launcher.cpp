// JobLauncher: jobs on long-lived gatos-supervise processes ("slots"), one
// per concurrently running job, reused job after job. See gatos/exec/exec.h and
// docs/worker-execution.md ("Job launcher").
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "execution.h"
#include "gatos/exec/exec.h"
#include "gatos/exec/supervise_protocol.h"
#include "prepare_job.h"
#include "supervisor_conn.h"

namespace gatos {

using namespace exec_internal;  // NOLINT: internal helpers of this library
using namespace exec_protocol;  // NOLINT: the frames and records it speaks

struct JobLauncher::Pool : std::enable_shared_from_this<JobLauncher::Pool> {
  LauncherOptions opts;
  std::string supervise;  // "" = none: every job takes Execution::Start

  std::mutex mu;  // guards everything below
  std::vector<std::unique_ptr<SupervisorConn>> idle[2];  // [ns]
  Stats stats;
  bool closed = false;

  std::mutex probe_mu;  // guards the probe results
  bool probed = false;
  SandboxEngine active = SandboxEngine::kAuto;
  Status sandbox_status;

  Result<std::unique_ptr<SupervisorConn>> Spawn(bool ns) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
      return InternalError(std::string("exec: socketpair failed: ") + std::strerror(errno) +
                           "; check the worker's open-file limit (ulimit -n)");
    }
    UniqueFd mine(sp[0]), theirs(sp[1]);
    int one = 1;
    // A namespace slot reports the job's pid in SCM_CREDENTIALS, which the
    // kernel translates into our PID namespace.
    setsockopt(mine.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    GATOS_ASSIGN_OR_RETURN(
        pid_t pid,
        StartSupervisor({supervise, "--slot", std::to_string(kProtocolVersion), ns ? "ns" : "plain"},
                        {theirs.get()}));
    theirs.reset();
    auto conn = std::make_unique<SupervisorConn>(std::move(mine), pid, ns);
    {
      std::lock_guard<std::mutex> l(mu);
      ++stats.slots_started;
    }
    Record rec;
    int k = conn->Read(&rec, nullptr, 30000);
    if (k == 1 && rec.kind == kRecReady && rec.value == kProtocolVersion) return conn;
    if (k == 1 && rec.kind == kRecSlotFailed && rec.stage == kStageSlotRoot) {
      return InternalError(std::string("sandbox: gatos-supervise failed ") + StageName(rec.stage) + " (step " +
                           std::to_string(rec.index) + "): " + std::strerror(rec.value2) +
                           "; it needs a host /tmp and /proc it may mount over (as bubblewrap does)");
    }
    if (k == 1 && rec.kind == kRecSlotFailed) {
      return FailedPreconditionError(
          std::string("sandbox: gatos-supervise failed ") + StageName(rec.stage) + ": " +
          std::strerror(rec.value2) +
          "; user namespaces may be disabled (sysctl user.max_user_namespaces) or restricted "
          "(kernel.apparmor_restrict_unprivileged_userns, a container's seccomp profile)");
    }
    return InternalError("exec: " + supervise + " did not start a slot (" +
                         (k == 0 ? std::string("no answer in 30 s") : std::string("it exited")) +
                         "); check that it belongs to this worker's version");
  }

  // An idle slot, preferably the one that last ran a job in `workspace`
  // (a sandboxed slot then has its binds' mount points made already).
  Result<std::unique_ptr<SupervisorConn>> Acquire(bool ns, const std::string& workspace) {
    std::vector<std::unique_ptr<SupervisorConn>> dead;  // closed outside the lock
    {
      std::lock_guard<std::mutex> l(mu);
      auto& list = idle[ns ? 1 : 0];
      if (!list.empty() && list.back()->last_workspace() != workspace) {
        for (size_t i = list.size() - 1; i-- > 0;) {
          if (list[i]->last_workspace() == workspace) {
            std::swap(list[i], list.back());
            break;
          }
        }
      }
      while (!list.empty()) {
        std::unique_ptr<SupervisorConn> c = std::move(list.back());
        list.pop_back();
        // An idle slot has nothing to say: if it does (or hung up), it died
        // or misbehaved, and no job may run in it.
        if (c->IdleButReadable()) {
          ++stats.slots_discarded;
          dead.push_back(std::move(c));
          continue;
        }
        return c;
      }
    }
    dead.clear();
    return Spawn(ns);
  }

  void Release(std::unique_ptr<SupervisorConn> c, bool healthy) {
    {
      std::lock_guard<std::mutex> l(mu);
      auto& list = idle[c->ns() ? 1 : 0];
      if (healthy && !closed && static_cast<int>(list.size()) < opts.max_idle_slots) {
        list.push_back(std::move(c));
        return;
      }
      if (!healthy) ++stats.slots_discarded;
    }
    c.reset();  // closes the socket and reaps the supervisor
  }

  Result<std::unique_ptr<Execution>> RunOnSlot(const ExecSpec& spec, const PreparedJob& job, bool ns) {
    const std::string workspace = job.binds.empty() ? "" : job.binds.front().destination;
    for (int attempt = 0;; ++attempt) {
      GATOS_ASSIGN_OR_RETURN(std::unique_ptr<SupervisorConn> conn, Acquire(ns, workspace));
      UniqueFd out_r, out_w, err_r, err_w;
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        Release(std::move(conn), true);
        return InternalError(std::string("exec: pipe failed: ") + std::strerror(errno) +
                             "; check the worker's open-file limit (ulimit -n)");
      }
      out_r = UniqueFd(p[0]);
      out_w = UniqueFd(p[1]);
      if (pipe2(p, O_CLOEXEC) != 0) {
        Release(std::move(conn), true);
        return InternalError(std::string("exec: pipe failed: ") + std::strerror(errno) +
                             "; check the worker's open-file limit (ulimit -n)");
      }
      err_r = UniqueFd(p[0]);
      err_w = UniqueFd(p[1]);
      JobRequest req;
      req.seq = conn->NextSeq();
      req.network = spec.allow_network;
      req.grace_ms = spec.kill_grace_ms;
      req.exec_path = job.program;
      req.chdir = job.cwd;
      req.argv = job.argv;
      req.env = job.env;
      req.binds = job.binds;
      req.fsize_bytes = DiskLimitBytes(spec.limits);
      req.tmpfs_bytes = req.fsize_bytes;
      // One above the cgroup's limit, so that the cgroup (which counts the
      // same processes) refuses first and records the event; the rlimit is
      // the floor where there is no pids cgroup.
      req.nproc = spec.limits.pids > 0 ? spec.limits.pids + 1 : 0;
      // The job's cgroup: a new one (per job), or the slot's, reset.
      std::unique_ptr<JobCgroup> cgroup;
      JobCgroup* cg = nullptr;
      if (spec.cgroups && spec.cgroups->version() != CgroupHost::Version::kNone) {
        if (opts.cgroup_per_slot) {
          if (conn->cgroup()) {
            if (Status st = conn->cgroup()->Reset(spec.limits); !st.ok()) {
              Release(std::move(conn), false);
              return st;
            }
          } else {
            auto made = JobCgroup::Create(spec.cgroups, NextCgroupName("slot-"), spec.limits);
            if (!made.ok()) {
              Release(std::move(conn), true);
              return made.status();
            }
            conn->cgroup() = std::move(made).value();
          }
          cg = conn->cgroup().get();
        } else {
          auto made = MakeJobCgroup(spec);
          if (!made.ok()) {
            Release(std::move(conn), true);
            return made.status();
          }
          cgroup = std::move(made).value();
          cg = cgroup.get();
        }
      }
      conn->set_last_workspace(workspace);
      if (!conn->SendJob(EncodeJob(req), out_w.get(), err_w.get(),
                         cg ? cg->procs_fds() : std::vector<int>{})) {
        Release(std::move(conn), false);  // it died while idle: the job never reached it
        if (attempt == 0) continue;
        return InternalError("exec: cannot hand the job to a fresh gatos-supervise: " +
                             std::string(std::strerror(errno)));
      }
      out_w.reset();
      err_w.reset();
      {
        std::lock_guard<std::mutex> l(mu);
        ++stats.jobs;
      }
      std::weak_ptr<Pool> weak = weak_from_this();
      auto release = [weak](std::unique_ptr<SupervisorConn> c, bool healthy) {
        if (auto pool = weak.lock()) {
          pool->Release(std::move(c), healthy);
        }  // else: the launcher is gone; c closes here
      };
      return FinishStart(std::move(conn), req.seq, std::move(out_r), std::move(err_r), spec, job,
                         release, std::move(cgroup));
    }
  }

  // Decides, once, which engine sandboxed jobs use.
  void Probe() {
    std::lock_guard<std::mutex> l(probe_mu);
    if (probed) return;
    probed = true;
    Status ns_status = OkStatus(), bwrap_status = OkStatus();
    bool want_ns = opts.engine != SandboxEngine::kBubblewrap;
    bool want_bwrap = opts.engine != SandboxEngine::kNamespaces;
    if (want_ns) {
      ns_status = ProbeNamespaces();
      if (ns_status.ok()) {
        active = SandboxEngine::kNamespaces;
        sandbox_status = OkStatus();
        return;
      }
    }
    if (want_bwrap) {
      bwrap_status = ProbeSandbox(opts.bwrap_path);
      if (bwrap_status.ok()) {
        active = SandboxEngine::kBubblewrap;
        sandbox_status = OkStatus();
        return;
      }
    }
    active = SandboxEngine::kAuto;
    std::string why = want_ns ? ns_status.message() : "";
    if (want_bwrap) why += (why.empty() ? "" : "; and ") + bwrap_status.message();
    sandbox_status = FailedPreconditionError(why);
  }

  // Starts a namespace slot and runs /bin/true in it; the slot is kept.
  Status ProbeNamespaces() {
    if (supervise.empty()) {
      return FailedPreconditionError(
          "sandbox: gatos-supervise was not found next to the worker (or in $GATOS_SUPERVISE); "
          "the namespace sandbox needs it");
    }
    ExecSpec spec;
    spec.timeout_ms = 10000;
    spec.kill_grace_ms = 100;
    spec.output_cap_bytes = 4096;
    PreparedJob job;
    job.program = "/bin/true";
    job.argv = {job.program};
    job.cwd = "/";
    job.sandboxed = true;
    auto ex = RunOnSlot(spec, job, true);
    Result<ExecResult> res = ex.ok() ? (*ex)->Wait() : Result<ExecResult>(ex.status());
    if (!res.ok()) {
      return FailedPreconditionError(res.status().message());
    }
    if (res->exit_code != 0) {
      return FailedPreconditionError("sandbox: /bin/true failed in a namespace slot (" +
                                     (res->signal ? "signal " + std::to_string(*res->signal)
                                                  : "exit " + std::to_string(res->exit_code.value_or(-1))) +
                                     "); run 'gatos doctor --sandbox' on this host");
    }
    return OkStatus();
  }
};

JobLauncher::JobLauncher(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

JobLauncher::~JobLauncher() {
  std::vector<std::unique_ptr<SupervisorConn>> idle;
  {
    std::lock_guard<std::mutex> l(pool_->mu);
    pool_->closed = true;
    for (auto& list : pool_->idle) {
      for (auto& c : list) idle.push_back(std::move(c));
      list.clear();
    }
  }
  idle.clear();  // each idle supervisor sees its socket close and exits; reaped here
}

Result<std::unique_ptr<JobLauncher>> JobLauncher::Create(const LauncherOptions& options) {
  auto pool = std::make_shared<Pool>();
  pool->opts = options;
  if (pool->opts.max_idle_slots < 0) pool->opts.max_idle_slots = 0;
  pool->supervise = options.supervise_path.empty() ? DefaultSuperviseBinary() : options.supervise_path;
  if (!pool->supervise.empty() && access(pool->supervise.c_str(), X_OK) != 0) {
    return FailedPreconditionError("exec: supervise_path " + pool->supervise +
                                   " is not an executable file; it is gatos-supervise, "
                                   "installed next to gatos-worker");
  }
  std::unique_ptr<JobLauncher> launcher(new JobLauncher(pool));
  if (options.probe_in_create) {
    pool->Probe();
    if (options.engine != SandboxEngine::kAuto && !pool->sandbox_status.ok()) {
      return pool->sandbox_status;
    }
  }
  return launcher;
}

Status JobLauncher::SandboxStatus() {
  pool_->Probe();
  std::lock_guard<std::mutex> l(pool_->probe_mu);
  return pool_->sandbox_status;
}

SandboxEngine JobLauncher::ActiveEngine() {
  pool_->Probe();
  std::lock_guard<std::mutex> l(pool_->probe_mu);
  return pool_->active;
}

JobLauncher::Stats JobLauncher::stats() const {
  std::lock_guard<std::mutex> l(pool_->mu);
  Stats s = pool_->stats;
  s.idle_slots = static_cast<int64_t>(pool_->idle[0].size() + pool_->idle[1].size());
  return s;
}

Result<std::unique_ptr<Execution>> JobLauncher::Start(const ExecSpec& spec_in) {
  Pool& p = *pool_;
  const ExecSpec* sp = &spec_in;
  ExecSpec with_cgroups;
  if (!spec_in.cgroups && p.opts.cgroups) {
    with_cgroups = spec_in;
    with_cgroups.cgroups = p.opts.cgroups;
    sp = &with_cgroups;
  }
  const ExecSpec& spec = *sp;
  SandboxEngine engine = SandboxEngine::kAuto;
  Status sandbox_ok = OkStatus();
  if (spec.sandbox != ExecSpec::Sandbox::kOff) {
    engine = ActiveEngine();
    std::lock_guard<std::mutex> l(p.probe_mu);
    sandbox_ok = p.sandbox_status;
  }
  if (engine == SandboxEngine::kBubblewrap || p.supervise.empty()) {
    // One supervisor and one bwrap per job (or, without gatos-supervise, a
    // forked supervisor per job).
    ExecSpec s = spec;
    s.bwrap_path = p.opts.bwrap_path;
    return Execution::Start(s);
  }
  GATOS_ASSIGN_OR_RETURN(PreparedJob job, PrepareJob(spec, sandbox_ok));
  return p.RunOnSlot(spec, job, job.sandboxed);
}

}  // namespace gatos
