// libFuzzer target: the provenance envelope's two readers on arbitrary bytes,
// each against the JSON parser. Invariants: no crash;
//  - ParseProvenanceStatement (which reads the layout BuildProvenanceStatement
//    writes without a parser when it can) and ParseStatementJson (always the
//    parser) agree: both accept with equal fields, or both refuse with the
//    same error;
//  - ParseDsseEnvelope agrees with itself on the same text after a leading
//    space, which only the parser accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/audit/attest.h"

namespace {

bool SameEnvelope(const gatos::DsseEnvelope& a, const gatos::DsseEnvelope& b) {
  if (a.payload_type != b.payload_type || a.payload != b.payload ||
      a.signatures.size() != b.signatures.size()) {
    return false;
  }
  for (size_t i = 0; i < a.signatures.size(); ++i) {
    if (a.signatures[i].keyid != b.signatures[i].keyid || a.signatures[i].sig != b.signatures[i].sig) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gatos::Result<gatos::ProvenanceStatement> fast = gatos::ParseProvenanceStatement(text);
  gatos::Result<gatos::ProvenanceStatement> full = gatos::provenance_internal::ParseStatementJson(text);
  if (fast.ok() != full.ok()) abort();
  if (!fast.ok() && fast.status().ToString() != full.status().ToString()) abort();
  if (fast.ok() && !(*fast == *full)) abort();

  if (size < gatos::kMaxEnvelopeBytes) {
    gatos::Result<gatos::DsseEnvelope> env = gatos::ParseDsseEnvelope(text);
    gatos::Result<gatos::DsseEnvelope> parsed = gatos::ParseDsseEnvelope(" " + std::string(text));
    if (env.ok() != parsed.ok()) abort();
    if (!env.ok() && env.status().ToString() != parsed.status().ToString()) abort();
    if (env.ok() && !SameEnvelope(*env, *parsed)) abort();
  }
  return 0;
}
