// The default concurrency for a number of CPUs.
#include "gatos/worker/concurrency.h"

#include <gtest/gtest.h>

namespace gatos::worker {
namespace {

TEST(WorkerConcurrency, EightPerCpuBetweenFourAndSixtyFour) {
  EXPECT_EQ(ConcurrencyForCpus(0), 8);
  EXPECT_EQ(ConcurrencyForCpus(1), 8);
  EXPECT_EQ(ConcurrencyForCpus(2), 16);
  EXPECT_EQ(ConcurrencyForCpus(8), 64);
  EXPECT_EQ(ConcurrencyForCpus(9), 64);
  EXPECT_EQ(ConcurrencyForCpus(128), 64);
  EXPECT_EQ(kMinDefaultConcurrency, 4);
}

}  // namespace
}  // namespace gatos::worker
