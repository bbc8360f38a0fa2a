// Job resource limits end to end (issue 36): the policy's limits reach the
// worker in the signed lease, hostile jobs end `failed` naming the limit
// they hit, the worker lives on and runs the next job, and poe.json and
// `gatos status` say what each job was allowed and used. The whole stack
// (nats-server, gatosd, the worker and its jobs) runs inside an outer cgroup
// the test makes for itself (outer_cgroup.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <csignal>
#include <string>

#include "outer_cgroup.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

class LimitsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    outer_ = std::make_unique<OuterCgroup>(JobLimits{1536, 1024, 0, 0});
    ASSERT_TRUE(outer_->ok());
    stack_ = std::make_unique<Stack>();
    ASSERT_TRUE(stack_->Start());
    RunResult r = stack_->Gatos({"policy", "set", "--ledger", stack_->ledger(), "job_memory_mb=256",
                                 "job_pids=64", "job_disk_mb=64", "max_job_memory_mb=512"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    stack_->StartWorker(0, {"--concurrency", "2"});
  }
  void TearDown() override {
    stack_.reset();
    outer_.reset();
  }
  RunResult Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "--git-dir", stack_->ledger()};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions ro;
    ro.env = stack_->env();
    return testing::Run(argv, ro);
  }
  json Poe(const std::string& id) {
    std::string commit =
        TrimEnd(Git({"rev-parse", "refs/gatos/jobs/" + id.substr(7) + "/result"}).out);
    return json::parse(Git({"show", commit + ":poe.json"}).out);
  }
  void Wait(const std::string& id) {
    stack_->Gatos({"wait", id, "--ledger", stack_->nats_url(), "--timeout", "60"}, 90);
  }

  std::unique_ptr<OuterCgroup> outer_;
  std::unique_ptr<Stack> stack_;
};

TEST_F(LimitsE2ETest, HostileJobsEndFailedNamingTheLimitAndTheNextJobSucceeds) {
  const std::string bomb = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", \"b() { b | b & }; b; exec sleep 120\"]\ntimeout: 60\n");
  const std::string mem = stack_->PushJob(
      "command: [\"/usr/bin/python3\", \"-c\", \"x = bytearray(2 * 1024 ** 3)\"]\ntimeout: 60\n");
  const std::string disk = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", \"head -c 300M /dev/zero > big\"]\ntimeout: 60\n");
  // Many files, each below the per-file limit (RLIMIT_FSIZE): only the
  // worker's measuring while the job runs stops it before all 300 MB.
  const std::string files = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", "
      "\"for i in $(seq 300); do head -c 1M /dev/zero > f$i || exit 1; done\"]\ntimeout: 60\n");
  for (const auto& id : {bomb, mem, disk, files}) Wait(id);
  struct Want {
    std::string id, reason;
  };
  for (const Want& w :
       {Want{bomb, "process limit 64 reached"}, Want{mem, "killed: memory limit 256 MB"},
        Want{disk, "disk limit 64 MB reached"}, Want{files, "disk limit 64 MB reached"}}) {
    json poe = Poe(w.id);
    EXPECT_EQ(poe["status"], "failed") << poe.dump() << stack_->worker(0)->log();
    EXPECT_EQ(poe["reason"], w.reason) << poe.dump();
    EXPECT_EQ(poe["exit"]["timed_out"], false);
    EXPECT_EQ(poe["limits"],
              (json{{"cpu_millis", 0}, {"disk_mb", 64}, {"memory_mb", 256}, {"pids", 64}}));
    ASSERT_TRUE(poe.contains("usage")) << poe.dump();
    EXPECT_LE(poe["usage"]["peak_processes"].get<int64_t>(), 64);
    EXPECT_LE(poe["usage"]["peak_memory_bytes"].get<int64_t>(), 256ll << 20);
  }
  // Ended while it wrote (killed), not at the end of its loop.
  json many = Poe(files);
  EXPECT_EQ(many["exit"]["signal"], SIGKILL) << many.dump();
  EXPECT_GE(many["usage"]["disk_bytes"].get<int64_t>(), 64ll << 20) << many.dump();
  // A manifest may ask for more, up to the maximum; the worker is alive.
  const std::string next = stack_->PushJob(
      "command: [\"/usr/bin/python3\", \"-c\", \"x = bytearray(300 * 1024 * 1024)\"]\ntimeout: 60\n"
      "resources: {memory_mb: 512}\n");
  Wait(next);
  json poe = Poe(next);
  EXPECT_EQ(poe["status"], "succeeded") << poe.dump() << stack_->worker(0)->log();
  EXPECT_EQ(poe["limits"]["memory_mb"], 512);
  EXPECT_GE(poe["usage"]["peak_memory_bytes"].get<int64_t>(), 300ll << 20);
  EXPECT_GE(poe["usage"]["cpu_ms"].get<int64_t>(), 0);
  // gatos status shows them.
  RunResult st = stack_->Gatos({"status", mem, "--ledger", stack_->ledger()});
  EXPECT_NE(st.out.find("reason: killed: memory limit 256 MB"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("limits: memory 256 MB, 64 processes, disk 64 MB"), std::string::npos)
      << st.out;
  EXPECT_NE(st.out.find("used:   peak memory "), std::string::npos) << st.out;
  // The worker said at start what it enforces.
  EXPECT_NE(stack_->worker(0)->log().find("job limits: a cgroup per job, cgroup v"),
            std::string::npos)
      << stack_->worker(0)->log();
  // Every result verifies offline, limits and usage signed with the rest.
  RunResult audit = stack_->Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
}

}  // namespace
}  // namespace gatos::testing
