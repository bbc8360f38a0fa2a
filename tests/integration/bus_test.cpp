// Integration tests of gatos::Bus against a real nats-server (JetStream).
// They never skip: nats-server is part of the installed toolchain.
#include "gatos/nats/bus.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nats_server.h"
#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::FreePort;
using ::gatos::testing::NatsServer;
using Clock = std::chrono::steady_clock;

#define ASSERT_OK(expr)                                          \
  do {                                                           \
    ::gatos::Status status_ = ::gatos::internal::AsStatus(expr); \
    ASSERT_TRUE(status_.ok()) << status_.ToString();             \
  } while (0)

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

bool WaitUntil(const std::function<bool()>& predicate, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!predicate()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Collects messages delivered on library threads (the handler only enqueues).
class Inbox {
 public:
  Bus::Handler Handler() {
    return [this](Message m) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(std::move(m));
      cv_.notify_all();
    };
  }
  bool WaitFor(size_t count, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return messages_.size() >= count; });
  }
  std::vector<Message> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
};

class BusTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }

  BusOptions Options() {
    BusOptions options;
    options.url = server_.url();
    options.name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    return options;
  }

  std::unique_ptr<Bus> Connect() { return Connect(Options()); }
  std::unique_ptr<Bus> Connect(const BusOptions& options) {
    auto bus = Bus::Connect(options);
    EXPECT_TRUE(bus.ok()) << bus.status().ToString();
    return bus.ok() ? std::move(bus).value() : nullptr;
  }

  static Bus::StreamConfig Jobs() {
    Bus::StreamConfig config;
    config.name = "JOBS";
    config.subjects = {"gatos.jobs.pending"};
    return config;
  }

  static Bus::ConsumerConfig Workers(int64_t ack_wait_ms = 30000) {
    Bus::ConsumerConfig config;
    config.stream = "JOBS";
    config.durable = "workers";
    config.filter_subject = "gatos.jobs.pending";
    config.ack_wait_ms = ack_wait_ms;
    return config;
  }

  // Fetches until `want` messages arrived, riding out Unavailable while the
  // client reconnects or JetStream recovers after a restart.
  static std::vector<std::unique_ptr<Bus::JsMessage>> FetchAll(Bus::PullConsumer& consumer,
                                                               size_t want, int timeout_ms) {
    std::vector<std::unique_ptr<Bus::JsMessage>> got;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (got.size() < want && Clock::now() < deadline) {
      auto batch = consumer.Fetch(static_cast<int>(want - got.size()), 500);
      if (!batch.ok()) {
        EXPECT_EQ(batch.status().code(), StatusCode::kUnavailable) << batch.status().ToString();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      for (auto& m : *batch) got.push_back(std::move(m));
    }
    return got;
  }

  NatsServer server_;
};

TEST_F(BusTest, ConnectsToServer) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  EXPECT_TRUE(bus->connected());
  EXPECT_EQ(bus->url(), server_.url());
  ASSERT_OK(bus->Flush(1000));
}

TEST(BusConnectTest, DeadPortIsUnavailableQuicklyAndNamesUrl) {
  BusOptions options;
  options.url = "nats://127.0.0.1:" + std::to_string(FreePort());
  auto start = Clock::now();
  auto bus = Bus::Connect(options);
  ASSERT_FALSE(bus.ok());
  EXPECT_EQ(bus.status().code(), StatusCode::kUnavailable) << bus.status().ToString();
  EXPECT_NE(bus.status().message().find(options.url), std::string::npos) << bus.status().ToString();
  EXPECT_LT(MillisSince(start), 2000);
}

TEST(BusConnectTest, EmptyUrlIsInvalidArgument) {
  auto bus = Bus::Connect(BusOptions{});
  ASSERT_FALSE(bus.ok());
  EXPECT_EQ(bus.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BusTest, PublishSubscribeDeliversInOrder) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  Inbox inbox;
  auto sub = bus->Subscribe("gatos.test.>", inbox.Handler());
  ASSERT_OK(sub);
  ASSERT_OK(bus->Flush(1000));
  for (int i = 0; i < 3; ++i) ASSERT_OK(bus->Publish("gatos.test.a", "m" + std::to_string(i)));
  ASSERT_TRUE(inbox.WaitFor(3, 5000));
  auto messages = inbox.messages();
  ASSERT_EQ(messages.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(messages[i].subject, "gatos.test.a");
    EXPECT_EQ(messages[i].data, "m" + std::to_string(i));
    EXPECT_TRUE(messages[i].reply.empty());
  }
}

