// The retry logic on its own: backoff (exponential, capped, jitter), which
// results open another attempt, and the JetStream id of an offer.
#include <gtest/gtest.h>

#include <set>

#include "gatos/model/job_record.h"
#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"

namespace gatos {
namespace {

PolicySettings Retrying(int64_t max_attempts) {
  PolicySettings s;
  s.max_attempts = max_attempts;
  s.retry_base_ms = 1000;
  s.retry_factor = 2;
  s.retry_max_ms = 10'000;
  s.retry_jitter_pct = 20;
  return s;
}

JobRecord AtAttempt(int64_t attempt) {
  JobRecord r;
  r.job_hex = std::string(64, 'a');
  r.job_commit = std::string(40, 'c');
  r.attempt = attempt;
  r.epoch = attempt;
  r.worker_hex = std::string(64, '1');
  r.lease_commit = std::string(40, 'b');
  r.expires_ms = 1'000'000;
  return r;
}

TEST(RetryBackoffTest, DoublesFromTheBaseBeforeAttemptTwoAndStopsAtTheCap) {
  PolicySettings s = Retrying(10);
  EXPECT_EQ(RetryBackoffMs(s, 2), 1000);
  EXPECT_EQ(RetryBackoffMs(s, 3), 2000);
  EXPECT_EQ(RetryBackoffMs(s, 4), 4000);
  EXPECT_EQ(RetryBackoffMs(s, 5), 8000);
  EXPECT_EQ(RetryBackoffMs(s, 6), 10'000);
  EXPECT_EQ(RetryBackoffMs(s, 100), 10'000);
}

TEST(RetryBackoffTest, FactorOneIsAConstantBackoffAndBaseZeroIsNone) {
  PolicySettings s = Retrying(10);
  s.retry_factor = 1;
  EXPECT_EQ(RetryBackoffMs(s, 2), 1000);
  EXPECT_EQ(RetryBackoffMs(s, 9), 1000);
  s.retry_base_ms = 0;
  EXPECT_EQ(RetryBackoffMs(s, 2), 0);
  EXPECT_EQ(RetryBackoffMs(s, 50), 0);
  EXPECT_EQ(DrawRetryBackoffMs(s, 50, 12345), 0);
}

TEST(RetryBackoffTest, TheCapBoundsABaseAboveIt) {
  PolicySettings s = Retrying(10);
  s.retry_base_ms = 50'000;
  EXPECT_EQ(RetryBackoffMs(s, 2), 10'000);
}

TEST(RetryBackoffTest, LargestSettingsDoNotOverflow) {
  PolicySettings s = Retrying(100);
  s.retry_base_ms = 86'400'000;
  s.retry_factor = 10;
  s.retry_max_ms = 7LL * 86'400'000;
  for (int64_t n = 2; n <= 100; ++n) {
    EXPECT_GT(RetryBackoffMs(s, n), 0);
    EXPECT_LE(RetryBackoffMs(s, n), s.retry_max_ms);
  }
}

TEST(RetryBackoffTest, JitterTakesUpToItsShareOffAndTheDrawStaysInRange) {
  PolicySettings s = Retrying(10);
  EXPECT_EQ(RetryBackoffMinMs(s, 2), 800);
  EXPECT_EQ(RetryBackoffMinMs(s, 3), 1600);
  EXPECT_EQ(DrawRetryBackoffMs(s, 3, 0), 1600);
  EXPECT_EQ(DrawRetryBackoffMs(s, 3, 400), 2000);  // both ends included
  EXPECT_EQ(DrawRetryBackoffMs(s, 3, 401), 1600);
  std::set<int64_t> seen;
  for (uint64_t r = 0; r < 5000; r += 7) {
    int64_t d = DrawRetryBackoffMs(s, 3, r * 2654435761u);
    EXPECT_GE(d, 1600);
    EXPECT_LE(d, 2000);
    seen.insert(d);
  }
  EXPECT_GT(seen.size(), 100u) << "jitter spreads the retries";
  s.retry_jitter_pct = 0;
  EXPECT_EQ(DrawRetryBackoffMs(s, 3, 99), 2000);
  s.retry_jitter_pct = 100;
  EXPECT_EQ(RetryBackoffMinMs(s, 3), 0);
}

TEST(RetryDecisionTest, FailedAndTimedOutRetryWhileAttemptsAreLeft) {
  PolicySettings s = Retrying(3);
  EXPECT_TRUE(RetryAfterResult(AtAttempt(1), s, "failed", ""));
  EXPECT_TRUE(RetryAfterResult(AtAttempt(2), s, "timed-out", ""));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(3), s, "failed", "")) << "the last attempt is final";
  EXPECT_FALSE(RetryAfterResult(AtAttempt(4), s, "failed", "")) << "a re-run past max_attempts is final";
}

TEST(RetryDecisionTest, SuccessAndAbortNeverRetry) {
  PolicySettings s = Retrying(3);
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "succeeded", ""));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "aborted", ""));
}

TEST(RetryDecisionTest, DefaultPolicyNeverRetries) {
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), PolicySettings{}, "failed", ""));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), PolicySettings{}, "timed-out", ""));
}

