// The NATS permissions generated from a policy (nats_auth.h), enforced by a
// real nats-server: no anonymous client, nobody but the ledger key may answer
// gatos.rpc.* or publish jobs, workers and submitters only reach their own
// subjects and inboxes, and a key revoked from the policy is disconnected
// when the server reloads the regenerated configuration.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/model/nats_auth.h"
#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "nats_server.h"
#include "test_util.h"

namespace gatos {
namespace {

using testing::NatsServer;
using namespace std::chrono_literals;

// Collects a connection's asynchronous errors and disconnections, and lets
// the test wait for them (no fixed sleeps).
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> errors;
  int disconnects = 0;

  bool WaitForError(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] {
      for (const auto& e : errors) {
        if (e.find(needle) != std::string::npos) return true;
      }
      return false;
    });
  }
  bool WaitForDisconnect(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return disconnects > 0; });
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& e : errors) out += e + "\n";
    return out;
  }
};

Ed25519PrivateKey NewKey(const std::string& name) {
  auto k = GenerateEd25519Key(name);
  EXPECT_TRUE(k.ok()) << k.status().ToString();
  return *k;
}

class NatsAuthTest : public ::testing::Test {
 protected:
  NatsAuthTest()
      : ledger_(NewKey("ledger")),
        worker_(NewKey("worker")),
        submitter_(NewKey("submitter")),
        server_(Options()) {}

  NatsServer::Options Options() {
    NatsServer::Options o;
    o.extra_config = "include auth.conf\n";
    return o;
  }

  void SetUp() override {
    policy_.ledger_key = ledger_.public_key();
    bool changed = false;
    ASSERT_TRUE(PolicyAllow(&policy_, "worker", worker_.public_key(), &changed).ok());
    ASSERT_TRUE(PolicyAllow(&policy_, "submitter", submitter_.public_key(), &changed).ok());
    WriteAuth();
    ASSERT_TRUE(server_.Start());
  }

  void WriteAuth() { testing::WriteFile(server_.dir() + "/auth.conf", NatsAuthorizationConfig(policy_)); }

  Result<std::unique_ptr<Bus>> ConnectAs(const Ed25519PrivateKey& key, Events* events, const std::string& name) {
    BusOptions o;
    o.url = server_.url();
    o.name = name;
    o.max_reconnect = 0;
    SetBusIdentity(&o, key);
    o.on_async_error = [events](const std::string& e) {
      std::lock_guard<std::mutex> lock(events->mu);
      events->errors.push_back(e);
      events->cv.notify_all();
    };
    o.on_disconnected = [events] {
      std::lock_guard<std::mutex> lock(events->mu);
      ++events->disconnects;
      events->cv.notify_all();
    };
    return Bus::Connect(o);
  }

  Ed25519PrivateKey ledger_, worker_, submitter_;
  Policy policy_;
  NatsServer server_;
};

TEST(NkeyTest, ServerChecksTheEncodingAndAcceptsOurs) {
  // nats-server refuses a configuration naming a malformed user nkey (bad
  // prefix, length or CRC). Ours starts; the same key with one character
  // changed does not, so the acceptance below is a real check.
  auto key = NewKey("k");
  std::string nkey = NkeyUserPublic(key.public_key());
  ASSERT_EQ(nkey.size(), 56u);
  ASSERT_EQ(nkey[0], 'U');
  std::string broken = nkey;
  broken[20] = broken[20] == 'A' ? 'B' : 'A';

  NatsServer::Options good;
  good.extra_config = "authorization { users = [ { nkey: " + nkey + " } ] }\n";
  NatsServer ok_server(good);
  EXPECT_TRUE(ok_server.Start());

  NatsServer::Options bad;
  bad.extra_config = "authorization { users = [ { nkey: " + broken + " } ] }\n";
  bad.start_timeout_ms = 5000;
  NatsServer bad_server(bad);
  auto started = bad_server.Start();
  EXPECT_FALSE(started);
  EXPECT_NE(bad_server.log().find("nkey"), std::string::npos) << bad_server.log();
}

