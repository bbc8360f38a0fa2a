// The replicated ledger's two uses of JetStream against a real nats-server:
// the election on a KV bucket (kv_bucket.h driven by election.h) and the
// replicated write-ahead log's stream with its fence (record_stream.h).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "gatos/model/election.h"
#include "gatos/model/record_parts.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/kv_bucket.h"
#include "gatos/nats/record_stream.h"
#include "nats_server.h"
#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::NatsServer;
using ::gatos::testing::PollFor;

std::unique_ptr<Bus> Connect(const NatsServer& server) {
  BusOptions o;
  o.url = server.url();
  auto b = Bus::Connect(o);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

// One step of a replica's election loop against the real bucket.
void Step(Election& e, KvBucket& kv) {
  Election::Action a = e.Next();
  if (a.kind == Election::Action::kCreate) e.OnCreated(kv.Create("leader", a.value));
  if (a.kind == Election::Action::kUpdate) e.OnUpdated(kv.Update("leader", a.value, a.revision));
}

ElectionOptions Fast() {
  ElectionOptions o;
  o.ttl_ms = 1000;
  o.keep_every_ms = 200;
  o.try_every_ms = 50;
  o.margin_ms = 300;
  return o;
}

TEST(ReplicationBusTest, ElectionOnAKvBucketAcquiresKeepsLosesAndFencesTheOldLeader) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  auto bus = Connect(server);
  ASSERT_TRUE(bus);
  auto kv = KvBucket::Open(*bus, {"GATOS_TEST_ELECTION", Fast().ttl_ms, 1, true});
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  Election a("a", Fast(), SystemNowMs);
  Election c("c", Fast(), SystemNowMs);
  Step(a, **kv);
  ASSERT_TRUE(a.leading()) << a.last_change();
  const uint64_t term_a = a.term();
  auto second = (*kv)->Create("leader", "x");
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().message();
  // For three TTLs the leader keeps the key and the other replica, trying
  // all along, never leads.
  const int64_t until = SystemNowMs() + 3 * Fast().ttl_ms;
  while (SystemNowMs() < until) {
    Step(a, **kv);
    Step(c, **kv);
    ASSERT_TRUE(a.leading()) << a.last_change();
    ASSERT_FALSE(c.leading());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto entry = (*kv)->Get("leader");
  ASSERT_TRUE(entry.ok() && entry->has_value());
  auto value = DecodeLeaderValue((*entry)->value);
  ASSERT_TRUE(value.ok()) << (*entry)->value;
  EXPECT_EQ(value->name, "a");
  EXPECT_EQ(value->term, term_a);
  const uint64_t last_rev = (*entry)->revision;
  // The leader stops: the key expires and c takes over with a higher term.
  const int64_t stopped = SystemNowMs();
  ASSERT_TRUE(PollFor(5000, [&] {
    Step(c, **kv);
    return c.leading();
  })) << c.last_change();
  EXPECT_LE(SystemNowMs() - stopped, Fast().ttl_ms + 2000);
  EXPECT_GT(c.term(), term_a);
  // The old leader's keep with its last revision is refused.
  auto stale = (*kv)->Update("leader", EncodeLeaderValue({"a", term_a}), last_rev);
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted) << stale.status().message();
  // And a bucket asked for with another TTL is not silently reused.
  auto other = KvBucket::Open(*bus, {"GATOS_TEST_ELECTION", 5000, 1, true});
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition) << other.status().message();
}

// The replicas' statuses as a follower reads them before it stands for
// election: every key under the prefix with its last value, deleted and
// expired ones gone, other keys left out.
TEST(ReplicationBusTest, LatestUnderReadsEachKeyUnderAPrefixAndDropsExpiredOnes) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  auto bus = Connect(server);
  ASSERT_TRUE(bus);
  auto kv = KvBucket::Open(*bus, {"GATOS_TEST_LATEST", 1500, 1, true});
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  auto none = (*kv)->LatestUnder("replica.");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE((*kv)->Put("replica.r1", "one").ok());
  ASSERT_TRUE((*kv)->Put("replica.r0", "zero").ok());
  ASSERT_TRUE((*kv)->Put("replica.r1", "one again").ok());
  ASSERT_TRUE((*kv)->Put("leader", "not a status").ok());
  auto got = (*kv)->LatestUnder("replica.");
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].first, "replica.r0");
  EXPECT_EQ((*got)[0].second.value, "zero");
  EXPECT_EQ((*got)[1].first, "replica.r1");
  EXPECT_EQ((*got)[1].second.value, "one again");
  EXPECT_GT((*got)[1].second.revision, (*got)[0].second.revision);
  // Keys not written again expire with the bucket's TTL; a fresh one stays.
  ASSERT_TRUE(PollFor(10'000, [&] {
    EXPECT_TRUE((*kv)->Put("replica.r2", "two").ok());
    auto g = (*kv)->LatestUnder("replica.");
    return g.ok() && g->size() == 1 && (*g)[0].first == "replica.r2";
  }));
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng());
  return s;
}

