// Requests a worker or client signs for the ledger (rpc.h payloads), signed
// with its Ed25519 key.
//
// Thread-safety: pure functions.
#ifndef GATOS_SIGNED_REQUEST_H_
#define GATOS_SIGNED_REQUEST_H_

#include <cstdint>
#include <string_view>

#include "gatos/keys.h"
#include "gatos/rpc.h"

namespace gatos {

// A claim (epoch 0) or renew (epoch >= 1) request for `job_hex`, signed by
// `worker` at `now_ms`: what a worker sends and what the ledger verifies.
LeaseRequest SignLeaseRequest(const Ed25519PrivateKey& worker, std::string_view job_hex,
                              int64_t epoch, int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_SIGNED_REQUEST_H_