TEST_F(NatsAuthTest, AnonymousClientIsRefused) {
  auto anonymous = NatsAcceptsAnonymous(server_.url());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().ToString();
  EXPECT_FALSE(*anonymous);

  BusOptions o;
  o.url = server_.url();
  o.max_reconnect = 0;
  auto bus = Bus::Connect(o);
  ASSERT_FALSE(bus.ok());
  EXPECT_NE(bus.status().message().find("uthorization"), std::string::npos) << bus.status().ToString();
}

TEST_F(NatsAuthTest, UnknownKeyIsRefused) {
  Events events;
  auto stranger = NewKey("stranger");
  auto bus = ConnectAs(stranger, &events, "stranger");
  ASSERT_FALSE(bus.ok());
  EXPECT_NE(bus.status().message().find("uthorization"), std::string::npos) << bus.status().ToString();
}

TEST_F(NatsAuthTest, EveryPolicyKeyConnectsAsItself) {
  Events e1, e2, e3;
  auto l = ConnectAs(ledger_, &e1, "gatosd");
  auto w = ConnectAs(worker_, &e2, "worker");
  auto s = ConnectAs(submitter_, &e3, "submitter");
  ASSERT_TRUE(l.ok()) << l.status().ToString() << "\n" << server_.log();
  ASSERT_TRUE(w.ok()) << w.status().ToString() << server_.log();
  ASSERT_TRUE(s.ok()) << s.status().ToString() << server_.log();
}

TEST_F(NatsAuthTest, ASignatureStartingWithAZeroByteIsNeverSentWithoutItsBytes) {
  // nats.c 3.4 (Debian's) leaves "sig" out of CONNECT when the nonce's
  // signature starts with a zero byte: one connection in 256 failed
  // authentication, and two such failures in a row end nats.c's reconnects.
  // The bus abandons such an attempt and connects again with a new nonce.
  // Here the first signature of each connection is made to start with zero
  // (it is then also wrong, so sending it would fail just the same).
  std::atomic<int> zero_led{1};
  std::atomic<int> signed_nonces{0};
  std::mutex mu;
  std::condition_variable cv;
  bool reconnected = false;
  BusOptions o;
  o.url = server_.url();
  o.name = "worker";
  o.max_reconnect = 40;
  o.reconnect_wait_ms = 100;
  SetBusIdentity(&o, worker_);
  auto sign = o.sign_nonce;
  o.sign_nonce = [&, sign](std::string_view nonce) {
    ++signed_nonces;
    std::string sig = sign(nonce);
    if (zero_led.load() > 0) {
      --zero_led;
      sig[0] = '\0';
    }
    return sig;
  };
  o.on_reconnected = [&] {
    std::lock_guard<std::mutex> lock(mu);
    reconnected = true;
    cv.notify_all();
  };
  auto bus = Bus::Connect(o);
  ASSERT_TRUE(bus.ok()) << bus.status().ToString() << "\n" << server_.log();
  // Two at least: the real signature after it may start with zero too.
  EXPECT_GE(signed_nonces.load(), 2);
  EXPECT_EQ(zero_led.load(), 0);

  // The same on a reconnect: the server restarts, the first signature after
  // it starts with zero, and the connection comes back.
  zero_led = 1;
  ASSERT_TRUE(server_.Restart());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return reconnected; })) << server_.log();
  }
  EXPECT_EQ(zero_led.load(), 0);
  EXPECT_TRUE((*bus)->Flush(5000).ok());
  // No CONNECT ever reached the server without a signature.
  EXPECT_EQ(server_.log().find("Signature missing"), std::string::npos) << server_.log();
  EXPECT_EQ(server_.log().find("authentication error"), std::string::npos) << server_.log();
}

// A server without authorization sends no nonce, and nats.c then asks for a
// signature of "" (the same every time). For one key in 256 it starts with a
// zero byte; such a key must still connect to such a server (nothing checks
// the signature), not be refused by the bus on every attempt.
TEST(NkeyTest, AKeyWhoseEmptySignatureStartsWithZeroConnectsToAServerWithoutAuth) {
  std::optional<Ed25519PrivateKey> key;
  for (int i = 0; i < 100000 && !key; ++i) {
    auto k = NewKey("k");
    if (Ed25519Sign(k, "")[0] == 0) key = k;
  }
  ASSERT_TRUE(key.has_value());
  NatsServer open_server;
  ASSERT_TRUE(open_server.Start());
  BusOptions o;
  o.url = open_server.url();
  o.max_reconnect = 0;
  SetBusIdentity(&o, *key);
  auto bus = Bus::Connect(o);
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  EXPECT_TRUE((*bus)->Flush(5000).ok());
}

