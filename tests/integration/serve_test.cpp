// gatosd serve end to end: real nats-server, real git push, the worker RPC
// driven by a test client, crashes with SIGKILL, and a NATS restart.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/grant.h"
#include "gatos/git/result.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/time_format.h"
#include "gatos/nats/bus.h"
#include "stack.h"
#include "test_worker.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

std::string Job(int n) {
  return "command: [\"/bin/echo\", \"job " + std::to_string(n) + "\"]\ntimeout: 30\n";
}

// Pending-job messages as a worker sees them, through a test-only durable.
std::vector<std::string> FetchPending(Bus& bus, const std::string& durable, int want, int timeout_ms) {
  Bus::ConsumerConfig cc;
  cc.stream = rpc::kStream;
  cc.durable = durable;
  cc.filter_subject = rpc::kPendingSubject;
  auto consumer = bus.PullSubscribe(cc);
  EXPECT_TRUE(consumer.ok()) << consumer.status().message();
  std::vector<std::string> jobs;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (static_cast<int>(jobs.size()) < want && std::chrono::steady_clock::now() < deadline) {
    auto msgs = (*consumer)->Fetch(want, 200);
    if (!msgs.ok()) continue;
    for (auto& m : *msgs) {
      jobs.push_back(json::parse(m->data())["job"]);
      (void)m->Ack();
    }
  }
  return jobs;
}

TEST(ServeTest, PushedJobIsPublishedOnceAndRePushIsANoOp) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  // The test's durable exists before the push, so it sees every publication.
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 100).empty());
  std::string id = stack.PushJob(Job(1));
  auto seen = FetchPending(w.bus(), "observer", 2, 3000);
  ASSERT_EQ(seen, std::vector<std::string>{id});
  RunResult again;
  stack.PushJob(Job(1), &again);
  EXPECT_NE(again.err.find("already exists; nothing to do"), std::string::npos) << again.err;
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 1500).empty());
  // Restarting gatosd republishes every pending job; the stream drops the duplicate.
  stack.StopGatosd(SIGTERM);
  ASSERT_TRUE(stack.StartGatosd());
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 1500).empty());
}

// One push of many jobs with gatosd serving: the hook pipelines them on
// gatosd's socket; each is recorded and published exactly once, the pusher
// sees every id, and pushing them again (with one more) is a no-op for each.
// The observer below reads offers without claiming them: gatosd must offer
// every pending job at once, not the window that follows claims
// (docs/scheduling.md).
StackOptions AllOffers() { return StackOptions{.gatosd_args = {"--offer-window", "all"}}; }

TEST(ServeTest, APushOfManyJobsIsRecordedAndPublishedOnceEach) {
  Stack stack(AllOffers());
  ASSERT_TRUE(stack.Start());
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 100).empty());
  std::vector<std::string> yamls;
  for (int i = 0; i < 30; ++i) yamls.push_back(Job(1000 + i));
  RunResult push;
  std::vector<std::string> ids = stack.PushJobs(yamls, &push);
  ASSERT_EQ(ids.size(), 30u);
  for (const auto& id : ids) EXPECT_NE(push.err.find("accepted job " + id), std::string::npos) << id;
  auto seen = FetchPending(w.bus(), "observer", 31, 2000);
  std::sort(seen.begin(), seen.end());
  std::vector<std::string> want = ids;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
  RunResult log = gatos::testing::Run({"git", "--git-dir", stack.ledger(), "log", "--first-parent", "--format=%s", "refs/gatos/log"});
  int submits = 0;
  std::istringstream lines(log.out);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(" submit");
    if (at == std::string::npos) continue;
    size_t start = line.rfind(' ', at - 1);
    submits += std::stoi(line.substr(start + 1, at - start - 1));
  }
  EXPECT_EQ(submits, 30) << log.out;

  yamls.push_back(Job(2000));
  RunResult again;
  std::vector<std::string> ids2 = stack.PushJobs(yamls, &again);
  for (size_t i = 0; i < 30; ++i) {
    EXPECT_NE(again.err.find("job " + ids2[i] + " already exists; nothing to do"), std::string::npos) << ids2[i];
  }
  EXPECT_NE(again.err.find("accepted job " + ids2[30]), std::string::npos) << again.err;
  EXPECT_EQ(FetchPending(w.bus(), "observer", 2, 1500), std::vector<std::string>{ids2[30]});
}

