// Job resource limits with real processes (docs/worker-execution.md,
// "Resource limits"): a real fork bomb, a real 2 GiB allocation and a real
// 300 MB write, each ended by its limit with the reason, nothing of it left,
// the next job fine; and what a job used, as its cgroup counted it.
//
// Every test runs inside an OUTER cgroup the test makes for itself (memory
// 1 GiB, 512 processes) and moves its own process into, so the launcher's
// slots and every job are inside it: a regression cannot take down the
// machine that runs the tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/job_cgroup.h"
#include "launcher_test_util.h"
#include "outer_cgroup.h"
#include "test_util.h"

namespace gatos {
namespace {

using gatos::testing::OuterCgroup;
using launcher_test::MakeSpec;
using launcher_test::ProcessesWithMarker;
using Sandbox = ExecSpec::Sandbox;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

enum class Engine { kNamespaces, kPlain, kBubblewrap };

std::string EngineName(const ::testing::TestParamInfo<Engine>& i) {
  return i.param == Engine::kNamespaces ? "Namespaces"
         : i.param == Engine::kPlain    ? "Unsandboxed"
                                        : "Bubblewrap";
}

class LimitsTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    outer_ = std::make_unique<OuterCgroup>();
    ASSERT_TRUE(outer_->ok());
    // Inside the outer cgroup, as a worker would be inside its own.
    cgroups_ = CgroupHost::Open("gatos-limits-jobs-" + std::to_string(getpid()));
    ASSERT_NE(cgroups_->version(), CgroupHost::Version::kNone) << cgroups_->Describe();
    ASSERT_TRUE(cgroups_->memory() && cgroups_->pids() && cgroups_->cpu()) << cgroups_->Describe();
    LauncherOptions o;
    o.engine =
        GetParam() == Engine::kBubblewrap ? SandboxEngine::kBubblewrap : SandboxEngine::kAuto;
    o.cgroups = cgroups_;
    o.cgroup_per_slot = per_slot_;
    auto l = JobLauncher::Create(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    launcher_ = std::move(*l);
  }
  void TearDown() override {
    launcher_.reset();
    cgroups_.reset();
    outer_.reset();
  }

  ExecSpec Spec(std::vector<std::string> argv, const JobLimits& limits) {
    ExecSpec s = MakeSpec(dir_, std::move(argv),
                          GetParam() == Engine::kPlain ? Sandbox::kOff : Sandbox::kRequire,
                          "ws" + std::to_string(++n_));
    s.limits = limits;
    s.kill_grace_ms = 200;
    return s;
  }

  ExecResult Run(const ExecSpec& s) { return launcher_test::RunOn(*launcher_, s); }

  // What every hostile test checks afterwards: nothing of the job is left,
  // and the launcher runs the next job as if nothing happened.
  void ExpectGoneAndNextJobFine(const ExecSpec& hostile) {
    EXPECT_TRUE(ProcessesWithMarker(hostile.env.at("GATOS_TEST_MARKER")).empty());
    EXPECT_EQ(ReadText(cgroups_->pids_dir() + "/pids.current").substr(0, 2), "0\n")
        << "a process of the job is still in its cgroup";
    ExecResult next = Run(Spec({"/bin/sh", "-c", "echo fine"}, kPolicy));
    EXPECT_EQ(next.exit_code, 0);
    EXPECT_EQ(next.stdout_data, "fine\n");
    EXPECT_EQ(next.limit_hit, "");
    EXPECT_EQ(LimitReason(next), "");
  }

