// Job resource limits (docs/limits.md, "Job resource limits"): what a job may
// use of its worker's host (memory, processes, CPU, disk), as a manifest asks
// (`resources`), as the policy sets by default and caps (job_* and
// max_job_*), as the ledger grants in a lease commit (the Job-Limits and
// Job-Limits-Max trailers) and as the worker applies and reports in poe.json.
//
// One definition of each rule: the manifest parser, the ledger's push check,
// the lease codec and the worker all call these.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_MODEL_JOB_LIMITS_H_
#define GATOS_MODEL_JOB_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

// What a manifest's `resources` asks; each field optional, each >= 1.
struct JobResources {
  std::optional<int64_t> memory_mb;   // MiB of memory (RAM, no swap)
  std::optional<int64_t> pids;        // processes and threads at once
  std::optional<int64_t> cpu_millis;  // CPU bandwidth, 1000 = one CPU
  std::optional<int64_t> disk_mb;     // MiB written to files
  bool operator==(const JobResources&) const = default;
};

// Limits as applied: 0 = none. Also the policy's defaults and maxima.
struct JobLimits {
  int64_t memory_mb = 0;
  int64_t pids = 0;
  int64_t cpu_millis = 0;
  int64_t disk_mb = 0;
  bool Any() const { return memory_mb > 0 || pids > 0 || cpu_millis > 0 || disk_mb > 0; }
  bool operator==(const JobLimits&) const = default;
};

// What a job used of its worker's host, as the kernel counted it (the job's
// cgroup); -1 = not measured.
struct JobUsage {
  int64_t peak_memory_bytes = -1;  // the cgroup's high-water mark
  int64_t cpu_ms = -1;             // user + system CPU time of every process
  int64_t peak_processes = -1;     // most processes and threads at once
  int64_t disk_bytes = -1;         // bytes the job left in its workspace and output dir
  bool Any() const {
    return peak_memory_bytes >= 0 || cpu_ms >= 0 || peak_processes >= 0 || disk_bytes >= 0;
  }
  bool operator==(const JobUsage&) const = default;
};

// The largest value each key may have (manifest, policy): far above any
// host, small enough that MiB -> bytes and millis -> microseconds never
// overflow.
inline constexpr int64_t kMaxJobMemoryMb = 16LL << 20;  // 16 TiB
inline constexpr int64_t kMaxJobPids = 4'194'304;       // the kernel's pid_max ceiling
inline constexpr int64_t kMaxJobCpuMillis = 1'024'000;  // 1024 CPUs
inline constexpr int64_t kMaxJobDiskMb = 16LL << 20;    // 16 TiB

// The keys of `resources`, in the order above.
inline constexpr const char* kJobResourceKeys[] = {"memory_mb", "pids", "cpu_millis", "disk_mb"};
// The ceiling of `key` (one of kJobResourceKeys); 0 for another key.
int64_t JobResourceCeiling(std::string_view key);
// Why `value` is not a valid value of resources.`key`; "" when it is
// (an integer from 1 to the key's ceiling).
std::string JobResourceProblem(std::string_view key, int64_t value);

// The limits a job runs under: what the manifest asks where it asks,
// else the policy's default; never above a maximum that is set (> 0).
JobLimits EffectiveJobLimits(const JobResources& asked, const JobLimits& defaults,
                             const JobLimits& maxima);
// Why the ledger refuses a manifest that asks more than the policy's
// maxima, naming the first such key, its value and the maximum, e.g.
// "resources.memory_mb: 4096 is over this ledger's maximum of 1024
// (max_job_memory_mb)"; "" when nothing is over.
std::string ResourcesOverMaximum(const JobResources& asked, const JobLimits& maxima);

// The lease trailers' value: "memory_mb=256 pids=64 cpu_millis=0 disk_mb=64"
// (every key, in this order). Parse is strict: exactly these keys in this
// order, decimal integers within 0..ceiling, single spaces.
std::string FormatJobLimits(const JobLimits& limits);
Result<JobLimits> ParseJobLimits(std::string_view text);

// For people (gatos status, the dashboard): "memory 256 MB, 64 processes,
// CPU 0.5, disk 64 MB" (the limits set; "none" without any), with
// " (not enforced: cpu)" when some were not; and "peak memory 104.9 MB,
// CPU 1.02 s, peak 12 processes, disk 64.0 MB" (what was measured).
std::string JobLimitsText(const JobLimits& limits, const std::vector<std::string>& unenforced);
std::string JobUsageText(const JobUsage& usage);

// The reason of a result whose job a limit ended (poe.json `reason`).
std::string MemoryLimitReason(int64_t memory_mb);  // "killed: memory limit 256 MB"
std::string ProcessLimitReason(int64_t pids);      // "process limit 64 reached"
std::string DiskLimitReason(int64_t disk_mb);      // "disk limit 64 MB reached"

}  // namespace gatos

#endif  // GATOS_MODEL_JOB_LIMITS_H_
