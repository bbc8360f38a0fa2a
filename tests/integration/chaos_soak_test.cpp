// The chaos soak, single node: while a client submits jobs and two workers
// run them, random processes of the plane are SIGKILLed and started again (a
// worker, gatosd, nats-server). Afterwards every job the ledger acknowledged
// exists and has exactly one result in the signed log, and the auditor's
// `gatos verify --all` passes. GATOS_CHAOS_SECONDS sets the length of the
// chaos (default 60); the seed is printed so a failing run can be replayed
// (GATOS_CHAOS_SEED).
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "gatos/git/ledger.h"
#include "log_reader.h"
#include "replicated_ledger.h"
#include "stack.h"
#include "submitter.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

TEST(ChaosSoakTest, SingleNodeLosesNothingAcknowledgedUnderRandomKills) {
  const int seconds = EnvInt("GATOS_CHAOS_SECONDS", 60);
  const unsigned seed = static_cast<unsigned>(EnvInt("GATOS_CHAOS_SEED", static_cast<int>(std::random_device{}())));
  SCOPED_TRACE("GATOS_CHAOS_SEED=" + std::to_string(seed));
  // Short leases: a killed worker's job is taken over within seconds.
  Stack stack(StackOptions{.lease_ms = 2000, .workers = 2, .republish_s = 2});
  ASSERT_TRUE(stack.Start());
  const std::vector<std::string> worker_args = {"--sandbox", "off", "--concurrency", "2"};
  for (int i = 0; i < 2; ++i) stack.StartWorker(i, worker_args);

  Submitter submitter({BinaryPath("gatos"), "submit", "--ledger", stack.nats_url(), "--sign-key",
                       stack.submitter_key(), "--timeout", "5"},
                      stack.env(), stack.dir().path());
  std::mt19937 rng(seed);
  std::map<std::string, int> kills;
  // Victims in rounds, each round a shuffle of every kind: every kind is
  // killed in any run of more than a few seconds.
  const std::vector<std::string> kinds = {"worker0", "worker1", "gatosd", "nats-server"};
  std::vector<std::string> round;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // The chaos's own pace (not a synchronization): a kill every 1-3 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(1000, 3000)(rng)));
    if (round.empty()) {
      round = kinds;
      std::shuffle(round.begin(), round.end(), rng);
    }
    const std::string victim = round.back();
    round.pop_back();
    if (victim == "gatosd") {
      ASSERT_EQ(stack.StopGatosd(SIGKILL), -SIGKILL);
      ASSERT_TRUE(stack.StartGatosd());
    } else if (victim == "nats-server") {
      ASSERT_TRUE(stack.nats().Kill());
      ASSERT_TRUE(stack.nats().Restart());
    } else {
      const int w = victim.back() - '0';
      ASSERT_EQ(stack.worker(w)->Stop(SIGKILL), -SIGKILL);
      stack.StartWorker(w, worker_args);
    }
    ++kills[victim];
  }
  submitter.Stop();
  const std::vector<std::string> acked = submitter.acked();
  std::string summary = "seed " + std::to_string(seed) + ", " + std::to_string(submitter.attempts()) +
                        " submits, " + std::to_string(acked.size()) + " acknowledged; kills:";
  for (const auto& [what, n] : kills) summary += " " + what + " " + std::to_string(n);
  SCOPED_TRACE(summary);
  std::cout << "[chaos] " << summary << "\n";
  ASSERT_GE(acked.size(), 20u) << "the plane acknowledged almost nothing:\n" << stack.gatosd().log();

  // Every acknowledged job finishes (the plane is whole again: no more kills).
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", stack.nats_url(), "--timeout", "120"});
  RunResult w = stack.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  const auto waited = std::chrono::steady_clock::now();

  // The signed log: each acknowledged job adopted once, with exactly one
  // final result; no job of the run has two.
  stack.StopGatosd(SIGTERM);
  ExpectOneSubmitAndOneResultEach(stack.ledger(), acked);
  RunResult v = stack.Gatos({"verify", "--all", "--repo", stack.ledger()}, 300);
  EXPECT_EQ(v.exit_code, 0) << v.out.substr(0, 4000) << v.err;
  auto secs = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0; };
  std::cout << "[chaos] chaos " << secs(end - start) << " s, then every job finished in " << secs(waited - end)
            << " s, log check and verify " << secs(std::chrono::steady_clock::now() - waited) << " s\n";
}

