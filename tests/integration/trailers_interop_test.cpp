// ParseCommitMessage / FormatCommitMessage against real `git
// interpret-trailers --parse` (no user or system config).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/model/trailers.h"
#include "test_util.h"

namespace gatos {
namespace {

class TrailersInteropTest : public ::testing::Test {
 protected:
  // What git reports for `message`: "Key: value\n" per trailer.
  std::string GitParse(const std::string& message) {
    const std::string file = dir_.Join("msg" + std::to_string(counter_++));
    testing::WriteFile(file, message);
    testing::RunOptions opts;
    opts.env = {{"HOME", dir_.path()},
                {"XDG_CONFIG_HOME", dir_.path()},
                {"GIT_CONFIG_NOSYSTEM", "1"},
                {"LC_ALL", "C"}};
    testing::RunResult r = testing::Run({"git", "interpret-trailers", "--parse", file}, opts);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  static std::string Render(const std::vector<Trailer>& trailers) {
    std::string out;
    for (const Trailer& t : trailers) out += t.key + ": " + t.value + "\n";
    return out;
  }

  testing::TempDir dir_;
  int counter_ = 0;
};

const std::vector<std::string>& Messages() {
  static const std::vector<std::string> messages = {
      // A result commit as the worker writes it.
      "gatos: result of job 298aaf4c\n\n"
      "Job-Id: blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc\n"
      "Proof-Of-Execution: "
      "blake3:0000000000000000000000000000000000000000000000000000000000000000\n"
      "Worker-Id: ed25519:1111111111111111111111111111111111111111111111111111111111111111\n"
      "Status: timed-out\nLease-Epoch: 7\n",
      // Multi-line values (continuation lines with spaces and tabs).
      "Title\n\nBody text.\n\nNote: first line\n  second line\n\tthird line\nOther: x\n",
      // Values with colons, URLs, trailing spaces.
      "Title\n\nSee: https://example.com:8080/a:b  \nRatio: 1:2:3\nEmpty:\n",
      // A body with trailer-like lines in a prose paragraph, then real trailers.
      "Title\n\nFixes: this looks like a trailer\nbut the paragraph is prose.\n\n"
      "Reviewed-by: A <a@example.com>\nJob-Id: blake3:00\n",
      // Trailer-like title paragraph: never trailers.
      "Job-Id: blake3:abc\nStatus: succeeded\n",
      // Last paragraph mixes prose and a key: no trailers at all.
      "Title\n\nsome prose\nKey: value\n",
      // No final newline, CRLF-free, several blank lines before the block.
      "Title\n\n\n\nA: 1\nB: 2",
      // Trailing blank lines after the block.
      "Title\n\nA: 1\n\n\n",
      // No trailers, just a body.
      "Only a title\n",
      // Empty body.
      "\n\nA: b\n",
      // Keys with digits and dashes; a Signed-off-by block.
      "T\n\nX-1: a\nSigned-off-by: Someone <s@example.com>\n",
  };
  return messages;
}

TEST_F(TrailersInteropTest, ParseMatchesGit) {
  for (const std::string& msg : Messages()) {
    Result<CommitMessage> ours = ParseCommitMessage(msg);
    ASSERT_TRUE(ours.ok()) << ours.status().ToString() << "\nmessage:\n" << msg;
    EXPECT_EQ(Render(ours->trailers), GitParse(msg)) << "message:\n" << msg;
  }
}

TEST_F(TrailersInteropTest, FormatRoundTripsThroughGit) {
  for (const std::string& msg : Messages()) {
    Result<CommitMessage> ours = ParseCommitMessage(msg);
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    const std::string formatted = FormatCommitMessage(*ours);
    Result<CommitMessage> again = ParseCommitMessage(formatted);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, *ours) << "formatted:\n" << formatted;
    EXPECT_EQ(GitParse(formatted), Render(ours->trailers)) << "formatted:\n" << formatted;
  }
}

TEST_F(TrailersInteropTest, FormattedResultTrailersAreWhatGitSees) {
  CommitMessage m;
  m.body = "gatos: result\n\nKey: value in the body\nand more prose";
  m.trailers = {{"Job-Id", "blake3:" + std::string(64, 'a')},
                {"Attest-Sig", "ed25519:" + std::string(128, 'b')},
                {"Status", "succeeded"},
                {"Lease-Epoch", "12"},
                {"Note", "multi\nline"}};
  const std::string text = FormatCommitMessage(m);
  EXPECT_EQ(GitParse(text), "Job-Id: blake3:" + std::string(64, 'a') +
                                "\nAttest-Sig: ed25519:" + std::string(128, 'b') +
                                "\nStatus: succeeded\nLease-Epoch: 12\nNote: multi line\n");
}

// Messages git reads one way and we refuse rather than guess.
TEST_F(TrailersInteropTest, StrictCasesGitWouldAccept) {
  for (const std::string msg :
       {"T\n\nSigned-off-by: a\nprose\nB: c\n", "T\n\nKey : v\n", "T\n\nA: b\n---\nA: c\n"}) {
    EXPECT_NE(GitParse(msg), "") << msg;
    EXPECT_EQ(ParseCommitMessage(msg).status().code(), StatusCode::kInvalidArgument) << msg;
  }
}

}  // namespace
}  // namespace gatos
