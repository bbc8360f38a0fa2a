// Prefetch: none until eight runs are known, half the concurrency while
// recent runs were short, none once they are long.
#include "gatos/worker/prefetch.h"

#include <gtest/gtest.h>

namespace gatos::worker {
namespace {

TEST(WorkerPrefetch, NothingBeforeEightRuns) {
  RunTimes t;
  for (int i = 0; i < 7; ++i) {
    t.Record(10);
    EXPECT_EQ(PrefetchCount(16, t), 0) << i;
  }
  t.Record(10);
  EXPECT_EQ(PrefetchCount(16, t), 8);
}

TEST(WorkerPrefetch, HalfTheConcurrencyAndAtLeastOneWhileJobsAreShort) {
  RunTimes t;
  for (int i = 0; i < 8; ++i) t.Record(499);
  EXPECT_EQ(PrefetchCount(16, t), 8);
  EXPECT_EQ(PrefetchCount(3, t), 1);
  EXPECT_EQ(PrefetchCount(1, t), 1);
}

TEST(WorkerPrefetch, NoneWhileJobsAreLong) {
  RunTimes t;
  for (int i = 0; i < 8; ++i) t.Record(500);
  EXPECT_EQ(t.average_ms(), 500);
  EXPECT_EQ(PrefetchCount(16, t), 0);
}

TEST(WorkerPrefetch, TheAverageFollowsAboutTheLastSixteenRuns) {
  RunTimes t;
  t.Record(1600);
  EXPECT_EQ(t.average_ms(), 1600);  // the first run is the average
  t.Record(0);
  EXPECT_EQ(t.average_ms(), 1500);  // 1600 + (0 - 1600) / 16
  EXPECT_EQ(t.runs(), 2);
  // Long jobs then short ones: prefetch resumes once the average is under 500 ms.
  RunTimes u;
  for (int i = 0; i < 8; ++i) u.Record(10000);
  int short_runs = 0;
  while (PrefetchCount(8, u) == 0) {
    u.Record(0);
    ++short_runs;
  }
  EXPECT_EQ(short_runs, 47);  // 10000 * (15/16)^47 < 500 <= 10000 * (15/16)^46
}

}  // namespace
}  // namespace gatos::worker