TEST_F(BusTest, DestroyedSubscriptionReceivesNothing) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  std::atomic<int> calls{0};
  auto sub = bus->Subscribe("gatos.test.gone", [&](Message) { ++calls; });
  ASSERT_OK(sub);
  // A second subscription to the same subject on the same connection: it
  // shows when a message has come through, so the absence check below
  // waits for a delivery instead of for time.
  Inbox witness;
  auto witness_sub = bus->Subscribe("gatos.test.gone", witness.Handler());
  ASSERT_OK(witness_sub);
  ASSERT_OK(bus->Flush(1000));
  // Positive control: the path delivers to both while both exist.
  ASSERT_OK(bus->Publish("gatos.test.gone", "1"));
  ASSERT_TRUE(WaitUntil([&] { return calls == 1; }, 5000));
  ASSERT_TRUE(witness.WaitFor(1, 5000));
  sub->reset();  // after this the handler must never run again
  ASSERT_OK(bus->Publish("gatos.test.gone", "2"));
  // "2" reached this connection; the destroyed subscription's handler had
  // already returned for good when reset() did (bus.h), so it cannot run now.
  ASSERT_TRUE(witness.WaitFor(2, 5000));
  EXPECT_EQ(witness.messages()[1].data, "2");
  EXPECT_EQ(calls, 1);
}

TEST_F(BusTest, RequestReplyRoundTrip) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  Bus* raw = bus.get();
  auto responder = bus->Subscribe("gatos.rpc.echo", [raw](Message m) {
    // Respond is a non-blocking publish: allowed inside a handler.
    raw->Respond(m, "echo:" + m.data).IgnoreError();
  });
  ASSERT_OK(responder);
  ASSERT_OK(bus->Flush(1000));
  auto reply = bus->Request("gatos.rpc.echo", "hello", 2000);
  ASSERT_OK(reply);
  EXPECT_EQ(reply->data, "echo:hello");
}

TEST_F(BusTest, RespondWithoutReplySubjectIsInvalidArgument) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  Message m;
  m.subject = "gatos.rpc.x";
  EXPECT_EQ(bus->Respond(m, "x").code(), StatusCode::kInvalidArgument);
}

TEST_F(BusTest, RequestWithoutResponderIsUnavailableAtOnce) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  auto start = Clock::now();
  auto reply = bus->Request("gatos.rpc.nobody", "x", 5000);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("gatos.rpc.nobody"), std::string::npos);
  EXPECT_LT(MillisSince(start), 2000);  // the server says so; no waiting for the timeout
}

TEST_F(BusTest, RequestToSilentSubscriberIsDeadlineExceeded) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  auto silent = bus->Subscribe("gatos.rpc.silent", [](Message) {});
  ASSERT_OK(silent);
  ASSERT_OK(bus->Flush(1000));
  auto start = Clock::now();
  auto reply = bus->Request("gatos.rpc.silent", "x", 300);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_GE(MillisSince(start), 250);
}

