#include "gatos/crypto/sha256.h"

#include <sodium.h>

#include "gatos/model/encoding.h"

namespace gatos {

std::string Sha256Hex(std::string_view data) {
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return HexEncode(out, sizeof out);
}

std::string PolicyRoot(const Policy& p) { return "sha256:" + Sha256Hex(PolicyRootInput(p)); }

}  // namespace gatos
