// Fuzzes ParseAllowedSigners and the lookups. Invariant: Format() of a parsed
// list parses back to the same entries (comments aside).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/allowed_signers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto list = gatos::ParseAllowedSigners(input, "fuzz");
  if (!list.ok()) return 0;
  for (const gatos::AllowedSigner& e : list->entries()) {
    (void)list->FindKey(e.key, "git", 1700000000);
    for (const std::string& p : e.principals) {
      (void)list->IsAllowed(p, e.key, "git", 1700000000);
    }
  }
  auto again = gatos::ParseAllowedSigners(list->Format(), "formatted");
  if (!again.ok() || again->entries().size() != list->entries().size()) std::abort();
  for (size_t i = 0; i < list->entries().size(); ++i) {
    const gatos::AllowedSigner& a = list->entries()[i];
    const gatos::AllowedSigner& b = again->entries()[i];
    if (a.principals != b.principals || a.cert_authority != b.cert_authority ||
        a.namespaces != b.namespaces || a.valid_after != b.valid_after ||
        a.valid_before != b.valid_before || a.key != b.key) {
      std::abort();
    }
  }
  return 0;
}
