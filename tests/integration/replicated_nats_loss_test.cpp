// A replicated ledger losing a NATS node, on loopback with real processes:
// three nats-server nodes (JetStream, R3), three `gatosd serve
// --replicated` replicas, a worker and a client submitting all along. The
// node that hurts most is SIGKILLed, one at a time: the JetStream meta
// leader (JetStream answers "temporarily unavailable", 10008, until the
// others elect another), the leader of the election bucket's stream (the
// leader's keep fails), the leader of the replicated log's stream (its
// append fails), and the node every replica is connected to. After
// each kill a replica must acknowledge submissions again within a bound;
// the node is then started again. At the end every acknowledged job has
// its one result and the replicas hold one log. And the node every replica
// uses goes silent (SIGSTOP): they leave it and go on through the others.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "nats_server.h"
#include "replicated_ledger.h"
#include "submitter.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The node whose log last says it took `role` ("Self is new JetStream
// cluster metadata leader", or "new stream leader for '$G > NAME'" which
// only the new leader logs); -1 when none did. Log lines start with the
// time ("[pid] 2026/11/29 09:49:10.667932"), comparable as text.
int LastToLog(ReplicatedLedger& c, const std::string& line) {
  int who = -1;
  std::string latest;
  for (int i = 0; i < kReplicas; ++i) {
    const std::string log = c.nats_[i]->log();
    const size_t at = log.rfind(line);
    if (at == std::string::npos) continue;
    const size_t bol = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
    const size_t sp = log.find(' ', bol);
    if (sp == std::string::npos) continue;
    const std::string when = log.substr(sp + 1, 26);
    if (when > latest) {
      latest = when;
      who = i;
    }
  }
  return who;
}

double Seconds(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0; }

TEST(ReplicatedNatsLossTest, AReplicaServesAgainSoonAfterEachNatsNodeThatMattersIsKilled) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.StartAll()) << c.Logs();
  Submitter submitter({BinaryPath("gatos"), "submit", "--ledger", c.urls_, "--sign-key", c.alice_, "--timeout", "5"},
                      c.env_, c.dir_.path());
  ASSERT_TRUE(PollFor(60000, [&] { return submitter.acked_count() >= 5; })) << c.Logs();

  std::string ledger_id, history;
  {
    const std::string log = c.gatosd_[0]->log();
    const size_t at = log.find("bucket GATOS_LEADER_");
    ASSERT_NE(at, std::string::npos) << log;
    ledger_id = log.substr(at + 20, log.find(')', at) - at - 20);
  }
  // The replicas connect to the first URL of --nats (the list is not
  // shuffled): n0 is the node every replica uses.
  const std::vector<std::pair<std::string, std::string>> victims = {
      {"the JetStream meta leader", "Self is new JetStream cluster metadata leader"},
      {"the leader of the election bucket's stream", "new stream leader for '$G > KV_GATOS_LEADER_" + ledger_id + "'"},
      {"the leader of the replicated log's stream", "new stream leader for '$G > GATOS_WAL_" + ledger_id + "'"},
      {"the node every replica is connected to", ""},
  };
  std::vector<double> served_after;
  for (const auto& [what, line] : victims) {
    const int n = line.empty() ? 0 : LastToLog(c, line);
    ASSERT_GE(n, 0) << "no node logged '" << line << "'";
    const size_t before = submitter.acked_count();
    ASSERT_TRUE(c.nats_[n]->Kill());
    const auto killed = Clock::now();
    // A replica acknowledges again: elected, caught up, and serving
    // through the two nodes left (two acknowledgements: one may have been
    // decided before the kill).
    const bool served = PollFor(30000, [&] { return submitter.acked_count() >= before + 2; });
    const double s = Seconds(Clock::now() - killed);
    history += "n" + std::to_string(n) + " (" + what + ") killed: " +
               (served ? "acknowledging again after " + std::to_string(s) + " s" : "nothing acknowledged in 30 s") + "\n";
    ASSERT_TRUE(served) << history << c.Logs();
    served_after.push_back(s);
    ASSERT_TRUE(c.nats_[n]->Restart());
    // Back to three nodes before the next kill: a leader serves again.
    const size_t back = submitter.acked_count();
    ASSERT_TRUE(PollFor(60000, [&] { return submitter.acked_count() >= back + 2; })) << history << c.Logs();
  }
  submitter.Stop();
  const std::vector<std::string> acked = submitter.acked();
  std::cout << "[figures] NATS node kills, " << acked.size() << " jobs acknowledged (" << c.dir_.path() << "):\n" << history;

  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  ASSERT_TRUE(c.WaitForOneLogHead(-1, 60000)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica(acked);
}

// The NATS node every replica is connected to (the first of --nats, and
// the list is not shuffled) goes silent: SIGSTOP, as a hung host or one cut
// off the network, which closes nothing. Each replica must notice (its
// pings go unanswered), reconnect to another node, and go on: a replica
// leads and acknowledges, and every follower applies what it appends while
// that node is still silent. With the library's default pings a connection
// to a silent server looked connected, and every read and election call on
// it timed out, for 4 to 6 minutes.
TEST(ReplicatedNatsLossTest, TheNatsNodeEveryReplicaUsesGoesSilentAndTheyGoOnThroughTheOthers) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.StartAll()) << c.Logs();
  std::vector<std::string> acked;
  int n = 0;
  for (; n < 3; ++n) {
    std::string id = c.Submit(n);
    if (!id.empty()) acked.push_back(id);
  }
  ASSERT_EQ(acked.size(), 3u) << c.Logs();
  std::vector<size_t> sizes;
  for (int i = 0; i < kReplicas; ++i) sizes.push_back(c.gatosd_[i]->log().size());

  ASSERT_TRUE(c.nats_[0]->Pause());
  struct ResumeAtEnd {
    NatsServer& n;
    ~ResumeAtEnd() { (void)n.Resume(); }
  } resume{*c.nats_[0]};
  // A replica leads through the other two nodes and acknowledges again.
  // (The client is given those two: what is tested is the replicas'
  // leaving n0, and a client that tries a silent member first spends its
  // connect timeout there on each call.)
  const std::string others = c.nats_[1]->url() + "," + c.nats_[2]->url();
  const size_t before = acked.size();
  const auto paused = Clock::now();
  ASSERT_TRUE(PollFor(120000, [&] {
    std::string id = c.Submit(n++, others);
    if (!id.empty()) acked.push_back(id);
    return acked.size() >= before + 3;
  })) << "nothing acknowledged with nats node n0 silent\n" << c.Logs();
  std::cout << "[figures] n0 silent: 3 acknowledged after " << Seconds(Clock::now() - paused) << " s\n";
  // Every replica holds what was acknowledged while n0 is silent.
  std::string head;
  ASSERT_TRUE(c.WaitForOneLogHead(-1, 30000, &head)) << c.LogHeads() << c.Logs();
  // They went on because each left the silent node for another one.
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_TRUE(c.gatosd_[i]->running()) << "r" << i;
    EXPECT_NE(c.gatosd_[i]->log().find("NATS: reconnected", sizes[i]), std::string::npos)
        << "r" << i << ":\n" << c.gatosd_[i]->log().substr(sizes[i]);
  }
  ASSERT_TRUE(c.nats_[0]->Resume());
  // Every acknowledged job finishes (the worker left n0 too).
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << c.worker_.log();
}

}  // namespace
}  // namespace gatos::testing
