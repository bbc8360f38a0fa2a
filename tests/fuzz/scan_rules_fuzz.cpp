// libFuzzer target: the gatos-scan parsers of files a user hands the scanner
// (rules with their examples, allow-lists, baselines) and the SARIF emitter
// on findings built from arbitrary bytes. Invariants: no crash, no exception,
// no unbounded recursion; every parse error names the file and line; an
// accepted rule set has a stable canonical form, merging it into itself keeps
// every rule id once, and its examples have an origin; an accepted baseline
// round-trips through BaselineJson; the SARIF log is JSON whatever the path
// and rule bytes. Also the scan outputs' readers (findings.jsonl as `gatos
// findings` and the dashboard group it: a bad line is an error naming its
// line, a good one round-trips) and value decoding for allow-lists (base64
// text is printable).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "gatos/model/secret_groups.h"
#include "gatos/scan/baseline.h"
#include "gatos/scan/rules.h"
#include "gatos/scan/scanner.h"
#include "gatos/scan/value_decode.h"

namespace {

bool NamesFile(const gatos::Status& s) {
  return s.code() == gatos::StatusCode::kInvalidArgument &&
         s.message().rfind("fuzz.yaml:", 0) == 0;
}

void FuzzRules(std::string_view bytes) {
  gatos::Result<gatos::scan::RuleSet> rules = gatos::scan::ParseRules(bytes, "fuzz.yaml");
  if (rules.ok()) {
    const std::string canonical = gatos::scan::CanonicalRuleSet(*rules);
    if (canonical.empty() || canonical != gatos::scan::CanonicalRuleSet(*rules)) abort();
    std::set<std::string> ids;
    for (const gatos::scan::Rule& r : rules->rules) {
      if (r.id.empty() || (r.regex.empty() && r.path.empty()) || !ids.insert(r.id).second) {
        abort();
      }
      if (r.entropy && (*r.entropy < 0 || *r.entropy > 8)) abort();
      for (const auto* list : {&r.examples.tp, &r.examples.fp}) {
        for (const gatos::scan::RuleExample& ex : *list) {
          if (ex.origin.rfind("fuzz.yaml:", 0) != 0 || (ex.text.empty() && ex.path.empty())) {
            abort();
          }
        }
      }
    }
    gatos::scan::RuleSet merged = *rules;
    gatos::scan::MergeRules(&merged, *rules);
    if (merged.rules.size() != rules->rules.size()) abort();
  } else if (!NamesFile(rules.status())) {
    abort();
  }
  gatos::Result<gatos::scan::Allowlist> al = gatos::scan::ParseAllowlist(bytes, "fuzz.yaml");
  if (!al.ok() && !NamesFile(al.status())) abort();
}

void FuzzBaseline(std::string_view bytes) {
  gatos::Result<gatos::scan::Baseline> b = gatos::scan::ParseBaseline(bytes, "fuzz.yaml");
  if (!b.ok()) {
    if (!NamesFile(b.status())) abort();
    return;
  }
  if (b->size() > 200000) abort();
}

// Findings whose path, rule id and description come from the input.
void FuzzSarif(std::string_view bytes) {
  gatos::scan::ScanReport r;
  r.repo_key = std::string(bytes.substr(0, 16));
  const size_t third = bytes.size() / 3;
  r.rules = {{std::string(bytes.substr(0, third)), std::string(bytes.substr(third, third))}};
  gatos::scan::ListedFinding f;
  f.path = std::string(bytes.substr(third));
  f.blob = std::string(bytes.substr(0, 40));
  f.commit = f.blob;
  f.finding.rule_id = r.rules[0].id;
  f.finding.start = bytes.size();
  f.finding.end = bytes.size() * 2;
  f.finding.line = bytes.size() % 7;
  f.finding.fingerprint = std::string(bytes.substr(third / 2));
  r.findings = {f};
  r.accepted = {f};
  r.secrets = gatos::GroupBySecret({gatos::scan::ToLocation(f)});
  const std::string secrets = gatos::scan::SecretsJsonl(r);
  if (secrets.empty() || secrets.back() != '\n' ||
      !nlohmann::json::accept(std::string_view(secrets).substr(0, secrets.size() - 1))) {
    abort();
  }
  r.baseline_used = bytes.size() % 2 == 0;
  const std::string sarif = gatos::scan::SarifJson(r);
  if (!nlohmann::json::accept(sarif)) abort();
  // The baseline writer is fed the same findings: its output must parse.
  gatos::scan::ListedFinding good = f;
  good.finding.fingerprint = "blake3k:" + std::string(64, 'a');
  good.finding.rule_id = "rule";
  const std::string baseline = gatos::scan::BaselineJson({good});
  gatos::Result<gatos::scan::Baseline> back = gatos::scan::ParseBaseline(baseline, "fuzz.yaml");
  if (!back.ok() || !back->Accepts("rule", good.finding.fingerprint)) abort();
}

void FuzzDecode(std::string_view bytes) {
  if (std::optional<std::string> t = gatos::scan::Base64Text(bytes)) {
    if (t->size() < 4) abort();
    for (unsigned char c : *t) {
      if (c < 0x20 || c > 0x7e) abort();
    }
  }
  if (std::optional<std::string> p = gatos::scan::PercentDecoded(bytes)) {
    if (p->size() >= bytes.size()) abort();  // at least one escape shrank it
  }
  (void)gatos::scan::DecodedValue(bytes);
}

void FuzzFindings(std::string_view bytes) {
  gatos::Result<std::vector<gatos::FindingLocation>> parsed = gatos::ParseFindingsJsonl(bytes);
  if (!parsed.ok()) {
    if (parsed.status().code() != gatos::StatusCode::kInvalidArgument ||
        parsed.status().message().rfind("line ", 0) != 0) {
      abort();
    }
    return;
  }
  size_t total = parsed->size();
  for (const gatos::FindingLocation& l : *parsed) {
    const std::string line = gatos::LocationJson(l).dump(-1, ' ', false,
                                                         nlohmann::json::error_handler_t::replace);
    gatos::Result<gatos::FindingLocation> again = gatos::ParseFindingLine(line);
    if (!again.ok() || again->rule.size() != l.rule.size() || again->line != l.line) abort();
  }
  std::vector<gatos::SecretGroup> groups = gatos::GroupBySecret(std::move(*parsed));
  size_t n = 0;
  for (const gatos::SecretGroup& g : groups) {
    if (g.locations.empty() || g.id.size() != 64) abort();
    n += g.locations.size();
    (void)gatos::GroupJson(g, true).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (n != total) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FuzzRules(bytes);
  FuzzBaseline(bytes);
  FuzzSarif(bytes);
  FuzzDecode(bytes);
  FuzzFindings(bytes);
  return 0;
}
