#include "gatos/worker/lease_renewal.h"

#include <algorithm>

namespace gatos::worker {

int64_t RenewInterval(int64_t lease_ms) { return std::max<int64_t>(lease_ms / 3, 50); }

int64_t RenewRetryDelay(int64_t interval_ms, int failures, uint32_t random) {
  const int64_t backoff =
      std::min<int64_t>(interval_ms, int64_t{100} << std::clamp(failures, 0, 6));
  return backoff / 2 + static_cast<int64_t>(random % static_cast<uint32_t>(backoff / 2 + 1));
}

void LeaseRenewal::Renewed(int64_t expires_ms, int64_t now_ms) {
  failures_ = 0;
  expires_ms_ = expires_ms;
  next_ms_ = now_ms + interval_ms_;
}

bool LeaseRenewal::Failed(int64_t now_ms, uint32_t random) {
  ++failures_;
  next_ms_ = now_ms + RenewRetryDelay(interval_ms_, failures_, random);
  return now_ms < expires_ms_;
}

}  // namespace gatos::worker
