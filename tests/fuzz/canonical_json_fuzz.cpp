// libFuzzer target: CanonicalJson over whatever nlohmann parses.
// Invariants: no crash; canonical output re-parses and is a fixed point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gatos/model/canonical_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json value = nlohmann::json::parse(data, data + size, nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return 0;
  gatos::Result<std::string> canonical = gatos::CanonicalJson(value);
  if (!canonical.ok()) return 0;
  if (!gatos::IsValidUtf8(*canonical)) abort();
  nlohmann::json reparsed = nlohmann::json::parse(*canonical, nullptr, false);
  if (reparsed.is_discarded()) abort();
  gatos::Result<std::string> twice = gatos::CanonicalJson(reparsed);
  if (!twice.ok() || *twice != *canonical) abort();
  return 0;
}
