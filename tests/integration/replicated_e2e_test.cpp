// The replicated ledger end to end, with real processes on loopback: a
// three-node nats-server cluster (JetStream, R3), three `gatosd serve
// --replicated` replicas, a worker, and a client that records every job id
// the ledger acknowledged. The leader is SIGKILLed twice (each time another
// replica leads) and one NATS node once; then the leader key is overwritten
// behind the leader's back, so it steps down in its own process and
// follows. At the end every acknowledged job has its one result, the
// replicas hold the same log, `gatos verify --all` passes on each, and the
// killed leaders, restarted, follow again.
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "git_repo.h"
#include "gatos/ledger/maintenance.h"
#include "gatos/ledger/replica_id.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/kv_bucket.h"
#include "gatos/model/clock.h"
#include "gatos/model/time_format.h"
#include "nats_server.h"
#include "replicated_ledger.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

// A user's script across a failover: `gatos wait` and `gatos submit`
// started right after the leader's SIGKILL (no replica answers the
// ledger's RPC until another is elected, seconds later) say once that they
// wait for a leader, and succeed once the new leader serves; each job has
// exactly one submit and one result. A refusal is not asked again.
TEST(ReplicatedE2eTest, TheClientWaitsForTheNextLeaderAcrossAFailover) {
  ReplicatedLedger c;
  int leader = -1;
  ASSERT_TRUE(c.StartAll(&leader)) << c.Logs();
  const std::string first = c.Submit(1);
  ASSERT_FALSE(first.empty()) << c.Logs();

  ASSERT_EQ(c.gatosd_[leader]->Stop(SIGKILL), -SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  RunResult waited;
  std::thread waiter([&] { waited = c.Gatos({"wait", first, "--ledger", c.urls_, "--timeout", "120", "--json"}, 150); });
  const std::string file = c.dir_.Join("after-the-kill.yaml");
  WriteFile(file, "command: [\"/bin/echo\", \"after the kill\"]\ntimeout: 30\n");
  RunResult s = c.Gatos({"submit", file, "--ledger", c.urls_, "--sign-key", c.alice_, "--timeout", "5"}, 120);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  waiter.join();
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err << c.Logs();
  const std::string second = TrimEnd(s.out);
  EXPECT_NE(s.err.find("gatos: waiting up to 30 s for the ledger's leader"), std::string::npos) << s.err;
  EXPECT_LT(took, 35.0);
  EXPECT_NE(c.WaitForLeader(leader), -1) << c.Logs();
  ASSERT_EQ(waited.exit_code, 0) << waited.out << waited.err << c.Logs();
  auto states = nlohmann::json::parse(waited.out, nullptr, false);
  ASSERT_TRUE(states.is_array() && states.size() == 1u) << waited.out;
  EXPECT_EQ(states[0].value("state", ""), "succeeded") << waited.out;
  RunResult w2 = c.Gatos({"wait", second, "--ledger", c.urls_, "--timeout", "120"}, 150);
  EXPECT_EQ(w2.exit_code, 0) << w2.out << w2.err << c.Logs();

  // A refusal is not asked again: a job signed by a key the policy does
  // not name fails at once, without waiting for a leader.
  const std::string mallory = c.dir_.Join("mallory");
  ASSERT_EQ(c.Gatos({"keygen", "-f", mallory}).exit_code, 0);
  RunResult refused = c.Gatos({"submit", file, "--ledger", c.urls_, "--sign-key", mallory, "--timeout", "5"}, 60);
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_EQ(refused.err.find("waiting up to"), std::string::npos) << refused.err;
  // --leader-wait 0: no waiting at all; a bad value is a usage error.
  RunResult usage = c.Gatos({"status", first, "--ledger", c.urls_, "--leader-wait", "soon"});
  EXPECT_EQ(usage.exit_code, 2) << usage.err;

  // The killed replica follows again; every replica holds each job once,
  // with one result, and verifies.
  ASSERT_TRUE(c.StartReplica(leader));
  const int now_leading = c.WaitForLeader(leader);
  ASSERT_GE(now_leading, 0) << c.Logs();
  ASSERT_TRUE(c.WaitForOneLogHead(now_leading, 60000)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica({first, second});
}

// A follower that has applied less of the log than another lets that one
// lead when the leader dies: elected, it would apply the rest before it
// serves. r2 is kept behind (GATOSD_FAULT_APPLY_DELAY_MS: it waits a minute
// before applying what it reads) and made the eager one (it tries every 50
// ms, r1 every 250 ms), so without standing aside it would win the race.
TEST(ReplicatedE2eTest, AFollowerBehindStandsAsideForAMoreCurrentOne) {
  ReplicatedLedger c;
  c.serve_args_ = {"--election-ttl-ms", "6000"};  // stands aside up to 2 s
  ASSERT_TRUE(c.Prepare());
  ASSERT_TRUE(c.StartReplica(0));
  ASSERT_EQ(c.WaitForLeader(), 0) << c.Logs();
  ASSERT_TRUE(c.StartWorker());
  auto following = [&](int i) {
    return PollFor(30000, [&] { return c.gatosd_[i]->log().substr(c.start_at_[i]).find(" following") != std::string::npos; });
  };
  ASSERT_TRUE(c.StartReplica(1));
  ASSERT_TRUE(c.StartReplica(2));
  ASSERT_TRUE(following(1) && following(2)) << c.Logs();
  // r2 again, from now on slow to apply what it reads.
  c.gatosd_[2]->Stop(SIGTERM);
  ASSERT_TRUE(c.StartReplica(2, {{"GATOSD_FAULT_APPLY_DELAY_MS", "60000"}}, {"--election-try-ms", "50"}));
  ASSERT_TRUE(following(2)) << c.Logs();
  std::vector<std::string> acked;
  for (int n = 0; n < 3; ++n) {
    acked.push_back(c.Submit(n));
    ASSERT_FALSE(acked.back().empty()) << c.Logs();
  }
  ASSERT_TRUE(PollFor(30000, [&] { return c.LogHead(1) == c.LogHead(0); })) << c.LogHeads() << c.Logs();
  ASSERT_NE(c.LogHead(2), c.LogHead(0)) << "r2 applied the new records: it is not behind";

  ASSERT_EQ(c.gatosd_[0]->Stop(SIGKILL), -SIGKILL);
  EXPECT_EQ(c.WaitForLeader(0), 1) << c.Logs();
  const std::string r2 = c.gatosd_[2]->log().substr(c.start_at_[2]);
  EXPECT_NE(r2.find("replica r1 has applied more of the log"), std::string::npos) << r2;
  EXPECT_NE(r2.find("standing aside for it"), std::string::npos) << r2;
  EXPECT_EQ(r2.find(" leads with term "), std::string::npos) << r2;

  // Back to normal, every replica holds the same log with each job once.
  ASSERT_EQ(c.gatosd_[2]->Stop(SIGKILL), -SIGKILL);
  ASSERT_TRUE(c.StartReplica(2));
  ASSERT_TRUE(c.StartReplica(0));
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 150);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  ASSERT_TRUE(c.WaitForOneLogHead(1, 60000)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica(acked);
}

TEST(ReplicatedE2eTest, TheLeaderKilledTwiceLosesNothingAcknowledgedAndTheReplicasConverge) {
  ReplicatedLedger c;
  int leader = -1;
  ASSERT_TRUE(c.StartAll(&leader)) << c.Logs();

  std::vector<std::string> acked;
  int n = 0;
  auto submit_some = [&](int count) {
    for (int k = 0; k < count; ++k, ++n) {
      std::string id = c.Submit(n);
      if (!id.empty()) acked.push_back(id);
    }
  };
  submit_some(8);
  ASSERT_GE(acked.size(), 8u) << c.gatosd_[leader]->log();
  std::vector<int> killed;
  std::string history;  // for failure messages
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(c.gatosd_[leader]->Stop(SIGKILL), -SIGKILL);
    killed.push_back(leader);
    submit_some(4);  // while there is no leader: not acknowledged, or by the next
    const int next = c.WaitForLeader(leader);
    ASSERT_GE(next, 0) << "no new leader after killing r" << leader;
    history += "killed r" + std::to_string(leader) + ", then r" + std::to_string(next) + " leads (at " +
               std::to_string(SystemNowMs()) + ")\n";
    leader = next;
    const size_t before = acked.size();
    submit_some(8);
    EXPECT_GE(acked.size(), before + 8) << history << c.Logs();
    if (round == 0) {
      ASSERT_TRUE(c.StartReplica(killed[0]));  // rejoins as a follower
      // One NATS node dies too: two of three keep the streams' quorum, and
      // every client reconnects to another member.
      ASSERT_TRUE(c.nats_[2]->Kill());
      history += "killed nats node n2\n";
    }
  }
  ASSERT_TRUE(c.StartReplica(killed[1]));
  ASSERT_TRUE(c.nats_[2]->Restart());

  // Someone else writes the leader key: the leader's next keep fails, it
  // steps down in the same process and follows; a replica leads again.
  {
    auto id = ReplicaLedgerId(c.ledgers_[0]);
    ASSERT_TRUE(id.ok()) << id.status().message();
    BusOptions bo;
    bo.url = c.urls_;
    auto bus = Bus::Connect(bo);
    ASSERT_TRUE(bus.ok()) << bus.status().message();
    auto kv = KvBucket::OpenExisting(**bus, LeaderBucketName(*id));
    ASSERT_TRUE(kv.ok()) << kv.status().message();
    std::vector<size_t> sizes;  // where each replica's log is now
    for (int i = 0; i < kReplicas; ++i) sizes.push_back(c.gatosd_[i]->log().size());
    const size_t before = sizes[leader];
    ASSERT_TRUE((*kv)->Put("leader", R"({"name":"intruder","term":0})").ok());
    ASSERT_TRUE(c.gatosd_[leader]->WaitForLog("stepped down; following again", 10000)) << c.Logs();
    EXPECT_NE(c.gatosd_[leader]->log().find("no longer the leader", before), std::string::npos);
    EXPECT_TRUE(c.gatosd_[leader]->running());
    int again = -1;
    ASSERT_TRUE(PollFor(15000, [&] {
      again = c.Leader();
      if (again < 0) return false;
      const size_t serving = c.gatosd_[again]->log().rfind("serving ledger");
      return serving != std::string::npos && serving > sizes[again];
    })) << c.Logs();
    leader = again;
    history += "the leader key overwritten; r" + std::to_string(leader) + " leads\n";
    const size_t acked_before = acked.size();
    submit_some(4);
    EXPECT_GE(acked.size(), acked_before + 4) << history << c.Logs();
  }

  // Every acknowledged job finishes, with its result.
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << c.worker_.log();
  // The replicas converge on one log; each verifies.
  std::string head;
  ASSERT_TRUE(c.WaitForOneLogHead(leader, 30000, &head)) << c.LogHeads() << c.Logs();
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_EQ(c.gatosd_[i]->running(), true) << "r" << i << ":\n" << c.gatosd_[i]->log();
  }
  // Each applied record is one pack at a follower, as each batch is at the
  // leader; followers roll them up as the leader does (more than 32 start
  // a repack), so no replica's object store is left with one pack per
  // record: with thousands, every lookup scanned them all and a follower
  // fell behind for good.
  ASSERT_TRUE(PollFor(30000, [&] {
    for (int i = 0; i < kReplicas; ++i) {
      if (CountPacks(c.ledgers_[i]) > 32) return false;
    }
    return true;
  })) << "packs: " << CountPacks(c.ledgers_[0]) << " " << CountPacks(c.ledgers_[1]) << " "
      << CountPacks(c.ledgers_[2]);
  // The killed leaders came back as followers (the first may have been
  // elected again when the second was killed; the second follows the
  // leader that replaced it).
  for (int i : killed) {
    const std::string log = c.gatosd_[i]->log();
    const size_t restarted = log.rfind("replica r" + std::to_string(i) + " of ledger");
    ASSERT_NE(restarted, std::string::npos);
    EXPECT_NE(log.find("replica r" + std::to_string(i) + " following", restarted), std::string::npos) << log;
  }
  // gatos cluster status names the three, one of them the leader, all at
  // the same log sequence. (On a loaded machine a leader may lose its key
  // and another take over meanwhile: the leader is whoever it names.)
  nlohmann::json status;
  ASSERT_TRUE(PollFor(10000, [&] {
    RunResult s = c.Gatos({"cluster", "status", "--ledger", c.ledgers_[0], "--nats", c.urls_, "--json"});
    if (s.exit_code != 0) return false;
    status = nlohmann::json::parse(s.out, nullptr, false);
    if (!status.is_object() || status["replicas"].size() != kReplicas) return false;
    int leaders = 0;
    for (const auto& r : status["replicas"]) {
      if (r["log_seq"] != status["replicas"][0]["log_seq"]) return false;
      if (r["role"] == "leader") ++leaders;
    }
    return leaders == 1;
  })) << status.dump();
  for (const auto& r : status["replicas"]) {
    if (r["role"] == "leader") {
      leader = std::stoi(r["name"].get<std::string>().substr(1));
      EXPECT_EQ(r["lag_ms"], 0);
    }
    EXPECT_TRUE(r.contains("term") && r.contains("lag_ms")) << r.dump();
  }
  // gatos doctor checks a replica: bucket, stream, a leader, its own report.
  {
    const int f = (leader + 1) % kReplicas;
    const std::string follower = "r" + std::to_string(f);
    RunResult d = c.Gatos({"doctor", "--json", "--nats", c.urls_, "--ledger", c.ledgers_[f], "--key",
                           c.ledgers_[0] + "/gatos/ledger_key", "--replica-name", follower});
    nlohmann::json dj = nlohmann::json::parse(d.out, nullptr, false);
    bool seen = false;
    for (const auto& ch : dj.value("checks", nlohmann::json::array())) {
      if (ch.value("check", "") != "replica") continue;
      seen = true;
      EXPECT_EQ(ch.value("status", ""), "ok") << ch.dump();
      EXPECT_NE(ch.value("detail", "").find(follower + " is a follower"), std::string::npos) << ch.dump();
    }
    EXPECT_TRUE(seen) << d.out << d.err;
  }
  // The leader's /metrics says it leads, with its term.
  {
    RunResult m = c.Cmd({"curl", "-s", "http://127.0.0.1:" + std::to_string(c.http_ports_[leader]) + "/metrics"});
    EXPECT_NE(m.out.find("\ngatos_replica_leader 1\n"), std::string::npos) << m.out.substr(0, 2000);
    uint64_t term = 0;
    for (const auto& r : status["replicas"]) {
      if (r["role"] == "leader") term = r["term"].get<uint64_t>();
    }
    EXPECT_NE(m.out.find("\ngatos_replica_term " + std::to_string(term) + "\n"), std::string::npos);
  }
  // Log commits carry the term of the leader that wrote them.
  RunResult msg = c.Cmd({"git", "-C", c.ledgers_[leader], "log", "-1", "--format=%B", "refs/gatos/log"});
  EXPECT_NE(msg.out.find("Ledger-Term: "), std::string::npos) << msg.out;
  c.StopAndCheckEachReplica(acked);
  // Ids are unique: one job per acknowledgement.
  EXPECT_EQ(std::set<std::string>(acked.begin(), acked.end()).size(), acked.size());
}
// A trigger across a failover: the leader reads the watched repository and
// fires; its positions (refs/gatos/watch/<name>) reach every replica in
// the log, so the next leader, after the first's SIGKILL, neither fires
// the move already fired again nor misses the one made while no replica
// led; each replica's log verifies.
TEST(ReplicatedE2eTest, ATriggerFiresEachMoveOnceAcrossALeaderKill) {
  TempDir repos;  // the watched repository: every replica's --watch-local root
  ReplicatedLedger c;
  c.serve_args_ = {"--watch-local", repos.path()};
  ASSERT_TRUE(c.Prepare());
  for (int i = 0; i < kReplicas; ++i) ASSERT_TRUE(c.StartReplica(i));
  const int leader = c.WaitForLeader();
  ASSERT_GE(leader, 0) << c.Logs();

  const GitEnv env = WithTestGitIdentity(c.env_);
  const std::string remote = repos.Join("app.git"), work = c.dir_.Join("app-work");
  Git(env, {"init", "-q", "--bare", "-b", "main", remote});
  Git(env, {"init", "-q", "-b", "main", work});
  Git(env, {"remote", "add", "origin", remote}, work);
  auto push = [&](const std::string& branch, const std::string& text) {
    Git(env, {"checkout", "-q", "-B", branch}, work);
    WriteFile(work + "/file", text + "\n");
    Git(env, {"add", "file"}, work);
    Git(env, {"commit", "-q", "-m", text}, work);
    Git(env, {"push", "-q", "origin", branch}, work);
    return Git(env, {"rev-parse", "HEAD"}, work);
  };
  const std::string first = push("main", "one");
  const std::string tmpl = c.dir_.Join("app-job.yaml");
  WriteFile(tmpl, "command: [\"/bin/true\"]\ntimeout: 60\ninputs:\n  - {kind: git, url: " + remote + ", ref: main}\n");
  RunResult add = c.Gatos({"schedule", "add", "app", "--template", tmpl, "--sign-key", c.alice_, "--ledger",
                           c.ledgers_[leader], "--watch", remote, "--refs", "refs/heads/*", "--poll", "1s"});
  ASSERT_EQ(add.exit_code, 0) << add.err << c.Logs();

  auto positions = [&](int i) {
    return c.Cmd({"git", "--git-dir", c.ledgers_[i], "show", "refs/gatos/watch/app:positions.json"}).out;
  };
  // The Trigger-Commit of each fire of the schedule in replica i's log.
  auto fired = [&](int i) {
    RunResult r = c.Cmd({"git", "--git-dir", c.ledgers_[i], "log", "--reverse", "--topo-order",
                         "--format=%(trailers:key=Trigger-Commit,valueonly,separator=)", "refs/gatos/fires/app",
                         "--not", "refs/gatos/schedules/app"});
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(line);
    }
    return out;
  };
  ASSERT_TRUE(PollFor(30000, [&] { return positions(leader).find(first) != std::string::npos; }))
      << positions(leader) << c.Logs();
  const std::string c1 = push("main", "two");
  ASSERT_TRUE(PollFor(30000, [&] { return positions(leader).find(c1) != std::string::npos; }))
      << positions(leader) << c.Logs();
  ASSERT_EQ(fired(leader), std::vector<std::string>{c1});
  ASSERT_TRUE(c.WaitForOneLogHead(leader, 30000)) << c.LogHeads() << c.Logs();

  ASSERT_EQ(c.gatosd_[leader]->Stop(SIGKILL, 5000), -SIGKILL);
  const std::string c2 = push("release", "three");  // made while no replica leads: a new branch
  const int next = c.WaitForLeader(leader);
  ASSERT_GE(next, 0) << c.Logs();
  ASSERT_TRUE(PollFor(30000, [&] { return positions(next).find(c2) != std::string::npos; }))
      << positions(next) << c.Logs();
  EXPECT_EQ(fired(next), (std::vector<std::string>{c1, c2}));
  // The killed replica, started again, follows and gets both fires.
  ASSERT_TRUE(c.StartReplica(leader));
  ASSERT_TRUE(c.WaitForOneLogHead(next, 60000)) << c.LogHeads() << c.Logs();
  for (int i = 0; i < kReplicas; ++i) EXPECT_EQ(fired(i), (std::vector<std::string>{c1, c2})) << "r" << i;
  c.StopAndCheckEachReplica({});
}

