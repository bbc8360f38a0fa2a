// What a worker publishes of a running job's output, and when
// (gatos/worker/live_output_buffer.h).
#include "gatos/worker/live_output_buffer.h"

#include <gtest/gtest.h>

namespace gatos::worker {
namespace {

LiveLimits Small() {
  LiveLimits l;
  l.bytes_per_s = 1000;
  l.burst_bytes = 2000;
  l.messages_per_s = 4;
  l.burst_messages = 4;
  l.buffer_bytes = 3000;
  l.chunk_bytes = 500;
  l.progress_interval_ms = 500;
  return l;
}

TEST(LiveOutputBuffer, SmallOutputGoesOutWholeAndInOrder) {
  LiveOutputBuffer b(Small(), 0);
  b.Append(1, "one\n");
  b.Append(2, "err\n");
  b.Append(1, "two\n");
  auto chunks = b.Take(0);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].stream, 1);
  EXPECT_EQ(chunks[0].offset, 0);
  EXPECT_EQ(chunks[0].data, "one\ntwo\n");
  EXPECT_EQ(chunks[1].stream, 2);
  EXPECT_EQ(chunks[1].data, "err\n");
  EXPECT_FALSE(b.HasPending());
  b.Append(1, "three\n");
  chunks = b.Take(10);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].offset, 8);
}

TEST(LiveOutputBuffer, AFloodIsBoundedInMemoryBytesAndMessages) {
  const LiveLimits l = Small();
  LiveOutputBuffer b(l, 0);
  const std::string mib(1 << 20, 'x');
  int64_t published = 0, messages = 0;
  // 100 MiB over 10 s of ticks every 100 ms.
  for (int64_t t = 0; t <= 10000; t += 100) {
    if (t < 10000) {
      for (int i = 0; i < 10; ++i) b.Append(1, mib);
    }
    for (const LiveChunk& c : b.Take(t)) {
      EXPECT_LE(c.data.size(), l.chunk_bytes);
      published += static_cast<int64_t>(c.data.size());
      ++messages;
    }
  }
  // The budget over 10 s: the burst plus the rate.
  EXPECT_LE(published, l.burst_bytes + 10 * l.bytes_per_s);
  EXPECT_GE(published, 10 * l.bytes_per_s);
  EXPECT_LE(messages, static_cast<int64_t>(l.burst_messages + 10 * l.messages_per_s));
  EXPECT_EQ(b.published_bytes(), published);
  EXPECT_EQ(b.published_messages(), messages);
  EXPECT_GE(b.dropped_bytes(), 100 * (1 << 20) - l.buffer_bytes - published);
}

TEST(LiveOutputBuffer, OffsetsShowWhereBytesWereDropped) {
  LiveLimits l = Small();
  l.buffer_bytes = 10;
  l.chunk_bytes = 100;
  LiveOutputBuffer b(l, 0);
  b.Append(1, "0123456789abcdef");  // 6 bytes over the buffer: dropped
  b.Append(1, "ghij");              // still dropping until the buffer was taken
  auto chunks = b.Take(0);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].offset, 0);
  EXPECT_EQ(chunks[0].data, "0123456789");
  b.Append(1, "KLM");
  chunks = b.Take(0);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].offset, 20);  // 10 bytes between 10 and 20 never went out
  EXPECT_EQ(chunks[0].data, "KLM");
  EXPECT_EQ(b.dropped_bytes(), 10);
}

TEST(LiveOutputBuffer, ProgressIsPacedAndSharesTheMessageBudget) {
  LiveOutputBuffer b(Small(), 0);
  EXPECT_TRUE(b.TakeProgressSlot(0));
  EXPECT_FALSE(b.TakeProgressSlot(100));  // within the interval
  EXPECT_TRUE(b.TakeProgressSlot(600));
  EXPECT_EQ(b.published_messages(), 2);
}

TEST(LiveOutputBuffer, RatesComeFromSuccessiveReports) {
  Progress a, b;
  a.counters = {{"objects", 100, 1000, 0}, {"bytes", 0, 0, 0}};
  b.counters = {{"objects", 300, 1000, 0}, {"bytes", 4096, 0, 0}, {"commits", 3, 0, 0}};
  Progress r = WithRates(a, 1000, b, 3000);
  ASSERT_EQ(r.counters.size(), 3u);
  EXPECT_DOUBLE_EQ(r.counters[0].rate, 100.0);
  EXPECT_DOUBLE_EQ(r.counters[1].rate, 2048.0);
  EXPECT_DOUBLE_EQ(r.counters[2].rate, 0.0);    // no earlier report of it
  Progress soon = WithRates(r, 3000, b, 3050);  // too close: keep the rates
  EXPECT_DOUBLE_EQ(soon.counters[0].rate, 100.0);
}

}  // namespace
}  // namespace gatos::worker
