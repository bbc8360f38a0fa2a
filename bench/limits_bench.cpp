// What job resource limits cost per job (issue 36's target: at most 0.3 ms
// of CPU): jobs on the JobLauncher without limits, with a cgroup made and
// removed per job, and with a cgroup per slot reset for each job; then the
// cgroup steps alone (no job), which is the added cost without the noise of
// the jobs around it. Prints figures; never passes or fails. Run as root
// (or in a delegated cgroup), as the worker would run.
//
//   limits_bench [--jobs N] [--rounds R] [--ops N]
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/job_cgroup.h"
#include "cpu_clock.h"

namespace {

using gatos::CgroupHost;
using gatos::ExecSpec;
using gatos::JobCgroup;
using gatos::JobLimits;
namespace fs = std::filesystem;

using gatos::bench::MachineCpuMs;
using gatos::bench::Median;
using gatos::bench::MonoMs;
using gatos::bench::TreeCpuMs;


// Other load only adds CPU to a round: the least is the closest to the
// job's own cost.
double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

enum class Mode { kNone, kPerJob, kPerJobNoCpu, kPerSlot };
const char* ModeName(Mode m) {
  return m == Mode::kNone          ? "no limits"
         : m == Mode::kPerJob      ? "cgroup per job"
         : m == Mode::kPerJobNoCpu ? "cgroup per job, no CPU limit"
                                   : "cgroup per slot, reset";
}

constexpr JobLimits kLimits{256, 64, 1000, 64};
constexpr JobLimits kLimitsNoCpu{256, 64, 0, 64};

struct Figures {
  double jobs_per_s = 0, tree_ms = 0, machine_ms = 0;
};

Figures RunJobs(Mode mode, bool sandboxed, int jobs, const std::string& dir,
                const std::shared_ptr<CgroupHost>& host) {
  gatos::LauncherOptions o;
  if (mode != Mode::kNone) o.cgroups = host;
  o.cgroup_per_slot = mode == Mode::kPerSlot;
  auto l = gatos::JobLauncher::Create(o);
  if (!l.ok()) {
    std::fprintf(stderr, "launcher: %s\n", l.status().ToString().c_str());
    std::exit(1);
  }
  ExecSpec s;
  s.workspace = dir + "/work";
  s.output_dir = dir + "/out";
  fs::create_directories(s.workspace);
  s.argv = {"/bin/true"};
  s.sandbox = sandboxed ? ExecSpec::Sandbox::kRequire : ExecSpec::Sandbox::kOff;
  s.timeout_ms = 60000;
  if (mode != Mode::kNone) s.limits = mode == Mode::kPerJobNoCpu ? kLimitsNoCpu : kLimits;
  auto run_one = [&] {
    auto ex = (*l)->Start(s);
    if (!ex.ok()) {
      std::fprintf(stderr, "start: %s\n", ex.status().ToString().c_str());
      std::exit(1);
    }
    auto r = (*ex)->Wait();
    if (!r.ok() || r->exit_code != 0) {
      std::fprintf(stderr, "job failed: %s\n",
                   r.ok() ? r->stderr_data.c_str() : r.status().ToString().c_str());
      std::exit(1);
    }
  };
  run_one();  // warm-up: starts the slot
  const double tree0 = TreeCpuMs(), machine0 = MachineCpuMs(), t0 = MonoMs();
  for (int i = 0; i < jobs; ++i) run_one();
  const double wall = MonoMs() - t0;
  l->reset();  // reaps the slot, so that its CPU is counted
  return {jobs / (wall / 1e3), (TreeCpuMs() - tree0) / jobs, (MachineCpuMs() - machine0) / jobs};
}

// The cgroup steps a job adds, without a job: per job, make (mkdir in each
// hierarchy, the limits, open cgroup.procs), read the events and usage, kill
// nothing, remove; per slot, reset (limits, counters) and read.
Figures CgroupSteps(Mode mode, int ops, const std::shared_ptr<CgroupHost>& host) {
  std::unique_ptr<JobCgroup> slot;
  if (mode == Mode::kPerSlot)
    slot = std::move(JobCgroup::Create(host, "bench-slot", kLimits)).value();
  const double tree0 = TreeCpuMs(), machine0 = MachineCpuMs(), t0 = MonoMs();
  for (int i = 0; i < ops; ++i) {
    if (mode == Mode::kPerJob) {
      auto g = JobCgroup::Create(host, "bench-" + std::to_string(i), kLimits);
      if (!g.ok()) {
        std::fprintf(stderr, "%s\n", g.status().ToString().c_str());
        std::exit(1);
      }
      (*g)->LimitHit();
      (*g)->Usage();
    } else {
      if (!slot->Reset(kLimits).ok()) std::exit(1);
      slot->LimitHit();
      slot->Usage();
    }
  }
  const double wall = MonoMs() - t0;
  slot.reset();
  return {ops / (wall / 1e3), (TreeCpuMs() - tree0) / ops, (MachineCpuMs() - machine0) / ops};
}

std::string Machine() {
  utsname u;
  uname(&u);
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return model + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs, Linux " + u.release;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 300, rounds = 5, ops = 2000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) {
      jobs = std::atoi(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--ops" && i + 1 < argc) {
      ops = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: limits_bench [--jobs N] [--rounds R] [--ops N]\n");
      return 2;
    }
  }
  auto host = CgroupHost::Open("gatos-limits-bench-" + std::to_string(getpid()));
  std::printf("# limits_bench: %s\n", Machine().c_str());
  std::printf("cgroups: %s\n", host->Describe().c_str());
  if (host->version() == CgroupHost::Version::kNone) return 1;
  double load[3];
  if (getloadavg(load, 3) == 3)
    std::printf("load average at start: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  const std::string dir = "/tmp/gatos-limits-bench-" + std::to_string(getpid());

  std::printf(
      "\n## `/bin/true` jobs on the JobLauncher, concurrency 1 (%d jobs, median of %d rounds)\n\n",
      jobs, rounds);
  std::printf(
      "Limits: memory 256 MB, 64 processes, CPU 1.0 (none where it says so), disk 64 MB.\n"
      "CPU (tree): this process, its supervisors and jobs; CPU (machine): all cores,\n"
      "anything else running included.\n\n");
  std::printf(
      "| sandbox | limits | jobs/s | CPU ms/job (tree), median | (tree), least | CPU ms/job "
      "(machine) "
      "|\n|---|---|---|---|---|---|\n");
  struct Config {
    bool sandboxed;
    Mode mode;
    std::vector<double> rate, tree, machine;
  };
  std::vector<Config> configs;
  for (bool sandboxed : {false, true}) {
    for (Mode m : {Mode::kNone, Mode::kPerJob, Mode::kPerJobNoCpu, Mode::kPerSlot}) {
      configs.push_back({sandboxed, m, {}, {}, {}});
    }
  }
  for (int r = 0; r < rounds; ++r) {  // round-robin: load changes hit every case alike
    for (auto& c : configs) {
      Figures f = RunJobs(c.mode, c.sandboxed, jobs, dir, host);
      c.rate.push_back(f.jobs_per_s);
      c.tree.push_back(f.tree_ms);
      c.machine.push_back(f.machine_ms);
    }
  }
  for (auto& c : configs) {
    std::printf("| %s | %s | %.0f | %.3f | %.3f | %.3f |\n", c.sandboxed ? "namespaces" : "none",
                ModeName(c.mode), Median(c.rate), Median(c.tree), Min(c.tree), Median(c.machine));
  }

  std::printf("\n## The cgroup steps alone, no job (%d per round, median of %d rounds)\n\n", ops,
              rounds);
  std::printf(
      "| steps | per second | CPU ms (tree), median | (tree), least | CPU ms (machine) "
      "|\n|---|---|---|---|---|\n");
  for (Mode m : {Mode::kPerJob, Mode::kPerSlot}) {
    std::vector<double> rate, tree, machine;
    for (int r = 0; r < rounds; ++r) {
      Figures f = CgroupSteps(m, ops, host);
      rate.push_back(f.jobs_per_s);
      tree.push_back(f.tree_ms);
      machine.push_back(f.machine_ms);
    }
    std::printf("| %s | %.0f | %.4f | %.4f | %.4f |\n",
                m == Mode::kPerJob ? "make, read, remove (per job)" : "reset, read (per slot)",
                Median(rate), Median(tree), Min(tree), Median(machine));
  }
  if (getloadavg(load, 3) == 3)
    std::printf("\nload average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  host.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
