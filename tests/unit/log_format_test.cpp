#include "gatos/model/log_format.h"

#include <gtest/gtest.h>

#include "gatos/model/ledger_commits.h"

namespace gatos {
namespace {

TEST(LogFormatTest, BatchRecordRoundTripsAndReadsAsText) {
  std::string job(64, 'a');
  std::vector<LogEntry> entries = {
      {LogKind::kSubmit, job, "refs/gatos/jobs/" + job + "/job", "", std::string(40, '1')},
      {LogKind::kClaim, job, "refs/gatos/jobs/" + job + "/lease", "", std::string(40, '2')},
      {LogKind::kAbort, job, "", "", ""},
      {LogKind::kPolicy, "", "refs/gatos/policy", std::string(40, '3'), std::string(40, '4')},
      {LogKind::kPrune, job, "refs/gatos/jobs/" + job + "/job", std::string(40, '1'), ""},
  };
  std::string text = EncodeBatch(entries);
  EXPECT_EQ(text.substr(0, 7 + 65), "submit " + job + " ");
  EXPECT_NE(text.find("abort " + job + " - - -\n"), std::string::npos);
  auto back = DecodeBatch(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, entries);
}

TEST(LogFormatTest, BatchDecodeRefusesWhatTheLedgerNeverWrites) {
  std::string job(64, 'a');
  for (const std::string& bad : {
           std::string("submit ") + job + " refs/gatos/x - 1\n",                          // short id
           std::string("frobnicate ") + job + " - - -\n",                                  // unknown kind
           std::string("claim ") + job + " refs/heads/main - " + std::string(40, '1') + "\n",  // outside refs/gatos
           std::string("claim ") + job + " refs/gatos/x " + std::string(40, '1') + " " + std::string(40, '1') + "\n",
           std::string("claim ") + job + " - " + std::string(40, '1') + " -\n",             // ids without a ref
           std::string("claim ") + job + " - - -",                                          // no newline
           std::string("claim ") + job + " - - - extra\n",
       }) {
    EXPECT_EQ(DecodeBatch(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LogFormatTest, LogMessageCarriesSequenceKeyAndPolicy) {
  LogCommitInfo info;
  info.seq = 42;
  info.ledger_key_hex = std::string(64, 'b');
  info.policy_commit = std::string(40, 'c');
  info.time_ms = 1'800'000'000'123;
  info.counts = {{"claim", 2}, {"submit", 3}};
  std::string m = EncodeLogMessage(info);
  EXPECT_EQ(m.substr(0, m.find('\n')), "gatos log 42: 2 claim, 3 submit");
  auto back = ParseLogMessage(m);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->seq, 42);
  EXPECT_EQ(back->ledger_key_hex, info.ledger_key_hex);
  EXPECT_EQ(back->policy_commit, info.policy_commit);
  EXPECT_EQ(back->time_ms, info.time_ms);
  std::string two = m + "Log-Seq: 43\n";
  EXPECT_FALSE(ParseLogMessage(two).ok());
}

TEST(LedgerCommitsTest, LeaseCommitMessageRoundTripsStrictly) {
  LeaseCommitInfo i{"takeover", std::string(64, 'a'), std::string(64, 'b'), 3, 1'800'000'000'000, 2,
                    1'799'999'999'990, std::string(128, 'c'), 30000, 1 << 20, 4 << 20, true};
  auto back = ParseLeaseCommitMessage(FormatLeaseCommitMessage(i));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, i);
  std::string m = FormatLeaseCommitMessage(i);
  m.replace(m.find("Lease-Epoch: 3"), 14, "Lease-Epoch: x");
  EXPECT_EQ(ParseLeaseCommitMessage(m).status().code(), StatusCode::kInvalidArgument);
}

TEST(LedgerCommitsTest, CancelAndReRunCommitsRoundTrip) {
  UserRequestCommitInfo c{false, std::string(64, 'a'), std::string(64, 'b'), 0, 1'800'000'000'000, 1'799'999'999'000,
                          std::string(128, 'd')};
  auto back = ParseUserRequestCommitMessage(FormatUserRequestCommitMessage(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, c);
  c.retry = true;
  c.attempt = 3;
  back = ParseUserRequestCommitMessage(FormatUserRequestCommitMessage(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, c);
}

}  // namespace
}  // namespace gatos