// Retention by size: the oldest records go first and the newest is always
// kept, so the leader's fence and a caught-up follower never miss one (a
// replica further behind finds a gap and is refused: docs/replication.md).
TEST(ReplicationBusTest, RetentionBySizeDropsTheOldestRecordsAndKeepsTheNewest) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  auto bus = Connect(server);
  ASSERT_TRUE(bus);
  RecordStreamConfig cfg{"GATOS_TEST_WAL", "gatos.test.wal", 1, 0, 120'000, 0};
  cfg.max_bytes = 16 * 1024;
  auto opened = RecordStream::Open(*bus, cfg);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  RecordStream& stream = **opened;
  uint64_t last = 0;
  for (int seq = 2; seq < 62; ++seq) {
    auto a = stream.Append(seq, RandomBytes(1000, seq), last);
    ASSERT_TRUE(a.ok()) << a.status().message();
    last = *a;
  }
  EXPECT_EQ(*stream.LastSequence(), last);
  const uint64_t first = *stream.FirstSequence();
  EXPECT_GT(first, 1u) << "16 KiB do not hold 60 records of 1 kB";
  auto gone = stream.Read(1);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_FALSE(gone->has_value());
  auto newest = stream.Read(last);
  ASSERT_TRUE(newest.ok() && newest->has_value());
  auto part = DecodeRecordPart((*newest)->data);
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->seq, 61);
  // The next append is fenced on the newest, as without retention.
  EXPECT_TRUE(stream.Append(62, RandomBytes(1000, 62), last).ok());
  // Reopening with another size updates the stream.
  cfg.max_bytes = -1;
  EXPECT_TRUE(RecordStream::Open(*bus, cfg).ok());
}

TEST(ReplicationBusTest, TheStreamFencesADeposedLeaderAndSplitsLargeRecords) {
  NatsServer::Options so;
  so.max_payload_bytes = 64 * 1024;
  NatsServer server(so);
  ASSERT_TRUE(server.Start());
  auto bus = Connect(server);
  ASSERT_TRUE(bus);
  RecordStreamConfig cfg{"GATOS_TEST_WAL", "gatos.test.wal", 1, 0, 120'000, 0};
  auto opened = RecordStream::Open(*bus, cfg);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  RecordStream& stream = **opened;
  EXPECT_LE(stream.max_part_bytes(), 64u * 1024);

  // Leader A appends record 2; B, elected after, appends record 3 on top.
  const std::string r2 = RandomBytes(1000, 1), r3 = RandomBytes(200'000, 2), r3_old = RandomBytes(500, 3);
  auto s2 = stream.Append(2, r2, 0);
  ASSERT_TRUE(s2.ok()) << s2.status().message();
  EXPECT_EQ(*s2, 1u);
  auto s3 = stream.Append(3, r3, *s2);
  ASSERT_TRUE(s3.ok()) << s3.status().message();
  EXPECT_GT(*s3, *s2 + 3);  // 200 kB in parts of under 64 KiB
  // A, deposed but unaware, appends its own record 3 after what it saw last.
  auto fenced = stream.Append(3, r3_old, *s2);
  EXPECT_EQ(fenced.status().code(), StatusCode::kAborted) << fenced.status().message();
  EXPECT_NE(fenced.status().message().find("fenced"), std::string::npos) << fenced.status().message();
  // Even at the right position, a record of one part whose sequence is in
  // the stream already is refused (its message id is the sequence).
  auto dup = stream.Append(2, r3_old, *s3);
  EXPECT_EQ(dup.status().code(), StatusCode::kAborted) << dup.status().message();
  EXPECT_EQ(*stream.LastSequence(), *s3);

  // A follower reads the stream in order and joins the records.
  RecordJoiner j;
  std::vector<JoinedRecord> got;
  for (uint64_t seq = 1;; ++seq) {
    auto m = stream.Read(seq);
    ASSERT_TRUE(m.ok()) << m.status().message();
    if (!m->has_value()) break;
    auto r = j.Add((*m)->data);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->has_value()) got.push_back(std::move(**r));
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 2);
  EXPECT_EQ(got[0].bytes, r2);
  EXPECT_EQ(got[1].seq, 3);
  EXPECT_EQ(got[1].bytes, r3);
}

}  // namespace
}  // namespace gatos
