// The Execution that follows one job on any supervisor: its output read
// and capped, the timeout, Stop(), the records 'X' and 'C', and handing the
// supervisor back (gatos/exec/exec.h; execution.h). Thread-safety as exec.h
// says: Stop() from any thread while Wait() runs in another.
#include "execution.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "private_devices.h"

namespace gatos {
namespace {

using namespace ::gatos::exec_internal;  // NOLINT: this file implements them
using namespace ::gatos::exec_protocol;  // NOLINT: the frames and records it speaks

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MonoMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Errno(int err) { return std::string(std::strerror(err)); }

// How often a running job's cgroup is checked for a limit it hit.
constexpr int64_t kLimitCheckMs = 50;

// How often, at the least, a running job with a disk limit has its
// workspace and output dir measured; a large tree is measured less often
// (kDiskCheckCostFactor times the last walk's time), so the walk costs at
// most 1/kDiskCheckCostFactor of a core.
constexpr int64_t kDiskCheckMs = 100;
constexpr int64_t kDiskCheckCostFactor = 20;

// The size of the regular files under the directory `dirfd` (not following
// links: every directory is opened with O_NOFOLLOW beneath its parent, so a
// job that swaps one for a symlink sends the walk nowhere), stopping past
// `stop_at` (the most that matters) or after `max_entries` entries. Takes
// ownership of `dirfd`.
int64_t FilesBytesAt(int dirfd, int64_t stop_at, int* max_entries) {
  DIR* d = fdopendir(dirfd);
  if (!d) {
    close(dirfd);
    return 0;
  }
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    if (--*max_entries < 0 || total > stop_at) break;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      total += st.st_size;
    } else if (S_ISDIR(st.st_mode)) {
      int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) total += FilesBytesAt(sub, stop_at - total, max_entries);
    }
  }
  closedir(d);
  return total;
}

int64_t FilesBytes(const std::string& dir, int64_t stop_at, int* max_entries) {
  if (dir.empty()) return 0;
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? 0 : FilesBytesAt(fd, stop_at, max_entries);
}

// The bytes of the files in a job's workspace and output dir (the output
// dir counted apart only when it is not inside the workspace).
int64_t JobFilesBytes(const std::string& workspace, const std::string& output_dir,
                      int64_t stop_at) {
  int budget = 100000;
  int64_t bytes = FilesBytes(workspace, stop_at, &budget);
  if (output_dir.rfind(workspace + "/", 0) != 0) {
    bytes += FilesBytes(output_dir, stop_at - bytes, &budget);
  }
  return bytes;
}

std::atomic<uint64_t> g_cgroup_seq{0};

// The error for a job that the supervisor could not start.
Status StartError(const Record& rec, const PreparedJob& job) {
  const int err = rec.value2;
  if (rec.stage == kStageExec) {
    std::string what = "exec: cannot run '" + job.program + "': " + Errno(err);
    if (err == ENOENT) return NotFoundError(what + "; check the manifest's command");
    if (err == EACCES)
      return PermissionDeniedError(what + "; the file must be executable by the worker");
    return InvalidArgumentError(what + "; check the manifest's command and cwd");
  }
  if (rec.stage == kStageChdir) {
    return InvalidArgumentError("exec: cannot change to the job's cwd " + job.cwd + ": " +
                                Errno(err));
  }
  if (rec.stage == kStageMount && (rec.index & kJobBindIndex)) {
    size_t i = rec.index & ~(kJobBindIndex | kPidInCredentials);
    std::string what = i < job.binds.size()
                           ? job.binds[i].source + " at " + job.binds[i].destination
                           : "#" + std::to_string(i);
    return InvalidArgumentError("sandbox: cannot bind " + what + ": " + Errno(err) +
                                "; a destination must be creatable in the sandbox (not under "
                                "/usr or another read-only bind)");
  }
  if (rec.stage == kStageFork) {
    return InternalError("exec: the supervisor could not start the job (" + Errno(err) +
                         "); the host may be out of processes");
  }
  return InternalError(
      std::string("sandbox: setup failed while ") + StageName(rec.stage) +
      (rec.stage == kStageMount || rec.stage == kStageRoot || rec.stage == kStageSlotRoot
           ? " (step " + std::to_string(rec.index & ~kPidInCredentials) + ")"
           : "") +
      ": " + Errno(err));
}

}  // namespace

