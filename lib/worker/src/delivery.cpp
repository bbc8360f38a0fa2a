#include "gatos/worker/delivery.h"

namespace gatos::worker {

size_t NextResultBatchEnd(const std::vector<size_t>& frame_bytes, size_t from) {
  size_t end = from, bytes = 0;
  while (end < frame_bytes.size() && end - from < kMaxResultBatchEntries &&
         (end == from || bytes + frame_bytes[end] <= kMaxResultBatchBytes)) {
    bytes += frame_bytes[end];
    ++end;
  }
  return end;
}

DeliveryDecision DecideDelivery(const Reply& r, size_t frame_bytes, size_t batch_entries) {
  using Kind = DeliveryDecision::Kind;
  if (r.ok()) return {Kind::kDelivered, "", false};
  if (r.too_large && batch_entries > 1) return {Kind::kSendAlone, "", false};
  if (r.too_large) {
    return {Kind::kRefused,
            "the result (" + std::to_string(frame_bytes) + " bytes) cannot be sent: " + r.message,
            true};
  }
  const std::string text = std::string(TransitionErrorName(r.error)) + ": " + r.message;
  return {r.error == TransitionError::kRetry ? Kind::kRetry : Kind::kRefused, text, false};
}

}  // namespace gatos::worker
