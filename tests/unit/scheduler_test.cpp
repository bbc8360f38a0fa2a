// The offer scheduler's decisions (gatos/model/scheduler.h): priority
// order, round-robin across submitters, running limits, paused pools, the
// window of outstanding offers, and admission limits.
#include "gatos/model/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gatos {
namespace {

std::string Id(const std::string& prefix, int i) { return prefix + std::to_string(i); }

// Offers everything the scheduler lets go and claims each at once (a pool
// with instant workers): the full order of offers.
std::vector<std::string> Drain(Scheduler& s, const SchedulingPolicy& p, std::map<std::string, ScheduledJob>& jobs,
                               int64_t* now) {
  std::vector<std::string> order;
  for (int round = 0; round < 100000; ++round) {
    auto next = s.Next(p, *now);
    if (next.empty()) break;
    for (const auto& j : next) {
      order.push_back(j);
      s.Running(jobs[j], *now);
      s.Remove(j);
    }
    *now += 1000;  // far apart: the window stays at its minimum
  }
  return order;
}

TEST(SchedulerTest, HigherPriorityFirstThenFifoWithinOneSubmitter) {
  Scheduler s;
  std::map<std::string, ScheduledJob> jobs;
  for (int i = 0; i < 3; ++i) jobs[Id("low", i)] = {Id("low", i), "", "a", 1};
  for (int i = 0; i < 3; ++i) jobs[Id("high", i)] = {Id("high", i), "", "a", 9};
  for (int i = 0; i < 3; ++i) s.Ready(jobs[Id("low", i)]);
  for (int i = 0; i < 3; ++i) s.Ready(jobs[Id("high", i)]);
  int64_t now = 0;
  auto order = Drain(s, {}, jobs, &now);
  EXPECT_EQ(order, (std::vector<std::string>{"high0", "high1", "high2", "low0", "low1", "low2"}));
}

TEST(SchedulerTest, RoundRobinAcrossSubmittersWithinAPriority) {
  Scheduler s;
  std::map<std::string, ScheduledJob> jobs;
  // alice queues 6 jobs before bob queues 2: bob is not behind all of hers.
  for (int i = 0; i < 6; ++i) jobs[Id("a", i)] = {Id("a", i), "", "alice", 5};
  for (int i = 0; i < 2; ++i) jobs[Id("b", i)] = {Id("b", i), "", "bob", 5};
  for (int i = 0; i < 6; ++i) s.Ready(jobs[Id("a", i)]);
  for (int i = 0; i < 2; ++i) s.Ready(jobs[Id("b", i)]);
  int64_t now = 0;
  auto order = Drain(s, {}, jobs, &now);
  EXPECT_EQ(order, (std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "a3", "a4", "a5"}));
}

TEST(SchedulerTest, OutstandingOffersStayWithinTheWindow) {
  Scheduler s;
  for (int i = 0; i < 10; ++i) s.Ready({Id("j", i), "", "a", 5});
  auto first = s.Next({}, 0);
  EXPECT_EQ(first.size(), static_cast<size_t>(Scheduler::kMinWindow));
  EXPECT_TRUE(s.Next({}, 0).empty());  // nothing claimed yet
  s.Running({first[0], "", "a", 5}, 1);
  EXPECT_EQ(s.Next({}, 1).size(), 1u);
  EXPECT_EQ(s.Pool("").offered, Scheduler::kMinWindow);
  EXPECT_EQ(s.Pool("default").running, 1);
}

TEST(SchedulerTest, WindowGrowsWithTheClaimRate) {
  Scheduler s;
  for (int i = 0; i < 500; ++i) s.Ready({Id("j", i), "", "a", 5});
  // 100 claims within the rate window: the window follows them.
  int claimed = 0;
  while (claimed < 100) {
    auto next = s.Next({}, 1000);
    ASSERT_FALSE(next.empty());
    for (const auto& j : next) {
      if (claimed == 100) break;
      s.Running({j, "", "a", 5}, 1000);
      ++claimed;
    }
  }
  EXPECT_EQ(s.Window("", 1000), 100);
  EXPECT_EQ(s.Window("", 1000 + Scheduler::kWindowRateMs), Scheduler::kMinWindow);
}

TEST(SchedulerTest, AHigherPriorityJobWaitsBehindAtMostTheWindow) {
  Scheduler s;
  std::map<std::string, ScheduledJob> jobs;
  for (int i = 0; i < 200; ++i) {
    jobs[Id("p5-", i)] = {Id("p5-", i), "", "a", 5};
    s.Ready(jobs[Id("p5-", i)]);
  }
  auto offered = s.Next({}, 0);
  ASSERT_EQ(offered.size(), 2u);
  jobs["urgent"] = {"urgent", "", "b", 9};
  s.Ready(jobs["urgent"]);
  // The first claim frees a place in the window: the urgent job takes it.
  s.Running(jobs[offered[0]], 1000);
  auto next = s.Next({}, 1000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], "urgent");
}

