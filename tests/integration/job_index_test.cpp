// gatosd's index over a real ledger: rebuilt from refs, updated in place,
// swept without scanning every job; and the inbox file hooks append to.
#include "gatos/job_index.h"

#include <gtest/gtest.h>

#include "ledger_fixture.h"
#include "test_util.h"

namespace gatos {
namespace {

using testing::LedgerFixture;

std::string Job(int i) { return "command: [\"/bin/true\"]\nargs: [\"" + std::to_string(i) + "\"]\ntimeout: 5\n"; }

TEST(JobIndexTest, RebuildCountsStatesAndListsInIdOrderWithPaging) {
  LedgerFixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  std::vector<std::string> hexes;
  for (int i = 0; i < 5; ++i) hexes.push_back(f.Submit(*l, *jp, Job(i)).second);
  LeaseGrant g;
  ASSERT_TRUE(jp->Claim(f.Req(hexes[0], f.w1), &g).ok());
  bool already;
  ASSERT_TRUE(jp->Cancel(hexes[1], f.ledger_key.public_key().Hex(), &already).ok());

  JobIndex index;
  auto n = index.Rebuild(*l, f.now);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(index.Count(JobState::kPending), 3u);
  EXPECT_EQ(index.Count(JobState::kClaimed), 1u);
  EXPECT_EQ(index.Count(JobState::kAborted), 1u);
  EXPECT_EQ(index.Find(hexes[0])->worker_hex, f.w1.public_key().Hex());
  EXPECT_EQ(index.Find(hexes[0])->epoch, 1);

  std::vector<std::string> sorted = hexes;
  std::sort(sorted.begin(), sorted.end());
  auto all = index.List(std::nullopt, "", 100);
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(all[i]->job_hex, sorted[i]);
  auto page = index.List(std::nullopt, sorted[1], 2);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0]->job_hex, sorted[2]);
  EXPECT_EQ(page[1]->job_hex, sorted[3]);
  EXPECT_EQ(index.List(JobState::kClaimed, "", 10).size(), 1u);
}

TEST(JobIndexTest, SweepsSeeOnlyUnpublishedPendingJobsAndExpiredLeases) {
  LedgerFixture f(false, 10'000);
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  std::string a = f.Submit(*l, *jp, Job(1)).second;
  std::string b = f.Submit(*l, *jp, Job(2)).second;
  JobIndex index;
  ASSERT_TRUE(index.Rebuild(*l, f.now).ok());
  EXPECT_EQ(index.PendingNotPublishedSince(f.now, 10).size(), 2u);
  index.MarkPublished(a, f.now);
  EXPECT_EQ(index.PendingNotPublishedSince(f.now, 10), std::vector<std::string>{b});
  EXPECT_EQ(index.PendingNotPublishedSince(f.now - 1, 10), std::vector<std::string>{b});
  // Oldest publication first, and the limit is respected.
  index.MarkPublished(b, f.now - 5);
  EXPECT_EQ(index.PendingNotPublishedSince(f.now + 1, 10), (std::vector<std::string>{b, a}));
  EXPECT_EQ(index.PendingNotPublishedSince(f.now + 1, 1), std::vector<std::string>{b});

  LeaseGrant g;
  ASSERT_TRUE(jp->Claim(f.Req(a, f.w1), &g).ok());
  ASSERT_TRUE(index.ApplyLease(a, f.w1.public_key().Hex(), g.epoch, g.expires_ms));
  EXPECT_EQ(index.Count(JobState::kClaimed), 1u);
  EXPECT_EQ(index.Count(JobState::kPending), 1u);
  EXPECT_TRUE(index.ExpiredLeases(g.expires_ms - 1, 10).empty());
  EXPECT_EQ(index.ExpiredLeases(g.expires_ms, 10), std::vector<std::string>{a});
  index.MarkPublished(a, g.expires_ms, g.epoch);  // offered for takeover once per epoch
  EXPECT_TRUE(index.ExpiredLeases(g.expires_ms, 10).empty());
  // A renew moves the expiry; the old one is forgotten.
  ASSERT_TRUE(index.ApplyLease(a, f.w1.public_key().Hex(), 1, g.expires_ms + 5000));
  ASSERT_TRUE(index.ApplyResult(a, std::string(40, 'c'), JobState::kSucceeded));
  EXPECT_EQ(index.Count(JobState::kClaimed), 0u);
  EXPECT_EQ(index.Count(JobState::kSucceeded), 1u);
  EXPECT_TRUE(index.ExpiredLeases(g.expires_ms + 10'000, 10).empty());
  EXPECT_FALSE(index.ApplyLease(std::string(64, 'f'), "w", 1, 1));
}

TEST(JobIndexTest, RefreshReadsOneJobFromRefs) {
  LedgerFixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  JobIndex index;
  ASSERT_TRUE(index.Rebuild(*l, f.now).ok());
  std::string a = f.Submit(*l, *jp, Job(3)).second;
  bool is_new = false;
  auto e = index.Refresh(*l, a, f.now, &is_new);
  ASSERT_TRUE(e.ok());
  ASSERT_NE(*e, nullptr);
  EXPECT_TRUE(is_new);
  EXPECT_EQ((*e)->state, JobState::kPending);
  auto missing = index.Refresh(*l, std::string(64, 'a'), f.now, &is_new);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, nullptr);
}

TEST(InboxTest, ReaderSeesOnlyCompleteNewLines) {
  testing::TempDir dir;
  testing::Run({"mkdir", "-p", dir.Join("gatos")});
  ASSERT_TRUE(AppendInbox(dir.path(), "job old").ok());
  InboxReader reader(dir.path());
  reader.SkipToEnd();
  EXPECT_TRUE(reader.ReadNew().empty());
  ASSERT_TRUE(AppendInbox(dir.path(), "job a").ok());
  ASSERT_TRUE(AppendInbox(dir.path(), "reject unsigned").ok());
  EXPECT_EQ(reader.ReadNew(), (std::vector<std::string>{"job a", "reject unsigned"}));
  // A partial line (a writer mid-write) waits for its newline.
  testing::WriteFile(InboxPath(dir.path()), testing::ReadFile(InboxPath(dir.path())) + "job pa");
  EXPECT_TRUE(reader.ReadNew().empty());
  testing::WriteFile(InboxPath(dir.path()), testing::ReadFile(InboxPath(dir.path())) + "rtial\n");
  EXPECT_EQ(reader.ReadNew(), std::vector<std::string>{"job partial"});
  // A missing directory is an error that names the file.
  Status s = AppendInbox(dir.Join("nope"), "job x");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("nope/gatos/inbox"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gatos
