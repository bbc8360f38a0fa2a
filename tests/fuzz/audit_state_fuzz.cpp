// libFuzzer target: the auditor's state file (gatos verify --state FILE) and
// the mirror record (DIR/gatos-mirror, gatos mirror) on arbitrary bytes.
// Invariants: no crash; an accepted file encodes back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/audit/log_audit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto s = gatos::ParseAuditState(text); s.ok()) {
    auto again = gatos::ParseAuditState(gatos::EncodeAuditState(*s));
    if (!again.ok() || !(*again == *s)) abort();
  }
  if (auto m = gatos::ParseMirrorRecord(text); m.ok()) {
    auto again = gatos::ParseMirrorRecord(gatos::EncodeMirrorRecord(*m));
    if (!again.ok() || !(*again == *m)) abort();
  }
  return 0;
}
