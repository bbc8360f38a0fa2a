// Job resource limits (job_limits.h).
#include "gatos/model/job_limits.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace gatos {
namespace {

int64_t* Field(JobLimits& l, int i) {
  int64_t* f[] = {&l.memory_mb, &l.pids, &l.cpu_millis, &l.disk_mb};
  return f[i];
}
int64_t FieldOf(const JobLimits& l, int i) { return *Field(const_cast<JobLimits&>(l), i); }
const std::optional<int64_t>& Asked(const JobResources& r, int i) {
  const std::optional<int64_t>* f[] = {&r.memory_mb, &r.pids, &r.cpu_millis, &r.disk_mb};
  return *f[i];
}
constexpr int64_t kCeilings[] = {kMaxJobMemoryMb, kMaxJobPids, kMaxJobCpuMillis, kMaxJobDiskMb};

}  // namespace

int64_t JobResourceCeiling(std::string_view key) {
  for (int i = 0; i < 4; ++i) {
    if (key == kJobResourceKeys[i]) return kCeilings[i];
  }
  return 0;
}

std::string JobResourceProblem(std::string_view key, int64_t value) {
  const int64_t ceiling = JobResourceCeiling(key);
  if (value < 1) return std::to_string(value) + " is not positive; expected an integer >= 1";
  if (value > ceiling) {
    return std::to_string(value) + " is over the largest value, " + std::to_string(ceiling);
  }
  return "";
}

JobLimits EffectiveJobLimits(const JobResources& asked, const JobLimits& defaults,
                             const JobLimits& maxima) {
  JobLimits out;
  for (int i = 0; i < 4; ++i) {
    int64_t v = Asked(asked, i) ? *Asked(asked, i) : FieldOf(defaults, i);
    const int64_t max = FieldOf(maxima, i);
    // A maximum caps the default too: a policy whose default is above its
    // maximum (or none, 0) still gives no job more than the maximum.
    if (max > 0 && (v == 0 || v > max)) v = max;
    *Field(out, i) = v;
  }
  return out;
}

std::string ResourcesOverMaximum(const JobResources& asked, const JobLimits& maxima) {
  for (int i = 0; i < 4; ++i) {
    const int64_t max = FieldOf(maxima, i);
    if (Asked(asked, i) && max > 0 && *Asked(asked, i) > max) {
      return std::string("resources.") + kJobResourceKeys[i] + ": " +
             std::to_string(*Asked(asked, i)) + " is over this ledger's maximum of " +
             std::to_string(max) + " (max_job_" + kJobResourceKeys[i] + ")";
    }
  }
  return "";
}

std::string FormatJobLimits(const JobLimits& l) {
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (i) out += ' ';
    out += kJobResourceKeys[i];
    out += '=';
    out += std::to_string(FieldOf(l, i));
  }
  return out;
}

Result<JobLimits> ParseJobLimits(std::string_view text) {
  JobLimits l;
  std::string_view rest = text;
  for (int i = 0; i < 4; ++i) {
    const std::string key = std::string(kJobResourceKeys[i]) + "=";
    if (i > 0) {
      if (rest.empty() || rest[0] != ' ') break;
      rest.remove_prefix(1);
    }
    if (rest.substr(0, key.size()) != key) {
      return InvalidArgumentError("job limits: expected " + key + "<integer> at \"" +
                                  std::string(rest.substr(0, 40)) + "\"");
    }
    rest.remove_prefix(key.size());
    size_t n = 0;
    int64_t v = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') {
      if (n >= 12) return InvalidArgumentError("job limits: " + key + " is too large");
      v = v * 10 + (rest[n] - '0');
      ++n;
    }
    if (n == 0 || (n > 1 && rest[0] == '0')) {
      return InvalidArgumentError("job limits: " + key + " is not a decimal integer");
    }
    if (v > kCeilings[i]) {
      return InvalidArgumentError("job limits: " + key + std::to_string(v) +
                                  " is over the largest value, " + std::to_string(kCeilings[i]));
    }
    *Field(l, i) = v;
    rest.remove_prefix(n);
  }
  if (!rest.empty() || FormatJobLimits(l) != text) {
    return InvalidArgumentError("job limits: expected \"" + FormatJobLimits(JobLimits{}) +
                                "\" with integers");
  }
  return l;
}

namespace {
std::string Decimal(int64_t v, int64_t unit, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits,
                static_cast<double>(v) / static_cast<double>(unit));
  return buf;
}
}  // namespace

std::string JobLimitsText(const JobLimits& l, const std::vector<std::string>& unenforced) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (l.memory_mb > 0) add("memory " + std::to_string(l.memory_mb) + " MB");
  if (l.pids > 0) add(std::to_string(l.pids) + " processes");
  if (l.cpu_millis > 0) add("CPU " + Decimal(l.cpu_millis, 1000, 2));
  if (l.disk_mb > 0) add("disk " + std::to_string(l.disk_mb) + " MB");
  if (out.empty()) return "none";
  if (!unenforced.empty()) {
    std::string names;
    for (const auto& u : unenforced) names += (names.empty() ? "" : ", ") + u;
    out += " (not enforced: " + names + ")";
  }
  return out;
}

std::string JobUsageText(const JobUsage& u) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (u.peak_memory_bytes >= 0)
    add("peak memory " + Decimal(u.peak_memory_bytes, 1000000, 1) + " MB");
  if (u.cpu_ms >= 0) add("CPU " + Decimal(u.cpu_ms, 1000, 2) + " s");
  if (u.peak_processes >= 0) add("peak " + std::to_string(u.peak_processes) + " processes");
  if (u.disk_bytes >= 0) add("disk " + Decimal(u.disk_bytes, 1000000, 1) + " MB");
  return out.empty() ? "not measured" : out;
}

std::string MemoryLimitReason(int64_t memory_mb) {
  return "killed: memory limit " + std::to_string(memory_mb) + " MB";
}
std::string ProcessLimitReason(int64_t pids) {
  return "process limit " + std::to_string(pids) + " reached";
}
std::string DiskLimitReason(int64_t disk_mb) {
  return "disk limit " + std::to_string(disk_mb) + " MB reached";
}

}  // namespace gatos
