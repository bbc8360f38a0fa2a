// Watching a job run (issue 41): `gatos logs` of a finished job, `gatos logs
// -f` of a running one through its worker's live output on NATS, the NATS
// permissions that keep a job's output to its submitter, the bounds that
// keep a flooding job off the bus, and a scan job's progress in
// `gatos status --json`. Real nats-server, gatosd, worker and CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "child_process.h"
#include "gatos/crypto/keys.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/live_output.h"
#include "gatos/model/nats_auth.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Hex(const std::string& id) { return id.substr(id.find(':') + 1); }

// A connection as the ledger key (allowed everything), as gatosd has.
std::unique_ptr<Bus> LedgerBus(Stack& s) {
  auto key = LoadLedgerKey(s.ledger());
  EXPECT_TRUE(key.ok()) << key.status().message();
  BusOptions bo;
  bo.url = s.nats_url();
  bo.max_reconnect = 0;
  SetBusIdentity(&bo, *key);
  auto bus = Bus::Connect(bo);
  EXPECT_TRUE(bus.ok()) << bus.status().message();
  return bus.ok() ? std::move(*bus) : nullptr;
}

// Counts what is published on a set of live subjects.
struct LiveTap {
  std::mutex mu;
  int64_t messages = 0, output_bytes = 0, progress = 0, invalid = 0;
  std::string text;  // output bytes, in order of arrival
  std::unique_ptr<Bus::Subscription> sub;
  void Attach(Bus& bus, const std::string& subject) {
    auto s = bus.Subscribe(subject, [this](Message m) {
      auto parsed = ParseLiveMessage(m.data);
      std::lock_guard<std::mutex> l(mu);
      ++messages;
      if (!parsed.ok()) {
        ++invalid;
      } else if (parsed->kind == LiveKind::kOutput) {
        output_bytes += static_cast<int64_t>(parsed->data.size());
        if (text.size() < (1 << 20)) text += parsed->data;
      } else {
        ++progress;
      }
    });
    ASSERT_TRUE(s.ok()) << s.status().message();
    sub = std::move(*s);
    ASSERT_TRUE(bus.Flush(2000).ok());
  }
};

std::string State(Stack& s, const std::string& id) {
  RunResult st = s.Gatos({"status", id, "--ledger", s.nats_url(), "--json"});
  json j = json::parse(st.out, nullptr, false);
  return j.is_object() ? j.value("state", "") : "";
}

