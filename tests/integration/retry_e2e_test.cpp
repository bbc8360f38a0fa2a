// Retries, dead jobs and deliberate re-runs with real processes: nats-server,
// gatosd serve, gatos-worker (unsandboxed, so a job's state on disk decides
// whether it fails), jobs pushed with stock git. Backoff is asserted from the
// ledger's signed log (Log-Time of the commits that recorded each attempt and
// the next claim), never from the test's own clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/ledger.h"
#include "gatos/model/clock.h"
#include "gatos/model/log_format.h"
#include "gatos/model/policy.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/trailers.h"
#include "gatos/nats/bus.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

// One logged transition of a job, as the ledger's signed log records it.
struct Logged {
  int64_t seq = 0;
  int64_t time_ms = 0;  // Log-Time of the log commit
  std::string log_commit;
  std::string kind;
  std::string ref;
  std::string new_id;
};

class RetryE2ETest : public ::testing::Test {
 protected:
  void StartStack(const std::vector<std::string>& policy, int workers = 2) {
    stack_ = std::make_unique<Stack>(StackOptions{.workers = workers});
    ASSERT_TRUE(stack_->Start());
    std::vector<std::string> args = {"policy", "set", "--ledger", stack_->ledger()};
    args.insert(args.end(), policy.begin(), policy.end());
    RunResult r = stack_->Gatos(args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int i = 0; i < workers; ++i) stack_->StartWorker(i, {"--sandbox", "off"});
  }
  RunResult Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "--git-dir", stack_->ledger()};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions ro;
    ro.env = stack_->env();
    return testing::Run(argv, ro);
  }
  std::string Ref(const std::string& id, const std::string& leaf) {
    return TrimEnd(Git({"rev-parse", "--verify", "-q", JobRef(id.substr(7), leaf)}).out);
  }
  std::string Trailer(const std::string& commit, const std::string& key) {
    return TrimEnd(Git({"log", "-1", "--format=%(trailers:key=" + key + ",valueonly)", commit}).out);
  }
  json Status(const std::string& id) {
    RunResult r = stack_->Gatos({"status", id, "--ledger", stack_->nats_url(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json::object();
  }
  RunResult Wait(const std::string& id, int seconds = 60) {
    return stack_->Gatos({"wait", id, "--ledger", stack_->nats_url(), "--timeout", std::to_string(seconds)},
                         seconds + 30);
  }
  // A job that counts its runs in `counter` and fails until run `succeed_at`
  // (0: always fails, with exit code 7).
  std::string CountingJob(const std::string& counter, int succeed_at, const std::string& extra = "") {
    std::string check = succeed_at > 0 ? "test $n -ge " + std::to_string(succeed_at) : "exit 7";
    return "command: [\"/bin/sh\", \"-c\", \"n=$(cat '" + counter + "' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '" +
           counter + "'; echo run $n; " + check + "\"]\ntimeout: 30\n" + extra;
  }
  PolicySettings Settings() {
    auto ledger = Ledger::Open(stack_->ledger());
    EXPECT_TRUE(ledger.ok());
    auto p = (*ledger)->ReadPolicy();
    EXPECT_TRUE(p.ok());
    return p->settings;
  }
  // Every transition of job `id` in the log, oldest first.
  std::vector<Logged> LogOf(const std::string& id) {
    std::string hex = id.substr(7);
    auto ledger = Ledger::Open(stack_->ledger());
    EXPECT_TRUE(ledger.ok()) << ledger.status().message();
    std::vector<Logged> out;
    auto head = (*ledger)->ResolveRef(kLogRef);
    std::string at = head.ok() ? *head : "";
    while (!at.empty()) {
      auto c = (*ledger)->ReadCommit(at);
      EXPECT_TRUE(c.ok()) << c.status().message();
      if (!c.ok()) break;
      auto info = ParseLogMessage(c->message);
      EXPECT_TRUE(info.ok()) << info.status().message();
      auto batch = (*ledger)->ReadFileAtCommit(at, "batch", 64 << 20);
      EXPECT_TRUE(batch.ok()) << batch.status().message();
      auto entries = DecodeBatch(batch.ok() ? *batch : "");
      EXPECT_TRUE(entries.ok()) << entries.status().message();
      std::vector<Logged> here;
      for (const auto& e : entries.ok() ? *entries : std::vector<LogEntry>{}) {
        if (e.job_hex != hex) continue;
        here.push_back({info->seq, info->time_ms, at, std::string(LogKindName(e.kind)), e.ref, e.new_id});
      }
      out.insert(out.begin(), here.begin(), here.end());
      // The first log commit's parent is the initial policy commit.
      at = c->parents.empty() || info->seq <= 1 ? "" : c->parents[0];
    }
    return out;
  }
  // Transition kinds (one per kind and log commit), oldest first; renewals left out.
  static std::vector<std::string> Kinds(const std::vector<Logged>& log) {
    std::vector<std::string> k;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i].kind == "renew") continue;
      if (i > 0 && log[i].kind == log[i - 1].kind && log[i].log_commit == log[i - 1].log_commit) continue;
      k.push_back(log[i].kind);
    }
    return k;
  }
  // For each attempt n that the ledger recorded as retried (automatically),
  // the time from that record to the next claim must be at least the
  // policy's smallest backoff before attempt n+1. Returns the number checked.
  int ExpectBackoffRespected(const std::vector<Logged>& log, const PolicySettings& ps) {
    int checked = 0, attempt = 1;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i].kind == "retry") ++attempt;  // a deliberate re-run opens the next attempt at once
      if (log[i].kind != "attempt") continue;
      ++attempt;
      auto next = std::find_if(log.begin() + static_cast<long>(i) + 1, log.end(),
                               [](const Logged& l) { return l.kind == "claim"; });
      EXPECT_NE(next, log.end()) << "attempt " << attempt << " was never claimed";
      if (next == log.end()) break;
      int64_t waited = next->time_ms - log[i].time_ms;
      EXPECT_GE(waited, RetryBackoffMinMs(ps, attempt))
          << "attempt " << attempt << " was claimed " << waited << " ms after attempt " << attempt - 1 << " ended";
      ++checked;
    }
    return checked;
  }
  // Checks the worker's signature of a result commit with stock git against
  // the policy's worker list.
  void ExpectSignedByWorker(const std::string& commit) {
    std::string signers = stack_->dir().Join("workers.allowed");
    WriteFile(signers, Git({"show", "refs/gatos/policy:workers"}).out);
    RunResult v = Git({"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + signers, "verify-commit",
                       commit});
    EXPECT_EQ(v.exit_code, 0) << commit << ": " << v.err;
    EXPECT_NE(v.err.find("Good \"git\" signature"), std::string::npos) << v.err;
  }
  // Nats-Msg-Id of every pending offer of job `id` in the stream, in order.
  std::vector<std::string> PendingMsgIds(const std::string& id) {
    BusOptions bo;
    bo.url = stack_->nats_url();
    auto bus = Bus::Connect(bo);
    EXPECT_TRUE(bus.ok()) << bus.status().message();
    if (!bus.ok()) return {};
    Bus::ConsumerConfig cc;
    cc.stream = rpc::kStream;
    cc.durable = "retry-test-reader";
    cc.filter_subject = rpc::kPendingSubject;
    auto consumer = (*bus)->PullSubscribe(cc);
    EXPECT_TRUE(consumer.ok()) << consumer.status().message();
    if (!consumer.ok()) return {};
    std::vector<std::string> ids;
    // Read until the consumer has nothing left: every message delivered to
    // this reader and acknowledged by it (after it was looked at below).
    auto all_read = [&] {
      auto st = (*bus)->GetConsumerState(rpc::kStream, cc.durable);
      return st.ok() && st->num_pending == 0 && st->num_ack_pending == 0;
    };
    bool done = false;
    for (int round = 0; round < 100 && !(done = all_read()); ++round) {
      auto msgs = (*consumer)->Fetch(50, 300);
      if (!msgs.ok()) continue;
      for (auto& m : *msgs) {
        auto p = rpc::DecodePending(m->data());
        if (p.ok() && "blake3:" + p->job_hex == id) ids.push_back(m->header("Nats-Msg-Id"));
        EXPECT_TRUE(m->Ack().ok());
      }
    }
    EXPECT_TRUE(done) << "the stream still holds offers this reader has not read";
    return ids;
  }
  std::string Counter(const std::string& path) { return TrimEnd(ReadFile(path)); }

  std::unique_ptr<Stack> stack_;
};

