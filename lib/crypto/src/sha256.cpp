#include "gatos/crypto/sha256.h"

#include "digest.h"

#include "gatos/model/encoding.h"

namespace gatos {

std::string Sha256Hex(std::string_view data) {
  uint8_t out[32];
  crypto_internal::Digest(crypto_internal::DigestAlg::kSha256, data, out);
  return HexEncode(out, sizeof out);
}

std::string PolicyRoot(const Policy& p) { return "sha256:" + Sha256Hex(PolicyRootInput(p)); }

}  // namespace gatos