TEST_F(NatsAuthTest, OnlyTheLedgerKeyAnswersRequests) {
  Events le, we, se;
  auto ledger = ConnectAs(ledger_, &le, "gatosd");
  auto worker = ConnectAs(worker_, &we, "impostor");
  auto submitter = ConnectAs(submitter_, &se, "submitter");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString() << "\n" << server_.log();
  ASSERT_TRUE(worker.ok()) << worker.status().ToString() << "\n" << server_.log();
  ASSERT_TRUE(submitter.ok()) << submitter.status().ToString() << "\n" << server_.log();

  // The worker tries to answer status requests in gatosd's place.
  std::atomic<int> impostor_got{0};
  auto impostor = (*worker)->Subscribe(rpc::kStatus, [&](Message m) {
    ++impostor_got;
    (void)(*worker)->Respond(m, "forged");
  });
  ASSERT_TRUE(impostor.ok()) << impostor.status().ToString();
  ASSERT_TRUE(we.WaitForError("Permissions Violation for Subscription to \"gatos.rpc.status\""))
      << we.All();

  auto real = (*ledger)->Subscribe(rpc::kStatus, [&](Message m) { (void)(*ledger)->Respond(m, "genuine"); });
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  ASSERT_TRUE((*ledger)->Flush(5000).ok());

  for (int i = 0; i < 20; ++i) {
    auto reply = (*submitter)->Request(rpc::kStatus, "{}", 5000);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->data, "genuine");
  }
  EXPECT_EQ(impostor_got.load(), 0);
}

// The replicas' read subjects (a replica by name, any replica): submitters
// may ask, only the ledger key (every replica connects as it) may answer.
TEST_F(NatsAuthTest, OnlyTheLedgerKeyAnswersReplicaReads) {
  Events le, we, se;
  auto ledger = ConnectAs(ledger_, &le, "replica");
  auto worker = ConnectAs(worker_, &we, "impostor");
  auto submitter = ConnectAs(submitter_, &se, "submitter");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString() << "\n" << server_.log();
  ASSERT_TRUE(worker.ok()) << worker.status().ToString() << "\n" << server_.log();
  ASSERT_TRUE(submitter.ok()) << submitter.status().ToString() << "\n" << server_.log();
  std::atomic<int> impostor_got{0};
  std::vector<std::unique_ptr<Bus::Subscription>> subs;
  for (const std::string subject : {rpc::ReplicaReadSubject("r1.example", rpc::kStatus),
                                    rpc::ReplicaReadSubject("", rpc::kList)}) {
    auto impostor = (*worker)->Subscribe(subject, [&](Message m) {
      ++impostor_got;
      (void)(*worker)->Respond(m, "forged");
    });
    ASSERT_TRUE(impostor.ok()) << impostor.status().ToString();
    ASSERT_TRUE(we.WaitForError("Permissions Violation for Subscription to \"" + subject + "\"")) << we.All();
    subs.push_back(std::move(*impostor));
    auto real = (*ledger)->Subscribe(subject, [&](Message m) { (void)(*ledger)->Respond(m, "genuine"); });
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    subs.push_back(std::move(*real));
  }
  ASSERT_TRUE((*ledger)->Flush(5000).ok());
  for (const std::string subject : {rpc::ReplicaReadSubject("r1.example", rpc::kStatus),
                                    rpc::ReplicaReadSubject("", rpc::kList)}) {
    auto reply = (*submitter)->Request(subject, "{}", 5000);
    ASSERT_TRUE(reply.ok()) << subject << ": " << reply.status().ToString() << "\n" << se.All();
    EXPECT_EQ(reply->data, "genuine");
  }
  EXPECT_EQ(impostor_got.load(), 0);
}

