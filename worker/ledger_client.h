// The worker's requests to gatosd over the bus (PROTOCOL section 4): one
// request, or several of the same kind in one batch request, each answered
// in the worker's one vocabulary of outcomes (gatos/worker/rpc_reply.h).
//
// Thread-safety: thread-safe (the Bus is); the fetch loop, the renewer and
// the reporter call it at once. Does not own the bus.
#ifndef GATOS_WORKER_LEDGER_CLIENT_H_
#define GATOS_WORKER_LEDGER_CLIENT_H_

#include <string>
#include <vector>

#include "gatos/nats/bus.h"
#include "gatos/worker/rpc_reply.h"

namespace gatos::worker {

class LedgerClient {
 public:
  explicit LedgerClient(Bus* bus) : bus_(bus) {}

  Reply Call(const char* subject, const std::string& data, int timeout_ms);

  // Sends `entries` (requests of the single form) as one batch request, or
  // as the single form when there is one; one Reply per entry, in order.
  std::vector<Reply> CallMany(const char* single, const char* batch,
                              const std::vector<std::string>& entries, int timeout_ms);

 private:
  Bus* bus_;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_LEDGER_CLIENT_H_
