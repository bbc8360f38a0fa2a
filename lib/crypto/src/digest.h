// SHA-256 and SHA-512 through OpenSSL's EVP (its assembly uses the CPU's SHA
// extensions and AVX2, several times faster than libsodium's portable C on
// the few kilobytes the auditor hashes per job). One context per thread and
// algorithm, reused: setting one up costs more than hashing a small input.
#ifndef GATOS_CRYPTO_SRC_DIGEST_H_
#define GATOS_CRYPTO_SRC_DIGEST_H_

#include <cstdint>
#include <string_view>

namespace gatos {
namespace crypto_internal {

enum class DigestAlg { kSha256, kSha512 };

// Writes the digest (32 or 64 bytes) of `data` to `out`.
void Digest(DigestAlg alg, std::string_view data, uint8_t* out);

}  // namespace crypto_internal
}  // namespace gatos

#endif  // GATOS_CRYPTO_SRC_DIGEST_H_
