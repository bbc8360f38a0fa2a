// Delivering results: how they are grouped into requests, and what each
// entry's reply means for its outbox row.
#include "gatos/worker/delivery.h"

#include <gtest/gtest.h>

#include <vector>

namespace gatos::worker {
namespace {

using Kind = DeliveryDecision::Kind;

Reply Refused(TransitionError e, std::string m) { return Reply{e, std::move(m), {}, false}; }

TEST(WorkerDelivery, BatchesHoldUpTo1MiBAndAtLeastOneResult) {
  const size_t kMiB = 1 << 20;
  EXPECT_EQ(NextResultBatchEnd({}, 0), 0u);
  EXPECT_EQ(NextResultBatchEnd({100, 200, 300}, 0), 3u);
  EXPECT_EQ(NextResultBatchEnd({kMiB / 2, kMiB / 2, 1}, 0), 2u);  // exactly 1 MiB
  EXPECT_EQ(NextResultBatchEnd({kMiB / 2, kMiB / 2, 1}, 2), 3u);
  EXPECT_EQ(NextResultBatchEnd({3 * kMiB, 10}, 0), 1u);  // a larger single result goes alone
  EXPECT_EQ(NextResultBatchEnd({10, 3 * kMiB}, 0), 1u);
  EXPECT_EQ(NextResultBatchEnd({10, 3 * kMiB}, 1), 2u);
}

TEST(WorkerDelivery, BatchesHoldAtMost256Results) {
  std::vector<size_t> sizes(600, 10);
  EXPECT_EQ(NextResultBatchEnd(sizes, 0), 256u);
  EXPECT_EQ(NextResultBatchEnd(sizes, 256), 512u);
  EXPECT_EQ(NextResultBatchEnd(sizes, 512), 600u);
}

TEST(WorkerDelivery, AnAcceptedResultIsDelivered) {
  DeliveryDecision d = DecideDelivery(Reply{}, 1000, 3);
  EXPECT_EQ(d.kind, Kind::kDelivered);
  EXPECT_EQ(d.error_text, "");
  EXPECT_FALSE(d.replace);
}

TEST(WorkerDelivery, ARetryableFailureIsRetriedWithTheLedgersWords) {
  DeliveryDecision d = DecideDelivery(Refused(TransitionError::kRetry, "no responders"), 1000, 1);
  EXPECT_EQ(d.kind, Kind::kRetry);
  EXPECT_EQ(d.error_text, "retry: no responders");
  EXPECT_FALSE(d.replace);
}

TEST(WorkerDelivery, EveryOtherRefusalIsDeadAtOnce) {
  for (TransitionError e :
       {TransitionError::kInvalid, TransitionError::kUnauthorized, TransitionError::kStaleOwner,
        TransitionError::kTerminal, TransitionError::kInternal, TransitionError::kLostRace,
        TransitionError::kCancelled}) {
    DeliveryDecision d = DecideDelivery(Refused(e, "because"), 1000, 2);
    EXPECT_EQ(d.kind, Kind::kRefused) << TransitionErrorName(e);
    EXPECT_EQ(d.error_text, std::string(TransitionErrorName(e)) + ": because");
    EXPECT_FALSE(d.replace);
  }
}

TEST(WorkerDelivery, TooLargeInABatchIsSentAgainAloneAndAloneIsReplaced) {
  Reply big = NoReply(InvalidArgumentError("maximum payload exceeded"));
  EXPECT_EQ(DecideDelivery(big, 2'000'000, 2).kind, Kind::kSendAlone);
  DeliveryDecision alone = DecideDelivery(big, 2'000'000, 1);
  EXPECT_EQ(alone.kind, Kind::kRefused);
  EXPECT_EQ(alone.error_text,
            "the result (2000000 bytes) cannot be sent: maximum payload exceeded");
  EXPECT_TRUE(alone.replace);
}

}  // namespace
}  // namespace gatos::worker
