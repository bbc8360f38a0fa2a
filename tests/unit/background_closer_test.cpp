#include "gatos/sys/background_closer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace gatos {
namespace {

// The read end of a pipe sees end-of-file once every write end is closed.
TEST(BackgroundCloserTest, ClosesWhatItIsHandedOnItsOwnThread) {
  BackgroundCloser closer;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  closer.Close(p[1]);
  char c;
  EXPECT_EQ(::read(p[0], &c, 1), 0) << "the write end was closed";
  ::close(p[0]);
  closer.Close(-1);  // ignored
}

TEST(BackgroundCloserTest, DestructionClosesEveryDescriptorStillPending) {
  std::vector<int> readers;
  {
    BackgroundCloser closer;
    // More than it queues: the rest are closed on the caller.
    for (size_t i = 0; i < BackgroundCloser::kMaxPending + 8; ++i) {
      int p[2];
      ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
      readers.push_back(p[0]);
      closer.Close(p[1]);
    }
  }
  for (int r : readers) {
    char c;
    EXPECT_EQ(::read(r, &c, 1), 0) << "a write end is still open";
    ::close(r);
  }
}

}  // namespace
}  // namespace gatos