// A timed schedule across a failover: every second, catch-up `all`; the
// leader SIGKILLed after three fires. The next leader fires on from the
// ticks in the replicated log: no tick fired twice, none of the outage
// skipped, and every replica, the killed one restarted, holds the same
// fires and verifies.
TEST(ReplicatedE2eTest, ATimedScheduleFiresEachTickOnceAcrossALeaderKill) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.Prepare());
  for (int i = 0; i < kReplicas; ++i) ASSERT_TRUE(c.StartReplica(i));
  const int leader = c.WaitForLeader();
  ASSERT_GE(leader, 0) << c.Logs();
  const std::string tmpl = c.dir_.Join("tick-job.yaml");
  WriteFile(tmpl, "command: [\"/bin/true\"]\ntimeout: 30\n");
  RunResult add = c.Gatos({"schedule", "add", "tick", "--template", tmpl, "--sign-key", c.alice_, "--ledger",
                           c.ledgers_[leader], "--every", "1s", "--catch-up", "all"});
  ASSERT_EQ(add.exit_code, 0) << add.err << c.Logs();
  // The ticks fired, by their Fired-At, in replica i's log, oldest first;
  // a tick fired twice fails the test.
  auto fires = [&](int i) {
    return FiredTicks(c.Cmd({"git", "--git-dir", c.ledgers_[i], "log",
                             "--format=%(trailers:key=Fired-At,valueonly,separator=)", "refs/gatos/fires/tick"})
                          .out,
                      "r" + std::to_string(i));
  };
  ASSERT_TRUE(PollFor(30000, [&] { return fires(leader).size() >= 3; })) << c.Logs();
  ASSERT_EQ(c.gatosd_[leader]->Stop(SIGKILL, 5000), -SIGKILL);
  const int next = c.WaitForLeader(leader);
  ASSERT_GE(next, 0) << c.Logs();
  const int64_t took_over = SystemNowMs();
  ASSERT_TRUE(PollFor(30000, [&] {
    auto f = fires(next);
    return !f.empty() && f.back() > took_over + 2000;
  })) << c.Logs();
  RunResult pause = c.Gatos({"schedule", "pause", "tick", "--sign-key", c.alice_, "--ledger", c.ledgers_[next]});
  ASSERT_EQ(pause.exit_code, 0) << pause.err << c.Logs();
  ASSERT_TRUE(c.StartReplica(leader));
  ASSERT_TRUE(c.WaitForOneLogHead(next, 60000)) << c.LogHeads() << c.Logs();
  const std::vector<int64_t> all = fires(next);
  ASSERT_GE(all.size(), 6u);
  // Every tick from the first fire to the last, the failover included.
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i] - all[i - 1], 1000) << "fire " << i;
  for (int i = 0; i < kReplicas; ++i) EXPECT_EQ(fires(i), all) << "r" << i;
  c.StopAndCheckEachReplica({});
}