TEST_F(RetryE2ETest, JobFailingTwiceSucceedsAtAttemptThreeWithThreeSignedResults) {
  StartStack({"max_attempts=3", "retry_base_ms=1000", "retry_factor=2", "retry_jitter_pct=20"});
  std::string counter = stack_->dir().Join("counter");
  std::string id = stack_->PushJob(CountingJob(counter, 3));
  // `gatos wait` started before the first attempt: it waits through both
  // failed attempts and returns the final state.
  RunResult w = Wait(id);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << stack_->worker(0)->log() << stack_->gatosd().log();
  EXPECT_NE(w.out.find("succeeded"), std::string::npos) << w.out;
  EXPECT_EQ(Counter(counter), "3");

  json st = Status(id);
  EXPECT_EQ(st["state"], "succeeded") << st.dump();
  EXPECT_EQ(st["attempt"], 3);
  EXPECT_FALSE(st.value("dead", false));
  ASSERT_EQ(st["attempts"].size(), 3u) << st.dump();
  std::vector<std::string> commits = {Ref(id, "attempts/1"), Ref(id, "attempts/2"), Ref(id, "result")};
  std::set<std::string> distinct(commits.begin(), commits.end());
  EXPECT_EQ(distinct.size(), 3u);
  int64_t last_epoch = 0;
  for (int n = 1; n <= 3; ++n) {
    const json& a = st["attempts"][n - 1];
    const std::string& c = commits[n - 1];
    ASSERT_FALSE(c.empty()) << "no signed result for attempt " << n;
    EXPECT_EQ(a["n"], n);
    EXPECT_EQ(a["result_commit"], c);
    EXPECT_EQ(a["status"], n < 3 ? "failed" : "succeeded");
    EXPECT_EQ(Trailer(c, "Status"), n < 3 ? "failed" : "succeeded");
    EXPECT_EQ(Git({"show", c + ":stdout"}).out, "run " + std::to_string(n) + "\n");
    EXPECT_TRUE(a.contains("worker") && a.contains("started") && a.contains("finished")) << a.dump();
    ExpectSignedByWorker(c);
    int64_t epoch = std::stoll(Trailer(c, "Lease-Epoch"));
    EXPECT_GT(epoch, last_epoch) << "epochs go up with attempts";
    last_epoch = epoch;
    EXPECT_TRUE(a.contains("claimed")) << a.dump();
    if (n > 1) {
      EXPECT_GE(a.value("waited_ms", int64_t{-1}), RetryBackoffMinMs(Settings(), n)) << a.dump();
    }
  }

  // The log: every attempt recorded, each retry claimed only after its backoff.
  std::vector<Logged> log = LogOf(id);
  EXPECT_EQ(Kinds(log), (std::vector<std::string>{"submit", "claim", "attempt", "claim", "attempt", "claim", "result"}));
  EXPECT_EQ(ExpectBackoffRespected(log, Settings()), 2);

  // Each attempt was offered under its own message id: a republish of attempt
  // 2 is never dropped as a duplicate of attempt 1.
  std::vector<std::string> msg_ids = PendingMsgIds(id);
  for (int n = 1; n <= 3; ++n) {
    std::string want = id.substr(7) + ".a" + std::to_string(n) + ".";
    EXPECT_TRUE(std::any_of(msg_ids.begin(), msg_ids.end(), [&](const std::string& m) { return m.rfind(want, 0) == 0; }))
        << "no offer of attempt " << n << " among " << json(msg_ids).dump();
  }
  EXPECT_EQ(std::set<std::string>(msg_ids.begin(), msg_ids.end()).size(), msg_ids.size());

  // Human status names the attempts.
  RunResult human = stack_->Gatos({"status", id, "--ledger", stack_->nats_url()});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("attempt 3 of 3"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("attempt 1  failed"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("attempt 2  failed"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("attempt 3  succeeded"), std::string::npos) << human.out;
}

TEST_F(RetryE2ETest, AlwaysFailingJobEndsDeadAfterMaxAttemptsAndRetryRunsItOnceMore) {
  StartStack({"max_attempts=3", "retry_base_ms=400", "retry_factor=3", "retry_jitter_pct=50"});
  std::string counter = stack_->dir().Join("counter");
  std::string id = stack_->PushJob(CountingJob(counter, 0));
  RunResult w = Wait(id);
  EXPECT_EQ(w.exit_code, 1) << w.out << w.err;
  EXPECT_EQ(Counter(counter), "3");
  json st = Status(id);
  EXPECT_EQ(st["state"], "failed") << st.dump();
  EXPECT_EQ(st["attempt"], 3);
  EXPECT_EQ(st["dead"], true);
  EXPECT_FALSE(st.contains("not_before")) << "a dead job has no next attempt";
  ASSERT_EQ(st["attempts"].size(), 3u);
  std::vector<Logged> log = LogOf(id);
  EXPECT_EQ(Kinds(log), (std::vector<std::string>{"submit", "claim", "attempt", "claim", "attempt", "claim", "result"}));
  EXPECT_EQ(ExpectBackoffRespected(log, Settings()), 2);

  // Listed as dead; the JSON listing says so too.
  RunResult ls = stack_->Gatos({"ls", "--ledger", stack_->nats_url(), "--state", "dead", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  json listed = json::parse(ls.out);
  ASSERT_EQ(listed["jobs"].size(), 1u) << ls.out;
  EXPECT_EQ(listed["jobs"][0]["job"], id);
  EXPECT_EQ(listed["counts"]["dead"], 1);
  RunResult ls_human = stack_->Gatos({"ls", "--ledger", stack_->nats_url(), "--state", "dead"});
  EXPECT_NE(ls_human.out.find(id), std::string::npos) << ls_human.out;
  EXPECT_NE(ls_human.out.find("dead"), std::string::npos) << ls_human.out;

  // Nobody but the ledger writes attempts: a pushed "attempt" is refused.
  RunOptions ro;
  ro.env = stack_->env();
  RunResult push = testing::Run({"git", "-C", stack_->dir().Join("work"), "push", stack_->push_url(),
                                 "HEAD:" + JobRef(id.substr(7), "attempts/4")},
                                ro);
  EXPECT_NE(push.exit_code, 0);
  EXPECT_NE(push.err.find("written by the ledger only"), std::string::npos) << push.err;
  EXPECT_TRUE(Ref(id, "attempts/4").empty());

  // A key that is neither the submitter nor an operator may not re-run it.
  std::string stranger = stack_->dir().Join("mallory");
  ASSERT_EQ(stack_->Gatos({"keygen", "-f", stranger}).exit_code, 0);
  RunResult refused = stack_->Gatos({"retry", id, "--ledger", stack_->nats_url(), "--key", stranger});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("may not re-run"), std::string::npos) << refused.err;
  EXPECT_EQ(Status(id)["attempt"], 3);

  // The submitter may: one more attempt (past max_attempts: not retried again).
  RunResult again = stack_->Gatos({"retry", id, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("attempt 4"), std::string::npos) << again.out;
  w = Wait(id);
  EXPECT_EQ(w.exit_code, 1) << w.out << w.err;
  EXPECT_EQ(Counter(counter), "4");
  st = Status(id);
  EXPECT_EQ(st["state"], "failed");
  EXPECT_EQ(st["attempt"], 4);
  EXPECT_EQ(st["dead"], true);
  EXPECT_EQ(st["attempts"].size(), 4u);
  EXPECT_FALSE(Ref(id, "attempts/3").empty()) << "the re-opened result is kept as attempt 3";
  EXPECT_FALSE(Ref(id, "retry").empty());
  log = LogOf(id);
  EXPECT_EQ(Kinds(log), (std::vector<std::string>{"submit", "claim", "attempt", "claim", "attempt", "claim", "result",
                                                  "retry", "claim", "result"}));

  // An operator named in the policy may re-run it too. The signed request
  // names the attempt it opens: replayed, it re-opens nothing.
  std::string op = stack_->dir().Join("operator");
  ASSERT_EQ(stack_->Gatos({"keygen", "-f", op}).exit_code, 0);
  RunResult allow = stack_->Gatos({"policy", "allow-operator", "--ledger", stack_->ledger(), op + ".pub"});
  ASSERT_EQ(allow.exit_code, 0) << allow.err;
  auto op_key = ReadPrivateKeyFile(op);
  ASSERT_TRUE(op_key.ok());
  UserRequest req = SignUserRequest(*op_key, id.substr(7), true, 5, SystemNowMs());
  BusOptions bo;
  bo.url = stack_->nats_url();
  auto bus = Bus::Connect(bo);
  ASSERT_TRUE(bus.ok()) << bus.status().message();
  auto first = (*bus)->Request(rpc::kRetry, rpc::Dump(rpc::UserRequestJson(req)), 10000);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(json::parse(first->data).value("ok", false)) << first->data;
  EXPECT_EQ(Wait(id).exit_code, 1);
  EXPECT_EQ(Counter(counter), "5");
  auto replay = (*bus)->Request(rpc::kRetry, rpc::Dump(rpc::UserRequestJson(req)), 10000);
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  json rj = json::parse(replay->data);
  EXPECT_FALSE(rj.value("ok", true)) << replay->data;
  EXPECT_EQ(rj.value("error", ""), "lost_race") << replay->data;
  EXPECT_EQ(Status(id)["attempt"], 5);
  EXPECT_EQ(Status(id)["state"], "failed");
}

TEST_F(RetryE2ETest, TimedOutAttemptIsRetried) {
  StartStack({"max_attempts=2", "retry_base_ms=200", "retry_jitter_pct=0"}, 1);
  std::string counter = stack_->dir().Join("counter");
  // Run 1 sleeps past its 1 s timeout; run 2 succeeds.
  std::string id = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", \"n=$(cat '" + counter + "' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '" +
      counter + "'; if [ $n -lt 2 ]; then exec sleep 303; fi\"]\ntimeout: 1\n");
  RunResult w = Wait(id);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  json st = Status(id);
  EXPECT_EQ(st["state"], "succeeded") << st.dump();
  ASSERT_EQ(st["attempts"].size(), 2u);
  EXPECT_EQ(st["attempts"][0]["status"], "timed-out");
}

TEST_F(RetryE2ETest, CancelledJobIsNotRetried) {
  StartStack({"max_attempts=3", "retry_base_ms=100"}, 1);
  std::string counter = stack_->dir().Join("counter");
  // Traps the stop and exits non-zero: it still ends aborted, never retried.
  std::string id = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", \"echo 1 >> '" + counter + "'; trap 'exit 9' TERM; sleep 304 & wait\"]\n"
      "timeout: 60\n");
  for (int i = 0; i < 200 && Status(id).value("state", "") != "claimed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Status(id)["state"], "claimed");
  RunResult c = stack_->Gatos({"cancel", id, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  RunResult w = Wait(id);
  EXPECT_EQ(w.exit_code, 1);
  json st = Status(id);
  EXPECT_EQ(st["state"], "aborted") << st.dump();
  EXPECT_EQ(st["attempt"], 1);
  EXPECT_FALSE(st.value("dead", false));
  EXPECT_EQ(st["attempts"].size(), 1u);
  EXPECT_EQ(Counter(counter), "1");
  EXPECT_EQ(Kinds(LogOf(id)), (std::vector<std::string>{"submit", "claim", "cancel", "result"}));
  // Nor can it be re-run on purpose: only failed and timed-out jobs can.
  RunResult r = stack_->Gatos({"retry", id, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("only a job that ended failed or timed-out"), std::string::npos) << r.err;
}

TEST_F(RetryE2ETest, PendingCancelledJobIsNotRetried) {
  // No worker: the job is cancelled while pending and ends aborted at once.
  StartStack({"max_attempts=3", "retry_base_ms=100"}, 0);
  std::string id = stack_->PushJob("command: [\"/bin/true\"]\ntimeout: 5\n");
  RunResult c = stack_->Gatos({"cancel", id, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(Wait(id, 10).exit_code, 1);
  EXPECT_EQ(Status(id)["state"], "aborted");
  RunResult r = stack_->Gatos({"retry", id, "--ledger", stack_->nats_url(), "--key", stack_->submitter_key()});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(RetryE2ETest, PolicyRefusedResultIsNotRetried) {
  // The policy's result limit refuses the job's outputs: the worker reports a
  // failed result with the reason, and the same job would meet the same
  // refusal, so it is not retried.
  StartStack({"max_attempts=3", "retry_base_ms=100", "max_result_bytes=4096"}, 1);
  std::string counter = stack_->dir().Join("counter");
  std::string id = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\", \"echo 1 >> '" + counter +
      "'; head -c 65536 /dev/zero > $GATOS_OUTPUT_DIR/big\"]\ntimeout: 30\n");
  RunResult w = Wait(id);
  EXPECT_EQ(w.exit_code, 1) << w.out << w.err << stack_->worker(0)->log();
  json st = Status(id);
  EXPECT_EQ(st["state"], "failed") << st.dump();
  EXPECT_EQ(st["attempt"], 1);
  EXPECT_EQ(st["attempts"].size(), 1u);
  EXPECT_FALSE(st["attempts"][0].value("reason", "").empty()) << st.dump();
  EXPECT_EQ(Counter(counter), "1");
  EXPECT_EQ(Kinds(LogOf(id)), (std::vector<std::string>{"submit", "claim", "result"}));
}

TEST_F(RetryE2ETest, GatosdKilledDuringBackoffStillRetriesAfterIt) {
  StartStack({"max_attempts=2", "retry_base_ms=1500", "retry_jitter_pct=0"}, 1);
  std::string counter = stack_->dir().Join("counter");
  std::string id = stack_->PushJob(CountingJob(counter, 2));
  for (int i = 0; i < 400 && Status(id).value("attempt", 0) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(Status(id)["attempt"], 2);
  stack_->StopGatosd(SIGKILL);
  ASSERT_TRUE(stack_->StartGatosd());
  RunResult w = Wait(id);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  EXPECT_EQ(Counter(counter), "2");
  EXPECT_EQ(ExpectBackoffRespected(LogOf(id), Settings()), 1);
}

}  // namespace
}  // namespace gatos::testing