struct Execution::Impl {
  std::unique_ptr<SupervisorConn> conn;  // guarded by ctrl_mu once started
  ReleaseFn release;                     // null: drop (reap) the supervisor
  uint32_t seq = 0;
  pid_t job = -1;
  UniqueFd out_r, err_r;
  int64_t timeout_ms = 0;
  size_t cap = 0;
  std::function<void(int, std::string_view)> tap;  // ExecSpec::output_tap
  int64_t started_mono = 0;
  ExecResult result;
  std::atomic<bool> stop_requested{false};
  std::shared_ptr<PrivateDevices> devices;  // removed after the job
  std::unique_ptr<JobCgroup> own_cgroup;    // per job: removed after it
  JobCgroup* cgroup = nullptr;              // own_cgroup's, or the slot's
  JobLimits limits;
  std::string workspace, output_dir;
  int64_t next_check_mono = 0;
  std::mutex ctrl_mu;                       // serializes control frames from Stop() and Wait()
  bool finished = false;                    // guarded by ctrl_mu
  bool waited = false;

  void Send(char c) {
    std::lock_guard<std::mutex> lock(ctrl_mu);
    if (finished || !conn) return;
    conn->SendControl(c, seq);
  }

  // Hands the supervisor back (or reaps it). After this, Stop() is a no-op.
  void Finish(bool healthy) {
    std::unique_ptr<SupervisorConn> c;
    {
      std::lock_guard<std::mutex> lock(ctrl_mu);
      finished = true;
      c = std::move(conn);
    }
    if (!c) return;
    if (release) {
      release(std::move(c), healthy);
    } else {
      c.reset();
    }
  }

  // Reads what is available on one output pipe; false at EOF or error.
  bool Drain(UniqueFd& fd, std::string* data, bool* truncated, int stream) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n > 0) {
        if (tap) tap(stream, std::string_view(buf, static_cast<size_t>(n)));
        size_t room = cap > data->size() ? cap - data->size() : 0;
        size_t take = static_cast<size_t>(n) < room ? static_cast<size_t>(n) : room;
        data->append(buf, take);
        if (take < static_cast<size_t>(n)) *truncated = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      fd.reset();
      return false;
    }
  }
};