TEST(SchedulerTest, SubmitterRunningLimitHoldsItsOffersAndLetsOthersRun) {
  SchedulingPolicy p;
  p.default_limits.max_running = 2;
  Scheduler s;
  for (int i = 0; i < 10; ++i) s.Ready({Id("a", i), "", "alice", 5});
  for (int i = 0; i < 10; ++i) s.Ready({Id("b", i), "", "bob", 5});
  std::map<std::string, int> running;
  // Claim everything offered, never finish anything: at most 2 each.
  for (int t = 0; t < 50; ++t) {
    for (const auto& j : s.Next(p, t * 1000)) {
      s.Running({j, "", j[0] == 'a' ? "alice" : "bob", 5}, t * 1000);
      ++running[j.substr(0, 1)];
    }
  }
  EXPECT_EQ(running["a"], 2);
  EXPECT_EQ(running["b"], 2);
  EXPECT_EQ(s.RunningOf("alice"), 2);
  EXPECT_EQ(s.Pending("alice"), 8);
  // One of alice's finishes: the next of hers may go.
  s.Remove("a0");
  auto next = s.Next(p, 100000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].substr(0, 1), "a");
}

TEST(SchedulerTest, PoolRunningLimitAndPauseAndPoolsAreSeparate) {
  SchedulingPolicy p;
  p.pool_max_running["gpu"] = 1;
  p.paused.insert("batch");
  Scheduler s;
  for (int i = 0; i < 3; ++i) s.Ready({Id("g", i), "gpu", "a", 5});
  for (int i = 0; i < 3; ++i) s.Ready({Id("x", i), "batch", "a", 5});
  for (int i = 0; i < 3; ++i) s.Ready({Id("d", i), "", "a", 5});
  auto next = s.Next(p, 0);
  std::map<std::string, int> by_pool;
  for (const auto& j : next) ++by_pool[j.substr(0, 1)];
  EXPECT_EQ(by_pool["g"], 1);  // max_running 1 counts offers too
  EXPECT_EQ(by_pool["x"], 0);  // paused
  EXPECT_EQ(by_pool["d"], 2);  // the window
  EXPECT_EQ(s.Pool("batch").queued, 3);
  p.paused.clear();
  EXPECT_EQ(s.Next(p, 1).size(), 2u);  // resumed: the batch pool's window
}

TEST(SchedulerTest, AnExpiredLeaseQueuesTheJobAgainAndStaleEntriesAreSkipped) {
  Scheduler s;
  s.Ready({"j1", "", "a", 5});
  s.Ready({"j2", "", "a", 5});
  auto first = s.Next({}, 0);
  ASSERT_EQ(first.size(), 2u);
  s.Running({"j1", "", "a", 5}, 0);
  s.Remove("j2");  // cancelled while offered
  s.Ready({"j1", "", "a", 5});  // its lease ran out
  EXPECT_EQ(s.StateOf("j1"), "queued");
  auto again = s.Next({}, 5000);
  EXPECT_EQ(again, (std::vector<std::string>{"j1"}));
  EXPECT_EQ(s.Pending("a"), 1);
  EXPECT_EQ(s.RunningOf("a"), 0);
}

TEST(SchedulerTest, AdmissionNamesTheLimitAndTheNumbers) {
  Scheduler s;
  EffectiveLimits l;
  l.max_pending = 3;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.Admit("aa", l, 0).ok());
    s.Admitted("aa", l, 0);
  }
  // Admitted in this batch: counted before the ledger records them.
  Decision d = s.Admit("aa", l, 0);
  EXPECT_EQ(d.error, TransitionError::kInvalid);
  EXPECT_EQ(d.message, "refused: submitter ed25519:aa has 3 pending jobs (max_pending 3)");
  s.EndBatch();
  for (int i = 0; i < 3; ++i) s.Ready({Id("j", i), "", "aa", 5});
  EXPECT_FALSE(s.Admit("aa", l, 0).ok());
  EXPECT_TRUE(s.Admit("bb", l, 0).ok());  // another submitter is not affected
  s.Remove("j0");
  EXPECT_TRUE(s.Admit("aa", l, 0).ok());

  EffectiveLimits rate;
  rate.per_minute = 2;
  s.Admitted("cc", rate, 1000);
  s.Admitted("cc", rate, 2000);
  s.EndBatch();
  d = s.Admit("cc", rate, 30'000);
  EXPECT_EQ(d.message, "refused: submitter ed25519:cc submitted 2 jobs in the last minute (per_minute 2)");
  EXPECT_TRUE(s.Admit("cc", rate, 61'001).ok());
}

TEST(SchedulerTest, PoolsWithLiveJobsAreBoundedAndAnEmptyPoolIsForgotten) {
  Scheduler s;
  for (size_t i = 0; i < Scheduler::kMaxLivePools; ++i) {
    ASSERT_TRUE(s.AdmitPool("p" + std::to_string(i)).ok());
    s.Ready({Id("j", static_cast<int>(i)), "p" + std::to_string(i), "a", 5});
  }
  EXPECT_TRUE(s.AdmitPool("p0").ok());  // a pool with live jobs takes more
  Decision d = s.AdmitPool("one-too-many");
  EXPECT_EQ(d.error, TransitionError::kInvalid);
  EXPECT_EQ(d.message, "refused: pool one-too-many would be a pool beyond this ledger's 256 pools with live jobs");
  s.Remove("j0");
  EXPECT_EQ(s.Pools().count("p0"), 0u);
  EXPECT_TRUE(s.AdmitPool("one-too-many").ok());
}

}  // namespace
}  // namespace gatos
