// libFuzzer target: ParsePoe on arbitrary bytes, against the JSON parser.
// Invariants: no crash; ParsePoe (which reads the canonical layout without a
// parser when it can) and ParsePoeJson (always the parser) agree on every
// input: both accept with equal fields, or both refuse with the same error;
// an accepted poe.json serializes back to its bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/poe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gatos::Result<gatos::Poe> fast = gatos::ParsePoe(text);
  gatos::Result<gatos::Poe> full = gatos::poe_internal::ParsePoeJson(text);
  if (fast.ok() != full.ok()) abort();
  if (!fast.ok()) {
    if (fast.status().message() != full.status().message()) abort();
    return 0;
  }
  if (!(*fast == *full)) abort();
  gatos::Result<std::string> back = gatos::SerializePoe(*fast);
  if (!back.ok() || *back != text) abort();
  return 0;
}
