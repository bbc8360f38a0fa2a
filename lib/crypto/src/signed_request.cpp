#include "gatos/signed_request.h"

#include "gatos/encoding.h"

namespace gatos {

LeaseRequest SignLeaseRequest(const Ed25519PrivateKey& worker, std::string_view job_hex,
                              int64_t epoch, int64_t now_ms) {
  LeaseRequest r;
  r.job_hex = std::string(job_hex);
  r.worker_hex = worker.public_key().Hex();
  r.epoch = epoch;
  r.requested_at_ms = now_ms;
  auto sig = Ed25519Sign(worker, epoch == 0 ? rpc::ClaimPayload(job_hex, r.worker_hex, now_ms)
                                            : rpc::RenewPayload(job_hex, r.worker_hex, epoch, now_ms));
  r.sig_hex = HexEncode(sig.data(), sig.size());
  return r;
}

}  // namespace gatos