// A client that pipelines more requests than gatosd takes from a connection
// at once (1,024), and more than may wait for replies (4,096), gets every
// reply, in order: gatosd reads the next frames while the replies before
// are still pending.
TEST(ServeTest, ManyPipelinedLocalRequestsAreAnsweredInOrder) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  std::vector<std::string> ids = stack.PushJobs({Job(7)});
  ASSERT_EQ(ids.size(), 1u);
  std::vector<std::pair<std::string, std::string>> requests;
  std::vector<std::string> asked;
  for (int i = 0; i < 5000; ++i) {
    // Every 1,000th asks for the job that exists; the rest for ids that do not.
    std::string hex = i % 1000 == 0 ? ids[0].substr(7) : Blake3Tagged("absent " + std::to_string(i)).substr(7);
    asked.push_back(hex);
    requests.emplace_back(rpc::kStatus, rpc::Dump({{"job", "blake3:" + hex}}));
  }
  bool via_gatosd = false;
  auto replies = LocalLedgerRequests(stack.ledger(), requests, LocalOptions{}, &via_gatosd);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  EXPECT_TRUE(via_gatosd);
  ASSERT_EQ(replies->size(), requests.size());
  for (size_t i = 0; i < replies->size(); ++i) {
    const std::string& r = (*replies)[i];
    if (i % 1000 == 0) {
      EXPECT_NE(r.find("\"ok\":true"), std::string::npos) << i << ": " << r;
      EXPECT_NE(r.find(asked[i]), std::string::npos) << i << ": " << r;
    } else {
      EXPECT_NE(r.find("no job blake3:" + asked[i] + " in this ledger"), std::string::npos) << i << ": " << r;
    }
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(ServeTest, ClaimResultStatusWaitAndMetricsThroughTheRpc) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  std::string id = stack.PushJob(Job(2));
  std::string hex = id.substr(7);
  TestWorker w0(stack.nats_url(), stack.worker_keys()[0]);
  TestWorker w1(stack.nats_url(), stack.worker_keys()[1]);
  json grant = w0.Claim(hex);
  ASSERT_TRUE(grant.value("ok", false)) << grant.dump();
  EXPECT_EQ(grant["epoch"], 1);
  // The grant proves itself: signed by the ledger key in the reply, naming
  // a lease commit for this worker's own request, with the job's manifest.
  auto ledger_pub = ReadPublicKeyFile(stack.ledger() + "/gatos/ledger_key.pub");
  ASSERT_TRUE(ledger_pub.ok());
  auto signed_grant = VerifyReplyGrants({&grant}, {*ledger_pub});
  ASSERT_TRUE(signed_grant.ok()) << signed_grant.status().message();
  auto verified = VerifyGrant(grant["objects"].get<std::string>(), signed_grant->front(), w0.last_claim());
  ASSERT_TRUE(verified.ok()) << verified.status().message();
  EXPECT_EQ(verified->job_yaml, Job(2));
  // The worker runs what VerifyGrant parsed: the manifest the job id names.
  EXPECT_EQ(verified->canonical, CanonicalManifest(verified->manifest));
  EXPECT_EQ(JobIdHex(verified->manifest), hex);
  EXPECT_EQ(verified->manifest.command, (std::vector<std::string>{"/bin/echo", "job 2"}));
  EXPECT_EQ(verified->lease.epoch, 1);
  json lost = w1.Claim(hex);
  EXPECT_FALSE(lost.value("ok", true));
  EXPECT_EQ(lost["error"], "lost_race");

  RunResult st = stack.Gatos({"status", id, "--ledger", stack.nats_url(), "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  json sj = json::parse(st.out);
  EXPECT_EQ(sj["state"], "claimed");
  EXPECT_EQ(sj["lease"]["worker"], "ed25519:" + w0.hex());

  // A result from the worker that lost the race is refused (stale owner).
  json stale = w1.Result(hex, grant);
  EXPECT_EQ(stale["error"], "stale_owner") << stale.dump();
  json done = w0.Result(hex, grant);
  ASSERT_TRUE(done.value("ok", false)) << done.dump();
  EXPECT_FALSE(done.value("existing", true));
  json resend = w0.Resend();
  EXPECT_TRUE(resend.value("existing", false)) << resend.dump();

  RunResult wait = stack.Gatos({"wait", id, "--ledger", stack.nats_url(), "--timeout", "10"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  RunResult local = stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"});
  EXPECT_EQ(json::parse(local.out)["state"], "succeeded") << local.out;
  RunResult ls = stack.Gatos({"ls", "--ledger", stack.nats_url(), "--state", "succeeded", "--json"});
  json lj = json::parse(ls.out);
  ASSERT_EQ(lj["jobs"].size(), 1u);
  EXPECT_EQ(lj["jobs"][0]["job"], id);

  std::string health = stack.HttpGet("/healthz");
  EXPECT_EQ(health.substr(0, 3), "200") << health;
  std::string metrics = stack.HttpGet("/metrics");
  EXPECT_NE(metrics.find("gatos_jobs{state=\"succeeded\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gatos_claim_latency_seconds_count 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gatos_requests_total{kind=\"claim\",outcome=\"lost_race\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("gatos_publish_backlog 0\n"), std::string::npos);
}

TEST(ServeTest, ConcurrentClaimantsThroughTheRpcGetOneLeaseAndOneResultPerJob) {
  Stack stack(StackOptions{.workers = 8});
  ASSERT_TRUE(stack.Start());
  std::vector<std::string> jobs;
  for (int i = 0; i < 30; ++i) {
    WriteFile(stack.dir().Join("j.yaml"), Job(100 + i));
    RunResult s = stack.Gatos({"submit", stack.dir().Join("j.yaml"), "--ledger", stack.nats_url(), "--sign-key",
                               stack.submitter_key()});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    jobs.push_back(s.out.substr(7, 64));
  }
  std::atomic<int> claims{0}, results{0}, lost{0}, other{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      TestWorker worker(stack.nats_url(), stack.worker_keys()[w]);
      for (size_t k = 0; k < jobs.size(); ++k) {
        const std::string& hex = jobs[(k + w * 7) % jobs.size()];
        json g = worker.Claim(hex);
        if (g.value("ok", false)) {
          ++claims;
          if (worker.Result(hex, g).value("ok", false)) ++results;
        } else if (g.value("error", "") == "lost_race" || g.value("error", "") == "terminal") {
          ++lost;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(claims.load(), 30);
  EXPECT_EQ(results.load(), 30);
  EXPECT_EQ(lost.load(), 8 * 30 - 30);
  EXPECT_EQ(other.load(), 0);
  RunOptions ro;
  RunResult refs = testing::Run({"git", "--git-dir", stack.ledger(), "for-each-ref", "--format=%(refname)",
                                 "refs/gatos/jobs/"}, ro);
  int leases = 0, result_refs = 0;
  std::istringstream lines(refs.out);
  std::string line;
  while (std::getline(lines, line)) {
    leases += line.size() > 6 && line.compare(line.size() - 6, 6, "/lease") == 0;
    result_refs += line.size() > 7 && line.compare(line.size() - 7, 7, "/result") == 0;
  }
  EXPECT_EQ(leases, 30);
  EXPECT_EQ(result_refs, 30);
}

TEST(ServeTest, ResultPushedWithStockGitGoesThroughTheSameChecks) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  std::string id = stack.PushJob(Job(20));
  std::string hex = id.substr(7);
  TestWorker w0(stack.nats_url(), stack.worker_keys()[0]);
  TestWorker w1(stack.nats_url(), stack.worker_keys()[1]);
  json grant = w0.Claim(hex);
  ASSERT_TRUE(grant.value("ok", false)) << grant.dump();
  auto push = [&](TestWorker& w, std::string* commit) {
    std::string local = stack.dir().Join("result-" + w.hex().substr(0, 8) + ".git");
    EXPECT_TRUE(Ledger::InitRepository(local).ok());
    auto repo = Ledger::Open(local);
    for (const auto& o : w.BuildObjects(hex, grant, commit)) EXPECT_TRUE((*repo)->WriteRawObject(o.type, o.data).ok());
    RunOptions ro;
    ro.env = stack.env();
    // Like any git client, the pusher has the history it builds on.
    testing::Run({"git", "--git-dir", local, "fetch", "-q", stack.ledger(),
                  "refs/gatos/jobs/" + hex + "/*:refs/ledger/*"}, ro);
    return testing::Run({"git", "--git-dir", local, "push", stack.push_url(), *commit + ":refs/gatos/results/" + hex}, ro);
  };
  // Not the lease holder: refused with the reason, nothing changes.
  std::string stale_commit;
  RunResult r = push(w1, &stale_commit);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("stale owner"), std::string::npos) << r.err;
  EXPECT_EQ(json::parse(stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"}).out)["state"], "claimed");
  // The holder's result is accepted, and gatosd learns of it.
  std::string commit;
  r = push(w0, &commit);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("result of job " + id + " recorded"), std::string::npos) << r.err;
  RunResult wait = stack.Gatos({"wait", id, "--ledger", stack.nats_url(), "--timeout", "10"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
}

TEST(ServeTest, RejectedPushesAreCountedByReason) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  RunOptions ro;
  ro.env = stack.env();
  // Not a job: a push to a branch.
  std::string work = stack.dir().Join("other");
  testing::Run({"git", "init", "-q", work}, ro);
  ro.cwd = work;
  WriteFile(work + "/x", "x");
  testing::Run({"git", "add", "x"}, ro);
  testing::Run({"git", "commit", "-q", "-m", "x"}, ro);
  RunResult r = testing::Run({"git", "push", stack.push_url(), "HEAD:refs/heads/main"}, ro);
  EXPECT_NE(r.exit_code, 0);
  std::string metrics;
  for (int i = 0; i < 50; ++i) {
    metrics = stack.HttpGet("/metrics");
    if (metrics.find("reason=\"forbidden_ref\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(metrics.find("gatos_rejected_total{source=\"push\",reason=\"forbidden_ref\"} 1\n"), std::string::npos)
      << metrics;
}

TEST(ServeTest, CancelPendingJobThroughGatosdAbortsIt) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  std::string id = stack.PushJob(Job(3));
  RunResult c = stack.Gatos({"cancel", id, "--ledger", stack.nats_url(), "--key", stack.submitter_key()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("state aborted"), std::string::npos) << c.out;
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  json claim = w.Claim(id.substr(7));
  EXPECT_EQ(claim["error"], "cancelled") << claim.dump();
  RunResult wait = stack.Gatos({"wait", id, "--ledger", stack.nats_url(), "--timeout", "5"});
  EXPECT_EQ(wait.exit_code, 1) << wait.out;
  // A worker key may not cancel.
  std::string id2 = stack.PushJob(Job(4));
  c = stack.Gatos({"cancel", id2, "--ledger", stack.nats_url(), "--key", stack.worker_keys()[0]});
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("only its submitter"), std::string::npos) << c.err;
}

TEST(ServeTest, SubmitThroughGatosdAndThroughGitUrl) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  WriteFile(stack.dir().Join("a.yaml"), Job(5));
  RunResult s = stack.Gatos({"submit", stack.dir().Join("a.yaml"), "--ledger", stack.nats_url(), "--sign-key",
                             stack.submitter_key()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  std::string id = s.out.substr(0, s.out.size() - 1);
  EXPECT_EQ(json::parse(stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"}).out)["state"], "pending");
  // Unsigned: refused with the reason, nothing created.
  WriteFile(stack.dir().Join("b.yaml"), Job(6));
  s = stack.Gatos({"submit", stack.dir().Join("b.yaml"), "--ledger", stack.nats_url()});
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_NE(s.err.find("not signed"), std::string::npos) << s.err;
  // Through a git URL (file://): stock git push under the hood.
  s = stack.Gatos({"submit", stack.dir().Join("b.yaml"), "--ledger", "file://" + stack.ledger(), "--sign-key",
                   stack.submitter_key()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  id = s.out.substr(0, s.out.size() - 1);
  EXPECT_EQ(json::parse(stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"}).out)["state"], "pending");
}

TEST(ServeTest, CrashBetweenRefUpdateAndPublishLosesNoJob) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 100).empty());
  // gatosd dies right after the batch is durable (its record in the
  // write-ahead log), before it publishes the offer or writes the batch's
  // pack, log ref and view refs.
  stack.StopGatosd(SIGKILL);
  ASSERT_TRUE(stack.StartGatosd({{"GATOSD_FAULT", "crash-after-adopt"}}));
  WriteFile(stack.dir().Join("a.yaml"), Job(7));
  RunResult s = stack.Gatos({"submit", stack.dir().Join("a.yaml"), "--ledger", stack.nats_url(), "--sign-key",
                             stack.submitter_key(), "--timeout", "3"}, 30);
  EXPECT_NE(s.exit_code, 0);  // no reply: gatosd died
  EXPECT_FALSE(stack.gatosd().running());
  std::string id = stack.Gatos({"job", "id", stack.dir().Join("a.yaml")}).out;
  id.pop_back();
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 500).empty());
  // Also a push while gatosd is down: the hook's own writer first writes
  // the batch the crash left in the write-ahead log.
  stack.StopGatosd(SIGKILL);
  std::string pushed = stack.PushJob(Job(8));
  EXPECT_EQ(json::parse(stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"}).out)["state"], "pending");
  ASSERT_TRUE(stack.StartGatosd());
  auto seen = FetchPending(w.bus(), "observer", 2, 5000);
  std::sort(seen.begin(), seen.end());
  std::vector<std::string> want = {id, pushed};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
}

// SIGKILL at each point of a batch: before and after its record reaches the
// write-ahead log (the commit point), after the pack is written, after the
// log ref moved, after the view refs. Whatever was acknowledged survives, a
// batch in the write-ahead log is written to the repository by the next
// writer (here the hook's, for a push while gatosd is down), the ledger's
// refs replay from its log, and a restarted gatosd offers every pending job.
TEST(ServeTest, CrashAtEachPointOfABatchLeavesAConsistentLedgerAndLosesNothingAcknowledged) {
  Stack stack(AllOffers());
  ASSERT_TRUE(stack.Start());
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 100).empty());
  std::vector<std::string> acknowledged, maybe;
  int n = 40;
  for (const char* point : {"before-wal", "after-wal", "after-pack", "after-log-ref", "after-views"}) {
    stack.StopGatosd(SIGKILL);
    ASSERT_TRUE(stack.StartGatosd({{"GATOSD_FAULT", point}}));
    std::string yaml = Job(++n);
    std::string hex = JobIdHex(*ParseManifest(yaml, "job.yaml"));
    std::string id = "blake3:" + hex;
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto submitter = ReadPrivateKeyFile(stack.submitter_key());
    auto commit = BuildCommitObject(tree, {}, "crash\n\nJob-Id: " + id + "\n", "a", "a@b", SystemNowMs(), &*submitter);
    objects.insert(objects.begin(), *commit);
    auto reply = w.bus().Request(rpc::kSubmit, rpc::EncodeFrame(json{{"commit", commit->id}}, EncodeObjectBatch(objects)),
                                 3000);
    EXPECT_FALSE(reply.ok()) << point << ": gatosd should have died before replying";
    for (int i = 0; i < 100 && stack.gatosd().running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(stack.gatosd().running()) << point;
    // A push while the crashed gatosd is gone is taken by the hook itself;
    // its writer first writes what the crash left in the write-ahead log.
    acknowledged.push_back(stack.PushJob(Job(++n)));
    if (std::string(point) == "before-wal") {
      // Not committed: the job is not in the ledger; a retry is a new submit.
      RunResult st = stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"});
      EXPECT_NE(st.exit_code, 0) << point << ": " << st.out;
    } else {
      maybe.push_back(id);  // committed but never acknowledged: it must be there
      RunResult st = stack.Gatos({"status", id, "--ledger", stack.ledger(), "--json"});
      EXPECT_EQ(st.exit_code, 0) << point << ": " << st.out << st.err;
      if (st.exit_code == 0) {
        EXPECT_EQ(json::parse(st.out)["state"], "pending") << point;
      }
    }
    EXPECT_TRUE(testing::WalHasNoRecordFiles(stack.ledger() + "/gatos/wal")) << point << ": the hook's writer emptied it";
  }
  ASSERT_TRUE(stack.StartGatosd());
  std::vector<std::string> want = acknowledged;
  want.insert(want.end(), maybe.begin(), maybe.end());
  auto seen = FetchPending(w.bus(), "observer", static_cast<int>(want.size()), 10000);
  std::sort(seen.begin(), seen.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
  // The refs are exactly what the log says: every job ref present, and the
  // ledger passes git's own consistency check.
  for (const auto& id : want) {
    RunOptions ro;
    auto ref = testing::Run({"git", "--git-dir", stack.ledger(), "rev-parse", "-q", "--verify",
                             "refs/gatos/jobs/" + id.substr(7) + "/job"}, ro);
    EXPECT_EQ(ref.exit_code, 0) << id;
  }
  auto fsck = testing::Run({"git", "--git-dir", stack.ledger(), "fsck", "--connectivity-only"}, {});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.err;
}

TEST(ServeTest, NatsRestartLosesNoJob) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  {
    TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
    EXPECT_TRUE(FetchPending(w.bus(), "observer", 1, 100).empty());
    std::string before = stack.PushJob(Job(9));
    EXPECT_EQ(FetchPending(w.bus(), "observer", 1, 3000), std::vector<std::string>{before});
  }
  ASSERT_TRUE(stack.nats().Stop());
  std::string during = stack.PushJob(Job(10));  // gatosd cannot publish now
  ASSERT_TRUE(stack.nats().Start());
  TestWorker w(stack.nats_url(), stack.worker_keys()[0]);
  EXPECT_EQ(FetchPending(w.bus(), "observer", 1, 10000), std::vector<std::string>{during});
  EXPECT_TRUE(stack.gatosd().running());
}

}  // namespace
}  // namespace gatos::testing
