#include "gatos/scan/baseline.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/yaml_tree.h"

namespace gatos::scan {
namespace {

using internal::YamlEntry;
using internal::YamlNode;

constexpr size_t kMaxBaselineBytes = 16 << 20;
constexpr size_t kMaxEntries = 200000;
constexpr int kVersion = 1;

Status Bad(const std::string& origin, const YamlNode& n, const std::string& what) {
  return InvalidArgumentError(origin + ":" + std::to_string(n.line) + ": " + what);
}

bool IsFingerprint(const std::string& s) {
  static constexpr std::string_view kPrefix = "blake3k:";
  if (s.size() != kPrefix.size() + 64 || !s.starts_with(kPrefix)) return false;
  for (size_t i = kPrefix.size(); i < s.size(); ++i) {
    const char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsRuleId(const std::string& id) {
  if (id.empty() || id.size() > 100) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
          (i > 0 && (c == '-' || c == '_' || c == '.')))) {
      return false;
    }
  }
  return true;
}

Result<std::string> ScalarOf(const std::string& origin, const YamlNode& n, const std::string& k) {
  if (n.kind != YamlNode::Kind::kScalar) return Bad(origin, n, "`" + k + "` must be a string");
  return n.value;
}

Status ParseEntry(const std::string& origin, const YamlNode& n, size_t index, Baseline* out) {
  const std::string where = "accepted[" + std::to_string(index) + "]";
  if (n.kind != YamlNode::Kind::kMap) {
    return Bad(origin, n, where + " must be an object with a `fingerprint`");
  }
  std::string fingerprint, rule;
  bool has_fingerprint = false;
  for (const YamlEntry& e : n.entries) {
    const std::string& k = e.key.value;
    if (k == "fingerprint") {
      GATOS_ASSIGN_OR_RETURN(fingerprint, ScalarOf(origin, e.value, k));
      if (!IsFingerprint(fingerprint)) {
        return Bad(origin, e.value,
                   where + ": `fingerprint` must be \"blake3k:\" and 64 lowercase hex digits "
                           "(as in findings.jsonl)");
      }
      has_fingerprint = true;
    } else if (k == "rule") {
      GATOS_ASSIGN_OR_RETURN(rule, ScalarOf(origin, e.value, k));
      if (!IsRuleId(rule)) return Bad(origin, e.value, where + ": `rule` is not a rule id");
    } else if (k == "path" || k == "commit" || k == "comment" || k == "line" || k == "blob") {
      // For review only; a number or a string.
      if (e.value.kind != YamlNode::Kind::kScalar) {
        return Bad(origin, e.value, where + ": `" + k + "` must be a string or number");
      }
    } else {
      return Bad(origin, e.key,
                 where + ": unknown key `" + k +
                     "` (expected fingerprint, rule, path, line, commit, blob, comment)");
    }
  }
  if (!has_fingerprint) return Bad(origin, n, where + " has no `fingerprint`");
  out->Accept(fingerprint, rule);
  return OkStatus();
}

}  // namespace

void Baseline::Accept(const std::string& fingerprint, const std::string& rule) {
  if (by_fingerprint_[fingerprint].insert(rule).second) ++entries_;
}

bool Baseline::Accepts(const std::string& rule, const std::string& fingerprint) const {
  auto it = by_fingerprint_.find(fingerprint);
  if (it == by_fingerprint_.end()) return false;
  return it->second.count("") > 0 || it->second.count(rule) > 0;
}

