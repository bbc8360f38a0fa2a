// libFuzzer target: the auditor's state file (gatos verify --state FILE) on
// arbitrary bytes. Invariants: no crash; an accepted file encodes back to the
// same state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/log_audit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto s = gatos::ParseAuditState(text);
  if (!s.ok()) return 0;
  auto again = gatos::ParseAuditState(gatos::EncodeAuditState(*s));
  if (!again.ok() || !(*again == *s)) abort();
  return 0;
}