TEST_F(BusTest, QueueSubscriptionDeliversEachMessageToExactlyOneMember) {
  auto publisher = Connect();
  auto member_a = Connect();
  auto member_b = Connect();
  ASSERT_TRUE(publisher && member_a && member_b);
  Inbox inbox_a, inbox_b;
  auto sub_a = member_a->QueueSubscribe("gatos.work", "workers", inbox_a.Handler());
  auto sub_b = member_b->QueueSubscribe("gatos.work", "workers", inbox_b.Handler());
  ASSERT_OK(sub_a);
  ASSERT_OK(sub_b);
  ASSERT_OK(member_a->Flush(1000));
  ASSERT_OK(member_b->Flush(1000));
  constexpr int kCount = 200;
  for (int i = 0; i < kCount; ++i) ASSERT_OK(publisher->Publish("gatos.work", std::to_string(i)));
  ASSERT_OK(publisher->Flush(1000));
  ASSERT_TRUE(WaitUntil(
      [&] { return inbox_a.messages().size() + inbox_b.messages().size() >= kCount; }, 5000));
  // No extra copy arrives late, shown without waiting for time: each member
  // handles its messages one at a time in the order the server sent them,
  // so once each has handled an "end" message published after the 200, any
  // copy of those would already be in its inbox. (Each "end" goes to one
  // member at random; publish them until both have one.)
  auto has_end = [](Inbox& inbox) {
    for (const auto& m : inbox.messages()) {
      if (m.data.rfind("end", 0) == 0) return true;
    }
    return false;
  };
  int ends = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (has_end(inbox_a) && has_end(inbox_b)) return true;
        EXPECT_TRUE(publisher->Publish("gatos.work", "end" + std::to_string(ends++)).ok());
        return false;
      },
      10000))
      << ends << " end messages published";
  auto without_ends = [](std::vector<Message> v) {
    std::erase_if(v, [](const Message& m) { return m.data.rfind("end", 0) == 0; });
    return v;
  };
  auto a = without_ends(inbox_a.messages());
  auto b = without_ends(inbox_b.messages());
  EXPECT_EQ(a.size() + b.size(), static_cast<size_t>(kCount));
  std::multiset<std::string> seen;
  for (const auto& m : a) seen.insert(m.data);
  for (const auto& m : b) seen.insert(m.data);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(seen.count(std::to_string(i)), 1u) << i;
  // The server picks a member at random: both get a share (P(fail) = 2^-199).
  EXPECT_GT(a.size(), 0u);
  EXPECT_GT(b.size(), 0u);
}

TEST_F(BusTest, EnsureStreamIsIdempotentAndUpdatesSubjects) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  ASSERT_OK(bus->EnsureStream(Jobs()));

  // Not captured yet: JetStream has nobody answering this subject.
  auto before = bus->JsPublish("gatos.jobs.extra", "x", "id-1");
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.status().code(), StatusCode::kUnavailable) << before.status().ToString();

  auto wider = Jobs();
  wider.subjects.push_back("gatos.jobs.extra");
  ASSERT_OK(bus->EnsureStream(wider));
  ASSERT_OK(bus->EnsureStream(wider));
  auto after = bus->JsPublish("gatos.jobs.extra", "x", "id-1");
  ASSERT_OK(after);
  EXPECT_FALSE(after->duplicate);
  auto state = bus->GetStreamState("JOBS");
  ASSERT_OK(state);
  EXPECT_EQ(state->messages, 1u);
}

TEST_F(BusTest, EnsureStreamRefusesRetentionChange) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  auto work_queue = Jobs();
  work_queue.work_queue = true;
  Status status = bus->EnsureStream(work_queue);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
  EXPECT_NE(status.message().find("JOBS"), std::string::npos);
}

TEST_F(BusTest, GetStreamStateOfMissingStreamIsNotFound) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  auto state = bus->GetStreamState("NOPE");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kNotFound) << state.status().ToString();
}

TEST_F(BusTest, JsPublishDedupesByMsgId) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  auto first = bus->JsPublish("gatos.jobs.pending", "job", "job-123");
  ASSERT_OK(first);
  EXPECT_FALSE(first->duplicate);
  auto second = bus->JsPublish("gatos.jobs.pending", "job", "job-123");
  ASSERT_OK(second);
  EXPECT_TRUE(second->duplicate);
  EXPECT_EQ(second->sequence, first->sequence);
  auto state = bus->GetStreamState("JOBS");
  ASSERT_OK(state);
  EXPECT_EQ(state->messages, 1u);

  auto other = bus->JsPublish("gatos.jobs.pending", "job", "job-456");
  ASSERT_OK(other);
  EXPECT_FALSE(other->duplicate);
  EXPECT_EQ(other->sequence, first->sequence + 1);
}

TEST_F(BusTest, JsPublishLargerThanStreamLimitIsInvalidArgument) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  auto config = Jobs();
  config.max_msg_size = 64;
  ASSERT_OK(bus->EnsureStream(config));
  auto ack = bus->JsPublish("gatos.jobs.pending", std::string(1000, 'x'), "big");
  ASSERT_FALSE(ack.ok());
  EXPECT_EQ(ack.status().code(), StatusCode::kInvalidArgument) << ack.status().ToString();
}

