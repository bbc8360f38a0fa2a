#include "gatos/model/leader_wait.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "gatos/model/rpc.h"

namespace gatos {

bool RetryAcrossLeaderChange(std::string_view subject, const Status& transport, TransitionError reply) {
  if (!transport.ok()) {
    if (transport.code() == StatusCode::kUnavailable) return true;
    if (transport.code() != StatusCode::kDeadlineExceeded) return false;
    return subject == rpc::kStatus || subject == rpc::kList || subject == rpc::kLogs || subject == rpc::kSubmit;
  }
  return reply == TransitionError::kRetry;
}

int64_t LeaderWaitBackoffMs(int attempt) {
  if (attempt <= 1) return 100;
  return attempt >= 5 ? 1000 : std::min<int64_t>(1000, int64_t{100} << (attempt - 1));
}

std::optional<int64_t> ParseLeaderWaitMs(std::string_view seconds) {
  if (seconds.empty() || seconds.size() > 32) return std::nullopt;
  const std::string s(seconds);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 86'400) return std::nullopt;
  return static_cast<int64_t>(std::llround(v * 1000));
}

}  // namespace gatos
