// libFuzzer target: the gatos-scan rules and allow-list parsers on arbitrary
// bytes. Invariants: no crash, no exception, no unbounded recursion; an
// accepted rule set has a stable canonical form, and merging it into itself
// keeps every rule id once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "gatos/scan/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gatos::Result<gatos::scan::RuleSet> rules = gatos::scan::ParseRules(bytes, "fuzz.yaml");
  if (rules.ok()) {
    const std::string canonical = gatos::scan::CanonicalRuleSet(*rules);
    if (canonical.empty() || canonical != gatos::scan::CanonicalRuleSet(*rules)) abort();
    std::set<std::string> ids;
    for (const gatos::scan::Rule& r : rules->rules) {
      if (r.id.empty() || r.regex.empty() || !ids.insert(r.id).second) abort();
      if (r.entropy && (*r.entropy < 0 || *r.entropy > 8)) abort();
    }
    gatos::scan::RuleSet merged = *rules;
    gatos::scan::MergeRules(&merged, *rules);
    if (merged.rules.size() != rules->rules.size()) abort();
  } else if (rules.status().code() != gatos::StatusCode::kInvalidArgument ||
             rules.status().message().rfind("fuzz.yaml:", 0) != 0) {
    abort();  // every parse error names the file and line
  }
  gatos::Result<gatos::scan::Allowlist> al = gatos::scan::ParseAllowlist(bytes, "fuzz.yaml");
  if (!al.ok() && al.status().message().rfind("fuzz.yaml:", 0) != 0) abort();
  return 0;
}
