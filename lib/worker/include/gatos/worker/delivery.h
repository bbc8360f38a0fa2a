// Delivering results from the outbox to the ledger (docs/worker-execution.md,
// "The worker's pipeline", "Results that cannot be reported"; outbox.h keeps
// them durable and schedules retries with backoff): how results are grouped
// into result-batch requests, and what each entry's reply means for its
// outbox row.
//
//   the ledger took it (or already had it)        delivered
//   Retryable (the ledger or the bus unreachable)  retry: the outbox backs off,
//                                                 then dead after max_attempts
//   refused (invalid, unauthorized, stale owner,  dead at once, with the ledger's
//     terminal, internal, ...)                    words as its reason
//   the bus refused the request for its size:
//     in a batch of several                       each is sent again on its own
//     alone                                       dead, and a small `failed`
//                                                 result takes its place
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_WORKER_DELIVERY_H_
#define GATOS_WORKER_DELIVERY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "gatos/worker/rpc_reply.h"

namespace gatos::worker {

// A result-batch request holds at most this many bytes of results (a larger
// single result goes alone) and this many entries.
inline constexpr size_t kMaxResultBatchBytes = 1 << 20;
inline constexpr size_t kMaxResultBatchEntries = 256;

// The results [from, end) that go in the next request, given each result's
// request size: as many as fit kMaxResultBatchBytes and
// kMaxResultBatchEntries, and at least one.
size_t NextResultBatchEnd(const std::vector<size_t>& frame_bytes, size_t from);

struct DeliveryDecision {
  enum class Kind {
    kDelivered,
    kRetry,      // the outbox schedules another attempt
    kRefused,    // dead at once
    kSendAlone,  // the batch was too large: send this one again by itself
  };
  Kind kind = Kind::kDelivered;
  // kRetry, kRefused: what the outbox records as the last error.
  std::string error_text;
  // kRefused because the bus will never carry it: a small failed result
  // (poe_assembly.h UndeliverablePoe) takes its place, when its job is at hand.
  bool replace = false;
};

// What the reply `r` to one result of `frame_bytes` bytes, sent in a
// request of `batch_entries` entries, means for its outbox row.
DeliveryDecision DecideDelivery(const Reply& r, size_t frame_bytes, size_t batch_entries);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_DELIVERY_H_