TEST_F(BusTest, PullConsumerFetchAndAck) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job-" + std::to_string(i),
                             "id-" + std::to_string(i), {{"Gatos-Job", std::to_string(i)}}));
  }
  auto consumer = bus->PullSubscribe(Workers());
  ASSERT_OK(consumer);
  auto batch = (*consumer)->Fetch(10, 2000);
  ASSERT_OK(batch);
  ASSERT_EQ(batch->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto& m = *(*batch)[i];
    EXPECT_EQ(m.subject(), "gatos.jobs.pending");
    EXPECT_EQ(m.data(), "job-" + std::to_string(i));
    EXPECT_EQ(m.header("Gatos-Job"), std::to_string(i));
    EXPECT_EQ(m.header("Nats-Msg-Id"), "id-" + std::to_string(i));
    EXPECT_EQ(m.header("Absent"), "");
    EXPECT_EQ(m.num_delivered(), 1u);
    EXPECT_EQ(m.stream_sequence(), static_cast<uint64_t>(i + 1));
    ASSERT_OK(m.Ack());
  }
  // Nothing left: an empty batch, not an error. This absence check waits
  // the fetch's own 300 ms; the same consumer has just delivered all three
  // (the positive control).
  auto start = Clock::now();
  auto empty = (*consumer)->Fetch(10, 300);
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_GE(MillisSince(start), 250);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto state = bus->GetConsumerState("JOBS", "workers");
        return state.ok() && state->num_ack_pending == 0 && state->ack_floor_stream_sequence == 3;
      },
      5000));

  // Settling a message the second time is a no-op.
  ASSERT_OK((*batch)[0]->Ack());
}

// FetchAvailable returns with the first messages there are, at most the
// batch, instead of waiting for the whole batch: the bounds are far below its
// 60 s timeout, so only a fetch that waits it out fails them.
TEST_F(BusTest, FetchAvailableReturnsWhatIsThereWithoutWaitingForTheBatch) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  auto consumer = bus->PullSubscribe(Workers());
  ASSERT_OK(consumer);

  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job-" + std::to_string(i), "id-" + std::to_string(i)));
  }
  auto start = Clock::now();
  auto two = (*consumer)->FetchAvailable(2, 60000);
  ASSERT_OK(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0]->data(), "job-0");
  EXPECT_EQ((*two)[1]->data(), "job-1");
  auto rest = (*consumer)->FetchAvailable(10, 60000);  // more than there is
  ASSERT_OK(rest);
  ASSERT_EQ(rest->size(), 3u);
  EXPECT_EQ((*rest)[0]->data(), "job-2");
  EXPECT_EQ((*rest)[2]->data(), "job-4");
  EXPECT_LT(MillisSince(start), 30000);
  for (auto* batch : {&*two, &*rest}) {
    for (auto& m : *batch) ASSERT_OK(m->Ack());
  }

  // Nothing there: it waits for the next message and returns with it alone.
  Result<std::vector<std::unique_ptr<Bus::JsMessage>>> next = std::vector<std::unique_ptr<Bus::JsMessage>>{};
  start = Clock::now();
  std::thread fetcher([&] { next = (*consumer)->FetchAvailable(4, 60000); });
  ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job-5", "id-5"));
  fetcher.join();
  ASSERT_OK(next);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0]->data(), "job-5");
  EXPECT_LT(MillisSince(start), 30000);
  ASSERT_OK((*next)[0]->Ack());

  // And an empty vector, not an error, when nothing comes in time (after
  // the positive control above: the same consumer delivered job-5).
  auto none = (*consumer)->FetchAvailable(4, 300);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(BusTest, PullSubscribeIsIdempotentAndKeepsConsumerOnDestroy) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  {
    auto consumer = bus->PullSubscribe(Workers());
    ASSERT_OK(consumer);
  }
  // Destroying the handle must not delete the durable consumer.
  ASSERT_OK(bus->GetConsumerState("JOBS", "workers"));
  auto again = bus->PullSubscribe(Workers(10000));  // changed ack_wait: updated in place
  ASSERT_OK(again);
  ASSERT_OK(bus->GetConsumerState("JOBS", "workers"));

  auto missing = bus->PullSubscribe([] {
    auto c = Workers();
    c.stream = "NOPE";
    return c;
  }());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
}