TEST(LiveOutputE2E, LogsFollowShowsLinesBeforeTheJobEndsAndExitsWithItsStatus) {
  StackOptions o;
  o.nats_auth = true;
  Stack s(o);
  ASSERT_TRUE(s.Start());
  s.StartWorker(0, {"--sandbox", "off"});
  std::string id = s.PushJob(
      "command: [\"/bin/sh\", \"-c\", \"for i in $(seq 1 30); do echo line $i; sleep 0.1; done; "
      "exit 3\"]\n"
      "timeout: 60\n");
  std::string hex = Hex(id);
  auto ledger_bus = LedgerBus(s);
  ASSERT_TRUE(ledger_bus);

  ChildProcess follow;
  std::string error;
  std::map<std::string, std::string> env = s.env();  // GATOS_NATS_KEY: the submitter
  ASSERT_TRUE(follow.Start(
      {BinaryPath("gatos"), "logs", id, "-f", "--ledger", s.nats_url(), "--timeout", "90"}, env,
      s.dir().Join("follow.log"), &error))
      << error;
  // Live output is not stored: a follower that subscribes after the job's
  // first lines starts later, with a note of the gap (checked below).
  ASSERT_TRUE(follow.WaitForLog("line ", 30000)) << follow.log() << s.worker(0)->log();
  // Shown live: the job is still running (it prints for 3 s).
  EXPECT_EQ(State(s, id), "claimed");
  std::string owner;
  {
    RunResult st = s.Gatos({"status", id, "--ledger", s.nats_url(), "--json"});
    owner = Hex(json::parse(st.out).value("submitter", "ed25519:"));
  }
  ASSERT_EQ(owner.size(), 64u);
  // Anyone allowed to publish may send junk on the job's subject: ignored.
  for (const std::string& junk :
       {std::string("\x1b[2J not json"), std::string("{\"v\":1}"), std::string(60000, '{')}) {
    ASSERT_TRUE(ledger_bus->Publish(LiveSubject(owner, hex, LiveKind::kOutput), junk).ok());
  }
  EXPECT_EQ(follow.Stop(0, 60000), 1);  // the job failed (exit 3): as gatos wait
  std::string log = follow.log();
  // Every line from the first one shown on, once and in order; lines before
  // it only if nothing was missed at the start.
  size_t first = log.find("line ");
  ASSERT_NE(first, std::string::npos) << log;
  int from = std::atoi(log.c_str() + first + 5);
  ASSERT_GE(from, 1) << log;
  if (from > 1) EXPECT_NE(log.find("not shown live"), std::string::npos) << log;
  size_t at = 0;
  for (int i = from; i <= 30; ++i) {
    std::string line = "line " + std::to_string(i) + "\n";
    size_t pos = log.find(line, at);
    ASSERT_NE(pos, std::string::npos) << "missing " << line << log;
    EXPECT_EQ(log.find(line, pos + 1), std::string::npos) << "shown twice: " << line << log;
    at = pos + line.size();
  }
  EXPECT_NE(log.find("failed, exit code 3"), std::string::npos) << log;
  EXPECT_EQ(log.find("not json"), std::string::npos) << log;
  EXPECT_EQ(log.find("2J"), std::string::npos) << log;

  // The finished job's output from its result: through gatosd and from the ledger directory.
  for (const std::string& ledger : {s.nats_url(), s.ledger()}) {
    RunResult logs = s.Gatos({"logs", id, "--ledger", ledger});
    EXPECT_EQ(logs.exit_code, 0) << logs.err;
    EXPECT_EQ(logs.out.substr(0, 14), "line 1\nline 2\n") << ledger;
    EXPECT_NE(logs.out.find("line 30\n"), std::string::npos);
    EXPECT_EQ(logs.err, "") << ledger;  // not cut
  }
  RunResult j = s.Gatos({"logs", id, "--ledger", s.ledger(), "--both", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json lj = json::parse(j.out);
  EXPECT_EQ(lj["attempt"], 1);
  EXPECT_EQ(lj["status"], "failed");
  EXPECT_EQ(lj["exit_code"], 3);
  EXPECT_EQ(lj["stdout"]["truncated"], false);
  EXPECT_EQ(lj["stderr"]["size"], 0);
  RunResult none = s.Gatos({"logs", id, "--ledger", s.ledger(), "--attempt", "2"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("no attempt 2"), std::string::npos) << none.err;
}

TEST(LiveOutputE2E, AnotherSubmittersKeyIsRefusedTheStream) {
  StackOptions o;
  o.nats_auth = true;
  Stack s(o);
  ASSERT_TRUE(s.Start());
  s.StartWorker(0, {"--sandbox", "off"});
  std::string id = s.PushJob(
      "command: [\"/bin/sh\", \"-c\", \"while true; do echo alice-secret-line; sleep 0.1; "
      "done\"]\ntimeout: 60\n");
  ASSERT_TRUE(PollFor(30000, [&] { return State(s, id) == "claimed"; })) << s.worker(0)->log();
  // Bob may submit jobs of his own, and so connect to NATS.
  std::string bob = s.dir().Join("bob");
  ASSERT_EQ(s.Gatos({"keygen", "-f", bob}).exit_code, 0);
  ASSERT_EQ(s.Gatos({"policy", "allow-submitter", "--ledger", s.ledger(), bob + ".pub"}).exit_code,
            0);
  auto bob_key = ReadPrivateKeyFile(bob);
  ASSERT_TRUE(bob_key.ok());
  const std::string nkey = NkeyUserPublic(bob_key->public_key());
  ASSERT_TRUE(
      PollFor(10000, [&] { return ReadFile(s.nats_auth_file()).find(nkey) != std::string::npos; }));
  ASSERT_TRUE(s.gatosd().WaitForLog("asked nats-server to reload", 5000)) << s.gatosd().log();

  RunOptions ro;
  ro.env = s.env();
  ro.env["GATOS_NATS_KEY"] = bob;
  ro.timeout_seconds = 60;
  // Bob can see that the job exists, once his key is in the server's configuration...
  ASSERT_TRUE(PollFor(10000, [&] {
    return testing::Run({BinaryPath("gatos"), "status", id, "--ledger", s.nats_url()}, ro)
               .exit_code == 0;
  }));
  // ...but not its output.
  RunResult r = testing::Run(
      {BinaryPath("gatos"), "logs", id, "-f", "--ledger", s.nats_url(), "--timeout", "30"}, ro);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("refused to show this job's output"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("alice-secret-line"), std::string::npos) << r.out;

  // Not even by subscribing by hand, to the job or to everything.
  BusOptions bo;
  bo.url = s.nats_url();
  bo.max_reconnect = 0;
  std::mutex mu;
  std::vector<std::string> errors;
  bo.on_async_error = [&](const std::string& e) {
    std::lock_guard<std::mutex> l(mu);
    errors.push_back(e);
  };
  SetBusIdentity(&bo, *bob_key);
  auto bus = Bus::Connect(bo);
  ASSERT_TRUE(bus.ok()) << bus.status().message();
  std::atomic<int> got{0};
  auto sub = (*bus)->Subscribe("gatos.live.>", [&](Message) { ++got; });
  ASSERT_TRUE(sub.ok());
  EXPECT_TRUE(PollFor(10000, [&] {
    std::lock_guard<std::mutex> l(mu);
    return !errors.empty();
  }));
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_FALSE(errors.empty());
    EXPECT_NE(errors[0].find("ermission"), std::string::npos) << errors[0];
  }
  EXPECT_EQ(got.load(), 0);

  // Alice, its submitter, sees it (the positive control, on the same running job).
  ChildProcess alice;
  std::string error;
  ASSERT_TRUE(alice.Start({BinaryPath("gatos"), "logs", id, "-f", "--ledger", s.nats_url()},
                          s.env(), s.dir().Join("alice.log"), &error));
  EXPECT_TRUE(alice.WaitForLog("alice-secret-line\n", 30000)) << alice.log();
  alice.Stop(SIGTERM);
}

TEST(LiveOutputE2E, AJobPrinting100MBDoesNotFloodTheBusAndItsResultIsUnaffected) {
  Stack s;
  ASSERT_TRUE(s.Start());
  auto ledger_bus = LedgerBus(s);
  ASSERT_TRUE(ledger_bus);
  LiveTap tap;
  tap.Attach(*ledger_bus, "gatos.live.>");
  s.StartWorker(0, {"--sandbox", "off"});
  const auto submitted = Clock::now();
  std::string id = s.PushJob(
      "command: [\"/bin/sh\", \"-c\", \"head -c 100000000 /dev/zero | tr '\\\\0' x; echo done "
      ">&2\"]\ntimeout: 120\n");
  RunResult w = s.Gatos({"wait", id, "--ledger", s.nats_url(), "--timeout", "120"}, 150);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << s.worker(0)->log();
  // Something was shown live, and never more than the budget allows
  // (live_output_buffer.h: 64 KiB burst + 32 KiB/s; 10 messages + 10/s),
  // at any moment since the job was submitted.
  ASSERT_TRUE(PollFor(10000, [&] {
    std::lock_guard<std::mutex> l(tap.mu);
    return tap.output_bytes > 0;
  }));
  double secs = std::chrono::duration<double>(Clock::now() - submitted).count();
  {
    std::lock_guard<std::mutex> l(tap.mu);
    EXPECT_LE(tap.output_bytes, 64 * 1024 + static_cast<int64_t>(32 * 1024 * secs)) << secs << " s";
    EXPECT_LE(tap.messages, 10 + static_cast<int64_t>(10 * secs)) << secs << " s";
    EXPECT_EQ(tap.invalid, 0);
    EXPECT_EQ(tap.text.find_first_not_of('x'), std::string::npos);
  }
  // The result: the first 1 MiB (the default cap), marked as cut; stderr whole.
  RunResult logs = s.Gatos({"logs", id, "--ledger", s.ledger()});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, std::string(1 << 20, 'x'));
  EXPECT_NE(
      logs.err.find("stdout was cut at the output cap: the result keeps its first 1048576 bytes"),
      std::string::npos)
      << logs.err;
  RunResult err = s.Gatos({"logs", id, "--ledger", s.nats_url(), "--stderr"});
  EXPECT_EQ(err.out, "done\n");
  // The same through gatosd, a page at a time.
  RunResult via_nats = s.Gatos({"logs", id, "--ledger", s.nats_url()});
  EXPECT_EQ(via_nats.out.size(), size_t{1} << 20);
  EXPECT_EQ(via_nats.out, logs.out);
}

TEST(LiveOutputE2E, AScanJobsProgressReachesStatusWhileItRunsAndItPublishesNoLines) {
  Stack s;
  ASSERT_TRUE(s.Start());
  std::string repos = s.dir().Join("repos");
  std::string repo = repos + "/many";
  RunOptions ro;
  ro.env = s.env();
  ASSERT_EQ(testing::Run({"mkdir", "-p", repos}, ro).exit_code, 0);
  ASSERT_EQ(testing::Run({"git", "init", "-q", "-b", "main", repo}, ro).exit_code, 0);
  for (int i = 0; i < 300; ++i)
    WriteFile(repo + "/f" + std::to_string(i) + ".txt", "file " + std::to_string(i) + "\n");
  RunOptions in_repo = ro;
  in_repo.cwd = repo;
  ASSERT_EQ(testing::Run({"git", "add", "."}, in_repo).exit_code, 0);
  ASSERT_EQ(testing::Run({"git", "commit", "-q", "-m", "many files"}, in_repo).exit_code, 0);
  auto ledger_bus = LedgerBus(s);
  ASSERT_TRUE(ledger_bus);
  LiveTap tap;
  tap.Attach(*ledger_bus, "gatos.live.>");
  s.StartWorker(0, {"--ro-bind", repos});
  // Paced (SCAN_PACE_MS) so that it runs for seconds.
  std::string id = s.PushJob("command: [\"gatos-scan\"]\nargs: [\"--repo\", \"" + repo +
                             "\"]\nenv: {SCAN_PACE_MS: \"30\"}\ntimeout: 120\n");
  json seen;
  ASSERT_TRUE(PollFor(60000, [&] {
    RunResult st = s.Gatos({"status", id, "--ledger", s.nats_url(), "--json"});
    json j = json::parse(st.out, nullptr, false);
    if (!j.is_object() || !j.contains("progress")) return false;
    seen = j;
    return true;
  })) << s.worker(0)->log();
  EXPECT_EQ(seen["state"], "claimed") << seen.dump();
  const json& p = seen["progress"];
  EXPECT_EQ(p["attempt"], 1);
  ASSERT_TRUE(p["counters"].is_array());
  bool objects = false;
  for (const auto& c : p["counters"]) {
    if (c["name"] == "objects") {
      objects = true;
      EXPECT_GT(c.value("total", 0), 0) << p.dump();
      EXPECT_LE(c.value("done", 0), c.value("total", 0));
    }
  }
  EXPECT_TRUE(objects) << p.dump();
  RunResult human = s.Gatos({"status", id, "--ledger", s.nats_url()});
  EXPECT_TRUE(human.out.find("progress: objects") != std::string::npos || State(s, id) != "claimed")
      << human.out;

  RunResult w = s.Gatos({"wait", id, "--ledger", s.nats_url(), "--timeout", "120"}, 150);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << s.worker(0)->log();
  // A finished job's status has no progress.
  RunResult done = s.Gatos({"status", id, "--ledger", s.nats_url(), "--json"});
  EXPECT_FALSE(json::parse(done.out).contains("progress")) << done.out;
  std::lock_guard<std::mutex> l(tap.mu);
  EXPECT_GT(tap.progress, 0);
  EXPECT_EQ(tap.output_bytes, 0) << tap.text;  // progress only, never lines
}

TEST(LiveOutputE2E, GatosdSurvivesHostileProgressReports) {
  Stack s;
  ASSERT_TRUE(s.Start());
  auto bus = LedgerBus(s);
  ASSERT_TRUE(bus);
  const std::string job(64, 'c');
  LiveMessage lie;
  lie.job_hex = job;
  lie.kind = LiveKind::kProgress;
  lie.progress.counters = {{"objects", 1, 2, 0}};
  for (const std::string& data :
       {std::string(""), std::string("\x00\xff garbage", 10), std::string(1 << 20, '['),
        std::string(
            "{\"v\":1,\"kind\":\"progress\",\"counters\":[{\"name\":\"x\",\"done\":1e400}]}"),
        EncodeLiveMessage(lie)}) {
    ASSERT_TRUE(bus->Publish("gatos.live.nobody." + job + ".progress", data).ok());
    ASSERT_TRUE(bus->Publish("gatos.live.x.y.progress", data).ok());
  }
  ASSERT_TRUE(bus->Flush(2000).ok());
  // Still serving; a job that does not exist has no status to decorate.
  RunResult st = s.Gatos({"status", "blake3:" + job, "--ledger", s.nats_url()});
  EXPECT_NE(st.exit_code, 0);
  EXPECT_NE(st.err.find("no job"), std::string::npos) << st.err;
  EXPECT_TRUE(s.gatosd().running()) << s.gatosd().log();
  RunResult ls = s.Gatos({"ls", "--ledger", s.nats_url()});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
}

}  // namespace
}  // namespace gatos::testing