Execution::Execution(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Execution::~Execution() {
  if (!impl_) return;
  if (!impl_->waited) {
    impl_->Send(kFrameKill);
    Wait().status().IgnoreError();
  }
  impl_->Finish(false);
}

pid_t Execution::pid() const { return impl_->job; }

void Execution::Stop() {
  if (impl_->stop_requested.exchange(true)) return;
  impl_->Send(kFrameTerm);
}

Result<ExecResult> Execution::Wait() {
  Impl& m = *impl_;
  if (m.waited) return FailedPreconditionError("exec: Wait() was already called for this job");
  m.waited = true;
  fcntl(m.out_r.get(), F_SETFL, O_NONBLOCK);
  fcntl(m.err_r.get(), F_SETFL, O_NONBLOCK);
  bool have_status = false, clean = false, broken = false;
  int32_t raw = 0;
  bool timeout_fired = false;
  int64_t cpu_ms = -1;
  const int sock = m.conn ? m.conn->fd() : -1;
  const int64_t disk_limit = DiskLimitBytes(m.limits);
  int64_t next_disk_check = m.started_mono + kDiskCheckMs;
  int64_t peak_disk = 0;
  while (sock >= 0 && !clean && !broken) {
    pollfd pfd[3];
    int n = 0;
    int out_i = -1, err_i = -1;
    if (m.out_r.get() >= 0) {
      out_i = n;
      pfd[n++] = {m.out_r.get(), POLLIN, 0};
    }
    if (m.err_r.get() >= 0) {
      err_i = n;
      pfd[n++] = {m.err_r.get(), POLLIN, 0};
    }
    int st_i = n;
    pfd[n++] = {sock, POLLIN, 0};
    int timeout = -1;
    // A job under memory or process limits is checked every kLimitCheckMs:
    // one that hit a limit is ended at once (a fork bomb would otherwise
    // spin at its limit until its timeout).
    const bool check_limits = m.cgroup && !have_status && m.result.limit_hit.empty() &&
                              (m.limits.memory_mb > 0 || m.limits.pids > 0);
    if (check_limits) {
      const int64_t now = MonoMillis();
      if (now >= m.next_check_mono) {
        m.next_check_mono = now + kLimitCheckMs;
        m.cgroup->Processes();  // the sampled peak where the kernel keeps none
        std::string hit = m.cgroup->LimitHit();
        if (!hit.empty()) {
          m.result.limit_hit = hit;
          m.Send(kFrameKill);
        }
      }
      timeout = static_cast<int>(m.next_check_mono - now);
    }
    // A job with a disk limit has its files measured while it runs, as
    // Kubernetes measures a pod's ephemeral storage: one that reached the
    // limit is ended at once (RLIMIT_FSIZE alone bounds each file, not how
    // many it writes).
    if (disk_limit > 0 && !have_status && m.result.limit_hit.empty()) {
      int64_t now = MonoMillis();
      if (now >= next_disk_check) {
        const int64_t bytes = JobFilesBytes(m.workspace, m.output_dir, disk_limit);
        const int64_t after = MonoMillis();
        peak_disk = bytes > peak_disk ? bytes : peak_disk;
        if (bytes >= disk_limit) {
          m.result.limit_hit = "disk";
          m.Send(kFrameKill);
        }
        const int64_t walk = after - now;
        now = after;
        next_disk_check =
            now + (walk * kDiskCheckCostFactor > kDiskCheckMs ? walk * kDiskCheckCostFactor
                                                              : kDiskCheckMs);
      }
      const int t = static_cast<int>(next_disk_check - now);
      timeout = timeout < 0 || t < timeout ? t : timeout;
    }
    if (m.timeout_ms > 0 && !timeout_fired && !have_status) {
      int64_t left = m.started_mono + m.timeout_ms - MonoMillis();
      if (left <= 0) {
        timeout_fired = true;
        m.result.timed_out = true;
        m.Send(kFrameTerm);
      } else {
        const int t = static_cast<int>(left > 1000000 ? 1000000 : left);
        timeout = timeout < 0 || t < timeout ? t : timeout;
      }
    }
    int r = poll(pfd, static_cast<nfds_t>(n), timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      return InternalError("exec: poll failed: " + Errno(errno));
    }
    if (out_i >= 0 && pfd[out_i].revents)
      m.Drain(m.out_r, &m.result.stdout_data, &m.result.stdout_truncated, 1);
    if (err_i >= 0 && pfd[err_i].revents)
      m.Drain(m.err_r, &m.result.stderr_data, &m.result.stderr_truncated, 2);
    if (!pfd[st_i].revents) continue;
    for (;;) {
      Record rec;
      int k = m.conn->Read(&rec, nullptr, 0);
      if (k == 0) break;
      if (k < 0) {
        broken = true;  // the supervisor is gone
        break;
      }
      if (rec.seq != m.seq) {
        broken = true;
      } else if (rec.kind == kRecExited && !have_status) {
        have_status = true;
        raw = rec.value;
        // Stop() after the job ended by itself does not mark it stopped.
        m.result.stopped = m.stop_requested.load();
        m.result.finished_ms = UnixMillis();
      } else if (rec.kind == kRecClean) {
        clean = true;
        cpu_ms = rec.value;
      } else {
        broken = true;
      }
      if (clean || broken) break;
    }
  }
  // Every writer is dead (after 'C'); collect what is still buffered.
  if (m.out_r.get() >= 0) m.Drain(m.out_r, &m.result.stdout_data, &m.result.stdout_truncated, 1);
  if (m.err_r.get() >= 0) m.Drain(m.err_r, &m.result.stderr_data, &m.result.stderr_truncated, 2);
  m.out_r.reset();
  m.err_r.reset();
  if (m.cgroup) {
    if (m.result.limit_hit.empty()) m.result.limit_hit = m.cgroup->LimitHit();
    m.result.usage = m.cgroup->Usage();
    // Nothing of the job may outlive it, even what escaped the supervisor's
    // view: the cgroup knows every process. A job's own cgroup does this
    // when it is removed below (only if it is not empty).
    if (!m.own_cgroup) m.cgroup->KillAll().IgnoreError();
  }
  // Every process of the job was reaped by its supervisor (or by one of the
  // job's own, reaped by it): its CPU time.
  if (cpu_ms >= 0 && (m.cgroup || m.limits.Any())) m.result.usage.cpu_ms = cpu_ms;
  if (m.cgroup || m.limits.Any()) {
    const int64_t stop_at = disk_limit > 0 ? disk_limit : INT64_MAX / 2;
    const int64_t bytes = JobFilesBytes(m.workspace, m.output_dir, stop_at);
    // The most the job held at once, as far as the checks saw.
    m.result.usage.disk_bytes = bytes > peak_disk ? bytes : peak_disk;
    // RLIMIT_FSIZE stops a file at the limit (SIGXFSZ, or under bwrap exit
    // 128+SIGXFSZ); the files left may reach it too.
    const bool xfsz = (WIFSIGNALED(raw) && WTERMSIG(raw) == SIGXFSZ) ||
                      (WIFEXITED(raw) && WEXITSTATUS(raw) == 128 + SIGXFSZ);
    if (disk_limit > 0 && m.result.limit_hit.empty() && have_status &&
        (bytes >= disk_limit || xfsz)) {
      m.result.limit_hit = "disk";
    }
  }
  m.own_cgroup.reset();  // removed before the slot takes another job
  m.Finish(clean && have_status && !broken);
  if (!have_status) {
    return InternalError(
        "exec: the job supervisor exited without reporting the job's status; "
        "it may have been killed from outside the worker (or by the job itself)");
  }
  if (WIFEXITED(raw)) {
    m.result.exit_code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    m.result.signal = WTERMSIG(raw);
  }
  return m.result;
}

std::string LimitReason(const ExecResult& r) {
  const JobLimits& limits = r.limits;
  if (r.limit_hit == "memory") return MemoryLimitReason(limits.memory_mb);
  if (r.limit_hit == "pids") return ProcessLimitReason(limits.pids);
  if (r.limit_hit == "disk") return DiskLimitReason(limits.disk_mb);
  return "";
}

namespace exec_internal {

int64_t DiskLimitBytes(const JobLimits& limits) { return limits.disk_mb << 20; }

Result<std::unique_ptr<JobCgroup>> MakeJobCgroup(const ExecSpec& spec) {
  if (!spec.cgroups || spec.cgroups->version() == CgroupHost::Version::kNone) {
    return std::unique_ptr<JobCgroup>();
  }
  return JobCgroup::Create(spec.cgroups, NextCgroupName("job-"), spec.limits);
}

std::string NextCgroupName(const char* prefix) { return prefix + std::to_string(++g_cgroup_seq); }

Result<std::unique_ptr<Execution>> FinishStart(std::unique_ptr<SupervisorConn> conn, uint32_t seq,
                                               UniqueFd out_r, UniqueFd err_r, const ExecSpec& spec,
                                               const PreparedJob& job, ReleaseFn release,
                                               std::unique_ptr<JobCgroup> cgroup) {
  auto impl = std::make_unique<Execution::Impl>();
  impl->own_cgroup = std::move(cgroup);
  impl->cgroup = impl->own_cgroup ? impl->own_cgroup.get() : conn->cgroup().get();
  impl->limits = spec.limits;
  impl->result.limits = spec.limits;
  impl->workspace = spec.workspace;
  impl->output_dir = spec.output_dir;
  if (spec.limits.Any()) {
    if (spec.cgroups) {
      impl->result.unenforced = spec.cgroups->Unenforced(spec.limits);
    } else {
      impl->result.unenforced = CgroupHost::UnenforcedWithout(spec.limits);
    }
  }
  impl->release = std::move(release);
  impl->seq = seq;
  impl->out_r = std::move(out_r);
  impl->err_r = std::move(err_r);
  impl->timeout_ms = spec.timeout_ms;
  impl->cap = spec.output_cap_bytes;
  impl->tap = spec.output_tap;
  impl->result.sandboxed = job.sandboxed;
  impl->result.sandbox_note = job.sandbox_note;
  impl->devices = job.devices;
  impl->result.started_ms = UnixMillis();
  impl->started_mono = MonoMillis();
  // The first check comes after kLimitCheckMs: a short job costs none (what
  // it hit is read once when it ends).
  impl->next_check_mono = impl->started_mono + kLimitCheckMs;
  Record rec;
  pid_t cred_pid = 0;
  int k = conn->Read(&rec, &cred_pid, -1);
  impl->conn = std::move(conn);
  Execution::Impl& m = *impl;
  auto ex = std::make_unique<Execution>(std::move(impl));  // from here on, the destructor cleans up
  if (k != 1 || rec.kind != kRecStarted || rec.seq != seq) {
    m.waited = true;
    m.Finish(false);
    return InternalError(
        "exec: the job supervisor exited before starting the job; check that gatos-supervise "
        "belongs to this worker's version and that the host has processes to spare");
  }
  m.job = (rec.index & kPidInCredentials) && cred_pid > 0 ? cred_pid : rec.value;
  if (rec.stage != kStageNone) {
    ex->Wait().status().IgnoreError();
    return StartError(rec, job);
  }
  return ex;
}

}  // namespace exec_internal
}  // namespace gatos
