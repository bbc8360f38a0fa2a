#include "gatos/lease.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

const std::string kW1(64, '1');
const std::string kW2(64, '2');
constexpr int64_t kT0 = 1'800'000'000'000;

JobSnapshot Pending() {
  JobSnapshot s;
  s.job_hex = std::string(64, 'a');
  s.job_commit = std::string(40, 'c');
  return s;
}

JobSnapshot Leased(const std::string& worker, int64_t epoch, int64_t expires) {
  JobSnapshot s = Pending();
  s.lease = LeaseInfo{std::string(40, 'l'), worker, epoch, expires};
  return s;
}

TEST(LeaseTest, FirstClaimCreatesEpochOneOnZeroOid) {
  ClaimDecision d;
  ASSERT_TRUE(DecideClaim(Pending(), kW1, kT0, &d).ok());
  EXPECT_EQ(d.epoch, 1);
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.expected_lease, "");
}

TEST(LeaseTest, LiveLeaseLosesTheRaceEvenForTheHolder) {
  ClaimDecision d;
  auto snap = Leased(kW1, 1, kT0 + 30'000);
  EXPECT_EQ(DecideClaim(snap, kW2, kT0, &d).error, TransitionError::kLostRace);
  EXPECT_EQ(DecideClaim(snap, kW1, kT0, &d).error, TransitionError::kLostRace);
}

TEST(LeaseTest, ExpiredLeaseIsTakenOverWithNextEpochAndCasOnOldLease) {
  ClaimDecision d;
  auto snap = Leased(kW1, 3, kT0);
  ASSERT_TRUE(DecideClaim(snap, kW2, kT0, &d).ok());  // expiry instant counts as expired
  EXPECT_EQ(d.epoch, 4);
  EXPECT_TRUE(d.takeover);
  EXPECT_EQ(d.expected_lease, std::string(40, 'l'));
}

TEST(LeaseTest, TerminalAndCancelledJobsCannotBeClaimed) {
  ClaimDecision d;
  auto done = Pending();
  done.result_commit = std::string(40, 'r');
  done.result_status = "succeeded";
  EXPECT_EQ(DecideClaim(done, kW1, kT0, &d).error, TransitionError::kTerminal);
  auto cancelled = Pending();
  cancelled.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(DecideClaim(cancelled, kW1, kT0, &d).error, TransitionError::kCancelled);
}

TEST(LeaseTest, RenewOnlyByHolderAtEpochBeforeExpiry) {
  auto snap = Leased(kW1, 2, kT0 + 1000);
  EXPECT_TRUE(DecideRenew(snap, kW1, 2, kT0).ok());
  Decision other = DecideRenew(snap, kW2, 2, kT0);
  EXPECT_EQ(other.error, TransitionError::kStaleOwner);
  EXPECT_NE(other.message.find("stale owner"), std::string::npos);
  EXPECT_EQ(DecideRenew(snap, kW1, 1, kT0).error, TransitionError::kStaleOwner);
  EXPECT_EQ(DecideRenew(snap, kW1, 2, kT0 + 1000).error, TransitionError::kStaleOwner);
  EXPECT_EQ(DecideRenew(Pending(), kW1, 1, kT0).error, TransitionError::kStaleOwner);
}

TEST(LeaseTest, ResultAcceptedWithinGraceAndFencedAfterTakeover) {
  auto snap = Leased(kW1, 1, kT0);
  EXPECT_TRUE(DecideResult(snap, kW1, 1, kT0 + 1999, 2000).ok());
  EXPECT_EQ(DecideResult(snap, kW1, 1, kT0 + 2000, 2000).error, TransitionError::kStaleOwner);
  // After a takeover the old holder's epoch is stale even inside the grace.
  auto taken = Leased(kW2, 2, kT0 + 30'000);
  EXPECT_EQ(DecideResult(taken, kW1, 1, kT0 + 10, 2000).error, TransitionError::kStaleOwner);
  EXPECT_TRUE(DecideResult(taken, kW2, 2, kT0 + 10, 2000).ok());
}

TEST(LeaseTest, SecondResultIsTerminal) {
  auto snap = Leased(kW1, 1, kT0 + 1000);
  snap.result_commit = std::string(40, 'r');
  snap.result_status = "failed";
  EXPECT_EQ(DecideResult(snap, kW1, 1, kT0, 0).error, TransitionError::kTerminal);
}

TEST(LeaseTest, DeriveViewCoversEveryState) {
  EXPECT_EQ(DeriveView(Pending(), kT0).state, JobState::kPending);
  auto live = Leased(kW1, 1, kT0 + 1);
  EXPECT_EQ(DeriveView(live, kT0).state, JobState::kClaimed);
  EXPECT_FALSE(DeriveView(live, kT0).lease_expired);
  EXPECT_TRUE(DeriveView(live, kT0 + 1).lease_expired);
  live.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(DeriveView(live, kT0).state, JobState::kClaimed);  // told to stop, still running
  EXPECT_EQ(DeriveView(live, kT0 + 1).state, JobState::kAborted);
  auto cancelled = Pending();
  cancelled.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(DeriveView(cancelled, kT0).state, JobState::kAborted);
  auto done = Pending();
  done.result_commit = std::string(40, 'r');
  done.result_status = "timed-out";
  EXPECT_EQ(DeriveView(done, kT0).state, JobState::kTimedOut);
}

TEST(LeaseTest, CancelIsIdempotentAndRefusedWhenFinished) {
  bool already = true;
  EXPECT_TRUE(DecideCancel(Pending(), &already).ok());
  EXPECT_FALSE(already);
  auto c = Pending();
  c.cancel_commit = std::string(40, 'x');
  EXPECT_TRUE(DecideCancel(c, &already).ok());
  EXPECT_TRUE(already);
  c.result_commit = std::string(40, 'r');
  c.result_status = "aborted";
  EXPECT_EQ(DecideCancel(c, &already).error, TransitionError::kTerminal);
}

TEST(LeaseTest, Rfc3339RoundTripWithMillis) {
  EXPECT_EQ(FormatRfc3339Millis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Millis(1'795'845'707'123), "2026-11-28T06:01:47.123Z");
  auto t = ParseRfc3339Millis("2026-11-28T06:01:47.123Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1'795'845'707'123);
  EXPECT_EQ(*ParseRfc3339Millis("2026-11-28T06:01:47Z"), 1'795'845'707'000);
  EXPECT_EQ(ParseRfc3339Millis("2026-11-28T06:01:47+01:00").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRfc3339Millis("2026-13-28T02:55:07Z").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
