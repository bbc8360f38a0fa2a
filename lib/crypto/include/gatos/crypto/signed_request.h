// Requests a worker or a user signs for the ledger (rpc.h payloads), signed
// with its Ed25519 key.
//
// Thread-safety: pure functions.
#ifndef GATOS_SIGNED_REQUEST_H_
#define GATOS_SIGNED_REQUEST_H_

#include <cstdint>
#include <string_view>

#include "gatos/crypto/keys.h"
#include "gatos/model/rpc.h"

namespace gatos {

// A claim of `epoch` (the epoch it would open) or a renew of the held
// `epoch`, for `job_hex`, signed by `worker` at `now_ms`.
LeaseRequest SignLeaseRequest(const Ed25519PrivateKey& worker, std::string_view job_hex, int64_t epoch,
                              int64_t now_ms, bool renew);

// A cancel, or (retry) a re-run opening `attempt`, signed by `user` at `now_ms`.
UserRequest SignUserRequest(const Ed25519PrivateKey& user, std::string_view job_hex, bool retry,
                            int64_t attempt, int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_SIGNED_REQUEST_H_
