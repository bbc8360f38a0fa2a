#include "gatos/crypto/signed_request.h"

#include "gatos/model/encoding.h"

namespace gatos {

LeaseRequest SignLeaseRequest(const Ed25519PrivateKey& worker, std::string_view job_hex, int64_t epoch,
                              int64_t now_ms, bool renew) {
  LeaseRequest r;
  r.renew = renew;
  r.job_hex = std::string(job_hex);
  r.worker_hex = worker.public_key().Hex();
  r.epoch = epoch;
  r.requested_at_ms = now_ms;
  auto sig = Ed25519Sign(worker, LeaseRequestPayload(r));
  r.sig_hex = HexEncode(sig.data(), sig.size());
  return r;
}

UserRequest SignUserRequest(const Ed25519PrivateKey& user, std::string_view job_hex, bool retry, int64_t attempt,
                            int64_t now_ms) {
  UserRequest r;
  r.retry = retry;
  r.job_hex = std::string(job_hex);
  r.requester_hex = user.public_key().Hex();
  r.attempt = attempt;
  r.requested_at_ms = now_ms;
  auto sig = Ed25519Sign(user, UserRequestPayload(r));
  r.sig_hex = HexEncode(sig.data(), sig.size());
  return r;
}

}  // namespace gatos
