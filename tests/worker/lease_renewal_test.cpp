// Renewal timing: the interval, the backoff with its jitter bounds, and when
// a lease that cannot be renewed is lost.
#include "gatos/worker/lease_renewal.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace gatos::worker {
namespace {

TEST(WorkerLeaseRenewal, RenewsEveryThirdOfTheLeaseAndNeverMoreOftenThan50Ms) {
  EXPECT_EQ(RenewInterval(30000), 10000);
  EXPECT_EQ(RenewInterval(3000), 1000);
  EXPECT_EQ(RenewInterval(150), 50);
  EXPECT_EQ(RenewInterval(149), 50);
  EXPECT_EQ(RenewInterval(0), 50);
}

TEST(WorkerLeaseRenewal, TheBackoffDoublesFrom200MsUpToTheIntervalWithHalfOfItRandom) {
  // failures -> backoff before jitter: 100 << min(failures, 6), at most the interval.
  const int64_t interval = 10000;
  const int64_t expected[] = {0, 200, 400, 800, 1600, 3200, 6400, 6400, 6400};
  for (int failures = 1; failures <= 8; ++failures) {
    const int64_t backoff = expected[failures];
    EXPECT_EQ(RenewRetryDelay(interval, failures, 0), backoff / 2) << failures;
    EXPECT_EQ(RenewRetryDelay(interval, failures, static_cast<uint32_t>(backoff / 2)), backoff)
        << failures;
    EXPECT_EQ(RenewRetryDelay(interval, failures, static_cast<uint32_t>(backoff / 2 + 1)),
              backoff / 2)
        << failures;
    EXPECT_EQ(RenewRetryDelay(interval, failures, UINT32_MAX),
              backoff / 2 + UINT32_MAX % (backoff / 2 + 1));
  }
  // A short lease: never longer than the interval.
  EXPECT_EQ(RenewRetryDelay(300, 3, 0), 150);
  EXPECT_EQ(RenewRetryDelay(300, 3, 150), 300);
  EXPECT_EQ(RenewRetryDelay(50, 1, 25), 50);
}

TEST(WorkerLeaseRenewal, TheScheduleStartsOneIntervalAfterTheClaim) {
  LeaseRenewal r(30000, 1'000'030'000);
  r.Start(1'000'000'000);
  EXPECT_EQ(r.next_ms(), 1'000'010'000);
  EXPECT_EQ(r.expires_ms(), 1'000'030'000);
  EXPECT_EQ(r.failures(), 0);
}

TEST(WorkerLeaseRenewal, ARenewalMovesTheDeadlineAndClearsFailures) {
  LeaseRenewal r(30000, 1'000'030'000);
  r.Start(1'000'000'000);
  ASSERT_TRUE(r.Failed(1'000'010'000, 0));
  EXPECT_EQ(r.failures(), 1);
  EXPECT_EQ(r.next_ms(), 1'000'010'100);
  r.Renewed(1'000'040'200, 1'000'010'200);
  EXPECT_EQ(r.failures(), 0);
  EXPECT_EQ(r.expires_ms(), 1'000'040'200);
  EXPECT_EQ(r.next_ms(), 1'000'020'200);
}

TEST(WorkerLeaseRenewal, FailuresBackOffUntilTheDeadlineThenTheLeaseIsLost) {
  LeaseRenewal r(3000, 10'000);
  r.Start(7'000);
  EXPECT_TRUE(r.Failed(8'000, 100));  // backoff 200: 100 + 100 % 101
  EXPECT_EQ(r.next_ms(), 8'200);
  EXPECT_TRUE(r.Failed(8'200, 0));  // backoff 400
  EXPECT_EQ(r.next_ms(), 8'400);
  EXPECT_TRUE(r.Failed(9'999, 0));    // still before the deadline
  EXPECT_FALSE(r.Failed(10'000, 0));  // at the deadline: lost
  EXPECT_EQ(r.failures(), 4);
  r.Lost();
  EXPECT_EQ(r.next_ms(), INT64_MAX);
}

}  // namespace
}  // namespace gatos::worker