  static constexpr JobLimits kPolicy{256, 64, 0, 64};
  gatos::testing::TempDir dir_;
  std::unique_ptr<OuterCgroup> outer_;
  std::shared_ptr<CgroupHost> cgroups_;
  std::unique_ptr<JobLauncher> launcher_;
  bool per_slot_ = false;
  int n_ = 0;
};

// The bomb of the issue, with its main process kept (exec, no fork): else
// the main shell may exit before the bomb reaches its limit, and the
// supervisor then ends the rest as leftovers (also fine, but not this test).
constexpr char kForkBomb[] = "b() { b | b & }; b; exec sleep 120";

TEST_P(LimitsTest, AForkBombNeverHoldsMoreThanItsProcessLimitAndEndsFailedNamingIt) {
  ExecSpec s = Spec({"/bin/sh", "-c", kForkBomb}, kPolicy);
  // Sample every job cgroup under the host (only this job runs) while it runs.
  std::atomic<bool> done{false};
  std::atomic<int64_t> most{0};
  std::thread sampler([&] {
    const std::string f = cgroups_->pids_dir() + "/pids.current";
    while (!done) {
      int64_t n = std::atoll(ReadText(f).c_str());
      if (n > most) most = n;
      std::this_thread::yield();
    }
  });
  ExecResult r = Run(s);
  done = true;
  sampler.join();
  // The sampler is a second witness of the ceiling only: on a loaded host
  // it may not run in the tenth of a second the bomb lives (CI saw it read
  // 1). That the bomb ran is what the cgroup says below: its pids limit
  // hit (pids.events) and its peak.
  EXPECT_LE(most.load(), 64);
  EXPECT_EQ(r.limit_hit, "pids");
  EXPECT_EQ(LimitReason(r), "process limit 64 reached");
  EXPECT_FALSE(r.timed_out) << "ended by its limit, not by its timeout";
  EXPECT_LE(r.usage.peak_processes, 64);
  EXPECT_GE(r.usage.peak_processes, 2);
  ExpectGoneAndNextJobFine(s);
}

// The issue's bomb as written: its main shell returns at once, so the bomb
// is ended either at its limit or as the leftovers of a finished job; either
// way it never holds more than 64 processes and nothing of it is left.
TEST_P(LimitsTest, TheIssuesForkBombAsWrittenLeavesNothing) {
  ExecSpec s = Spec({"/bin/sh", "-c", "b() { b | b & }; b"}, kPolicy);
  ExecResult r = Run(s);
  EXPECT_LE(r.usage.peak_processes, 64);
  EXPECT_TRUE(r.limit_hit == "pids" || r.limit_hit.empty()) << r.limit_hit;
  ExpectGoneAndNextJobFine(s);
}

TEST_P(LimitsTest, ATwoGibAllocationIsKilledAtItsMemoryLimit) {
  ExecSpec s = Spec({"/usr/bin/python3", "-c", "x = bytearray(2 * 1024 ** 3)"}, kPolicy);
  ExecResult r = Run(s);
  EXPECT_EQ(r.limit_hit, "memory");
  EXPECT_EQ(LimitReason(r), "killed: memory limit 256 MB");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LE(r.usage.peak_memory_bytes, 256ll << 20);
  EXPECT_GE(r.usage.peak_memory_bytes, 200ll << 20);
  ExpectGoneAndNextJobFine(s);
}

TEST_P(LimitsTest, A300MbWriteStopsAtItsDiskLimit) {
  ExecSpec s = Spec({"/bin/sh", "-c", "head -c 300M /dev/zero > big; echo wrote"}, kPolicy);
  ExecResult r = Run(s);
  EXPECT_EQ(r.limit_hit, "disk");
  EXPECT_EQ(LimitReason(r), "disk limit 64 MB reached");
  EXPECT_LE(std::filesystem::file_size(s.workspace + "/big"), 64u << 20);
  EXPECT_EQ(r.usage.disk_bytes, 64ll << 20);
  ExpectGoneAndNextJobFine(s);
}

TEST_P(LimitsTest, TheSandboxesTmpStopsAtTheDiskLimitToo) {
  if (GetParam() == Engine::kPlain) {
    // Unsandboxed, /tmp is the host's: only the file size is bounded.
    ExecSpec s = Spec({"/bin/sh", "-c", "head -c 100M /dev/zero > \"$HOME/t\"; echo $?"}, kPolicy);
    ExecResult r = Run(s);
    EXPECT_EQ(r.limit_hit, "disk");
    return;
  }
  // Many files, each below the limit: the tmpfs, not RLIMIT_FSIZE, stops them.
  ExecSpec s =
      Spec({"/bin/sh", "-c",
            "for i in 1 2 3 4; do head -c 30M /dev/zero > /tmp/f$i || exit 7; done; exit 0"},
           kPolicy);
  ExecResult r = Run(s);
  EXPECT_EQ(r.exit_code, 7) << r.stderr_data;
  EXPECT_NE(r.stderr_data.find("No space left on device"), std::string::npos) << r.stderr_data;
}

TEST_P(LimitsTest, UsageIsWhatTheJobUsed) {
  // 100 MiB touched: the peak is between 100 and 150 MB.
  ExecSpec mem = Spec({"/usr/bin/python3", "-c", "x = bytearray(100 * 1024 * 1024)"}, kPolicy);
  ExecResult r = Run(mem);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_GE(r.usage.peak_memory_bytes, 100ll << 20);
  EXPECT_LE(r.usage.peak_memory_bytes, 150ll << 20);
  EXPECT_GE(r.usage.peak_processes, 1);
  // A busy loop of one CPU second (by its own clock, so that a busy machine
  // does not change the answer): its cgroup counts it within 20%.
  ExecSpec cpu =
      Spec({"/usr/bin/python3", "-c", "import time\nwhile time.process_time() < 1.0: pass"},
           JobLimits{});
  r = Run(cpu);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_GE(r.usage.cpu_ms, 1000);
  EXPECT_LE(r.usage.cpu_ms, 1200);
}

TEST_P(LimitsTest, ACpuLimitSlowsTheJobDown) {
  // One second of wall time at a quarter of a CPU: about 250 ms of CPU.
  ExecSpec s = Spec(
      {"/usr/bin/python3", "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.0: pass"},
      JobLimits{0, 0, 250, 0});
  ExecResult r = Run(s);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.limit_hit, "");
  EXPECT_LE(r.usage.cpu_ms, 450);
  EXPECT_GE(r.usage.cpu_ms, 100);
}