// gatos up --replicas 3 as a user runs it: up.json names three replicas;
// the leader SIGKILLed, another leads and the killed one is started again.
TEST(ReplicatedE2eTest, GatosUpWithThreeReplicasSurvivesKillingTheLeader) {
  TempDir dir;
  ChildProcess up;
  std::string error;
  ASSERT_TRUE(up.Start({BinaryPath("gatos"), "up", "--replicas", "3", "--dir", dir.Join("up"), "--workers", "1",
                        "--sandbox", "off", "--nats-port", std::to_string(FreePort()), "--http-port",
                        std::to_string(FreePort())},
                       {{"HOME", dir.path()}}, dir.Join("up.log"), &error))
      << error;
  const std::string up_json = dir.Join("up/up.json");
  ASSERT_TRUE(PollFor(120000, [&] { return !ReadFile(up_json).empty() || !up.running(); })) << up.log();
  ASSERT_TRUE(up.running()) << up.log();
  nlohmann::json j = nlohmann::json::parse(ReadFile(up_json));
  ASSERT_EQ(j["replicas"].size(), 3u) << j.dump();
  const std::string urls = j["nats_url"];
  auto status = [&]() {
    RunOptions ro;
    ro.env = {{"HOME", dir.path()}, {"GATOS_NATS_KEY", dir.Join("up/ledger.git/gatos/ledger_key")}};
    RunResult r = ::gatos::testing::Run({BinaryPath("gatos"), "cluster", "status", "--ledger", dir.Join("up/ledger.git"), "--nats", urls,
                       "--json"},
                      ro);
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  // The leader with the highest term (a killed one's entry lingers until
  // the bucket's TTL removes it), and its term.
  uint64_t term = 0;
  auto leader_name = [&]() -> std::string {
    nlohmann::json s = status();
    if (!s.is_object()) return "";
    std::string name;
    term = 0;
    for (const auto& r : s["replicas"]) {
      if (r["role"] == "leader" && r["term"].get<uint64_t>() >= term) {
        term = r["term"].get<uint64_t>();
        name = r["name"];
      }
    }
    return name;
  };
  std::string first;
  ASSERT_TRUE(PollFor(30000, [&] { return !(first = leader_name()).empty(); })) << up.log();
  const uint64_t first_term = term;
  pid_t pid = 0;
  for (const auto& r : j["replicas"]) {
    EXPECT_FALSE(r["ledger"].get<std::string>().empty());
    EXPECT_FALSE(r["push"].get<std::string>().empty());
    if (r["name"] == first) pid = r["pid"].get<pid_t>();
  }
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // A new term: another replica, or the killed one started again, leads.
  ASSERT_TRUE(PollFor(30000, [&] { return !leader_name().empty() && term > first_term; })) << up.log();
  // The killed replica was started again: up.json names a new pid for it.
  ASSERT_TRUE(PollFor(30000, [&] {
    nlohmann::json now = nlohmann::json::parse(ReadFile(up_json), nullptr, false);
    if (!now.is_object()) return false;
    for (const auto& r : now["replicas"]) {
      if (r["name"] == first && r["pid"].get<pid_t>() != pid) return true;
    }
    return false;
  })) << up.log();
  EXPECT_TRUE(up.running()) << up.log();
  EXPECT_EQ(up.Stop(SIGTERM, 60000), 0) << up.log();
}

// Pipelined appends: the leader dies (a failpoint SIGKILLs it) right after
// the stream acknowledged a record it answered nobody for, with the next
// batch decided and waiting to be sent, while several clients submit at
// once. Every job a client saw acknowledged survives and runs once; the
// replicas converge and verify.
TEST(ReplicatedE2eTest, ALeaderKilledWithAppendsInFlightLosesNothingAcknowledged) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.Prepare());
  ASSERT_TRUE(c.StartReplica(0, {{"GATOSD_FAULT", "appended-ahead"}}));
  ASSERT_EQ(c.WaitForLeader(), 0) << c.gatosd_[0]->log();
  ASSERT_TRUE(c.StartReplica(1));
  ASSERT_TRUE(c.StartReplica(2));
  ASSERT_TRUE(c.StartWorker());
  std::mutex mu;
  std::vector<std::string> acked;
  std::atomic<int> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&] {
      while (!stop) {
        std::string id = c.Submit(next++);
        if (id.empty()) continue;
        std::lock_guard<std::mutex> l(mu);
        acked.push_back(id);
      }
    });
  }
  const bool died = PollFor(120000, [&] { return !c.gatosd_[0]->running(); });
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_TRUE(died) << "two batches were never outstanding at once\n" << c.Logs();
  EXPECT_NE(c.gatosd_[0]->log().find("failpoint appended-ahead"), std::string::npos) << c.gatosd_[0]->log();
  const int leader = c.WaitForLeader(0);
  ASSERT_GE(leader, 1) << c.Logs();
  const size_t before = acked.size();
  for (int k = 0; k < 3; ++k) {
    std::string id = c.Submit(next++);
    if (!id.empty()) acked.push_back(id);
  }
  EXPECT_EQ(acked.size(), before + 3) << c.Logs();
  ASSERT_TRUE(c.StartReplica(0));  // without the failpoint: rejoins as a follower
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), acked.begin(), acked.end());
  wait.insert(wait.end(), {"--ledger", c.urls_, "--timeout", "120"});
  RunResult w = c.Gatos(wait, 180);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  std::string head;
  ASSERT_TRUE(c.WaitForOneLogHead(leader, 30000, &head)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica(acked);
  EXPECT_EQ(std::set<std::string>(acked.begin(), acked.end()).size(), acked.size());
}

}  // namespace
}  // namespace gatos::testing
