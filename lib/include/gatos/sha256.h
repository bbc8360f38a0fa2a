// SHA-256 (libsodium), for the policy root ("sha256:<hex>", ADR-0002).
#ifndef GATOS_SHA256_H_
#define GATOS_SHA256_H_

#include <string>
#include <string_view>

namespace gatos {

std::string Sha256Hex(std::string_view data);  // 64 lowercase hex

}  // namespace gatos

#endif  // GATOS_SHA256_H_
