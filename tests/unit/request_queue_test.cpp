// gatosd's request queue once closed (a deposed leader draining, gatosd
// stopping): nothing offered to it is dropped unanswered.
#include "request_queue.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gatos::gatosd {
namespace {

Request NatsRequest(const std::string& reply_to) {
  Request r;
  r.req = {"gatos.rpc.submit", "frame", 1};
  r.nats.subject = "gatos.rpc.submit";
  r.nats.reply = reply_to;
  r.nats.data = "frame";
  return r;
}

TEST(RequestQueue, AnOpenQueueTakesRequestsInOrder) {
  RequestQueue q;
  Request a = NatsRequest("_INBOX.a"), b = NatsRequest("_INBOX.b");
  EXPECT_TRUE(q.Push(a));
  EXPECT_TRUE(q.Push(b));
  std::vector<Request> got = q.PopBatch(10, std::chrono::milliseconds(0));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].nats.reply, "_INBOX.a");
  EXPECT_EQ(got[1].nats.reply, "_INBOX.b");
}

TEST(RequestQueue, AClosedQueueLeavesANatsRequestToItsCallerToAnswer) {
  RequestQueue q;
  q.Close();
  Request r = NatsRequest("_INBOX.x");
  EXPECT_FALSE(q.Push(r));
  // Still whole: the subscriber replies "retry" on it.
  EXPECT_EQ(r.nats.reply, "_INBOX.x");
  EXPECT_EQ(r.nats.data, "frame");
  EXPECT_TRUE(q.PopBatch(10, std::chrono::milliseconds(0)).empty());
}

TEST(RequestQueue, AClosedQueueAnswersLocalRequestsRetry) {
  RequestQueue q;
  q.Close();
  auto one = std::make_shared<std::promise<std::string>>();
  auto two = std::make_shared<std::promise<std::string>>();
  auto f1 = one->get_future(), f2 = two->get_future();
  Request r;
  r.local = one;
  EXPECT_FALSE(q.Push(r));
  std::vector<Request> rs(1);
  rs[0].local = two;
  q.PushAll(std::move(rs));
  for (auto* f : {&f1, &f2}) {
    ASSERT_EQ(f->wait_for(std::chrono::seconds(0)), std::future_status::ready);
    nlohmann::json reply = nlohmann::json::parse(f->get());
    EXPECT_FALSE(reply.value("ok", true));
    EXPECT_EQ(reply.value("error", ""), "retry");
  }
}

}  // namespace
}  // namespace gatos::gatosd