TEST_F(BusTest, UnackedMessageIsRedeliveredAfterAckWait) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job", "id-1"));
  auto consumer = bus->PullSubscribe(Workers(/*ack_wait_ms=*/500));
  ASSERT_OK(consumer);
  auto first = (*consumer)->Fetch(1, 2000);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0]->num_delivered(), 1u);
  // No ack: the server redelivers once ack_wait has passed.
  auto start = Clock::now();
  auto second = (*consumer)->Fetch(1, 3000);
  ASSERT_OK(second);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_GE(MillisSince(start), 300);
  EXPECT_EQ((*second)[0]->data(), "job");
  EXPECT_EQ((*second)[0]->num_delivered(), 2u);
  ASSERT_OK((*second)[0]->Ack());
}

TEST_F(BusTest, NakRedeliversAndTermStops) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job", "id-1"));
  auto consumer = bus->PullSubscribe(Workers());
  ASSERT_OK(consumer);
  auto first = (*consumer)->Fetch(1, 2000);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 1u);
  ASSERT_OK((*first)[0]->InProgress());
  ASSERT_OK((*first)[0]->Nak());
  auto second = (*consumer)->Fetch(1, 2000);
  ASSERT_OK(second);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0]->num_delivered(), 2u);
  ASSERT_OK((*second)[0]->Term());
  // Terminated: not delivered again. The fetch waits its 300 ms; the same
  // consumer redelivered the message just above (the positive control).
  auto none = (*consumer)->Fetch(1, 300);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(BusTest, DurableConsumerSurvivesServerRestart) {
  std::atomic<int> reconnects{0};
  auto options = Options();
  options.on_reconnected = [&] { ++reconnects; };
  auto bus = Connect(options);
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job-" + std::to_string(i),
                             "id-" + std::to_string(i)));
  }
  auto consumer = bus->PullSubscribe(Workers());
  ASSERT_OK(consumer);
  auto first = (*consumer)->Fetch(1, 2000);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0]->data(), "job-1");
  ASSERT_OK((*first)[0]->Ack());
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto state = bus->GetConsumerState("JOBS", "workers");
        return state.ok() && state->ack_floor_stream_sequence == 1;
      },
      5000));

  ASSERT_TRUE(server_.Restart());
  ASSERT_TRUE(WaitUntil([&] { return bus->connected(); }, 10000)) << "client did not reconnect";
  // The callback runs on the library's callback thread, after the status flips.
  EXPECT_TRUE(WaitUntil([&] { return reconnects.load() >= 1; }, 5000));

  // The same PullConsumer keeps working; the acked message stays acked.
  auto rest = FetchAll(**consumer, 2, 10000);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0]->data(), "job-2");
  EXPECT_EQ(rest[1]->data(), "job-3");
  EXPECT_EQ(rest[0]->num_delivered(), 1u);
  for (auto& m : rest) ASSERT_OK(m->Ack());
  // The dedupe window survived too.
  auto repeat = bus->JsPublish("gatos.jobs.pending", "job-1", "id-1");
  ASSERT_OK(repeat);
  EXPECT_TRUE(repeat->duplicate);
}

TEST_F(BusTest, KilledServerMakesJsPublishUnavailableThenRecovers) {
  std::atomic<int> disconnects{0};
  std::atomic<int> reconnects{0};
  auto options = Options();
  options.jetstream_timeout_ms = 1000;
  options.on_disconnected = [&] { ++disconnects; };
  options.on_reconnected = [&] { ++reconnects; };
  auto bus = Connect(options);
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "before", "id-before"));

  ASSERT_TRUE(server_.Kill());
  auto start = Clock::now();
  auto during = bus->JsPublish("gatos.jobs.pending", "during", "id-during");
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.status().code(), StatusCode::kUnavailable) << during.status().ToString();
  EXPECT_LT(MillisSince(start), 3000);
  ASSERT_TRUE(WaitUntil([&] { return disconnects.load() >= 1; }, 5000));
  EXPECT_FALSE(bus->connected());
  auto request = bus->Request("gatos.rpc.any", "x", 500);
  EXPECT_EQ(request.status().code(), StatusCode::kUnavailable) << request.status().ToString();

  ASSERT_TRUE(server_.Start());
  ASSERT_TRUE(WaitUntil([&] { return bus->connected(); }, 10000)) << "client did not reconnect";
  // The callback runs on the library's callback thread, after the status flips.
  EXPECT_TRUE(WaitUntil([&] { return reconnects.load() >= 1; }, 5000));
  Result<Bus::PublishAck> after = UnavailableError("not tried");
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = bus->JsPublish("gatos.jobs.pending", "after", "id-after");
        return after.ok() || after.status().code() != StatusCode::kUnavailable;
      },
      10000));
  ASSERT_OK(after);
  EXPECT_FALSE(after->duplicate);
}

