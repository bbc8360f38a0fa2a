// What followers of a replicated ledger serve, with real processes on
// loopback (replicated_ledger.h: three nats-server nodes, three replicas, a
// worker): a `git push` to a follower's front door is forwarded to the
// leader and acknowledged once the follower applied it; status, ls and wait
// answered by a follower (and by any replica) say which one and as of which
// log sequence; a follower's /metrics and dashboard give its role, term and
// lag; a follower's push is refused clearly, and nothing is written, when
// no leader can be elected.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/clock.h"
#include "replicated_ledger.h"
#include "test_worker.h"

namespace gatos::testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string Job(int n) {
  return "command: [\"/bin/echo\", \"pushed-" + std::to_string(n) + "\"]\ntimeout: 30\n";
}

TEST(ReplicaFollowersTest, AFollowerForwardsPushesAndServesReadsMetricsAndTheDashboard) {
  ReplicatedLedger c;
  int leader = -1;
  ASSERT_TRUE(c.StartAll(&leader)) << c.Logs();
  const int f = (leader + 1) % kReplicas;
  const std::string fname = "r" + std::to_string(f);
  // A follower serves the ledger's local socket (its front door's hooks).
  ASSERT_TRUE(PollFor(30000, [&] { return Exists(c.ledgers_[f] + "/gatos/gatosd.sock"); })) << c.Logs();

  std::string id;
  RunResult push = c.PushJob(f, Job(1), &id);
  ASSERT_EQ(push.exit_code, 0) << push.err << c.Logs();
  EXPECT_NE(push.err.find("remote: gatos: accepted job " + id), std::string::npos) << push.err;
  EXPECT_NE(push.err.find("recorded by the leader"), std::string::npos) << push.err;
  // Acknowledged only once the follower held it: its own repository has
  // the job now, and so has the leader.
  RunResult local = c.Gatos({"status", id, "--ledger", c.ledgers_[f], "--json"});
  EXPECT_EQ(local.exit_code, 0) << local.err;
  RunResult on_leader = c.Gatos({"status", id, "--ledger", c.urls_, "--json"});
  EXPECT_EQ(on_leader.exit_code, 0) << on_leader.err;

  // wait, status and ls answered by the follower, saying so.
  RunResult w = c.Gatos({"wait", id, "--ledger", c.urls_, "--replica", fname, "--timeout", "60", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  auto waited = nlohmann::json::parse(w.out);
  ASSERT_EQ(waited.size(), 1u);
  EXPECT_EQ(waited[0]["state"], "succeeded");
  EXPECT_EQ(waited[0]["replica"]["name"], fname);
  EXPECT_EQ(waited[0]["replica"]["role"], "follower");
  EXPECT_GT(waited[0]["replica"]["log_seq"].get<int64_t>(), 1);

  RunResult st = c.Gatos({"status", id, "--ledger", c.urls_, "--replica", fname});
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("succeeded"), std::string::npos) << st.out;
  EXPECT_NE(st.err.find("(replica " + fname + ", follower, log sequence "), std::string::npos) << st.err;

  RunResult ls = c.Gatos({"ls", "--ledger", c.urls_, "--replica", fname, "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  auto listed = nlohmann::json::parse(ls.out);
  EXPECT_EQ(listed["replica"]["name"], fname);
  bool found = false;
  for (const auto& j : listed["jobs"]) found |= j.value("job", "") == id;
  EXPECT_TRUE(found) << ls.out;

  RunResult any = c.Gatos({"ls", "--ledger", c.urls_, "--replica", "any", "--json"});
  ASSERT_EQ(any.exit_code, 0) << any.err;
  const std::string who = nlohmann::json::parse(any.out)["replica"].value("name", "");
  EXPECT_TRUE(who == "r0" || who == "r1" || who == "r2") << any.out;

  // A replica that does not exist: a clear error, not a hang.
  RunResult none = c.Gatos({"status", id, "--ledger", c.urls_, "--replica", "nobody"}, 60);
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("no replica named nobody"), std::string::npos) << none.err;
  // --replica asks over NATS only.
  RunResult dir = c.Gatos({"ls", "--ledger", c.ledgers_[f], "--replica", fname});
  EXPECT_EQ(dir.exit_code, 2) << dir.err;  // a usage error

  // The follower's /metrics and dashboard: its role, term and lag.
  const std::string base = "http://127.0.0.1:" + std::to_string(c.http_ports_[f]);
  RunResult m = c.Cmd({"curl", "-s", base + "/metrics"});
  EXPECT_NE(m.out.find("gatos_replica_leader 0"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("gatos_replica_lag_seconds"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("gatos_replica_term"), std::string::npos) << m.out;
  nlohmann::json overview;
  ASSERT_TRUE(PollFor(10000, [&] {
    RunResult o = c.Cmd({"curl", "-s", base + "/overview.json"});
    overview = nlohmann::json::parse(o.out, nullptr, false);
    return !overview.is_discarded() && overview.contains("replica") &&
           overview["ledger"].value("seq", int64_t{0}) >= waited[0]["replica"]["log_seq"].get<int64_t>();
  })) << overview.dump();
  EXPECT_EQ(overview["replica"]["name"], fname);
  EXPECT_EQ(overview["replica"]["role"], "follower");
  RunResult page = c.Cmd({"curl", "-s", base + "/"});
  EXPECT_NE(page.out.find("replica " + fname + " · follower"), std::string::npos) << page.out;

  // gatos cluster status and gatos doctor reach each replica's reads.
  // Each replica writes its line once a second and it lives 3 s (the
  // election TTL): under load one can be missing for a moment.
  RunResult cs;
  nlohmann::json cluster;
  ASSERT_TRUE(PollFor(30000, [&] {
    cs = c.Gatos({"cluster", "status", "--ledger", c.ledgers_[f], "--nats", c.urls_, "--json"});
    cluster = nlohmann::json::parse(cs.out, nullptr, false);
    return cs.exit_code == 0 && !cluster.is_discarded() &&
           cluster["replicas"].size() == static_cast<size_t>(kReplicas);
  })) << cs.exit_code << " " << cs.out << cs.err;
  for (const auto& r : cluster["replicas"]) EXPECT_TRUE(r["reads"].value("ok", false)) << cs.out;
  RunResult table = c.Gatos({"cluster", "status", "--ledger", c.ledgers_[f], "--nats", c.urls_});
  EXPECT_NE(table.out.find("READS"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("no answer"), std::string::npos) << table.out;
  RunResult d = c.Gatos({"doctor", "--json", "--nats", c.urls_, "--ledger", c.ledgers_[f], "--key",
                         c.ledgers_[0] + "/gatos/ledger_key", "--replica-name", fname});
  nlohmann::json dj = nlohmann::json::parse(d.out, nullptr, false);
  bool seen = false;
  for (const auto& ch : dj.value("checks", nlohmann::json::array())) {
    if (ch.value("check", "") != "replica-reads") continue;
    seen = true;
    EXPECT_EQ(ch.value("status", ""), "ok") << ch.dump();
    EXPECT_NE(ch.value("detail", "").find(fname + " answers reads on gatos.replica." + fname + ".list"),
              std::string::npos)
        << ch.dump();
  }
  EXPECT_TRUE(seen) << d.out << d.err;

  // A job commit with history is refused at the follower (a submit carries
  // the commit and its tree, not its parents); nothing reaches the leader.
  std::string child;
  RunResult deep = c.PushJob(f, Job(2), &child, /*with_parent=*/true);
  EXPECT_NE(deep.exit_code, 0);
  EXPECT_NE(deep.err.find("without its history"), std::string::npos) << deep.err;
  RunResult missing = c.Gatos({"status", child, "--ledger", c.urls_});
  EXPECT_NE(missing.exit_code, 0) << missing.out;
}

// A job pushed with stock git to the leader's own front door: git wrote
// its objects to the leader's object store, and the leader's record of the
// batch carries them, so that every follower holds the job commit, its
// tree and its job.yaml after applying it, and each follower's repository
// verifies.
TEST(ReplicaFollowersTest, AJobPushedToTheLeadersDoorReachesEveryFollowerWithItsObjects) {
  ReplicatedLedger c;
  int leader = -1;
  ASSERT_TRUE(c.StartAll(&leader)) << c.Logs();

  std::string id;
  const std::string yaml = Job(4);
  RunResult push = c.PushJob(leader, yaml, &id);
  ASSERT_EQ(push.exit_code, 0) << push.err << c.Logs();
  EXPECT_NE(push.err.find("remote: gatos: accepted job " + id), std::string::npos) << push.err;
  RunResult w = c.Gatos({"wait", id, "--ledger", c.urls_, "--timeout", "60", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << c.Logs();
  auto waited = nlohmann::json::parse(w.out);
  ASSERT_EQ(waited.size(), 1u);
  ASSERT_EQ(waited[0]["state"], "succeeded") << w.out;
  const std::string commit = waited[0]["job_commit"];
  const std::string tree = TrimEnd(c.Cmd({"git", "-C", c.ledgers_[leader], "rev-parse", commit + "^{tree}"}).out);
  ASSERT_EQ(tree.size(), 40u) << tree;

  for (int f = 0; f < kReplicas; ++f) {
    if (f == leader) continue;
    const std::string fname = "r" + std::to_string(f);
    // Applied by the follower: its own status of the job has the result.
    RunResult st;
    nlohmann::json status;
    ASSERT_TRUE(PollFor(30000, [&] {
      st = c.Gatos({"status", id, "--ledger", c.urls_, "--replica", fname, "--json"});
      status = nlohmann::json::parse(st.out, nullptr, false);
      return st.exit_code == 0 && !status.is_discarded() && status.value("state", "") == "succeeded";
    })) << fname << ": " << st.out << st.err << c.Logs();
    EXPECT_EQ(status.value("job_commit", ""), commit) << st.out;
    EXPECT_EQ(status["replica"].value("name", ""), fname) << st.out;
    EXPECT_EQ(status["replica"].value("role", ""), "follower") << st.out;
    // The job commit, its tree and its job.yaml are in the follower's
    // object store, as the manifest was pushed.
    RunResult e = c.Cmd({"git", "-C", c.ledgers_[f], "cat-file", "-e", commit});
    EXPECT_EQ(e.exit_code, 0) << fname << " lacks job commit " << commit << ": " << e.err;
    e = c.Cmd({"git", "-C", c.ledgers_[f], "cat-file", "-e", tree});
    EXPECT_EQ(e.exit_code, 0) << fname << " lacks the job's tree " << tree << ": " << e.err;
    RunResult show = c.Cmd({"git", "-C", c.ledgers_[f], "show", commit + ":job.yaml"});
    EXPECT_EQ(show.exit_code, 0) << show.err;
    EXPECT_EQ(show.out, yaml);
  }
  c.StopAndCheckEachReplica({id});
}

// A result pushed with stock git to a follower's front door is forwarded to
// the leader as the result RPC carries one (the lease commit it builds on
// is in every replica's log) and acknowledged once the follower applied
// it. One the leader refuses (for an epoch it never granted) is refused at
// the follower with the leader's reason, and is not recorded.
TEST(ReplicaFollowersTest, AResultPushedToAFollowersDoorIsForwardedToTheLeader) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.Prepare(/*lease_ms=*/120000));  // no renewals: the test holds the lease while it pushes
  for (int i = 0; i < kReplicas; ++i) ASSERT_TRUE(c.StartReplica(i));
  const int leader = c.WaitForLeader();
  ASSERT_GE(leader, 0) << c.Logs();
  const int f = (leader + 1) % kReplicas;
  ASSERT_TRUE(PollFor(30000, [&] { return Exists(c.ledgers_[f] + "/gatos/gatosd.sock"); })) << c.Logs();

  // No worker runs: the test claims the job and signs the worker's result.
  std::string id;
  RunResult pushed_job = c.PushJob(f, Job(5), &id);
  ASSERT_EQ(pushed_job.exit_code, 0) << pushed_job.err << c.Logs();
  const std::string hex = id.substr(7);
  TestWorker w(c.urls_, c.worker_key_);
  const nlohmann::json grant = w.Claim(hex);
  ASSERT_TRUE(grant.value("ok", false)) << grant.dump();
  auto state_at = [&](const std::string& ledger) {
    RunResult st = c.Gatos({"status", id, "--ledger", ledger, "--json"});
    auto j = nlohmann::json::parse(st.out, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  };
  // The follower has applied the claim: its lease commit is there to build on.
  ASSERT_TRUE(PollFor(30000, [&] { return state_at(c.ledgers_[f]).value("state", "") == "claimed"; })) << c.Logs();

  const std::string local = c.dir_.Join("pusher.git");
  ASSERT_TRUE(Ledger::InitRepository(local).ok());
  auto repo = Ledger::Open(local);
  ASSERT_TRUE(repo.ok());
  nlohmann::json never_granted = grant;
  never_granted["epoch"] = grant["epoch"].get<int64_t>() + 1;
  std::string stale, good;
  for (const auto& o : w.BuildObjects(hex, never_granted, &stale)) ASSERT_TRUE((*repo)->WriteRawObject(o.type, o.data).ok());
  for (const auto& o : w.BuildObjects(hex, grant, &good)) ASSERT_TRUE((*repo)->WriteRawObject(o.type, o.data).ok());
  // Like any git client, the pusher has the history it builds on.
  RunResult fetch = c.Cmd({"git", "--git-dir", local, "fetch", "-q", c.ledgers_[f], "refs/gatos/jobs/" + hex + "/*:refs/ledger/*"});
  ASSERT_EQ(fetch.exit_code, 0) << fetch.err;
  auto push_result = [&](const std::string& commit) {
    return c.Cmd({"git", "--git-dir", local, "push", c.ledgers_[f] + "/push", commit + ":refs/gatos/results/" + hex});
  };

  RunResult refused = push_result(stale);
  EXPECT_NE(refused.exit_code, 0) << refused.err;
  EXPECT_NE(refused.err.find("the leader refused the push"), std::string::npos) << refused.err << c.Logs();
  EXPECT_EQ(state_at(c.ledgers_[leader]).value("state", ""), "claimed");

  RunResult accepted = push_result(good);
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err << c.Logs();
  EXPECT_NE(accepted.err.find("remote: gatos: result of job " + id +
                              " recorded (succeeded) by the leader; this replica applied it at log sequence "),
            std::string::npos)
      << accepted.err;
  // Acknowledged only once the follower held it; the leader holds it too.
  const nlohmann::json on_follower = state_at(c.ledgers_[f]);
  EXPECT_EQ(on_follower.value("state", ""), "succeeded") << on_follower.dump();
  EXPECT_EQ(on_follower.value("result_commit", ""), good) << on_follower.dump();
  EXPECT_EQ(state_at(c.ledgers_[leader]).value("result_commit", ""), good);
  ASSERT_TRUE(c.WaitForOneLogHead(leader, 30000)) << c.LogHeads() << c.Logs();
  c.StopAndCheckEachReplica({id});
}

// What only the leader records and a follower's front door is given: a
// schedule (from `gatos schedule` and pushed with git) and an auditor's
// witness (pushed). The follower checks each, forwards it to the leader
// (gatos.forward.*) and answers once its own ref holds it; the leader fires
// the schedule; a witness the leader's log contradicts is refused with the
// leader's reason.
TEST(ReplicaFollowersTest, AScheduleAndAWitnessGivenToAFollowerAreForwardedToTheLeader) {
  ReplicatedLedger c;
  int leader = -1;
  ASSERT_TRUE(c.StartAll(&leader)) << c.Logs();
  const int f = (leader + 1) % kReplicas;
  ASSERT_TRUE(PollFor(30000, [&] { return Exists(c.ledgers_[f] + "/gatos/gatosd.sock"); })) << c.Logs();
  auto ref_at = [&](int i, const std::string& ref) {
    return TrimEnd(c.Cmd({"git", "--git-dir", c.ledgers_[i], "rev-parse", "-q", "--verify", ref}).out);
  };

  // A schedule added on the follower's host.
  const std::string tmpl = c.dir_.Join("tick.yaml");
  WriteFile(tmpl, "command: [\"true\"]\ntimeout: 30\n");
  RunResult add = c.Gatos({"schedule", "add", "tick", "--template", tmpl, "--every", "1s", "--sign-key", c.alice_,
                           "--ledger", c.ledgers_[f]});
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err << c.Logs();
  EXPECT_NE(add.out.find("recorded by the leader, and this replica applied it at log sequence "), std::string::npos)
      << add.out;
  const std::string schedule = ref_at(f, "refs/gatos/schedules/tick");
  ASSERT_EQ(schedule.size(), 40u);
  EXPECT_EQ(ref_at(leader, "refs/gatos/schedules/tick"), schedule);
  // The leader fires it, and the follower applies the fires.
  ASSERT_TRUE(PollFor(30000, [&] { return !ref_at(f, "refs/gatos/fires/tick").empty(); })) << c.Logs();
  RunResult pause = c.Gatos({"schedule", "pause", "tick", "--sign-key", c.alice_, "--ledger", c.ledgers_[f]});
  ASSERT_EQ(pause.exit_code, 0) << pause.out << pause.err;
  EXPECT_NE(ref_at(leader, "refs/gatos/schedules/tick"), schedule);
  EXPECT_EQ(ref_at(leader, "refs/gatos/schedules/tick"), ref_at(f, "refs/gatos/schedules/tick"));

  // A witness: an auditor's mirror of the follower, verified and signed,
  // pushed to the follower's front door.
  const std::string mirror = c.dir_.Join("mirror.git");
  ASSERT_EQ(c.Cmd({"git", "clone", "-q", "--mirror", c.ledgers_[f], mirror}).exit_code, 0);
  const std::string auditor = c.dir_.Join("auditor");
  ASSERT_EQ(c.Gatos({"keygen", "-f", auditor}).exit_code, 0);
  RunResult w = c.Gatos({"witness", "--repo", mirror, "--key", auditor, "--json"}, 300);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  const nlohmann::json wj = nlohmann::json::parse(w.out);
  const std::string witness = wj.value("witness", "");
  const std::string push_ref = wj.value("ref", "");
  const std::string key_hex = push_ref.substr(push_ref.rfind('/') + 1);
  RunResult pushed = c.Cmd({"git", "--git-dir", mirror, "push", c.ledgers_[f] + "/push", push_ref});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err << c.Logs();
  EXPECT_NE(pushed.err.find("gatos: witness " + witness.substr(0, 12) + " recorded at refs/gatos/witness/" + key_hex +
                            " by the leader; this replica applied it at log sequence "),
            std::string::npos)
      << pushed.err;
  EXPECT_EQ(ref_at(f, "refs/gatos/witness/" + key_hex), witness);
  EXPECT_EQ(ref_at(leader, "refs/gatos/witness/" + key_hex), witness);
  // A witness of a log commit the ledger does not have at that sequence:
  // well formed and signed, so the follower forwards it; the leader refuses.
  auto key = ReadPrivateKeyFile(auditor);
  ASSERT_TRUE(key.ok());
  WitnessStatement lie{wj.value("ledger", ""), wj.value("seq", int64_t{1}), std::string(40, 'e'), "",
                       SystemNowMs()};
  GitObject bad = *BuildWitnessCommit(lie, *key);
  const std::string path = c.dir_.Join("bad.commit");
  WriteFile(path, bad.data);
  ASSERT_EQ(TrimEnd(c.Cmd({"git", "--git-dir", mirror, "hash-object", "-t", "commit", "-w", path}).out), bad.id);
  RunResult refused = c.Cmd({"git", "--git-dir", mirror, "push", c.ledgers_[f] + "/push", bad.id + ":" + push_ref});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("the leader refused the push"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("but this ledger's log has"), std::string::npos) << refused.err;
  EXPECT_EQ(ref_at(leader, "refs/gatos/witness/" + key_hex), witness);

  ASSERT_TRUE(c.WaitForOneLogHead(leader, 30000)) << c.LogHeads() << c.Logs();
  for (int i = 0; i < kReplicas; ++i) {
    RunResult v = c.Gatos({"verify", "--all", "--log-only", "--witnesses", "--repo", c.ledgers_[i]}, 300);
    EXPECT_EQ(v.exit_code, 0) << "r" << i << ": " << v.out.substr(0, 3000) << v.err;
    EXPECT_NE(v.out.find("ok witness refs/gatos/witness/" + key_hex), std::string::npos) << v.out.substr(0, 3000);
  }
}

TEST(ReplicaFollowersTest, AFollowersPushIsRefusedClearlyWhenNoLeaderCanBeElected) {
  ReplicatedLedger c;
  ASSERT_TRUE(c.Prepare());
  for (int i = 0; i < kReplicas; ++i) ASSERT_TRUE(c.StartReplica(i));
  const int leader = c.WaitForLeader();
  ASSERT_GE(leader, 0) << c.Logs();
  const int f = (leader + 1) % kReplicas;
  ASSERT_TRUE(PollFor(30000, [&] { return Exists(c.ledgers_[f] + "/gatos/gatosd.sock"); })) << c.Logs();
  // Every other replica killed, and two of the three NATS nodes: JetStream
  // has no quorum, so nobody can be elected; the follower stays one.
  for (int i = 0; i < kReplicas; ++i) {
    if (i != f) EXPECT_EQ(c.gatosd_[i]->Stop(SIGKILL, 5000), -SIGKILL);
  }
  ASSERT_TRUE(c.nats_[0]->Kill());
  ASSERT_TRUE(c.nats_[1]->Kill());
  const std::string head = c.LogHead(f);

  std::string id;
  RunResult push = c.PushJob(f, Job(3), &id);
  EXPECT_NE(push.exit_code, 0) << push.err;
  EXPECT_NE(push.err.find("remote: gatos: refs/gatos/submit/"), std::string::npos) << push.err;
  EXPECT_NE(push.err.find("no leader answered the forwarded push"), std::string::npos) << push.err << c.Logs();
  EXPECT_NE(push.err.find("nothing was recorded"), std::string::npos) << push.err;
  // Nothing was written: the follower's log did not move and holds no job.
  EXPECT_EQ(c.LogHead(f), head);
  RunResult st = c.Gatos({"status", id, "--ledger", c.ledgers_[f]});
  EXPECT_NE(st.exit_code, 0) << st.out;
  EXPECT_TRUE(c.gatosd_[f]->running()) << c.Logs();
  EXPECT_EQ(c.Leader(), -1) << c.Logs();
  // It still answers reads from what it applied.
  RunResult ls;
  EXPECT_TRUE(PollFor(15000, [&] {
    ls = c.Gatos({"ls", "--ledger", c.nats_[2]->url(), "--replica", "r" + std::to_string(f), "--json"});
    return ls.exit_code == 0;
  })) << ls.err;
}

}  // namespace
}  // namespace gatos::testing
