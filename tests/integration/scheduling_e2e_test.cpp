// Pools, priorities, fair share, limits and pause with real processes:
// nats-server, gatosd serve, gatos-worker (unsandboxed: jobs append to a
// file of the test's, which gives the order they started in), jobs pushed
// with stock git (commits signed by the submitters' keys, some with a
// Priority trailer) and submitted with the CLI (docs/scheduling.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/model/trailers.h"
#include "gatos/sys/flags.h"
#include "log_reader.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

class SchedulingE2ETest : public ::testing::Test {
 protected:
  void StartStack(int workers = 2) {
    stack_ = std::make_unique<Stack>(StackOptions{.workers = workers});
    ASSERT_TRUE(stack_->Start());
    starts_ = stack_->dir().Join("starts");
  }

  RunResult Gatos(std::vector<std::string> args, int timeout_s = 120) { return stack_->Gatos(std::move(args), timeout_s); }

  // A job that appends `tag` to the starts file, then sleeps `sleep`.
  std::string Job(const std::string& tag, const std::string& extra = "", const std::string& sleep = "0") {
    return "command: [\"/bin/sh\", \"-c\", \"echo " + tag + " >> " + starts_ + "; sleep " + sleep + "\"]\ntimeout: 60\n" +
           extra;
  }

  // Jobs as commits signed by `key` (as `git commit -S` with gpg.format=ssh
  // makes them), with a Priority trailer when `priority` is not 5, pushed
  // in ONE stock `git push` to the ledger's front door. Returns their ids.
  std::vector<std::string> PushSigned(const std::string& key_path, const std::vector<std::string>& yamls,
                                      int priority = 5, RunResult* push = nullptr) {
    auto key = ReadPrivateKeyFile(key_path);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    const std::string repo = stack_->dir().Join("push" + std::to_string(pushes_++) + ".git");
    EXPECT_TRUE(Ledger::InitRepository(repo).ok());
    auto local = Ledger::Open(repo);
    EXPECT_TRUE(local.ok());
    std::vector<std::string> args = {"git", "--git-dir", repo, "push", "-q", stack_->push_url()};
    std::vector<std::string> ids;
    for (size_t i = 0; i < yamls.size(); ++i) {
      auto m = ParseManifest(yamls[i], "job.yaml");
      std::string hex = m.ok() ? JobIdHex(*m) : std::string(64, '0');
      CommitMessage msg;
      msg.body = "a job";
      msg.trailers = {{"Job-Id", "blake3:" + hex}};
      if (priority != 5) msg.trailers.push_back({"Priority", std::to_string(priority)});
      std::vector<GitObject> objects;
      auto tree = BuildTreeObjects({{"job.yaml", yamls[i], false}}, &objects);
      EXPECT_TRUE(tree.ok());
      auto commit = BuildCommitObject(*tree, {}, FormatCommitMessage(msg), "tester", "t@example.invalid",
                                      SystemNowMs(), &*key);
      EXPECT_TRUE(commit.ok());
      objects.push_back(*commit);
      for (const auto& o : objects) EXPECT_TRUE((*local)->WriteRawObject(o.type, o.data).ok());
      args.push_back(commit->id + ":refs/gatos/submit/j" + std::to_string(pushes_) + "-" + std::to_string(i));
      ids.push_back("blake3:" + hex);
    }
    RunOptions ro;
    ro.env = stack_->env();
    RunResult r = testing::Run(args, ro);
    if (push) {
      *push = r;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    return ids;
  }

  std::string NewSubmitter(const std::string& name) {
    std::string k = stack_->dir().Join(name);
    RunResult r = Gatos({"keygen", "-f", k});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Gatos({"policy", "allow-submitter", "--ledger", stack_->ledger(), k + ".pub"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return k;
  }

  json Status(const std::string& id) {
    RunResult r = Gatos({"status", id, "--ledger", stack_->nats_url(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json::object();
  }
  json Pools() {
    RunResult r = Gatos({"pool", "ls", "--ledger", stack_->nats_url(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json by_name = json::object();
    if (r.exit_code == 0) {
      for (const auto& p : json::parse(r.out)) by_name[p.value("pool", "")] = p;
    }
    return by_name;
  }
  RunResult Wait(const std::vector<std::string>& ids, int seconds = 120) {
    std::vector<std::string> args = {"wait"};
    args.insert(args.end(), ids.begin(), ids.end());
    args.insert(args.end(), {"--ledger", stack_->nats_url(), "--timeout", std::to_string(seconds)});
    return Gatos(args, seconds + 30);
  }
  size_t JobRefs() {
    RunOptions ro;
    ro.env = stack_->env();
    RunResult r = testing::Run({"git", "--git-dir", stack_->ledger(), "for-each-ref", "refs/gatos/jobs/"}, ro);
    return static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n'));
  }
  void ExpectVerifies() {
    RunResult v = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }

  std::unique_ptr<Stack> stack_;
  std::string starts_;
  int pushes_ = 0;
};

TEST_F(SchedulingE2ETest, AGpuJobWaitsForAGpuWorkerAndSaysWhy) {
  StartStack();
  stack_->StartWorker(0, {"--sandbox", "off"});  // the default pool only
  std::string gpu = PushSigned(stack_->submitter_key(), {Job("gpu", "pool: gpu\n")}).at(0);
  std::string plain = PushSigned(stack_->submitter_key(), {Job("plain")}).at(0);
  // The default-pool job is done: the default worker has had its chance.
  RunResult w = Wait({plain});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  json st;
  ASSERT_TRUE(PollFor(10000, [&] {
    st = Status(gpu);
    return st.value("waiting", "") == "no worker serves pool gpu";
  })) << st.dump();
  EXPECT_EQ(st.value("state", ""), "pending");
  EXPECT_EQ(st.value("pool", ""), "gpu");
  RunResult human = Gatos({"status", gpu, "--ledger", stack_->nats_url()});
  EXPECT_HAS(human.out, "(no worker serves pool gpu)");
  EXPECT_EQ(Lines(starts_), (std::vector<std::string>{"plain"}));
  json pools = Pools();
  EXPECT_EQ(pools["gpu"].value("pending", -1), 1);
  EXPECT_EQ(pools["gpu"].value("workers", -1), 0);
  EXPECT_EQ(pools["default"].value("workers", -1), 1);

  stack_->StartWorker(1, {"--sandbox", "off", "--pools", "gpu"});
  w = Wait({gpu});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  EXPECT_EQ(Lines(starts_), (std::vector<std::string>{"plain", "gpu"}));
  ExpectVerifies();
}

TEST_F(SchedulingE2ETest, AWorkerOutsideAPoolIsRefusedByTheLedgerNotOnlyByRouting) {
  StartStack();
  RunResult r = Gatos({"policy", "allow-worker", "--ledger", stack_->ledger(), stack_->worker_keys()[0] + ".pub",
                       "--pools", "default"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The worker asks for gpu jobs; the policy does not let its key serve them.
  ChildProcess* w0 = stack_->StartWorker(0, {"--sandbox", "off", "--pools", "gpu,default"});
  std::string gpu = PushSigned(stack_->submitter_key(), {Job("gpu", "pool: gpu\n")}).at(0);
  ASSERT_TRUE(w0->WaitForLog("may not serve pool gpu", 20000)) << w0->log();
  EXPECT_EQ(Status(gpu).value("state", ""), "pending");
  EXPECT_TRUE(Lines(starts_).empty());
  // An allowed worker runs it; the auditor replays both through the rule.
  stack_->StartWorker(1, {"--sandbox", "off", "--pools", "gpu"});
  RunResult w = Wait({gpu});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  ExpectVerifies();
}

TEST_F(SchedulingE2ETest, PriorityNineJobsOvertakeAQueueOfPriorityFive) {
  StartStack(1);
  stack_->StartWorker(0, {"--sandbox", "off", "--concurrency", "1"});
  std::vector<std::string> low;
  for (int i = 0; i < 200; ++i) low.push_back(Job("p5-" + std::to_string(i), "", "0.05"));
  const std::vector<std::string> low_ids = PushSigned(stack_->submitter_key(), low);
  // The queue is moving (and the worker prefetches, as with short jobs).
  ASSERT_TRUE(PollFor(30000, [&] { return Lines(starts_).size() >= 10; }));
  std::vector<std::string> urgent;
  for (int i = 0; i < 5; ++i) {
    urgent.push_back(PushSigned(stack_->submitter_key(), {Job("p9-" + std::to_string(i), "", "0.05")}, 9).at(0));
  }
  RunResult w = Wait(urgent);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  // A job starts when the ledger grants its first lease. The signed log
  // orders every adoption and grant, so it says exactly how many
  // priority-5 jobs were granted between an urgent job's adoption and its
  // own grant (the test's clock and the jobs' output files do not).
  auto ledger = Ledger::Open(stack_->ledger());
  ASSERT_TRUE(ledger.ok());
  auto hex = [](const std::string& id) { return id.substr(id.find(':') + 1); };
  std::set<std::string> lows;
  for (const auto& id : low_ids) lows.insert(hex(id));
  std::vector<std::pair<LogKind, std::string>> order;  // one per transition
  for (const auto& c : ReadLog(**ledger)) {
    for (const auto& e : c.entries) {
      if (order.empty() || order.back() != std::pair(e.kind, e.job_hex)) order.emplace_back(e.kind, e.job_hex);
    }
  }
  for (int i = 0; i < 5; ++i) {
    auto adopted = std::find(order.begin(), order.end(), std::pair(LogKind::kSubmit, hex(urgent[i])));
    auto granted = std::find(order.begin(), order.end(), std::pair(LogKind::kClaim, hex(urgent[i])));
    ASSERT_NE(adopted, order.end()) << urgent[i];
    ASSERT_NE(granted, order.end()) << urgent[i];
    ASSERT_LT(adopted, granted);
    size_t further = 0;
    for (auto it = adopted; it != granted; ++it) further += it->first == LogKind::kClaim && lows.count(it->second);
    EXPECT_LE(further, 3u) << "p9-" << i << " was granted after " << further << " further priority-5 jobs";
  }
  EXPECT_LT(Lines(starts_).size(), 150u) << "the urgent jobs should not wait for the queue";
  // The trailer is what the ledger recorded.
  EXPECT_EQ(Status(urgent[0]).value("state", ""), "succeeded");
}

TEST_F(SchedulingE2ETest, TwoSubmittersShareTheWorkersFairly) {
  // 1,000 jobs each, pushed before any worker runs (both queues full at
  // once); every window of 100 consecutive starts holds 40-60 of each.
  constexpr int kJobs = 1000;
  StartStack(2);
  std::string bob = NewSubmitter("bob");
  std::vector<std::string> a, b;
  for (int i = 0; i < kJobs; ++i) {
    a.push_back(Job("A" + std::to_string(i)));
    b.push_back(Job("B" + std::to_string(i)));
  }
  PushSigned(stack_->submitter_key(), a);
  PushSigned(bob, b);
  stack_->StartWorker(0, {"--sandbox", "off"});
  stack_->StartWorker(1, {"--sandbox", "off"});
  ASSERT_TRUE(PollFor(240000, [&] { return Lines(starts_).size() >= 2 * kJobs; })) << Lines(starts_).size();
  std::vector<std::string> lines = Lines(starts_);
  int worst = 50;
  for (size_t start = 0; start + 100 <= lines.size(); ++start) {
    int as = 0;
    for (size_t i = start; i < start + 100; ++i) as += lines[i][0] == 'A';
    if (std::abs(as - 50) > std::abs(worst - 50)) worst = as;
  }
  EXPECT_GE(worst, 40);
  EXPECT_LE(worst, 60);
}

TEST_F(SchedulingE2ETest, LimitsRefuseByNameAndHoldRunningJobs) {
  StartStack(1);
  RunResult r = Gatos({"policy", "limits", "--ledger", stack_->ledger(), "--default", "--max-pending", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_HAS(Gatos({"policy", "show", "--ledger", stack_->ledger()}).out, "\"max_pending\":3");
  PushSigned(stack_->submitter_key(), {Job("1"), Job("2"), Job("3")});
  // Over max_pending, by RPC and by push: refused with the limit's name.
  WriteFile(stack_->dir().Join("four.yaml"), Job("4"));
  RunResult rpc = Gatos({"submit", stack_->dir().Join("four.yaml"), "--ledger", stack_->nats_url(), "--sign-key",
                         stack_->submitter_key()});
  EXPECT_NE(rpc.exit_code, 0);
  EXPECT_HAS(rpc.err, "has 3 pending jobs (max_pending 3)");
  RunResult push;
  const size_t refs = JobRefs();
  PushSigned(stack_->submitter_key(), {Job("5")}, 5, &push);
  EXPECT_NE(push.exit_code, 0);
  EXPECT_HAS(push.err, "has 3 pending jobs (max_pending 3)");
  EXPECT_EQ(JobRefs(), refs);

  // max_running 1 for bob: his jobs run one at a time while alice's run
  // beside them.
  std::string bob = NewSubmitter("bob");
  r = Gatos({"policy", "limits", "--ledger", stack_->ledger(), "--default", "--max-pending", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Gatos({"policy", "limits", "--ledger", stack_->ledger(), "--key", bob + ".pub", "--max-running", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto end_job = [&](const std::string& tag) {
    return "command: [\"/bin/sh\", \"-c\", \"echo start-" + tag + " >> " + starts_ + "; sleep 0.4; echo end-" + tag +
           " >> " + starts_ + "\"]\ntimeout: 60\n";
  };
  std::vector<std::string> bobs, alices;
  for (int i = 0; i < 3; ++i) bobs.push_back(end_job("B" + std::to_string(i)));
  for (int i = 0; i < 3; ++i) alices.push_back(end_job("A" + std::to_string(i)));
  auto bob_ids = PushSigned(bob, bobs);
  auto alice_ids = PushSigned(stack_->submitter_key(), alices);
  // Usage against the limits, per submitter (gatos pool ls --submitters).
  RunResult usage = Gatos({"pool", "ls", "--submitters", "--json", "--ledger", stack_->nats_url()});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  bool seen_bob = false;
  for (const auto& u : json::parse(usage.out)) {
    if (u.value("max_running", 0) != 1) continue;
    seen_bob = true;
    EXPECT_EQ(u.value("pending", -1), 3) << u.dump();
  }
  EXPECT_TRUE(seen_bob) << usage.out;
  stack_->StartWorker(0, {"--sandbox", "off", "--concurrency", "4"});
  std::vector<std::string> all = bob_ids;
  all.insert(all.end(), alice_ids.begin(), alice_ids.end());
  RunResult w = Wait(all);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  int bob_running = 0, bob_max = 0, alice_running = 0, alice_max = 0;
  for (const auto& l : Lines(starts_)) {
    if (l.rfind("start-B", 0) == 0) bob_max = std::max(bob_max, ++bob_running);
    if (l.rfind("end-B", 0) == 0) --bob_running;
    if (l.rfind("start-A", 0) == 0) alice_max = std::max(alice_max, ++alice_running);
    if (l.rfind("end-A", 0) == 0) --alice_running;
  }
  EXPECT_EQ(bob_max, 1);
  EXPECT_GE(alice_max, 2);
  ExpectVerifies();
}

TEST_F(SchedulingE2ETest, BadPoolsAndPrioritiesAreRefusedWithNothingWritten) {
  StartStack(1);
  const size_t refs = JobRefs();
  RunResult push;
  PushSigned(stack_->submitter_key(), {Job("x", "pool: Big.Pool\n")}, 5, &push);
  EXPECT_NE(push.exit_code, 0);
  EXPECT_HAS(push.err, "pool: \"Big.Pool\" is not a pool name");
  PushSigned(stack_->submitter_key(), {Job("y")}, 10, &push);
  EXPECT_NE(push.exit_code, 0);
  EXPECT_HAS(push.err, "Priority: \"10\" is not a priority; expected one digit 0-9");
  EXPECT_EQ(JobRefs(), refs);
  WriteFile(stack_->dir().Join("j.yaml"), Job("z"));
  RunResult cli = Gatos({"submit", stack_->dir().Join("j.yaml"), "--ledger", stack_->nats_url(), "--sign-key",
                         stack_->submitter_key(), "--priority", "10"});
  EXPECT_EQ(cli.exit_code, kExitUsage);
  EXPECT_HAS(cli.err, "--priority: Priority: \"10\" is not a priority");
  RunResult pause = Gatos({"pool", "pause", "Bad.Pool", "--ledger", stack_->ledger()});
  EXPECT_EQ(pause.exit_code, kExitUsage);
  EXPECT_EQ(JobRefs(), refs);
}

TEST_F(SchedulingE2ETest, APausedPoolOffersNothingUntilResumed) {
  StartStack(2);
  stack_->StartWorker(0, {"--sandbox", "off", "--pools", "default,gpu"});
  RunResult r = Gatos({"pool", "pause", "default", "--ledger", stack_->ledger()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string held = PushSigned(stack_->submitter_key(), {Job("held")}).at(0);
  std::string gpu = PushSigned(stack_->submitter_key(), {Job("gpu", "pool: gpu\n")}).at(0);
  RunResult w = Wait({gpu});  // the worker is live and takes what it may
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  EXPECT_EQ(Status(held).value("state", ""), "pending");
  EXPECT_EQ(Status(held).value("waiting", ""), "pool default is paused");
  json pools = Pools();
  EXPECT_EQ(pools["default"].value("paused", false), true);
  EXPECT_EQ(pools["default"].value("pending", -1), 1);
  std::string metrics;
  EXPECT_TRUE(PollFor(5000, [&] {
    metrics = stack_->HttpGet("/metrics");
    return metrics.find("gatos_pool_paused{pool=\"default\"} 1") != std::string::npos &&
           metrics.find("gatos_pool_jobs{pool=\"default\",state=\"queued\"} 1") != std::string::npos;
  })) << metrics;
  r = Gatos({"pool", "resume", "default", "--ledger", stack_->ledger()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  w = Wait({held});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  // Both changes are signed policy commits in the log.
  RunOptions ro;
  ro.env = stack_->env();
  RunResult log = testing::Run({"git", "--git-dir", stack_->ledger(), "log", "--format=%s", "refs/gatos/policy"}, ro);
  EXPECT_HAS(log.out, "gatos: scheduling {\"action\":\"pause\",\"pool\":\"default\"}");
  EXPECT_HAS(log.out, "gatos: scheduling {\"action\":\"resume\",\"pool\":\"default\"}");
  ExpectVerifies();
}

}  // namespace
}  // namespace gatos::testing
