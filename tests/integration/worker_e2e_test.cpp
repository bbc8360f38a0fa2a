// The whole job plane with real processes: nats-server, gatosd serve,
// gatos-worker, jobs pushed with stock git; crashes are real SIGKILLs.
#include <signal.h>

#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "gatos/git/result.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/trailers.h"
#include "gatos/nats/bus.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

class WorkerE2ETest : public ::testing::Test {
 protected:
  RunResult Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "--git-dir", stack_->ledger()};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions ro;
    ro.env = stack_->env();
    return testing::Run(argv, ro);
  }
  std::string ResultCommit(const std::string& id) {
    return TrimEnd(Git({"rev-parse", "--verify", "-q", "refs/gatos/jobs/" + id.substr(7) + "/result"}).out);
  }
  json Poe(const std::string& id) { return json::parse(Git({"show", ResultCommit(id) + ":poe.json"}).out); }
  std::string State(const std::string& id) {
    RunResult r = stack_->Gatos({"status", id, "--ledger", stack_->ledger(), "--json"});
    return r.exit_code == 0 ? json::parse(r.out).value("state", "") : "?";
  }
  RunResult Wait(const std::string& id, int seconds = 30) {
    return stack_->Gatos({"wait", id, "--ledger", stack_->nats_url(), "--timeout", std::to_string(seconds)},
                         seconds + 30);
  }
  // Counts processes whose command line contains `marker`.
  int Processes(const std::string& marker) {
    RunResult r = testing::Run({"pgrep", "-f", "-c", marker});
    return r.exit_code == 0 ? std::stoi(r.out) : 0;
  }

  std::unique_ptr<Stack> stack_;
};

