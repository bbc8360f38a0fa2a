#include "gatos/model/trailers.h"

#include <gtest/gtest.h>

#include <string>

namespace gatos {
namespace {

// Substring check without gmock (the test targets link gtest only).
#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

CommitMessage MustParse(std::string_view msg) {
  Result<CommitMessage> r = ParseCommitMessage(msg);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : CommitMessage{};
}

TEST(TrailersTest, ResultCommitTrailers) {
  CommitMessage m = MustParse(
      "gatos: result of job 298aaf4c\n\nRan on worker w1.\n\n"
      "Job-Id: blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc\n"
      "Status: succeeded\nLease-Epoch: 3\n");
  EXPECT_EQ(m.body, "gatos: result of job 298aaf4c\n\nRan on worker w1.");
  ASSERT_EQ(m.trailers.size(), 3u);
  EXPECT_EQ(m.trailers[0].key, "Job-Id");
  EXPECT_EQ(m.trailers[1], (Trailer{"Status", "succeeded"}));
  EXPECT_EQ(m.trailers[2], (Trailer{"Lease-Epoch", "3"}));
}

TEST(TrailersTest, ContinuationLinesAreFolded) {
  CommitMessage m = MustParse("Title\n\nNote: first\n  second\n\tthird\nB: x:y: z  \n");
  ASSERT_EQ(m.trailers.size(), 2u);
  EXPECT_EQ(m.trailers[0].value, "first second third");
  EXPECT_EQ(m.trailers[1].value, "x:y: z");
}

TEST(TrailersTest, TitleParagraphIsNeverTrailers) {
  CommitMessage m = MustParse("Job-Id: blake3:abc\n");
  EXPECT_TRUE(m.trailers.empty());
  EXPECT_EQ(m.body, "Job-Id: blake3:abc");
}

TEST(TrailersTest, MixedParagraphIsBody) {
  CommitMessage m = MustParse("Title\n\nFixes: something\nand prose\n");
  EXPECT_TRUE(m.trailers.empty());
  EXPECT_EQ(m.body, "Title\n\nFixes: something\nand prose");
  // Only the last paragraph counts.
  m = MustParse("Title\n\nKey: in body\n\nA: 1\n");
  EXPECT_EQ(m.body, "Title\n\nKey: in body");
  EXPECT_EQ(m.trailers, (std::vector<Trailer>{{"A", "1"}}));
}

TEST(TrailersTest, StrictRejections) {
  // Git accepts these blocks (Signed-off-by makes 25% enough, "Key :" is a
  // trailer to git); we do not guess.
  Result<CommitMessage> r = ParseCommitMessage("T\n\nSigned-off-by: a\nprose line\nB: c\n");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "line 4: 'prose line' in the trailer block is not");
  r = ParseCommitMessage("T\n\nKey : v\n");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "trailer key 'Key ' must be [A-Za-z0-9-]+");
  r = ParseCommitMessage("T\n\nA: b\n---\npatch\n");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "line 4: text after the trailer block");
  r = ParseCommitMessage("T\n\nA: b\n# comment\n");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = ParseCommitMessage(std::string(kMaxCommitMessageBytes + 1, 'a'));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "exceeds the limit of 1048576 bytes");
}

TEST(TrailersTest, FormatRoundTrips) {
  CommitMessage m{"Title line\n\nBody: looks like a trailer\nbut is prose",
                  {{"Job-Id", "blake3:00"},
                   {"Status", "failed"},
                   {"Empty", ""},
                   {"Url", "https://example.com/a:b"}}};
  const std::string text = FormatCommitMessage(m);
  EXPECT_EQ(text,
            "Title line\n\nBody: looks like a trailer\nbut is prose\n\nJob-Id: blake3:00\n"
            "Status: failed\nEmpty: \nUrl: https://example.com/a:b\n");
  EXPECT_EQ(MustParse(text), m);
  CommitMessage no_trailers{"Just a title", {}};
  EXPECT_EQ(FormatCommitMessage(no_trailers), "Just a title\n");
  EXPECT_EQ(MustParse(FormatCommitMessage(no_trailers)), no_trailers);
  CommitMessage empty_body{"", {{"A", "b"}}};
  EXPECT_EQ(MustParse(FormatCommitMessage(empty_body)), empty_body);
  // A newline in a value becomes a continuation line and folds to a space.
  CommitMessage multi{"T", {{"Note", "one\ntwo"}}};
  EXPECT_EQ(MustParse(FormatCommitMessage(multi)).trailers[0].value, "one two");
}

TEST(TrailersTest, FindAndRequireUnique) {
  std::vector<Trailer> t = {{"A", "1"}, {"B", "2"}, {"A", "3"}};
  EXPECT_EQ(FindTrailer(t, "A"), "1");
  EXPECT_EQ(FindTrailer(t, "a"), std::nullopt);  // exact key
  EXPECT_EQ(*RequireUniqueTrailer(t, "B"), "2");
  EXPECT_EQ(RequireUniqueTrailer(t, "A").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RequireUniqueTrailer(t, "C").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(IsValidTrailerKey("Proof-Of-Execution"));
  EXPECT_FALSE(IsValidTrailerKey("Bad Key"));
  EXPECT_FALSE(IsValidTrailerKey(""));
}

}  // namespace
}  // namespace gatos