// The same soak on a replicated ledger (three replicas, a three-node NATS
// cluster, one worker): the leader, a follower, the worker and a NATS node
// SIGKILLed at random and started again. Afterwards the replicas hold one
// log, and in each every acknowledged job has one submit and one result.
TEST(ChaosSoakTest, ReplicatedLosesNothingAcknowledgedUnderRandomKills) {
  const int seconds = EnvInt("GATOS_CHAOS_SECONDS", 60);
  const unsigned seed = static_cast<unsigned>(EnvInt("GATOS_CHAOS_SEED", static_cast<int>(std::random_device{}())));
  SCOPED_TRACE("GATOS_CHAOS_SEED=" + std::to_string(seed));
  ReplicatedLedger c;
  ASSERT_TRUE(c.StartAll()) << c.Logs();

  Submitter submitter({BinaryPath("gatos"), "submit", "--ledger", c.urls_, "--sign-key", c.alice_, "--timeout", "5"},
                      c.env_, c.dir_.path());
  std::mt19937 rng(seed);
  std::map<std::string, int> kills;
  const std::vector<std::string> kinds = {"leader", "follower", "worker", "nats-server"};
  std::vector<std::string> round;
  std::string history;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // The chaos's own pace (not a synchronization): a kill every 2-4 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(2000, 4000)(rng)));
    if (round.empty()) {
      round = kinds;
      std::shuffle(round.begin(), round.end(), rng);
    }
    const std::string victim = round.back();
    round.pop_back();
    if (victim == "leader" || victim == "follower") {
      const int leader = c.Leader();
      if (leader < 0) continue;  // an election is under way: next turn
      const int r = victim == "leader" ? leader : (leader + 1 + static_cast<int>(rng() % 2)) % kReplicas;
      ASSERT_EQ(c.gatosd_[r]->Stop(SIGKILL), -SIGKILL);
      ASSERT_TRUE(c.StartReplica(r));
      history += victim + " r" + std::to_string(r) + "; ";
    } else if (victim == "worker") {
      ASSERT_EQ(c.worker_.Stop(SIGKILL), -SIGKILL);
      ASSERT_TRUE(c.StartWorker());
      history += "worker; ";
    } else {
      const int n = static_cast<int>(rng() % kReplicas);
      ASSERT_TRUE(c.nats_[n]->Kill());
      ASSERT_TRUE(c.nats_[n]->Restart());
      history += "nats n" + std::to_string(n) + "; ";
    }
    ++kills[victim];
  }
  submitter.Stop();
  const std::vector<std::string> acked = submitter.acked();
  std::string summary = "seed " + std::to_string(seed) + ", " + std::to_string(submitter.attempts()) +
                        " submits, " + std::to_string(acked.size()) + " acknowledged; kills: " + history;
  SCOPED_TRACE(summary);
  std::cout << "[chaos] replicated: " << summary << "\n";
  ASSERT_GE(acked.size(), 20u) << "the plane acknowledged almost nothing:\n" << c.Logs();

  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  const auto waited = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.WaitForOneLogHead(-1, 60000)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica(acked);
  auto secs = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0; };
  std::cout << "[chaos] replicated: chaos " << secs(end - start) << " s, every job finished in " << secs(waited - end)
            << " s, convergence, log checks and verify " << secs(std::chrono::steady_clock::now() - waited) << " s\n";
}

}  // namespace
}  // namespace gatos::testing
