// When a running job's lease is renewed, and what a failed renewal means
// (PROTOCOL section 4; docs/worker-execution.md, "Renewing"):
//
//   - every third of the lease (at least every 50 ms), from the claim until
//     the job's result is handed over, so two renewals can fail before the
//     lease runs out;
//   - after a Retryable failure (no reply, an unverified reply, kRetry), again
//     after a backoff of min(interval, 100 ms x 2^failures) (2^6 at most),
//     half of it fixed and half random ("equal jitter"), as long as the lease
//     may still be live; once its deadline has passed the lease is lost;
//   - any other refusal (stale owner, terminal) loses the lease at once.
// A lost lease stops the job and nothing of it is reported (stop_decision.h).
//
// Thread-safety: LeaseRenewal is a value without locks; the renewer's mutex
// guards each job's.
#ifndef GATOS_WORKER_LEASE_RENEWAL_H_
#define GATOS_WORKER_LEASE_RENEWAL_H_

#include <cstdint>

namespace gatos::worker {

// The interval between renewals of a lease of `lease_ms`.
int64_t RenewInterval(int64_t lease_ms);

// The delay before the next attempt after `failures` (>= 1) Retryable
// failures in a row, drawn from a uniform random value: in
// [backoff / 2, backoff / 2 + backoff / 2], backoff = min(interval, 100 << min(failures, 6)).
int64_t RenewRetryDelay(int64_t interval_ms, int failures, uint32_t random);

// One job's renewal schedule.
class LeaseRenewal {
 public:
  LeaseRenewal() = default;
  LeaseRenewal(int64_t lease_ms, int64_t expires_ms)
      : interval_ms_(RenewInterval(lease_ms)), expires_ms_(expires_ms) {}

  // Renewed from `now_ms` on: the first renewal one interval later.
  void Start(int64_t now_ms) { next_ms_ = now_ms + interval_ms_; }
  // The ledger renewed the lease until `expires_ms`.
  void Renewed(int64_t expires_ms, int64_t now_ms);
  // A Retryable failure at `now_ms`: schedules the next attempt (backoff with
  // `random` as jitter). False when the lease's deadline has passed: the
  // lease is lost (call Lost()).
  [[nodiscard]] bool Failed(int64_t now_ms, uint32_t random);
  // The lease is lost: no renewal ever again.
  void Lost() { next_ms_ = INT64_MAX; }

  int64_t next_ms() const { return next_ms_; }
  int64_t expires_ms() const { return expires_ms_; }
  int64_t interval_ms() const { return interval_ms_; }
  int failures() const { return failures_; }

 private:
  int64_t interval_ms_ = 50;
  int64_t expires_ms_ = 0;
  int64_t next_ms_ = 0;
  int failures_ = 0;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_LEASE_RENEWAL_H_