Result<Baseline> ParseBaseline(std::string_view text, const std::string& origin) {
  if (text.size() > kMaxBaselineBytes) {
    return InvalidArgumentError(origin + ":1: baseline is " + std::to_string(text.size()) +
                                " bytes; the limit is " + std::to_string(kMaxBaselineBytes));
  }
  internal::YamlTreeLimits limits;
  limits.max_nodes = kMaxEntries * 16;
  limits.max_depth = 4;
  // Informational paths can be long; the total size bounds them anyway.
  limits.max_string_bytes = kMaxBaselineBytes;
  limits.max_total_bytes = kMaxBaselineBytes * 2;
  YamlNode root;
  internal::YamlTreeError err;
  // JSON is YAML; the tree parser gives lines and enforces the limits.
  const std::string json = internal::RewriteJsonSurrogatePairs(text);
  if (!internal::ParseYamlTree(json, limits, &root, &err)) {
    return InvalidArgumentError(origin + ":" + std::to_string(err.line) + ": " + err.message);
  }
  if (root.kind != YamlNode::Kind::kMap) {
    return Bad(origin, root,
               "a baseline must be an object {\"gatos_scan_baseline\": 1, \"accepted\": [...]}");
  }
  Baseline out;
  bool has_version = false;
  for (const YamlEntry& e : root.entries) {
    const std::string& k = e.key.value;
    if (k == "gatos_scan_baseline") {
      if (e.value.kind != YamlNode::Kind::kScalar || e.value.value != std::to_string(kVersion)) {
        return Bad(origin, e.value,
                   "unsupported baseline version (this gatos-scan reads version " +
                       std::to_string(kVersion) + ")");
      }
      has_version = true;
    } else if (k == "comment") {
      GATOS_RETURN_IF_ERROR(ScalarOf(origin, e.value, k));
    } else if (k == "accepted") {
      if (e.value.kind == YamlNode::Kind::kNull) continue;
      if (e.value.kind != YamlNode::Kind::kSequence) {
        return Bad(origin, e.value, "`accepted` must be a list of objects");
      }
      if (e.value.items.size() > kMaxEntries) {
        return Bad(origin, e.value,
                   "more than " + std::to_string(kMaxEntries) + " accepted findings");
      }
      for (size_t i = 0; i < e.value.items.size(); ++i) {
        GATOS_RETURN_IF_ERROR(ParseEntry(origin, e.value.items[i], i, &out));
      }
    } else {
      return Bad(origin, e.key,
                 "unknown top-level key `" + k +
                     "` (expected gatos_scan_baseline, accepted, comment)");
    }
  }
  if (!has_version) {
    return Bad(origin, root, "not a gatos-scan baseline: no \"gatos_scan_baseline\": 1");
  }
  return out;
}

Result<Baseline> LoadBaselineFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot read baseline " + path +
                         ": no such file or not readable (create one with --write-baseline)");
  }
  std::string text;
  text.resize(kMaxBaselineBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return UnavailableError("error reading baseline " + path);
  return ParseBaseline(text, path);
}

std::string BaselineJson(const std::vector<ListedFinding>& findings) {
  // One entry per (fingerprint, rule), at its first location in sort order.
  std::map<std::pair<std::string, std::string>, const ListedFinding*> chosen;
  for (const ListedFinding& f : findings) {
    auto key = std::make_pair(f.finding.fingerprint, f.finding.rule_id);
    auto [it, inserted] = chosen.emplace(key, &f);
    if (!inserted && std::tie(f.path, f.finding.line) <
                         std::tie(it->second->path, it->second->finding.line)) {
      it->second = &f;
    }
  }
  std::string out = "{\"gatos_scan_baseline\":1,\"accepted\":[";
  bool first = true;
  for (const auto& [key, f] : chosen) {
    // Text that is not UTF-8 cannot be JSON; these fields are informational.
    // (NUL is valid UTF-8 but no reader of the file accepts it.)
    auto text = [](const std::string& s) {
      return IsValidUtf8(s) && s.find('\0') == std::string::npos ? s
                                                                   : std::string("(not UTF-8)");
    };
    nlohmann::json j = {{"fingerprint", text(key.first)},
                        {"rule", text(key.second)},
                        {"commit", text(f->commit)},
                        {"line", f->finding.line},
                        {"path", text(f->path)}};
    Result<std::string> s = CanonicalJson(j);
    out += (first ? "\n" : ",\n") + (s.ok() ? *s : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    first = false;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace gatos::scan
