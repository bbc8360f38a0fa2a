// SHA-256 (OpenSSL, src/digest.h), for the policy root ("sha256:<hex>", ADR-0002).
#ifndef GATOS_SHA256_H_
#define GATOS_SHA256_H_

#include <string>
#include <string_view>

#include "gatos/model/policy.h"

namespace gatos {

std::string Sha256Hex(std::string_view data);  // 64 lowercase hex

// "sha256:<hex>" over the stored policy files (PolicyRootInput), the value a
// manifest's policy_root must equal when it names one.
std::string PolicyRoot(const Policy& p);

}  // namespace gatos

#endif  // GATOS_SHA256_H_