// A server that goes silent closes nothing (SIGSTOP: a hung host, or one
// cut off the network). The client must take it for gone after its pings
// go unanswered and reconnect to the other server of its list, within
// seconds (the library's default pings took 4 to 6 minutes).
TEST(BusSilentServerTest, ReconnectsToAnotherServerWhenItsServerGoesSilent) {
  NatsServer first, second;
  ASSERT_TRUE(first.Start());
  ASSERT_TRUE(second.Start());
  std::atomic<int> reconnects{0};
  BusOptions options;
  options.url = first.url() + "," + second.url();  // tried in this order
  options.on_reconnected = [&] { ++reconnects; };
  auto bus = Bus::Connect(options);
  ASSERT_TRUE(bus.ok()) << bus.status().message();
  ASSERT_NE((*bus)->ConnectionState().find(":" + std::to_string(first.port())), std::string::npos)
      << (*bus)->ConnectionState();
  ASSERT_TRUE(first.Pause());
  struct ResumeAtEnd {
    NatsServer& n;
    ~ResumeAtEnd() { (void)n.Resume(); }
  } resume{first};
  const auto start = Clock::now();
  ASSERT_TRUE(WaitUntil([&] { return reconnects.load() >= 1; }, 15000))
      << "still on the silent server: " << (*bus)->ConnectionState();
  EXPECT_LT(MillisSince(start), 10000);
  EXPECT_NE((*bus)->ConnectionState().find(":" + std::to_string(second.port())), std::string::npos)
      << (*bus)->ConnectionState();
  ASSERT_OK((*bus)->Flush(2000));
}

TEST_F(BusTest, HandlesThatOutliveTheBusAreSafe) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  ASSERT_OK(bus->EnsureStream(Jobs()));
  ASSERT_OK(bus->JsPublish("gatos.jobs.pending", "job", "id-1"));
  Inbox inbox;
  auto sub = bus->Subscribe("gatos.test.late", inbox.Handler());
  ASSERT_OK(sub);
  auto consumer = bus->PullSubscribe(Workers());
  ASSERT_OK(consumer);
  auto batch = (*consumer)->Fetch(1, 2000);
  ASSERT_OK(batch);
  ASSERT_EQ(batch->size(), 1u);
  bus.reset();  // against the documented order, on purpose
  auto after = (*consumer)->Fetch(1, 100);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status().ToString();
  EXPECT_EQ((*batch)[0]->Ack().code(), StatusCode::kUnavailable);
  sub->reset();
  consumer->reset();
  batch->clear();
}

TEST_F(BusTest, PublishOverDefaultMaxPayloadIsInvalidArgument) {
  auto bus = Connect();
  ASSERT_NE(bus, nullptr);
  Status status = bus->Publish("gatos.big", std::string(2 << 20, 'x'));  // 2 MB > 1 MB default
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
}

TEST(BusServerConfigTest, MaxPayloadFromConfigAllowsLargeMessages) {
  NatsServer::Options server_options;
  server_options.max_payload_bytes = 8 << 20;
  NatsServer server(server_options);
  ASSERT_TRUE(server.Start());
  BusOptions options;
  options.url = server.url();
  auto bus = Bus::Connect(options);
  ASSERT_OK(bus);
  Inbox inbox;
  auto sub = (*bus)->Subscribe("gatos.big", inbox.Handler());
  ASSERT_OK(sub);
  ASSERT_OK((*bus)->Flush(1000));
  const std::string big(2 << 20, 'x');
  ASSERT_OK((*bus)->Publish("gatos.big", big));
  ASSERT_TRUE(inbox.WaitFor(1, 5000));
  EXPECT_EQ(inbox.messages()[0].data.size(), big.size());

  Bus::StreamConfig stream;
  stream.name = "BIG";
  stream.subjects = {"gatos.bigjs"};
  ASSERT_OK((*bus)->EnsureStream(stream));
  ASSERT_OK((*bus)->JsPublish("gatos.bigjs", big, "big-1"));
}

}  // namespace
}  // namespace gatos
