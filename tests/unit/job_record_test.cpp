#include "gatos/model/job_record.h"

#include <gtest/gtest.h>

#include "gatos/model/canonical_json.h"
#include "gatos/model/refs.h"

namespace gatos {
namespace {

const std::string kW1(64, '1');
const std::string kW2(64, '2');
constexpr int64_t kT0 = 1'800'000'000'000;

JobRecord Pending() {
  JobRecord r;
  r.job_hex = std::string(64, 'a');
  r.job_commit = std::string(40, 'c');
  r.submitted_ms = kT0 - 1000;
  return r;
}

JobRecord Leased(const std::string& worker, int64_t epoch, int64_t expires) {
  JobRecord r = Pending();
  r.epoch = epoch;
  r.lease_commit = std::string(40, 'b');
  r.claim_commit = r.lease_commit;
  r.worker_hex = worker;
  r.expires_ms = expires;
  r.requested_at_ms = kT0 - 10;
  r.claims[worker] = r.lease_commit;
  return r;
}

TEST(JobRecordTest, FirstClaimAsksForEpochOne) {
  ClaimPlan p;
  ASSERT_TRUE(DecideClaim(Pending(), kW1, 1, kT0, &p).ok());
  EXPECT_EQ(p.epoch, 1);
  EXPECT_FALSE(p.takeover);
  EXPECT_EQ(p.expected_lease, "");
}

TEST(JobRecordTest, AClaimOfAnEpochAlreadyTakenIsALostRaceNotASecondGrant) {
  ClaimPlan p;
  // A replayed epoch-1 request after the job moved on to epoch 3.
  auto r = Leased(kW1, 3, kT0 - 1);
  EXPECT_EQ(DecideClaim(r, kW2, 1, kT0, &p).error, TransitionError::kLostRace);
  EXPECT_EQ(DecideClaim(r, kW2, 3, kT0, &p).error, TransitionError::kLostRace);
  EXPECT_TRUE(DecideClaim(r, kW2, 4, kT0, &p).ok());
}

TEST(JobRecordTest, LiveLeaseLosesTheRaceEvenForTheHolder) {
  ClaimPlan p;
  auto r = Leased(kW1, 1, kT0 + 30'000);
  EXPECT_EQ(DecideClaim(r, kW2, 2, kT0, &p).error, TransitionError::kLostRace);
  EXPECT_EQ(DecideClaim(r, kW1, 2, kT0, &p).error, TransitionError::kLostRace);
}

TEST(JobRecordTest, ExpiredLeaseIsTakenOverWithNextEpochAndCasOnOldLease) {
  ClaimPlan p;
  auto r = Leased(kW1, 3, kT0);
  ASSERT_TRUE(DecideClaim(r, kW2, 4, kT0, &p).ok());  // the expiry instant counts as expired
  EXPECT_EQ(p.epoch, 4);
  EXPECT_TRUE(p.takeover);
  EXPECT_EQ(p.expected_lease, std::string(40, 'b'));
}

TEST(JobRecordTest, TerminalAndCancelledJobsCannotBeClaimed) {
  ClaimPlan p;
  auto done = Pending();
  done.result_commit = std::string(40, 'r');
  done.result_status = "succeeded";
  EXPECT_EQ(DecideClaim(done, kW1, 1, kT0, &p).error, TransitionError::kTerminal);
  auto cancelled = Pending();
  cancelled.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(DecideClaim(cancelled, kW1, 1, kT0, &p).error, TransitionError::kCancelled);
}

TEST(JobRecordTest, ARetryWaitsForItsBackoff) {
  ClaimPlan p;
  auto r = Leased(kW1, 2, 0);
  r.worker_hex.clear();  // attempt 1 ended
  r.attempt = 2;
  r.not_before_ms = kT0 + 5000;
  EXPECT_EQ(DecideClaim(r, kW2, 3, kT0, &p).error, TransitionError::kRetry);
  ASSERT_TRUE(DecideClaim(r, kW2, 3, kT0 + 5000, &p).ok());
  EXPECT_FALSE(p.takeover);
  EXPECT_EQ(p.expected_lease, std::string(40, 'b'));  // the new attempt replaces the old lease
}

TEST(JobRecordTest, RenewOnlyByHolderAtEpochBeforeExpiryWithANewerRequest) {
  auto r = Leased(kW1, 2, kT0 + 1000);
  EXPECT_TRUE(DecideRenew(r, kW1, 2, kT0, kT0).ok());
  EXPECT_EQ(DecideRenew(r, kW2, 2, kT0, kT0).error, TransitionError::kStaleOwner);
  EXPECT_EQ(DecideRenew(r, kW1, 1, kT0, kT0).error, TransitionError::kStaleOwner);
  EXPECT_EQ(DecideRenew(r, kW1, 2, kT0, kT0 + 1000).error, TransitionError::kStaleOwner);
  // A replayed (or older) renew request keeps nobody's lease alive.
  EXPECT_EQ(DecideRenew(r, kW1, 2, r.requested_at_ms, kT0).error, TransitionError::kUnauthorized);
  EXPECT_EQ(DecideRenew(Pending(), kW1, 1, kT0, kT0).error, TransitionError::kStaleOwner);
}

TEST(JobRecordTest, ResultWithinGraceFromHolderOnly) {
  auto r = Leased(kW1, 1, kT0);
  EXPECT_TRUE(DecideResult(r, kW1, 1, kT0 + 1999, 2000).ok());
  EXPECT_EQ(DecideResult(r, kW1, 1, kT0 + 2000, 2000).error, TransitionError::kStaleOwner);
  EXPECT_EQ(DecideResult(r, kW2, 1, kT0, 2000).error, TransitionError::kStaleOwner);
  auto taken = Leased(kW2, 2, kT0 + 30'000);
  EXPECT_EQ(DecideResult(taken, kW1, 1, kT0 + 10, 2000).error, TransitionError::kStaleOwner);
}

TEST(JobRecordTest, StatesFollowTheRecordAndTheClock) {
  auto live = Leased(kW1, 1, kT0 + 1);
  EXPECT_EQ(RecordState(live, kT0), JobState::kClaimed);
  EXPECT_FALSE(LeaseExpired(live, kT0));
  EXPECT_TRUE(LeaseExpired(live, kT0 + 1));
  live.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(RecordState(live, kT0), JobState::kClaimed);  // told to stop, still running
  EXPECT_EQ(RecordState(live, kT0 + 1), JobState::kAborted);
  auto cancelled = Pending();
  cancelled.cancel_commit = std::string(40, 'x');
  EXPECT_EQ(RecordState(cancelled, kT0), JobState::kAborted);
  auto done = Pending();
  done.result_commit = std::string(40, 'r');
  done.result_status = "timed-out";
  EXPECT_EQ(RecordState(done, kT0), JobState::kTimedOut);
  EXPECT_TRUE(RecordDead(done, kT0));
  EXPECT_EQ(RecordState(Pending(), kT0), JobState::kPending);
}

TEST(JobRecordTest, CancelIsIdempotentAndRefusedWhenFinished) {
  bool already = true;
  EXPECT_TRUE(DecideCancel(Pending(), kT0, &already).ok());
  EXPECT_FALSE(already);
  auto c = Pending();
  c.cancel_commit = std::string(40, 'x');
  EXPECT_TRUE(DecideCancel(c, kT0, &already).ok());
  EXPECT_TRUE(already);
  c.result_commit = std::string(40, 'r');
  c.result_status = "aborted";
  EXPECT_EQ(DecideCancel(c, kT0, &already).error, TransitionError::kTerminal);
}

TEST(JobRecordTest, ReRunOnlyAFailedJobAndOnlyTheNextAttempt) {
  auto r = Pending();
  r.result_commit = std::string(40, 'r');
  r.result_status = "failed";
  EXPECT_TRUE(DecideRetry(r, 2, kT0).ok());
  EXPECT_EQ(DecideRetry(r, 3, kT0).error, TransitionError::kLostRace);
  EXPECT_EQ(DecideRetry(r, 1, kT0).error, TransitionError::kLostRace);
  r.result_status = "succeeded";
  EXPECT_EQ(DecideRetry(r, 2, kT0).error, TransitionError::kInvalid);
  EXPECT_EQ(DecideRetry(Pending(), 2, kT0).error, TransitionError::kInvalid);
}

TEST(JobRecordTest, RefsAreAViewOfTheRecord) {
  auto r = Leased(kW1, 1, kT0);
  r.claims[kW2] = std::string(40, 'm');
  r.attempts.push_back({1, std::string(40, 'f'), "failed", 1, kT0});
  r.result_commit = std::string(40, 'r');
  r.result_status = "succeeded";
  auto refs = JobRefs(r);
  EXPECT_EQ(refs.size(), 6u);
  EXPECT_EQ(refs[JobRef(r.job_hex, "job")], r.job_commit);
  EXPECT_EQ(refs[JobRef(r.job_hex, "lease")], r.lease_commit);
  EXPECT_EQ(refs[ClaimRef(r.job_hex, kW2)], std::string(40, 'm'));
  EXPECT_EQ(refs[AttemptRef(r.job_hex, 1)], std::string(40, 'f'));
  EXPECT_EQ(refs[JobRef(r.job_hex, "result")], r.result_commit);
  r.pruned_ms = kT0;
  EXPECT_TRUE(JobRefs(r).empty());
}

TEST(JobRecordTest, EncodingRoundTripsAndIsStrict) {
  auto r = Leased(kW1, 2, kT0);
  r.submitter_hex = kW2;
  r.cancel_commit = std::string(40, 'e');
  r.attempts.push_back({1, std::string(40, 'f'), "timed-out", 1, kT0 - 5});
  r.attempt = 2;
  r.not_before_ms = kT0 + 7;
  // The encoder writes canonical JSON directly: the same bytes as the
  // general canonicalizer.
  std::string text = EncodeJobRecord(r);
  EXPECT_EQ(*CanonicalJson(nlohmann::json::parse(text)), text);
  auto back = DecodeJobRecord(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(DecodeJobRecord("{\"v\":1}").status().code(), StatusCode::kInvalidArgument);
  std::string extra = EncodeJobRecord(r);
  extra.insert(1, "\"bogus\":1,");
  EXPECT_EQ(DecodeJobRecord(extra).status().code(), StatusCode::kInvalidArgument);
  std::string bad = EncodeJobRecord(Pending());
  bad.replace(bad.find(std::string(40, 'c')), 40, std::string(40, 'Z'));
  EXPECT_EQ(DecodeJobRecord(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