TEST_F(NatsAuthTest, WorkerCannotPublishJobsOrSubmit) {
  Events we;
  auto worker = ConnectAs(worker_, &we, "worker");
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  ASSERT_TRUE((*worker)->Publish(rpc::kPendingSubject, "{}").ok());
  ASSERT_TRUE(we.WaitForError("Permissions Violation for Publish to \"gatos.jobs.pending\"")) << we.All();
  ASSERT_TRUE((*worker)->Publish(rpc::kSubmit, "{}").ok());
  ASSERT_TRUE(we.WaitForError("Permissions Violation for Publish to \"gatos.rpc.submit\"")) << we.All();
  ASSERT_TRUE((*worker)->Publish(std::string(rpc::kCancelEventPrefix) + "x", "{}").ok());
  ASSERT_TRUE(we.WaitForError("Permissions Violation for Publish to \"gatos.cancel.x\"")) << we.All();
}

TEST_F(NatsAuthTest, SubmitterCannotClaimOrReadOtherInboxes) {
  Events se;
  auto submitter = ConnectAs(submitter_, &se, "submitter");
  ASSERT_TRUE(submitter.ok()) << submitter.status().ToString();
  ASSERT_TRUE((*submitter)->Publish(rpc::kClaim, "{}").ok());
  ASSERT_TRUE(se.WaitForError("Permissions Violation for Publish to \"gatos.rpc.claim\"")) << se.All();
  // What a follower forwards to the leader is the replicas' (the ledger
  // key's) to send.
  for (const char* forward : {rpc::kForwardSchedule, rpc::kForwardWitness}) {
    ASSERT_TRUE((*submitter)->Publish(forward, "{}").ok());
    ASSERT_TRUE(se.WaitForError("Permissions Violation for Publish to \"" + std::string(forward) + "\"")) << se.All();
  }
  // Replies to the worker's requests arrive on its inbox prefix; a
  // submitter may not listen there (nor on the default inbox).
  std::string worker_inbox = InboxPrefixFor(worker_.public_key()) + ".>";
  auto spy = (*submitter)->Subscribe(worker_inbox, [](Message) {});
  ASSERT_TRUE(spy.ok());
  ASSERT_TRUE(se.WaitForError("Permissions Violation for Subscription to \"" + worker_inbox + "\"")) << se.All();
  auto spy2 = (*submitter)->Subscribe("_INBOX.>", [](Message) {});
  ASSERT_TRUE(spy2.ok());
  ASSERT_TRUE(se.WaitForError("Permissions Violation for Subscription to \"_INBOX.>\"")) << se.All();
}

TEST_F(NatsAuthTest, WorkerRequestsGetRepliesOnItsOwnInbox) {
  Events le, we;
  auto ledger = ConnectAs(ledger_, &le, "gatosd");
  auto worker = ConnectAs(worker_, &we, "worker");
  ASSERT_TRUE(ledger.ok() && worker.ok());
  std::string seen_reply_to;
  std::mutex mu;
  auto sub = (*ledger)->Subscribe(rpc::kClaim, [&](Message m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen_reply_to = m.reply;
    }
    (void)(*ledger)->Respond(m, "granted");
  });
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE((*ledger)->Flush(5000).ok());
  auto reply = (*worker)->Request(rpc::kClaim, "{}", 5000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString() << "\n" << we.All();
  EXPECT_EQ(reply->data, "granted");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen_reply_to.rfind(InboxPrefixFor(worker_.public_key()) + ".", 0), 0u) << seen_reply_to;
}

TEST_F(NatsAuthTest, RevokedWorkerIsDisconnectedOnReload) {
  Events we, se;
  auto worker = ConnectAs(worker_, &we, "worker");
  auto submitter = ConnectAs(submitter_, &se, "submitter");
  ASSERT_TRUE(worker.ok() && submitter.ok());

  ASSERT_TRUE(PolicyRevoke(&policy_, "worker", worker_.public_key()).ok());
  WriteAuth();
  ASSERT_TRUE(server_.Reload());
  ASSERT_TRUE(we.WaitForDisconnect()) << we.All() << "\n" << server_.log();
  EXPECT_FALSE((*worker)->connected());
  // The submitter, still in the policy, keeps its connection.
  EXPECT_TRUE((*submitter)->Flush(5000).ok());
  EXPECT_TRUE((*submitter)->connected());
  Events again;
  auto reconnect = ConnectAs(worker_, &again, "worker");
  EXPECT_FALSE(reconnect.ok());
}

}  // namespace
}  // namespace gatos
