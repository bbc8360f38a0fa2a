// One job's cgroup (gatos/exec/job_cgroup.h): limits, events, usage, kill.
#include "gatos/exec/job_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cgroup_files.h"

namespace gatos {
namespace {

using namespace ::gatos::exec_internal;  // NOLINT: the file helpers

constexpr int64_t kCpuPeriodUs = 100'000;

Status WriteLimit(const std::string& dir, const char* file, const std::string& value) {
  if (int e = WriteSmallFile(dir + "/" + file, value)) {
    return InternalError("cgroup: cannot write " + value + " to " + dir + "/" + file + ": " +
                         std::strerror(e));
  }
  return OkStatus();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void SleepMs(int ms) {
  timespec ts{0, ms * 1'000'000L};
  nanosleep(&ts, nullptr);
}

// Pids listed in a cgroup.procs file.
std::vector<pid_t> Procs(const std::string& dir) {
  std::vector<pid_t> out;
  std::string s;
  if (!ReadSmallFile(dir + "/cgroup.procs", &s)) return out;
  pid_t v = 0;
  bool any = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      any = true;
    } else if (any) {
      out.push_back(v);
      v = 0;
      any = false;
    }
  }
  if (any) out.push_back(v);
  return out;
}

// The limits, written to a v1 or v2 cgroup. Lowering a v1 memory limit
// below memory.memsw.limit_in_bytes is fine, raising it above is not: the
// swap limit is lifted first and set last.
Status ApplyLimits(const CgroupHost& host, const std::string& memory, const std::string& pids,
                   const std::string& cpu, const JobLimits& l, bool fresh) {
  const bool v2 = host.version() == CgroupHost::Version::kV2;
  if (!memory.empty() && (l.memory_mb > 0 || !fresh)) {
    const std::string bytes = l.memory_mb > 0 ? std::to_string(l.memory_mb << 20) : "";
    if (v2) {
      GATOS_RETURN_IF_ERROR(WriteLimit(memory, "memory.max", l.memory_mb > 0 ? bytes : "max"));
      if (fresh) {
        // No swap, and an OOM kill ends every process of the job at once.
        WriteSmallFile(memory + "/memory.swap.max", "0");
        WriteSmallFile(memory + "/memory.oom.group", "1");
      }
    } else {
      const std::string memsw = memory + "/memory.memsw.limit_in_bytes";
      const bool swap_accounting = Exists(memsw);
      if (swap_accounting && !fresh) WriteSmallFile(memsw, "-1");
      GATOS_RETURN_IF_ERROR(
          WriteLimit(memory, "memory.limit_in_bytes", l.memory_mb > 0 ? bytes : "-1"));
      if (swap_accounting && l.memory_mb > 0) {
        GATOS_RETURN_IF_ERROR(WriteLimit(memory, "memory.memsw.limit_in_bytes", bytes));
      }
    }
  }
  if (!pids.empty() && (l.pids > 0 || !fresh)) {
    GATOS_RETURN_IF_ERROR(
        WriteLimit(pids, "pids.max", l.pids > 0 ? std::to_string(l.pids) : "max"));
  }
  if (!cpu.empty() && (l.cpu_millis > 0 || !fresh)) {
    // The kernel's smallest quota is 1 ms per period (0.01 CPU).
    const int64_t quota = std::max<int64_t>(1000, l.cpu_millis * kCpuPeriodUs / 1000);
    if (v2) {
      GATOS_RETURN_IF_ERROR(WriteLimit(
          cpu, "cpu.max",
          (l.cpu_millis > 0 ? std::to_string(quota) : "max") + " " + std::to_string(kCpuPeriodUs)));
    } else {
      GATOS_RETURN_IF_ERROR(
          WriteLimit(cpu, "cpu.cfs_quota_us", l.cpu_millis > 0 ? std::to_string(quota) : "-1"));
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<JobCgroup>> JobCgroup::Create(std::shared_ptr<const CgroupHost> host,
                                                     const std::string& name,
                                                     const JobLimits& limits) {
  std::unique_ptr<JobCgroup> g(new JobCgroup());
  g->host_ = host;
  g->limits_ = limits;
  g->name_ = name;
  auto sub = [&](const std::string& d) { return d.empty() ? std::string() : d + "/" + name; };
  g->memory_ = sub(host->memory_dir());
  g->pids_ = sub(host->pids_dir());
  // CPU time comes from the supervisor (RUSAGE_CHILDREN), so the cpu
  // hierarchy is needed only for a CPU limit: one migration less per job.
  if (limits.cpu_millis > 0) g->cpu_ = sub(host->cpu_dir());
  for (const std::string* d : {&g->memory_, &g->pids_, &g->cpu_}) {
    GATOS_RETURN_IF_ERROR(g->AddDir(*d));  // the destructor removes what was made
  }
  GATOS_RETURN_IF_ERROR(ApplyLimits(*host, g->memory_, g->pids_, g->cpu_, limits, true));
  return g;
}

Status JobCgroup::AddDir(const std::string& d) {
  if (d.empty() || std::find(dirs_.begin(), dirs_.end(), d) != dirs_.end()) return OkStatus();
  if (mkdir(d.c_str(), 0755) != 0) {
    const int e = errno;
    return e == EEXIST ? AlreadyExistsError("cgroup: " + d + " exists already")
                       : InternalError("cgroup: cannot create " + d + ": " + std::strerror(e));
  }
  dirs_.push_back(d);
  int fd = open((d + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return InternalError("cgroup: cannot open " + d + "/cgroup.procs: " + std::strerror(errno));
  }
  procs_fds_.push_back(fd);
  return OkStatus();
}

JobCgroup::~JobCgroup() {
  for (int fd : procs_fds_) close(fd);
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    // Cgroups a process in it made below (a job has no right to; a test's
    // outer cgroup holds a killed worker's).
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(*it, ec)) {
      if (e.is_directory(ec) && !e.is_symlink(ec)) RemoveCgroupTree(e.path().string());
    }
    // rmdir fails (EBUSY) only while a process is in it: then, and only
    // then, it is killed (most jobs leave nothing, and the supervisor saw
    // to that; this catches what escaped its view).
    for (int i = 0; i < 100 && rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) {
      KillAll().IgnoreError();
      SleepMs(1);
    }
  }
}

Status JobCgroup::Reset(const JobLimits& limits) {
  for (const std::string& d : dirs_) {
    if (!Procs(d).empty()) {
      return FailedPreconditionError("cgroup: " + d + " still holds a process of the last job");
    }
  }
  if (limits.cpu_millis > 0 && cpu_.empty() && !host_->cpu_dir().empty()) {
    cpu_ = host_->cpu_dir() + "/" + name_;
    GATOS_RETURN_IF_ERROR(AddDir(cpu_));
  }
  GATOS_RETURN_IF_ERROR(ApplyLimits(*host_, memory_, pids_, cpu_, limits, false));
  limits_ = limits;
  if (host_->version() == CgroupHost::Version::kV1) {
    if (!memory_.empty()) {
      // What the last job left charged here (its page cache) would count
      // against this job's limit and peak: reclaim it first.
      WriteSmallFile(memory_ + "/memory.force_empty", "0");
      WriteSmallFile(memory_ + "/memory.max_usage_in_bytes", "0");
      WriteSmallFile(memory_ + "/memory.failcnt", "0");
    }
  }
  oom_base_ = OomKills();
  pids_events_base_ = PidsMaxEvents();
  sampled_peak_ = -1;
  reused_ = true;
  return OkStatus();
}

int64_t JobCgroup::OomKills() {
  if (memory_.empty()) return 0;
  const bool v2 = host_->version() == CgroupHost::Version::kV2;
  int64_t n = ReadKeyed(memory_ + (v2 ? "/memory.events" : "/memory.oom_control"), "oom_kill");
  return n < 0 ? 0 : n;
}

int64_t JobCgroup::PidsMaxEvents() {
  if (pids_.empty()) return 0;
  int64_t n = ReadKeyed(pids_ + "/pids.events", "max");
  return n < 0 ? 0 : n;
}

std::string JobCgroup::LimitHit() {
  if (limits_.memory_mb > 0 && OomKills() > oom_base_) return "memory";
  if (limits_.pids > 0 && PidsMaxEvents() > pids_events_base_) return "pids";
  return "";
}

int64_t JobCgroup::Processes() {
  if (pids_.empty()) return -1;
  int64_t n = ReadNumber(pids_ + "/pids.current");
  if (n > sampled_peak_) sampled_peak_ = n;
  return n;
}

JobUsage JobCgroup::Usage() {
  JobUsage u;
  const bool v2 = host_->version() == CgroupHost::Version::kV2;
  if (!memory_.empty() && !(v2 && reused_)) {
    u.peak_memory_bytes =
        ReadNumber(memory_ + (v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  }
  if (!pids_.empty()) {
    int64_t peak = reused_ ? -1 : ReadNumber(pids_ + "/pids.peak");
    u.peak_processes = peak >= 0 ? peak : sampled_peak_;
  }
  return u;
}

Status JobCgroup::KillAll() {
  if (dirs_.empty()) return OkStatus();
  const std::string& d = !pids_.empty() ? pids_ : dirs_.front();
  if (host_->version() == CgroupHost::Version::kV2 && Exists(d + "/cgroup.kill")) {
    WriteSmallFile(d + "/cgroup.kill", "1");
  }
  // A process forking while we kill may add one more: read again until the
  // cgroup is empty in every hierarchy.
  const pid_t self = getpid();
  for (int round = 0; round < 1000; ++round) {
    bool any = false;
    for (const std::string& dir : dirs_) {
      for (pid_t p : Procs(dir)) {
        if (p == self) continue;  // never this process (a caller that moved itself in)
        any = true;
        kill(p, SIGKILL);
      }
    }
    if (!any) return OkStatus();
    SleepMs(1);
  }
  return InternalError("cgroup: processes remain in " + d + " after SIGKILL");
}

}  // namespace gatos
