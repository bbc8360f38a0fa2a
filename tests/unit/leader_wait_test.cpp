// Which answers of a replicated ledger the CLI asks again while a leader
// is elected (leader_wait.h): only those that say nothing was done, or
// where asking again is safe; never a refusal.
#include "gatos/model/leader_wait.h"

#include <gtest/gtest.h>

#include "gatos/model/rpc.h"

namespace gatos {
namespace {

TEST(LeaderWaitTest, NobodyAnsweringIsAskedAgainForEveryRequest) {
  for (const char* subject : {rpc::kSubmit, rpc::kStatus, rpc::kList, rpc::kLogs, rpc::kCancel, rpc::kRetry}) {
    EXPECT_TRUE(RetryAcrossLeaderChange(subject, UnavailableError("no responders"), TransitionError::kNone))
        << subject;
  }
}

TEST(LeaderWaitTest, ARetryAnswerIsAskedAgainAndARefusalNever) {
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kSubmit, OkStatus(), TransitionError::kRetry));
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kStatus, OkStatus(), TransitionError::kRetry));
  for (TransitionError e : {TransitionError::kNone, TransitionError::kInvalid, TransitionError::kUnauthorized,
                            TransitionError::kInternal, TransitionError::kTerminal, TransitionError::kLostRace,
                            TransitionError::kStaleOwner, TransitionError::kCancelled}) {
    EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kSubmit, OkStatus(), e)) << TransitionErrorName(e);
    EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kList, OkStatus(), e)) << TransitionErrorName(e);
  }
}

TEST(LeaderWaitTest, NoReplyInTimeIsAskedAgainOnlyWhereRepeatingIsSafe) {
  const Status late = DeadlineExceededError("no reply within 5000 ms");
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kSubmit, late, TransitionError::kNone));  // idempotent by job id
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kStatus, late, TransitionError::kNone));
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kList, late, TransitionError::kNone));
  EXPECT_TRUE(RetryAcrossLeaderChange(rpc::kLogs, late, TransitionError::kNone));
  EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kCancel, late, TransitionError::kNone));
  EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kRetry, late, TransitionError::kNone));
}

TEST(LeaderWaitTest, OtherFailuresAreNotAskedAgain) {
  EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kSubmit, PermissionDeniedError("refused this client"), TransitionError::kNone));
  EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kStatus, InvalidArgumentError("malformed reply"), TransitionError::kNone));
  EXPECT_FALSE(RetryAcrossLeaderChange(rpc::kStatus, NotFoundError("no job"), TransitionError::kNone));
}

TEST(LeaderWaitTest, BackoffDoublesToOneSecond) {
  EXPECT_EQ(LeaderWaitBackoffMs(1), 100);
  EXPECT_EQ(LeaderWaitBackoffMs(2), 200);
  EXPECT_EQ(LeaderWaitBackoffMs(3), 400);
  EXPECT_EQ(LeaderWaitBackoffMs(4), 800);
  EXPECT_EQ(LeaderWaitBackoffMs(5), 1000);
  EXPECT_EQ(LeaderWaitBackoffMs(1000), 1000);
}

TEST(LeaderWaitTest, TheBoundIsSecondsAtLeastZero) {
  EXPECT_EQ(ParseLeaderWaitMs("30"), 30'000);
  EXPECT_EQ(ParseLeaderWaitMs("0"), 0);
  EXPECT_EQ(ParseLeaderWaitMs("2.5"), 2'500);
  for (const char* bad : {"", "-1", "ten", "5s", "nan", "inf", "1e9"}) EXPECT_FALSE(ParseLeaderWaitMs(bad)) << bad;
}

}  // namespace
}  // namespace gatos
