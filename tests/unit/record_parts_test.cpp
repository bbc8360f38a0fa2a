#include "gatos/model/record_parts.h"

#include <gtest/gtest.h>

#include <random>

namespace gatos {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Joins every part in order; the record comes out exactly at the last one.
std::optional<JoinedRecord> JoinAll(RecordJoiner& j, const std::vector<std::string>& parts) {
  std::optional<JoinedRecord> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto r = j.Add(parts[i]);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return std::nullopt;
    EXPECT_EQ(r->has_value(), i + 1 == parts.size()) << "part " << i;
    if (r->has_value()) out = std::move(**r);
  }
  return out;
}

TEST(RecordPartsTest, ARecordSplitUnderTheLimitJoinsBackExactly) {
  const std::string record = RandomBytes(10'000, 1);
  for (size_t max : {kRecordPartHeader + 1, size_t{100}, size_t{1000}, size_t{10'064}, size_t{1} << 20}) {
    auto parts = SplitRecord(42, record, max);
    ASSERT_TRUE(parts.ok()) << parts.status().message();
    const size_t chunk = max - kRecordPartHeader;
    EXPECT_EQ(parts->size(), (record.size() + chunk - 1) / chunk) << max;
    for (const auto& p : *parts) EXPECT_LE(p.size(), max);
    RecordJoiner j;
    auto joined = JoinAll(j, *parts);
    ASSERT_TRUE(joined.has_value()) << max;
    EXPECT_EQ(joined->seq, 42);
    EXPECT_EQ(joined->bytes, record);
    EXPECT_EQ(j.pending_seq(), 0);
  }
}

TEST(RecordPartsTest, MessageIdsAreTheSequenceOrTheSequencePartAndDigest) {
  auto one = SplitRecord(7, "abc", 1000);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(RecordPartMsgId(*DecodeRecordPart((*one)[0])), "7");
  auto a = SplitRecord(7, RandomBytes(300, 8), 200);
  auto b = SplitRecord(7, RandomBytes(300, 9), 200);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string id = RecordPartMsgId(*DecodeRecordPart((*a)[1]));
  EXPECT_EQ(id.substr(0, 4), "7.1.");
  EXPECT_EQ(id.size(), 4u + 12);
  // Another record at the same sequence (the next leader's) has other ids.
  EXPECT_NE(RecordPartMsgId(*DecodeRecordPart((*b)[1])), id);
}

TEST(RecordPartsTest, SplitRefusesWhatCannotBeFramed) {
  EXPECT_EQ(SplitRecord(0, "x", 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitRecord(1, "", 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitRecord(1, "x", kRecordPartHeader).status().code(), StatusCode::kInvalidArgument);
}

TEST(RecordPartsTest, AnIncompleteRecordIsNeverYieldedAndANewStartAbandonsIt) {
  // A leader died after two of four parts of record 9; the next leader
  // publishes record 9 again, whole.
  auto dead = SplitRecord(9, RandomBytes(400, 2), 164);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 4u);
  const std::string again = RandomBytes(300, 3);
  auto next = SplitRecord(9, again, 1000);
  ASSERT_TRUE(next.ok());
  RecordJoiner j;
  for (int i = 0; i < 2; ++i) {
    auto r = j.Add((*dead)[i]);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value());
  }
  EXPECT_EQ(j.pending_seq(), 9);
  auto r = j.Add((*next)[0]);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->bytes, again);
  EXPECT_EQ(j.abandoned(), 1u);
}

TEST(RecordPartsTest, APartOutOfPlaceIsRefusedAndSaysWhy) {
  auto a = SplitRecord(5, RandomBytes(500, 4), 200);
  auto b = SplitRecord(6, RandomBytes(500, 5), 200);
  ASSERT_TRUE(a.ok() && b.ok());
  {
    RecordJoiner j;  // a middle part with nothing before it
    auto r = j.Add((*a)[1]);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no record was started"), std::string::npos) << r.status().message();
  }
  {
    RecordJoiner j;  // a part skipped
    ASSERT_TRUE(j.Add((*a)[0]).ok());
    auto r = j.Add((*a)[2]);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("expected part 2"), std::string::npos) << r.status().message();
    EXPECT_EQ(j.pending_seq(), 0);
  }
  {
    RecordJoiner j;  // another record's part in the middle
    ASSERT_TRUE(j.Add((*a)[0]).ok());
    EXPECT_EQ(j.Add((*b)[1]).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(RecordPartsTest, AChunkThatDoesNotHashToTheDigestIsDataLoss) {
  auto parts = SplitRecord(3, RandomBytes(300, 6), 200);
  ASSERT_TRUE(parts.ok());
  std::string& last = parts->back();
  last.back() = static_cast<char>(last.back() ^ 1);
  RecordJoiner j;
  for (size_t i = 0; i + 1 < parts->size(); ++i) ASSERT_TRUE(j.Add((*parts)[i]).ok());
  auto r = j.Add(parts->back());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().message();
}

TEST(RecordPartsTest, DecodeRefusesMalformedParts) {
  auto parts = SplitRecord(3, "hello", 1000);
  ASSERT_TRUE(parts.ok());
  const std::string good = (*parts)[0];
  ASSERT_TRUE(DecodeRecordPart(good).ok());
  auto with = [&](size_t at, char c) {
    std::string s = good;
    s[at] = c;
    return s;
  };
  EXPECT_FALSE(DecodeRecordPart(good.substr(0, kRecordPartHeader)).ok());  // no chunk
  EXPECT_FALSE(DecodeRecordPart(with(0, 'X')).ok());                       // magic
  EXPECT_FALSE(DecodeRecordPart(with(8, '\0')).ok());                      // sequence 0
  EXPECT_FALSE(DecodeRecordPart(with(16, '\1')).ok());                     // index 1 of 1
  EXPECT_FALSE(DecodeRecordPart(with(20, '\0')).ok());                     // 0 parts
  EXPECT_FALSE(DecodeRecordPart(with(24, '\2')).ok());                     // chunk longer than the record
  EXPECT_FALSE(DecodeRecordPart(good + "x").ok());                         // chunk longer than the record
}

}  // namespace
}  // namespace gatos
