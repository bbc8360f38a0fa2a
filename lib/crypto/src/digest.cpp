#include "digest.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace gatos {
namespace crypto_internal {
namespace {

struct Ctx {
  explicit Ctx(const char* name) : ctx(EVP_MD_CTX_new()), md(EVP_MD_fetch(nullptr, name, nullptr)) {
    if (!ctx || !md) std::abort();  // the default provider always has both
  }
  ~Ctx() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
  }
  EVP_MD_CTX* ctx;
  EVP_MD* md;
};

}  // namespace

void Digest(DigestAlg alg, std::string_view data, uint8_t* out) {
  thread_local Ctx sha256("SHA256");
  thread_local Ctx sha512("SHA512");
  Ctx& c = alg == DigestAlg::kSha256 ? sha256 : sha512;
  unsigned int len = 0;
  if (EVP_DigestInit_ex(c.ctx, c.md, nullptr) != 1 || EVP_DigestUpdate(c.ctx, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(c.ctx, out, &len) != 1) {
    std::abort();  // cannot fail for these algorithms short of memory exhaustion
  }
}

}  // namespace crypto_internal
}  // namespace gatos