TEST_F(WorkerE2ETest, PushedJobSucceedsWithAResultStockGitVerifies) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  stack_->StartWorker(0);
  std::string id = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['echo hello; echo oops >&2; echo 42 > \"$GATOS_OUTPUT_DIR/answer.txt\"']\n"
      "timeout: 30\n");
  RunResult w = Wait(id);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << stack_->worker(0)->log();
  std::string commit = ResultCommit(id);
  EXPECT_EQ(Git({"show", commit + ":stdout"}).out, "hello\n");
  EXPECT_EQ(Git({"show", commit + ":stderr"}).out, "oops\n");
  EXPECT_EQ(Git({"show", commit + ":outputs/answer.txt"}).out, "42\n");
  json poe = Poe(id);
  EXPECT_EQ(poe["status"], "succeeded");
  EXPECT_EQ(poe["exit"]["code"], 0);
  // Stock git verifies the worker's signature against the policy's worker list.
  std::string signers = stack_->dir().Join("workers.allowed");
  WriteFile(signers, Git({"show", "refs/gatos/policy:workers"}).out);
  RunResult v = Git({"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + signers, "verify-commit",
                     commit});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.err.find("Good \"git\" signature"), std::string::npos) << v.err;
  // The auditor's view, offline from the refs: everything verifies, with provenance.
  RunResult audit = stack_->Gatos({"verify", "--repo", stack_->ledger(), "--all", "--require-provenance"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("ok " + id), std::string::npos) << audit.out;
  EXPECT_EQ(Git({"show", commit + ":attestation.intoto.json"}).exit_code, 0);
  RunResult st = testing::Run({BinaryPath("gatos-worker"), "status", "--state-dir", stack_->worker_state(0),
                               "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  json health = json::parse(st.out);
  EXPECT_EQ(health["state"], "idle") << st.out;
}

TEST_F(WorkerE2ETest, FailingTimedOutAndCancelledJobsEndInTheirStates) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  stack_->StartWorker(0, {"--concurrency", "3"});
  // Sleeps of durations no other process on the machine has (a parallel
  // test's or another run's), so counting them counts this test's.
  const std::string tag = std::to_string(::getpid() % 100000);
  const std::string s300 = "sleep 300." + tag, s301 = "sleep 301." + tag, s302 = "sleep 302." + tag;
  std::string fail = stack_->PushJob("command: [\"/bin/sh\", \"-c\", \"exit 3\"]\ntimeout: 30\n");
  std::string slow = stack_->PushJob("command: [\"/bin/sh\", \"-c\", \"" + s300 + " & " + s301 +
                                     "; echo gatos-e2e-timeout-marker\"]\ntimeout: 1\n");
  std::string cancel = stack_->PushJob("command: [\"/bin/sh\", \"-c\", \"exec " + s302 + "\"]\ntimeout: 60\n");
  EXPECT_EQ(Wait(fail).exit_code, 1);
  EXPECT_EQ(State(fail), "failed");
  EXPECT_EQ(Poe(fail)["exit"]["code"], 3);
  EXPECT_EQ(Wait(slow).exit_code, 1);
  EXPECT_EQ(State(slow), "timed-out");
  EXPECT_EQ(Poe(slow)["exit"]["timed_out"], true);
  EXPECT_EQ(Processes(s300) + Processes(s301), 0) << "a timed-out job left processes behind";
  // Cancel the running job once it is claimed.
  ASSERT_TRUE(PollFor(5000, [&] { return State(cancel) == "claimed"; })) << stack_->worker(0)->log();
  RunResult c = stack_->Gatos({"cancel", cancel, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(Wait(cancel).exit_code, 1);
  EXPECT_EQ(State(cancel), "aborted");
  EXPECT_EQ(Poe(cancel)["status"], "aborted");
  EXPECT_EQ(Processes(s302), 0);
}

TEST_F(WorkerE2ETest, WorkerKilledMidJobIsTakenOverAfterLeaseExpiry) {
  stack_ = std::make_unique<Stack>(StackOptions{.lease_ms = 1500, .workers = 2});
  ASSERT_TRUE(stack_->Start());
  std::string effects = stack_->dir().Join("effects");
  stack_->StartWorker(0, {"--sandbox", "off"});
  std::string id = stack_->PushJob("command: [\"/bin/sh\", \"-c\"]\nargs: ['echo run >> " + effects +
                                   "; sleep 2']\ntimeout: 30\n");
  for (int i = 0; i < 100 && ReadFile(effects).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(ReadFile(effects), "run\n");
  stack_->worker(0)->Stop(SIGKILL);
  stack_->StartWorker(1, {"--sandbox", "off"});
  RunResult w = Wait(id, 30);
  EXPECT_EQ(w.exit_code, 0) << w.out << stack_->worker(1)->log() << stack_->gatosd().log();
  std::string runs = ReadFile(effects);
  EXPECT_LE(std::count(runs.begin(), runs.end(), '\n'), 2);
  json poe = Poe(id);
  EXPECT_EQ(poe["lease_epoch"], 2);
  // One result, by the second worker.
  EXPECT_EQ(TrimEnd(Git({"for-each-ref", "--format=%(refname)", "refs/gatos/jobs/" + id.substr(7) + "/result"}).out),
            "refs/gatos/jobs/" + id.substr(7) + "/result");
}

TEST_F(WorkerE2ETest, WorkerKilledBeforeAcknowledgementDeliversOnRestartWithoutRerunning) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  std::string effects = stack_->dir().Join("effects");
  ChildProcess* w = stack_->StartWorker(0, {"--sandbox", "off"}, {{"GATOS_WORKER_FAULT", "crash-after-enqueue"}});
  std::string id = stack_->PushJob("command: [\"/bin/sh\", \"-c\"]\nargs: ['echo run >> " + effects +
                                   "']\ntimeout: 30\n");
  for (int i = 0; i < 200 && w->running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(w->running()) << w->log();
  EXPECT_EQ(State(id), "claimed");
  RunResult st = testing::Run({BinaryPath("gatos-worker"), "status", "--state-dir", stack_->worker_state(0), "--json"});
  EXPECT_EQ(json::parse(st.out)["queue_depth"], 1) << st.out;
  stack_->StartWorker(0, {"--sandbox", "off"});
  RunResult wait = Wait(id);
  EXPECT_EQ(wait.exit_code, 0) << stack_->worker(0)->log();
  EXPECT_EQ(ReadFile(effects), "run\n");  // ran once
  EXPECT_NE(stack_->worker(0)->log().find("delivering 1 result(s) from the outbox"), std::string::npos);
}

TEST_F(WorkerE2ETest, StaleWorkersLateResultIsRejectedAndItStops) {
  stack_ = std::make_unique<Stack>(StackOptions{.lease_ms = 1500, .workers = 2});
  ASSERT_TRUE(stack_->Start());
  ChildProcess* a = stack_->StartWorker(0, {"--sandbox", "off"});
  std::string id = stack_->PushJob("command: [\"/bin/sleep\", \"3\"]\ntimeout: 30\n");
  for (int i = 0; i < 100 && State(id) != "claimed"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(State(id), "claimed") << a->log();
  // Freeze worker A past its lease; B takes the job over.
  kill(a->pid(), SIGSTOP);
  stack_->StartWorker(1, {"--sandbox", "off"});
  RunResult w = Wait(id, 30);
  EXPECT_EQ(w.exit_code, 0);
  std::string b_result = ResultCommit(id);
  EXPECT_EQ(Poe(id)["lease_epoch"], 2);
  kill(a->pid(), SIGCONT);
  // A learns it is stale (renew refused, or its result refused) and writes nothing.
  auto learned = [&] {
    std::string log = a->log();
    return log.find("stale owner") != std::string::npos || log.find("refused by the ledger") != std::string::npos;
  };
  for (int i = 0; i < 300 && !learned(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(learned()) << a->log();
  // Then A holds nothing it could still send: no lease, no pending result
  // in its outbox. Only after that does the unchanged result prove that A
  // wrote nothing (the same path delivered B's result: the positive control).
  json health;
  for (int i = 0; i < 300; ++i) {
    RunResult st = testing::Run({BinaryPath("gatos-worker"), "status", "--state-dir", stack_->worker_state(0), "--json"});
    health = st.exit_code == 0 ? json::parse(st.out, nullptr, false) : json();
    if (health.is_object() && health.value("leases_held", -1) == 0 && health.value("queue_depth", -1) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(health.is_object()) << a->log();
  EXPECT_EQ(health.value("leases_held", -1), 0) << health.dump() << a->log();
  EXPECT_EQ(health.value("queue_depth", -1), 0) << health.dump() << a->log();
  EXPECT_EQ(ResultCommit(id), b_result);
}

TEST_F(WorkerE2ETest, EightWorkersThousandJobsEachExactlyOneResult) {
  stack_ = std::make_unique<Stack>(StackOptions{.workers = 8});
  ASSERT_TRUE(stack_->Start());
  for (int i = 0; i < 8; ++i) stack_->StartWorker(i, {"--sandbox", "off", "--concurrency", "2"});
  // Submit 1000 signed jobs through gatosd over one connection.
  auto key = ReadPrivateKeyFile(stack_->submitter_key());
  ASSERT_TRUE(key.ok());
  BusOptions bo;
  bo.url = stack_->nats_url();
  auto bus = Bus::Connect(bo);
  ASSERT_TRUE(bus.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string yaml = "command: [\"/bin/true\"]\nargs: [\"" + std::to_string(i) + "\"]\ntimeout: 30\n";
    std::string hex = JobIdHex(*ParseManifest(yaml, "job.yaml"));
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto commit = BuildCommitObject(tree, {}, "job\n\nJob-Id: blake3:" + hex + "\n", "t", "t@x", SystemNowMs(), &*key);
    objects.insert(objects.begin(), *commit);
    auto reply = (*bus)->Request(rpc::kSubmit, rpc::EncodeFrame(json{{"commit", commit->id}}, EncodeObjectBatch(objects)), 10000);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    ASSERT_TRUE(json::parse(reply->data).value("ok", false)) << reply->data;
    ids.push_back("blake3:" + hex);
  }
  std::vector<std::string> args = {"wait", "--ledger", stack_->nats_url(), "--timeout", "240", "-q"};
  args.insert(args.end(), ids.begin(), ids.end());
  RunResult w = stack_->Gatos(args, 300);
  EXPECT_EQ(w.exit_code, 0) << w.err;
  RunResult refs = Git({"for-each-ref", "--format=%(refname)", "refs/gatos/jobs/"});
  std::set<std::string> with_result;
  int results = 0;
  std::istringstream lines(refs.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > 7 && line.compare(line.size() - 7, 7, "/result") == 0) {
      ++results;
      with_result.insert(line.substr(16, 64));
    }
  }
  EXPECT_EQ(results, 1000);
  EXPECT_EQ(with_result.size(), 1000u);
  RunResult audit = stack_->Gatos({"verify", "--repo", stack_->ledger(), "--all", "--require-results"}, 300);
  EXPECT_EQ(audit.exit_code, 0) << audit.err << audit.out.substr(0, 2000);
}

}  // namespace
}  // namespace gatos::testing
