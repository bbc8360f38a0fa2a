// gatosd's replies in the worker's one vocabulary: single replies, transport
// failures and batch replies.
#include "gatos/worker/rpc_reply.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/model/rpc.h"

namespace gatos::worker {
namespace {

std::string Dumped(const nlohmann::json& j) { return j.dump(); }

TEST(WorkerRpcReply, AnOkReplyCarriesItsBody) {
  nlohmann::json ok = rpc::OkReply();
  ok["lease_commit"] = "abc";
  Reply r = ReplyOf(Dumped(ok), rpc::kClaim);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.body.value("lease_commit", ""), "abc");
  EXPECT_FALSE(r.too_large);
}

TEST(WorkerRpcReply, AnErrorReplyKeepsItsClassAndMessage) {
  Reply r = ReplyOf(Dumped(rpc::ErrorReply(TransitionError::kLostRace, "held by another worker")),
                    rpc::kClaim);
  EXPECT_EQ(r.error, TransitionError::kLostRace);
  EXPECT_EQ(r.message, "held by another worker");
}

TEST(WorkerRpcReply, AMalformedReplyIsRetryableAndNamesTheSubject) {
  Reply r = ReplyOf("not json", rpc::kRenew);
  EXPECT_EQ(r.error, TransitionError::kRetry);
  EXPECT_EQ(r.message, "malformed reply on gatos.rpc.renew");
}

TEST(WorkerRpcReply, NoReplyIsRetryableAndTooLargeOnlyWhenTheBusRefusedTheSize) {
  Reply timeout = NoReply(DeadlineExceededError("no reply within 5000 ms"));
  EXPECT_EQ(timeout.error, TransitionError::kRetry);
  EXPECT_EQ(timeout.message, "no reply within 5000 ms");
  EXPECT_FALSE(timeout.too_large);
  Reply big = NoReply(InvalidArgumentError("maximum payload exceeded"));
  EXPECT_EQ(big.error, TransitionError::kRetry);
  EXPECT_TRUE(big.too_large);
}

TEST(WorkerRpcReply, ABatchReplyGivesEachEntryItsOwnReply) {
  std::string batch =
      rpc::EncodeBatch({Dumped(rpc::OkReply()),
                        Dumped(rpc::ErrorReply(TransitionError::kTerminal, "done")), "garbage"});
  std::vector<Reply> r = RepliesOfBatch(batch, 3, rpc::kResult, rpc::kResultBatch);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[1].error, TransitionError::kTerminal);
  EXPECT_EQ(r[1].message, "done");
  EXPECT_EQ(r[2].error, TransitionError::kRetry);
  EXPECT_EQ(r[2].message, "malformed reply on gatos.rpc.result");  // parsed as a single reply
}

TEST(WorkerRpcReply, ABatchRefusedAsAWholeRefusesEveryEntry) {
  std::vector<Reply> r =
      RepliesOfBatch(Dumped(rpc::ErrorReply(TransitionError::kUnauthorized, "not a worker")), 2,
                     rpc::kClaim, rpc::kClaimBatch);
  ASSERT_EQ(r.size(), 2u);
  for (const Reply& e : r) {
    EXPECT_EQ(e.error, TransitionError::kUnauthorized);
    EXPECT_EQ(e.message, "not a worker");
  }
}

TEST(WorkerRpcReply, ABatchReplyOfTheWrongShapeIsRetryableForEveryEntry) {
  const std::string malformed = "malformed reply on gatos.rpc.claim-batch";
  const std::string two = rpc::EncodeBatch({Dumped(rpc::OkReply()), Dumped(rpc::OkReply())});
  std::vector<std::string> cases = {
      Dumped(rpc::OkReply()),                      // ok, but not a batch
      rpc::EncodeBatch({Dumped(rpc::OkReply())}),  // one reply for two entries
      two.substr(0, two.size() - 1),               // a batch cut short
      "",                                          // nothing at all
  };
  for (const std::string& data : cases) {
    std::vector<Reply> r = RepliesOfBatch(data, 2, rpc::kClaim, rpc::kClaimBatch);
    ASSERT_EQ(r.size(), 2u);
    for (const Reply& e : r) {
      EXPECT_EQ(e.error, TransitionError::kRetry);
      EXPECT_EQ(e.message, malformed);
    }
  }
}

}  // namespace
}  // namespace gatos::worker
