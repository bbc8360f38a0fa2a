// libFuzzer target: ParseManifest on arbitrary bytes, as YAML and as JSON.
// Invariants: no crash, no exception, no stack overflow; an accepted
// manifest canonicalizes, validates, and re-parses (as JSON) to the same id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/canonical_json.h"
#include "gatos/model/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (gatos::ManifestFormat format :
       {gatos::ManifestFormat::kYaml, gatos::ManifestFormat::kJson}) {
    gatos::Result<gatos::Manifest> m = gatos::ParseManifest(bytes, "fuzz", format);
    if (!m.ok()) continue;
    const std::string canonical = gatos::CanonicalManifest(*m);
    if (canonical.empty() || !gatos::ValidateManifest(*m).ok()) abort();
    // The canonical form is itself a valid JSON manifest with the same id.
    gatos::Result<gatos::Manifest> again =
        gatos::ParseManifest(canonical, "canonical.json", gatos::ManifestFormat::kJson);
    if (!again.ok() || gatos::JobIdHex(*again) != gatos::JobIdHex(*m)) abort();
  }
  return 0;
}
