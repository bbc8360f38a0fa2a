// Job cgroups: the kernel's bound on what one job may use of its worker's
// host (memory, processes, CPU), and its count of what the job used
// (docs/worker-execution.md, "Resource limits").
//
// CgroupHost finds the hierarchy this process may create cgroups in: cgroup
// v2 when the unified hierarchy has the memory, pids and cpu controllers
// (under systemd: a unit with Delegate=yes), else cgroup v1's memory, pids
// and cpu hierarchies (as on hosts booted with the hybrid or legacy
// layout). Its directory is `<this process's cgroup>/<name>` in each
// hierarchy; a JobCgroup is one directory below it, holding one job at a
// time. The job child joins it itself (writing "0" to the cgroup.procs
// descriptors before its execve), so no process of the job is ever outside.
//
// Thread-safety: CgroupHost is immutable after Open and may be shared by
// any number of threads. A JobCgroup belongs to one thread at a time (the
// one that runs its job).
#ifndef GATOS_EXEC_JOB_CGROUP_H_
#define GATOS_EXEC_JOB_CGROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gatos/model/job_limits.h"
#include "gatos/model/status.h"

namespace gatos {

class CgroupHost {
 public:
  enum class Version { kNone, kV1, kV2 };

  // Finds the hierarchy from /proc/self/cgroup and /proc/self/mountinfo
  // (`root` replaces "/" for tests: "" = the real one) and makes this
  // process's directory `name` in it. Never fails: whatever it cannot use
  // is missing from memory()/pids()/cpu() and explained in problems().
  static std::shared_ptr<CgroupHost> Open(const std::string& name);
  // Removes what a process that is gone left behind: the directories
  // `<prefix>-<pid>` next to where Open makes its own, whose pid no longer
  // exists, with every empty cgroup below them (a worker that was killed
  // could not remove its own). Best effort; never touches a cgroup that
  // holds a process or whose process lives.
  static void RemoveStale(const std::string& prefix);
  // Removes the directories made by Open, with any empty cgroup left below.
  ~CgroupHost();
  CgroupHost(const CgroupHost&) = delete;
  CgroupHost& operator=(const CgroupHost&) = delete;

  Version version() const { return version_; }
  bool memory() const { return !memory_dir_.empty(); }
  bool pids() const { return !pids_dir_.empty(); }
  bool cpu() const { return !cpu_dir_.empty(); }
  // One line per controller that cannot be used, saying why and what to do.
  const std::vector<std::string>& problems() const { return problems_; }
  // One line for logs and `gatos doctor`: "cgroup v1 (memory, pids, cpu)
  // under /sys/fs/cgroup/memory/..." or why none.
  std::string Describe() const;
  // The limits of `want` this host cannot enforce, by name ("cpu", "memory",
  // "pids"; sorted). Disk is not a cgroup's: see JobLimitsUnenforced in exec.h.
  std::vector<std::string> Unenforced(const JobLimits& want) const;
  // The same without any cgroup: every memory, process and CPU limit set.
  static std::vector<std::string> UnenforcedWithout(const JobLimits& want);

  // The host's directories (v2: the same one thrice). "" = not usable. (A
  // job's CPU time is counted by its supervisor, so cpuacct is not used.)
  const std::string& memory_dir() const { return memory_dir_; }
  const std::string& pids_dir() const { return pids_dir_; }
  const std::string& cpu_dir() const { return cpu_dir_; }

 private:
  CgroupHost() = default;
  Version version_ = Version::kNone;
  std::string memory_dir_, pids_dir_, cpu_dir_;
  std::vector<std::string> problems_;
};

// One job's cgroup (one job at a time in it).
class JobCgroup {
 public:
  // Makes `<host>/<name>` in the memory and pids hierarchies (and cpu, for
  // a CPU limit) with `limits` (0 = none; those the host cannot enforce are
  // ignored) and opens its cgroup.procs files. Internal with the path and errno when a directory or
  // a limit cannot be written; AlreadyExists when `name` exists.
  static Result<std::unique_ptr<JobCgroup>> Create(std::shared_ptr<const CgroupHost> host,
                                                   const std::string& name,
                                                   const JobLimits& limits);
  // Removes its directories, killing what is left in it first if anything is.
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  // Makes it ready for the next job (per-slot reuse): FailedPrecondition if
  // a process is still in it; then sets `limits` and resets the counters
  // (memory high-water mark, CPU time; event counts are taken as a new
  // baseline). Peak processes are then sampled, not the kernel's.
  Status Reset(const JobLimits& limits);

  // The cgroup.procs descriptors (one per hierarchy), for the job child.
  const std::vector<int>& procs_fds() const { return procs_fds_; }
  const JobLimits& limits() const { return limits_; }

  // Which limit the job has hit since Create/Reset: "memory" (the kernel's
  // OOM killer killed one of its processes), "pids" (a fork was refused at
  // the process limit), or "". Reads two small files.
  std::string LimitHit();
  // Processes and threads in it now (-1 when not counted); also feeds the
  // sampled peak.
  int64_t Processes();
  // What the job used since Create/Reset: peak memory and peak processes
  // (cpu_ms and disk_bytes are left -1: the supervisor counts CPU time).
  JobUsage Usage();
  // SIGKILLs every process in it until none is left (cgroup.kill on v2);
  // Internal if some remain after about a second.
  Status KillAll();

 private:
  JobCgroup() = default;
  Status AddDir(const std::string& dir);
  int64_t OomKills();
  int64_t PidsMaxEvents();

  std::shared_ptr<const CgroupHost> host_;
  std::vector<std::string> dirs_;  // distinct directories, one per hierarchy
  std::string name_;
  std::string memory_, pids_, cpu_;  // "" = not made (cpu: only for a CPU limit)
  std::vector<int> procs_fds_;
  JobLimits limits_;
  int64_t oom_base_ = 0, pids_events_base_ = 0;
  int64_t sampled_peak_ = -1;
  bool reused_ = false;
};

}  // namespace gatos

#endif  // GATOS_EXEC_JOB_CGROUP_H_
