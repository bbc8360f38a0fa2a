// A hostile bus against the real processes (nats-server, gatosd,
// gatos-worker, gatos up): malformed and malicious requests on every RPC
// subject get an error reply and gatosd keeps serving; an unsigned cancel
// notice stops nothing; with NATS authentication, only the policy's keys get
// in, and the policy's changes reach nats-server while it runs.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/model/nats_auth.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "child_process.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::unique_ptr<Bus> Connect(const std::string& url, const Ed25519PrivateKey* key = nullptr) {
  BusOptions bo;
  bo.url = url;
  bo.max_reconnect = 0;
  if (key) SetBusIdentity(&bo, *key);
  auto b = Bus::Connect(bo);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

json StatusOf(Stack& s, const std::string& id) {
  RunResult r = s.Gatos({"status", id, "--ledger", s.ledger(), "--json"});
  json j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

TEST(HostileBusTest, EveryMalformedRequestGetsAnErrorReplyAndGatosdKeepsServing) {
  Stack s;
  ASSERT_TRUE(s.Start());
  std::string id = s.PushJob("command: [\"/bin/true\"]\ntimeout: 30\n");
  auto bus = Connect(s.nats_url());
  ASSERT_TRUE(bus);

  std::string split_char = std::string(79, 'a') + "\xc3\xa9";  // cut at 80 bytes splits the é
  std::vector<std::string> payloads = {
      json{{"job", split_char}}.dump(),
      json{{"job", split_char}, {"epoch", 1}, {"worker", split_char}, {"sig", split_char}}.dump(),
      "{\"job\":\"\xff\xfe\"}",
      "{\"job\":\"" + std::string(70, 'b') + "\xf0\x9f\x98\x80" + "\",\"state\":\"\xe2\x82\"}",
      "\xff\xfe",
      "",
      "not json at all",
      std::string(100000, '['),
      json{{"job", std::string(1 << 20, 'a')}}.dump(),
      "{\"job\":1e400,\"epoch\":\"x\",\"limit\":-1}",
      "{\"job\":null,\"epoch\":9223372036854775807,\"commit\":[]}",
      "GATOSRB1\xff\xff\xff\xff",
      "GATOSRB1" + std::string(8, '\0'),
  };
  const char* subjects[] = {rpc::kClaim,  rpc::kRenew,  rpc::kResult, rpc::kClaimBatch, rpc::kResultBatch,
                            rpc::kSubmit, rpc::kStatus, rpc::kList,   rpc::kCancel,     rpc::kRetry};
  for (const char* subject : subjects) {
    for (size_t i = 0; i < payloads.size(); ++i) {
      auto reply = bus->Request(subject, payloads[i], 10000);
      ASSERT_TRUE(reply.ok()) << subject << " payload " << i << ": " << reply.status().message() << "\n"
                              << s.gatosd().log();
      json j = json::parse(reply->data, nullptr, false);
      ASSERT_TRUE(j.is_object()) << subject << " payload " << i << ": " << reply->data;
      // A list request names no job: one whose fields are all unknown or
      // null is a plain listing. Everything else here is refused, saying why.
      bool plain_listing = std::string(subject) == rpc::kList && (i == 0 || i == 1 || i == 10);
      EXPECT_EQ(j.value("ok", true), plain_listing) << subject << " payload " << i << ": " << reply->data;
      if (!plain_listing) {
        EXPECT_FALSE(j.value("message", "").empty()) << subject << " payload " << i << ": " << reply->data;
      }
      // Every reply is valid UTF-8 (nlohmann refuses to parse anything else).
    }
  }
  EXPECT_TRUE(s.gatosd().running()) << s.gatosd().log();
  // Still serving: a real request gets its real answer.
  auto st = bus->Request(rpc::kStatus, json{{"job", id.substr(7)}}.dump(), 5000);
  ASSERT_TRUE(st.ok()) << st.status().message();
  json j = json::parse(st->data, nullptr, false);
  EXPECT_EQ(j.value("ok", false), true) << st->data;
  EXPECT_EQ(j["status"].value("state", ""), "pending") << st->data;
}

TEST(HostileBusTest, AnUnsignedCancelNoticeStopsNothing) {
  Stack s;
  ASSERT_TRUE(s.Start());
  std::string marks = s.dir().Join("marks");
  std::filesystem::create_directories(marks);
  s.StartWorker(0, {"--sandbox", "off"});
  // The job says it started, then waits for the test's go-ahead.
  std::string id = s.PushJob("command: [\"/bin/sh\", \"-c\", \"touch " + marks + "/started; while [ ! -f " + marks +
                             "/go ]; do sleep 0.02; done\"]\ntimeout: 60\n");
  ASSERT_TRUE(PollFor(30000, [&] { return std::filesystem::exists(marks + "/started"); }))
      << s.worker(0)->log();
  auto bus = Connect(s.nats_url());
  ASSERT_TRUE(bus);
  std::string hex = id.substr(7);
  ASSERT_TRUE(bus->Publish(std::string(rpc::kCancelEventPrefix) + hex, "cancel").ok());
  ASSERT_TRUE(bus->Publish(std::string(rpc::kCancelEventPrefix) + hex, json{{"commit", std::string(40, 'c')}}.dump()).ok());
  ASSERT_TRUE(s.worker(0)->WaitForLog("ignored an unverified cancel notice", 10000)) << s.worker(0)->log();
  WriteFile(marks + "/go", "");
  RunResult w = s.Gatos({"wait", id, "--ledger", s.nats_url(), "--timeout", "60"}, 90);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  json st = StatusOf(s, id);
  EXPECT_EQ(st.value("state", ""), "succeeded") << st.dump();
  RunResult cancel_ref = testing::Run({"git", "--git-dir", s.ledger(), "rev-parse", "-q", "--verify",
                              "refs/gatos/jobs/" + hex + "/cancel"});
  EXPECT_NE(cancel_ref.exit_code, 0) << cancel_ref.out;
}

TEST(HostileBusTest, WithNatsAuthOnlyPolicyKeysGetInAndPolicyChangesReachTheServer) {
  StackOptions o;
  o.nats_auth = true;
  Stack s(o);
  ASSERT_TRUE(s.Start());
  auto anonymous = NatsAcceptsAnonymous(s.nats_url());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().message();
  EXPECT_FALSE(*anonymous);
  EXPECT_TRUE(s.gatosd().WaitForLog("NATS refuses anonymous clients", 5000)) << s.gatosd().log();

  // A worker under its permissions: binds the consumer gatosd made, claims,
  // reports; the CLI waits through NATS as the submitter.
  s.StartWorker(0, {"--sandbox", "off"});
  ASSERT_TRUE(s.worker(0)->WaitForLog(" ready ", 20000)) << s.worker(0)->log();
  std::string id = s.PushJob("command: [\"/bin/echo\", \"authenticated\"]\ntimeout: 30\n");
  RunResult w = s.Gatos({"wait", id, "--ledger", s.nats_url(), "--timeout", "60"}, 90);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << s.worker(0)->log();
  EXPECT_FALSE(s.worker(0)->log().find("Permissions Violation") != std::string::npos) << s.worker(0)->log();

  // The CLI without a key is refused, and says what it needs.
  auto env = s.env();
  RunOptions ro;
  ro.env = env;
  ro.env["GATOS_NATS_KEY"] = "";
  RunResult anon = testing::Run({BinaryPath("gatos"), "ls", "--ledger", s.nats_url()}, ro);
  EXPECT_NE(anon.exit_code, 0);
  EXPECT_NE(anon.err.find("GATOS_NATS_KEY"), std::string::npos) << anon.err;

  // A key allowed while everything runs gets in once gatosd rewrote the
  // authorization and nats-server reloaded it.
  std::string late = s.dir().Join("late-worker");
  ASSERT_EQ(s.Gatos({"keygen", "-f", late}).exit_code, 0);
  auto late_key = ReadPrivateKeyFile(late);
  ASSERT_TRUE(late_key.ok());
  std::string nkey = NkeyUserPublic(late_key->public_key());
  RunResult allow = s.Gatos({"policy", "allow-worker", "--ledger", s.ledger(), late + ".pub"});
  ASSERT_EQ(allow.exit_code, 0) << allow.err;
  ASSERT_TRUE(PollFor(10000, [&] { return ReadFile(s.nats_auth_file()).find(nkey) != std::string::npos; }))
      << s.gatosd().log();
  ASSERT_TRUE(s.gatosd().WaitForLog("asked nats-server to reload", 5000)) << s.gatosd().log();
  std::unique_ptr<Bus> late_bus;
  ASSERT_TRUE(PollFor(10000, [&] {
    BusOptions bo;
    bo.url = s.nats_url();
    bo.max_reconnect = 0;
    SetBusIdentity(&bo, *late_key);
    auto b = Bus::Connect(bo);
    if (b.ok()) late_bus = std::move(*b);
    return late_bus != nullptr;
  }));

  // Revoked: its connection is closed and it cannot come back.
  RunResult revoke = s.Gatos({"policy", "revoke-worker", "--ledger", s.ledger(), late + ".pub"});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  ASSERT_TRUE(PollFor(10000, [&] { return ReadFile(s.nats_auth_file()).find(nkey) == std::string::npos; }));
  EXPECT_TRUE(PollFor(10000, [&] { return !late_bus->connected(); }));
  BusOptions bo;
  bo.url = s.nats_url();
  bo.max_reconnect = 0;
  SetBusIdentity(&bo, *late_key);
  EXPECT_TRUE(PollFor(10000, [&] { return !Bus::Connect(bo).ok(); }));
}

TEST(HostileBusTest, GatosUpStartsANatsServerThatRefusesAnonymousClients) {
  TempDir dir;
  ChildProcess up;
  std::string error;
  std::string stack = dir.Join("stack");
  ASSERT_TRUE(up.Start({BinaryPath("gatos"), "up", "--dir", stack, "--workers", "1"},
                       {{"HOME", dir.path()}, {"GIT_CONFIG_NOSYSTEM", "1"}}, dir.Join("up.log"), &error))
      << error;
  ASSERT_TRUE(PollFor(90000, [&] { return std::filesystem::exists(stack + "/up.json"); })) << up.log();
  json info = json::parse(ReadFile(stack + "/up.json"), nullptr, false);
  std::string url = info.value("nats_url", "");
  ASSERT_FALSE(url.empty()) << info.dump();
  auto anonymous = NatsAcceptsAnonymous(url);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().message();
  EXPECT_FALSE(*anonymous);
  // The submitter's key gets in, submits through NATS, and the job runs.
  std::string job = dir.Join("job.yaml");
  WriteFile(job, "command: [\"/bin/echo\", \"up\"]\ntimeout: 30\n");
  RunOptions ro;
  ro.env = {{"HOME", dir.path()}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"GATOS_NATS_KEY", stack + "/keys/submitter"}};
  RunResult sub = testing::Run({BinaryPath("gatos"), "submit", job, "--ledger", url, "--sign-key", stack + "/keys/submitter"}, ro);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::string id = sub.out.substr(0, sub.out.find('\n'));
  ro.timeout_seconds = 90;
  RunResult w = testing::Run({BinaryPath("gatos"), "wait", id, "--ledger", url, "--timeout", "60"}, ro);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << up.log();
  EXPECT_EQ(up.Stop(SIGTERM, 20000), 0) << up.log();
}

}  // namespace
}  // namespace gatos::testing