TEST(RetryDecisionTest, APolicyMayLeaveOutFailedOrTimedOut) {
  PolicySettings s = Retrying(3);
  s.retry_failed = false;
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "failed", ""));
  EXPECT_TRUE(RetryAfterResult(AtAttempt(1), s, "timed-out", ""));
  s.retry_failed = true;
  s.retry_timed_out = false;
  EXPECT_TRUE(RetryAfterResult(AtAttempt(1), s, "failed", ""));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "timed-out", ""));
}

TEST(RetryDecisionTest, ACancelledJobIsNeverRetried) {
  JobRecord r = AtAttempt(1);
  r.cancel_commit = std::string(40, 'd');
  EXPECT_FALSE(RetryAfterResult(r, Retrying(3), "failed", ""));
  EXPECT_FALSE(RetryAfterResult(r, Retrying(3), "timed-out", ""));
}

TEST(RetryDecisionTest, AFailureWithAReasonIsFinal) {
  // The job never ran to an exit, or the policy refused its result: the same
  // job would meet the same refusal.
  PolicySettings s = Retrying(3);
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "failed", "the outputs are over this ledger's limit"));
  EXPECT_FALSE(RetriesAttempt(s, "failed", "job.yaml does not parse on this worker"));
  EXPECT_TRUE(RetriesAttempt(s, "failed", ""));
}

TEST(RetryDecisionTest, ATransientFailureRetriesLikeAPlainOne) {
  // An input that could not be fetched for a reason that may pass.
  PolicySettings s = Retrying(3);
  const char* why = "fetching input 0: connection refused (gave up after 5 attempts) [transient: may succeed when retried]";
  EXPECT_TRUE(RetryAfterResult(AtAttempt(1), s, "failed", why, /*transient=*/true));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), s, "failed", why, /*transient=*/false));
  EXPECT_FALSE(RetryAfterResult(AtAttempt(3), s, "failed", why, /*transient=*/true));  // no attempt left
  EXPECT_FALSE(RetryAfterResult(AtAttempt(1), Retrying(1), "failed", why, /*transient=*/true));
}

TEST(RetryDecisionTest, AJobWithAFinalResultOpensNoAttempt) {
  JobRecord r = AtAttempt(1);
  r.result_commit = std::string(40, 'e');
  r.result_status = "failed";
  EXPECT_FALSE(RetryAfterResult(r, Retrying(3), "failed", ""));
}

TEST(RetryDecisionTest, DeadMeansEndedFailedOrTimedOut) {
  JobRecord r = AtAttempt(3);
  r.worker_hex.clear();
  EXPECT_FALSE(RecordDead(r, 0)) << "pending";
  r.result_commit = std::string(40, 'e');
  r.result_status = "failed";
  EXPECT_TRUE(RecordDead(r, 0));
  r.result_status = "timed-out";
  EXPECT_TRUE(RecordDead(r, 0));
  r.result_status = "succeeded";
  EXPECT_FALSE(RecordDead(r, 0));
  r.result_status = "aborted";
  EXPECT_FALSE(RecordDead(r, 0));
}

TEST(RetryDecisionTest, ARetriedJobIsPendingAndWaitsForItsBackoff) {
  JobRecord r = AtAttempt(2);
  r.worker_hex.clear();
  r.expires_ms = 0;
  r.not_before_ms = 5000;
  EXPECT_EQ(RecordState(r, 1000), JobState::kPending);
  ClaimPlan p;
  Decision d = DecideClaim(r, std::string(64, '2'), r.epoch + 1, 4999, &p);
  EXPECT_EQ(d.error, TransitionError::kRetry) << d.message;
  EXPECT_TRUE(DecideClaim(r, std::string(64, '2'), r.epoch + 1, 5000, &p).ok());
  EXPECT_EQ(p.epoch, 3);
}

TEST(RetryDecisionTest, ReRunNamesTheNextAttemptOnlyOfAFailedOrTimedOutJob) {
  JobRecord r = AtAttempt(3);
  r.worker_hex.clear();
  r.result_commit = std::string(40, 'e');
  r.result_status = "failed";
  EXPECT_TRUE(DecideRetry(r, 4, 0).ok());
  EXPECT_EQ(DecideRetry(r, 3, 0).error, TransitionError::kLostRace);
  EXPECT_EQ(DecideRetry(r, 5, 0).error, TransitionError::kLostRace);
  r.result_status = "succeeded";
  EXPECT_EQ(DecideRetry(r, 4, 0).error, TransitionError::kInvalid);
  r.result_status = "aborted";
  EXPECT_EQ(DecideRetry(r, 4, 0).error, TransitionError::kInvalid);
}

TEST(RetryOfferTest, TheMessageIdNamesAttemptAndEpoch) {
  std::string job(64, 'a');
  EXPECT_EQ(rpc::PendingMsgId(job, 2, 3), job + ".a2.e3");
  EXPECT_NE(rpc::PendingMsgId(job, 1, 1), rpc::PendingMsgId(job, 2, 1));
  EXPECT_NE(rpc::PendingMsgId(job, 2, 2), rpc::PendingMsgId(job, 2, 3));
}

}  // namespace
}  // namespace gatos
