// SARIF 2.1.0 output (OASIS SARIF v2.1.0, the format code-scanning UIs
// import). Only what the scanner knows without the secret: rule metadata,
// path, line, byte span, commit, blob and keyed fingerprints.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/scan/scanner.h"

namespace gatos::scan {
namespace {

// A relative URI reference for a repository path: every byte outside the
// unreserved set and '/' is percent-encoded, so spaces, '#', '?', '%' and
// bytes that are not UTF-8 survive losslessly.
std::string PathUri(const std::string& path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Rule descriptions come from rules files (UTF-8, checked by the YAML
// parser); keep the output valid JSON whatever a caller passes.
std::string Text(const std::string& s) { return IsValidUtf8(s) ? s : std::string("(not UTF-8)"); }

// "github-pat" -> "GithubPat", "jwt" -> "JwtSecret".
std::string RuleName(const std::string& id) {
  std::string out;
  bool upper = true;
  for (char c : id) {
    if (c == '-' || c == '_' || c == '.') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  // A one-word id ("jwt") would still equal its name but for case.
  if (out.size() == id.size()) out += "Secret";
  return Text(out);
}

// Identifies one finding (rule, blob, span, secret) across runs, for the
// SARIF `fingerprints` property; the secret enters only as its keyed hash.
std::string FindingId(const ListedFinding& f) {
  Blake3Hasher h;
  const std::string parts[] = {f.finding.rule_id, f.blob, std::to_string(f.finding.start),
                               std::to_string(f.finding.end), f.finding.fingerprint};
  for (const std::string& p : parts) {
    h.Update(p);
    h.Update(std::string_view("\0", 1));
  }
  return TaggedDigest(h.Finalize()).substr(7);  // hex without "blake3:"
}

nlohmann::json ResultJson(const ListedFinding& f, const std::map<std::string, size_t>& index,
                      const ScanReport& r, bool accepted) {
  const std::string& rule = f.finding.rule_id;
  auto it = index.find(rule);
  std::string description = it != index.end() ? Text(r.rules[it->second].description) : "";
  if (description.empty()) description = "Secret matched by rule " + Text(rule);
  nlohmann::json region = {
      {"startLine", std::max<uint64_t>(1, f.finding.line)},
      {"byteOffset", f.finding.start},
      {"byteLength", f.finding.end - f.finding.start},
  };
  nlohmann::json j = {
      {"ruleId", Text(rule)},
      {"level", "error"},
      {"kind", "fail"},
      {"message",
       {{"text", description + " (" + Text(rule) + ", secret fingerprint " +
                     Text(f.finding.fingerprint) + ", first seen in commit " + Text(f.commit) +
                     "). Rotate the secret; then remove it, or accept it in a baseline."}}},
      {"locations",
       {{{"physicalLocation",
          {{"artifactLocation", {{"uri", PathUri(f.path)}, {"uriBaseId", "%SRCROOT%"}}},
           {"region", std::move(region)}}}}}},
      // One result per location; the secret it belongs to groups them
      // (gatos/model/secret_groups.h), as code-scanning UIs group by partial
      // fingerprint.
      {"partialFingerprints",
       {{"gatosSecretFingerprint/v1", Text(f.finding.fingerprint)},
        {"gatosSecret/v1", SecretId(f.finding.rule_id, f.finding.fingerprint)}}},
      {"fingerprints", {{"gatosFinding/v1", FindingId(f)}}},
      {"properties",
       {{"commit", Text(f.commit)},
        {"blob", Text(f.blob)},
        {"secret", SecretId(f.finding.rule_id, f.finding.fingerprint)},
        {"atTip", f.at_tip}}},
  };
  if (it != index.end()) j["ruleIndex"] = it->second;
  if (r.baseline_used) j["baselineState"] = accepted ? "unchanged" : "new";
  if (accepted) {
    j["suppressions"] = {{{"kind", "external"},
                          {"status", "accepted"},
                          {"justification", "accepted in the gatos-scan baseline"}}};
  }
  return j;
}

}  // namespace

std::string SarifJson(const ScanReport& r) {
  std::map<std::string, size_t> index;
  nlohmann::json rules = nlohmann::json::array();
  for (size_t i = 0; i < r.rules.size(); ++i) {
    const RuleInfo& info = r.rules[i];
    index.emplace(info.id, i);
    const std::string text = info.description.empty() ? "Secret: " + Text(info.id)
                                                      : Text(info.description);
    rules.push_back({
        {"id", Text(info.id)},
        // SARIF wants `name` to differ from the opaque `id`: the id in
        // PascalCase, as code-scanning UIs show rule names.
        {"name", RuleName(info.id)},
        {"shortDescription", {{"text", text}}},
        {"fullDescription", {{"text", text}}},
        {"defaultConfiguration", {{"level", "error"}}},
        {"help",
         {{"text", "A credential matched rule " + Text(info.id) +
                       ". Revoke or rotate it at its issuer first (it is in the history), then "
                       "remove it. Accept a reviewed finding with a gatos-scan baseline or a "
                       "gatos:allow comment on its line."}}},
        {"properties", {{"tags", {"security", "secret"}}, {"security-severity", "8.0"}}},
    });
  }
  nlohmann::json results = nlohmann::json::array();
  for (const ListedFinding& f : r.findings) results.push_back(ResultJson(f, index, r, false));
  for (const ListedFinding& f : r.accepted) results.push_back(ResultJson(f, index, r, true));
  nlohmann::json run = {
      {"tool",
       {{"driver",
         {{"name", "gatos-scan"},
          {"version", kScannerVersion},
          {"semanticVersion", kScannerVersion},
          {"rules", std::move(rules)}}}}},
      {"versionControlProvenance",
       {{{"repositoryUri", Text(r.repo_key)}, {"mappedTo", {{"uriBaseId", "%SRCROOT%"}}}}}},
      {"invocations",
       {{{"executionSuccessful", r.complete},
         {"properties", {{"status", r.complete ? "complete" : "partial"},
                         {"policy_hash", Text(r.policy_hash)}}}}}},
      {"results", std::move(results)},
  };
  nlohmann::json log = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", {std::move(run)}},
  };
  return log.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gatos::scan