INSTANTIATE_TEST_SUITE_P(Engines, LimitsTest,
                         ::testing::Values(Engine::kNamespaces, Engine::kPlain,
                                           Engine::kBubblewrap),
                         EngineName);

// The same on one cgroup per slot, reset between jobs: the second job's
// figures are its own.
class PerSlotLimitsTest : public LimitsTest {
 protected:
  void SetUp() override {
    per_slot_ = true;
    LimitsTest::SetUp();
  }
};

TEST_P(PerSlotLimitsTest, AResetCgroupCountsOnlyTheNextJob) {
  ExecSpec bomb = Spec({"/bin/sh", "-c", kForkBomb}, kPolicy);
  ExecResult r = Run(bomb);
  EXPECT_EQ(r.limit_hit, "pids") << "exit " << r.exit_code.value_or(-1) << " signal "
                                 << r.signal.value_or(-1) << " peak " << r.usage.peak_processes
                                 << " stderr " << r.stderr_data.substr(0, 300);
  ExecSpec mem = Spec({"/usr/bin/python3", "-c", "x = bytearray(100 * 1024 * 1024)"}, kPolicy);
  r = Run(mem);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.limit_hit, "") << "the last job's events are not this one's";
  EXPECT_GE(r.usage.peak_memory_bytes, 100ll << 20);
  EXPECT_LE(r.usage.peak_memory_bytes, 150ll << 20);
  ExpectGoneAndNextJobFine(bomb);
}

INSTANTIATE_TEST_SUITE_P(Engines, PerSlotLimitsTest,
                         ::testing::Values(Engine::kNamespaces, Engine::kPlain), EngineName);

// Without a cgroup host, limits are rlimits only, and the result says which
// ones were not enforced.
TEST(LimitsWithoutCgroups, TheResultSaysWhatWasNotEnforced) {
  gatos::testing::TempDir dir;
  ExecSpec s = MakeSpec(dir, {"/bin/sh", "-c", "head -c 10M /dev/zero > f"});
  s.limits = JobLimits{256, 64, 500, 1};
  auto l = JobLauncher::Create({});
  ASSERT_TRUE(l.ok());
  ExecResult r = launcher_test::RunOn(**l, s);
  EXPECT_EQ(r.unenforced, (std::vector<std::string>{"cpu", "memory", "pids"}));
  EXPECT_EQ(r.limit_hit, "disk");
  EXPECT_EQ(std::filesystem::file_size(s.workspace + "/f"), 1u << 20);
}

}  // namespace
}  // namespace gatos

namespace gatos {
namespace {

// What a killed worker left is removed by the next one; what a live
// process holds is not.
TEST(CgroupHostTest, RemoveStaleRemovesOnlyWhatDeadProcessesLeft) {
  gatos::testing::OuterCgroup outer;
  ASSERT_TRUE(outer.ok());
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int st = 0;
  ASSERT_EQ(waitpid(dead, &st, 0), dead);
  auto gone = CgroupHost::Open("gatos-stale-test-" + std::to_string(dead));
  auto live = CgroupHost::Open("gatos-stale-test-" + std::to_string(getpid()));
  ASSERT_TRUE(gone->pids() && live->pids()) << gone->Describe();
  auto job = JobCgroup::Create(gone, "job-1", JobLimits{});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string gone_dir = gone->pids_dir(), job_dir = gone_dir + "/job-1";
  ASSERT_TRUE(std::filesystem::exists(job_dir));
  CgroupHost::RemoveStale("gatos-stale-test");
  EXPECT_FALSE(std::filesystem::exists(job_dir));
  EXPECT_FALSE(std::filesystem::exists(gone_dir));
  EXPECT_TRUE(std::filesystem::exists(live->pids_dir())) << "a live process's cgroup was removed";
}

}  // namespace
}  // namespace gatos
