#include "gatos/scan/rules.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gatos/model/canonical_json.h"
#include "gatos/model/yaml_tree.h"

namespace gatos::scan {
namespace {

using internal::YamlEntry;
using internal::YamlNode;

constexpr size_t kMaxRegexBytes = 8192;
constexpr size_t kMaxRules = 10000;

std::string At(const std::string& origin, const YamlNode& n) {
  return origin + ":" + std::to_string(n.line);
}

Status Bad(const std::string& origin, const YamlNode& n, const std::string& what) {
  return InvalidArgumentError(At(origin, n) + ": " + what);
}

Result<std::string> Scalar(const std::string& origin, const YamlNode& n, const std::string& key) {
  if (n.kind != YamlNode::Kind::kScalar) {
    return Bad(origin, n, "`" + key + "` must be a string (quote it if it contains ': ' or '#')");
  }
  return n.value;
}

Result<std::vector<std::string>> StringList(const std::string& origin, const YamlNode& n,
                                            const std::string& key) {
  std::vector<std::string> out;
  if (n.kind == YamlNode::Kind::kNull) return out;
  if (n.kind != YamlNode::Kind::kSequence) {
    return Bad(origin, n, "`" + key + "` must be a list of strings, e.g. [a, b]");
  }
  for (const YamlNode& item : n.items) {
    GATOS_ASSIGN_OR_RETURN(std::string s, Scalar(origin, item, key + " item"));
    out.push_back(std::move(s));
  }
  return out;
}

// Compiles `pattern` with PCRE2 to check it; the detector compiles again with JIT.
Status CheckRegex(const std::string& origin, const YamlNode& n, const std::string& what,
                  const std::string& pattern) {
  if (pattern.empty()) return Bad(origin, n, what + " is empty");
  if (pattern.size() > kMaxRegexBytes) {
    return Bad(origin, n,
               what + " is " + std::to_string(pattern.size()) + " bytes; the limit is " +
                   std::to_string(kMaxRegexBytes));
  }
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_MULTILINE, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return Bad(origin, n,
               what + " does not compile at offset " + std::to_string(offset) + ": " +
                   reinterpret_cast<const char*>(buf) + " (fix the pattern; syntax is PCRE2)");
  }
  pcre2_code_free(code);
  return OkStatus();
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

Status ParseAllowlistEntries(const std::string& origin, const YamlNode& map, bool allow_desc,
                             Allowlist* out) {
  if (map.kind == YamlNode::Kind::kNull) return OkStatus();
  if (map.kind != YamlNode::Kind::kMap) {
    return Bad(origin, map, "an allowlist must be a mapping with paths, regexes, stopwords");
  }
  for (const YamlEntry& e : map.entries) {
    const std::string& k = e.key.value;
    if (k == "paths" || k == "regexes" || k == "match_regexes" || k == "line_regexes" ||
        k == "decoded_regexes") {
      GATOS_ASSIGN_OR_RETURN(std::vector<std::string> list, StringList(origin, e.value, k));
      for (size_t i = 0; i < list.size(); ++i) {
        const YamlNode& where = e.value.items[i];
        GATOS_RETURN_IF_ERROR(CheckRegex(origin, where, "allowlist " + k + " entry", list[i]));
      }
      auto& dst = k == "paths"           ? out->paths
                  : k == "regexes"       ? out->regexes
                  : k == "match_regexes" ? out->match_regexes
                  : k == "line_regexes"  ? out->line_regexes
                                         : out->decoded_regexes;
      dst.insert(dst.end(), list.begin(), list.end());
    } else if (k == "stopwords") {
      GATOS_ASSIGN_OR_RETURN(std::vector<std::string> list, StringList(origin, e.value, k));
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].empty()) return Bad(origin, e.value.items[i], "empty stopword");
        out->stopwords.push_back(Lower(list[i]));
      }
    } else if (k == "description" && allow_desc) {
      GATOS_RETURN_IF_ERROR(Scalar(origin, e.value, k));
    } else {
      return Bad(origin, e.key,
                 "unknown allowlist key `" + k +
                     "` (expected paths, regexes, match_regexes, line_regexes, decoded_regexes or "
                     "stopwords)");
    }
  }
  return OkStatus();
}

bool ValidRuleId(const std::string& id) {
  if (id.empty() || id.size() > 100) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              (i > 0 && (c == '-' || c == '_' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

Result<double> ParseNumber(const std::string& origin, const YamlNode& n, const std::string& key,
                           double lo, double hi) {
  GATOS_ASSIGN_OR_RETURN(std::string s, Scalar(origin, n, key));
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream msg;
    msg << "`" << key << "` must be a number from " << lo << " to " << hi;
    return Bad(origin, n, msg.str());
  }
  return v;
}

// One example: a string (the text) or a mapping {text, path}.
Result<RuleExample> ParseExample(const std::string& origin, const YamlNode& n) {
  RuleExample ex;
  ex.origin = At(origin, n);
  if (n.kind == YamlNode::Kind::kScalar) {
    ex.text = n.value;
  } else if (n.kind == YamlNode::Kind::kMap) {
    for (const YamlEntry& e : n.entries) {
      const std::string& k = e.key.value;
      if (k == "text") {
        GATOS_ASSIGN_OR_RETURN(ex.text, Scalar(origin, e.value, "example text"));
      } else if (k == "path") {
        GATOS_ASSIGN_OR_RETURN(ex.path, Scalar(origin, e.value, "example path"));
      } else {
        return Bad(origin, e.key, "unknown example key `" + k + "` (expected text, path)");
      }
    }
  } else {
    return Bad(origin, n, "an example must be a string or a mapping {path: ..., text: ...}");
  }
  if (ex.text.empty() && ex.path.empty()) return Bad(origin, n, "empty example");
  return ex;
}

Status ParseExamples(const std::string& origin, const YamlNode& map, RuleExamples* out) {
  if (map.kind != YamlNode::Kind::kMap) {
    return Bad(origin, map, "`examples` must be a mapping with `tp` and `fp` lists");
  }
  for (const YamlEntry& e : map.entries) {
    const std::string& k = e.key.value;
    if (k != "tp" && k != "fp") {
      return Bad(origin, e.key,
                 "unknown examples key `" + k + "` (expected tp: true positives, fp: false "
                 "positives)");
    }
    if (e.value.kind == YamlNode::Kind::kNull) continue;
    if (e.value.kind != YamlNode::Kind::kSequence) {
      return Bad(origin, e.value, "`examples." + k + "` must be a list");
    }
    auto& dst = k == "tp" ? out->tp : out->fp;
    for (const YamlNode& item : e.value.items) {
      GATOS_ASSIGN_OR_RETURN(RuleExample ex, ParseExample(origin, item));
      dst.push_back(std::move(ex));
    }
  }
  return OkStatus();
}

Result<Rule> ParseRule(const std::string& origin, const YamlNode& n) {
  if (n.kind != YamlNode::Kind::kMap) return Bad(origin, n, "each rule must be a mapping");
  Rule r;
  r.origin = At(origin, n);
  const YamlNode* regex_node = nullptr;
  const YamlNode* path_node = nullptr;
  for (const YamlEntry& e : n.entries) {
    const std::string& k = e.key.value;
    if (k == "id") {
      GATOS_ASSIGN_OR_RETURN(r.id, Scalar(origin, e.value, k));
      if (!ValidRuleId(r.id)) {
        return Bad(origin, e.value,
                   "rule id must be 1-100 characters of [a-z0-9._-] starting with a letter or "
                   "digit");
      }
    } else if (k == "description") {
      GATOS_ASSIGN_OR_RETURN(r.description, Scalar(origin, e.value, k));
    } else if (k == "regex") {
      GATOS_ASSIGN_OR_RETURN(r.regex, Scalar(origin, e.value, k));
      regex_node = &e.value;
    } else if (k == "path") {
      GATOS_ASSIGN_OR_RETURN(r.path, Scalar(origin, e.value, k));
      path_node = &e.value;
    } else if (k == "examples") {
      GATOS_RETURN_IF_ERROR(ParseExamples(origin, e.value, &r.examples));
    } else if (k == "keywords") {
      GATOS_ASSIGN_OR_RETURN(r.keywords, StringList(origin, e.value, k));
      for (size_t i = 0; i < r.keywords.size(); ++i) {
        if (r.keywords[i].empty()) return Bad(origin, e.value.items[i], "empty keyword");
        r.keywords[i] = Lower(r.keywords[i]);
      }
    } else if (k == "entropy") {
      GATOS_ASSIGN_OR_RETURN(double v, ParseNumber(origin, e.value, k, 0.0, 8.0));
      r.entropy = v;
    } else if (k == "secret_group") {
      GATOS_ASSIGN_OR_RETURN(double v, ParseNumber(origin, e.value, k, 0, 99));
      if (v != std::floor(v)) return Bad(origin, e.value, "`secret_group` must be an integer");
      r.secret_group = static_cast<int>(v);
    } else if (k == "window") {
      GATOS_ASSIGN_OR_RETURN(double v, ParseNumber(origin, e.value, k, 1, kMaxWindow));
      if (v != std::floor(v)) return Bad(origin, e.value, "`window` must be an integer");
      r.window = static_cast<uint32_t>(v);
    } else if (k == "allowlist") {
      GATOS_RETURN_IF_ERROR(ParseAllowlistEntries(origin, e.value, true, &r.allowlist));
    } else {
      return Bad(origin, e.key,
                 "unknown rule key `" + k +
                     "` (expected id, description, regex, path, secret_group, keywords, "
                     "entropy, window, allowlist, examples)");
    }
  }
  if (r.id.empty()) return Bad(origin, n, "rule has no `id`");
  if (regex_node == nullptr && path_node == nullptr) {
    return Bad(origin, n, "rule " + r.id + " has no `regex` (nor a `path` for a path-only rule)");
  }
  if (regex_node != nullptr) {
    GATOS_RETURN_IF_ERROR(CheckRegex(origin, *regex_node, "rule " + r.id + " regex", r.regex));
  }
  if (path_node != nullptr) {
    GATOS_RETURN_IF_ERROR(CheckRegex(origin, *path_node, "rule " + r.id + " path", r.path));
  }
  if (r.path_only() && (!r.keywords.empty() || r.entropy || r.secret_group >= 0)) {
    // These act on a content match; a path-only rule has none.
    return Bad(origin, n,
               "rule " + r.id +
                   " has no `regex`: keywords, entropy and secret_group need one");
  }
  return r;
}

internal::YamlTreeLimits Limits() {
  internal::YamlTreeLimits l;
  l.max_nodes = 200000;
  l.max_depth = 16;
  l.max_string_bytes = kMaxRegexBytes;
  l.max_total_bytes = 16 << 20;
  return l;
}

Result<YamlNode> ParseTree(std::string_view yaml, const std::string& origin) {
  YamlNode root;
  internal::YamlTreeError err;
  if (!internal::ParseYamlTree(yaml, Limits(), &root, &err)) {
    return InvalidArgumentError(origin + ":" + std::to_string(err.line) + ": " + err.message);
  }
  return root;
}

Result<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot read " + what + " " + path +
                         ": no such file or not readable (check the path)");
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return UnavailableError("error reading " + what + " " + path);
  return s.str();
}

nlohmann::json AllowlistJson(const Allowlist& a) {
  nlohmann::json j = {{"paths", a.paths}, {"regexes", a.regexes}, {"stopwords", a.stopwords}};
  // Only when used, so rule sets without them keep their earlier form.
  if (!a.match_regexes.empty()) j["match_regexes"] = a.match_regexes;
  if (!a.line_regexes.empty()) j["line_regexes"] = a.line_regexes;
  if (!a.decoded_regexes.empty()) j["decoded_regexes"] = a.decoded_regexes;
  return j;
}

}  // namespace

Result<RuleSet> ParseRules(std::string_view yaml, const std::string& origin) {
  GATOS_ASSIGN_OR_RETURN(YamlNode root, ParseTree(yaml, origin));
  if (root.kind != YamlNode::Kind::kMap) {
    return Bad(origin, root,
               "a rules file must be a mapping with `rules:` (and optional "
               "`version:`, `allowlist:`)");
  }
  RuleSet set;
  std::map<std::string, std::string> seen;  // id -> origin
  bool has_rules = false;
  for (const YamlEntry& e : root.entries) {
    const std::string& k = e.key.value;
    if (k == "version") {
      GATOS_ASSIGN_OR_RETURN(set.version, Scalar(origin, e.value, k));
    } else if (k == "description") {
      GATOS_RETURN_IF_ERROR(Scalar(origin, e.value, k));
    } else if (k == "allowlist") {
      GATOS_RETURN_IF_ERROR(ParseAllowlistEntries(origin, e.value, true, &set.allowlist));
    } else if (k == "rules") {
      has_rules = true;
      if (e.value.kind == YamlNode::Kind::kNull) continue;
      if (e.value.kind != YamlNode::Kind::kSequence) {
        return Bad(origin, e.value, "`rules` must be a list of rule mappings");
      }
      if (e.value.items.size() > kMaxRules) {
        return Bad(origin, e.value, "more than " + std::to_string(kMaxRules) + " rules");
      }
      for (const YamlNode& item : e.value.items) {
        GATOS_ASSIGN_OR_RETURN(Rule r, ParseRule(origin, item));
        auto [it, inserted] = seen.emplace(r.id, r.origin);
        if (!inserted) {
          return Bad(
              origin, item,
              "duplicate rule id " + r.id + " (first defined at " + it->second + "; rename one)");
        }
        set.rules.push_back(std::move(r));
      }
    } else {
      return Bad(origin, e.key,
                 "unknown top-level key `" + k +
                     "` (expected version, description, allowlist, "
                     "rules)");
    }
  }
  if (!has_rules && set.allowlist.empty()) {
    return Bad(origin, root, "no `rules:` list and no `allowlist:` (nothing to load)");
  }
  return set;
}

Result<RuleSet> LoadRulesFile(const std::string& path) {
  GATOS_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "rules file"));
  return ParseRules(text, path);
}

Result<Allowlist> ParseAllowlist(std::string_view yaml, const std::string& origin) {
  GATOS_ASSIGN_OR_RETURN(YamlNode root, ParseTree(yaml, origin));
  Allowlist a;
  if (root.kind != YamlNode::Kind::kMap) {
    return Bad(origin, root, "an allowlist file must be a mapping with paths, regexes, stopwords");
  }
  GATOS_RETURN_IF_ERROR(ParseAllowlistEntries(origin, root, true, &a));
  return a;
}

Result<Allowlist> LoadAllowlistFile(const std::string& path) {
  GATOS_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "allowlist file"));
  return ParseAllowlist(text, path);
}

Result<RuleSet> DefaultRules() { return ParseRules(DefaultRulesYaml(), "rules/default.yaml"); }

void MergeAllowlist(Allowlist* base, const Allowlist& more) {
  base->paths.insert(base->paths.end(), more.paths.begin(), more.paths.end());
  base->regexes.insert(base->regexes.end(), more.regexes.begin(), more.regexes.end());
  base->match_regexes.insert(base->match_regexes.end(), more.match_regexes.begin(),
                             more.match_regexes.end());
  base->line_regexes.insert(base->line_regexes.end(), more.line_regexes.begin(),
                            more.line_regexes.end());
  base->decoded_regexes.insert(base->decoded_regexes.end(), more.decoded_regexes.begin(),
                               more.decoded_regexes.end());
  base->stopwords.insert(base->stopwords.end(), more.stopwords.begin(), more.stopwords.end());
}

void MergeRules(RuleSet* base, RuleSet more) {
  if (!more.version.empty()) {
    base->version = base->version.empty() ? more.version : base->version + "+" + more.version;
  }
  for (Rule& r : more.rules) {
    bool replaced = false;
    for (Rule& existing : base->rules) {
      if (existing.id == r.id) {
        existing = r;
        replaced = true;
        break;
      }
    }
    if (!replaced) base->rules.push_back(std::move(r));
  }
  MergeAllowlist(&base->allowlist, more.allowlist);
}

std::string CanonicalRuleSet(const RuleSet& rules) {
  nlohmann::json list = nlohmann::json::array();
  for (const Rule& r : rules.rules) {
    nlohmann::json j = {{"id", r.id},
                        {"regex", r.regex},
                        {"keywords", r.keywords},
                        {"secret_group", r.secret_group},
                        {"window", r.window == 0 ? kDefaultWindow : r.window},
                        {"allowlist", AllowlistJson(r.allowlist)}};
    if (!r.path.empty()) j["path"] = r.path;
    // Canonical JSON has no floats: thousandths of a bit are precise enough.
    if (r.entropy) j["entropy_milli"] = static_cast<int64_t>(std::llround(*r.entropy * 1000));
    list.push_back(std::move(j));
  }
  nlohmann::json doc = {{"version", rules.version},
                        {"rules", std::move(list)},
                        {"allowlist", AllowlistJson(rules.allowlist)}};
  Result<std::string> text = CanonicalJson(doc);
  // Every string came through the YAML parser, which only accepts UTF-8.
  return text.ok() ? *text : doc.dump();
}

double ShannonEntropy(std::string_view s) {
  if (s.empty()) return 0.0;
  size_t counts[256] = {};
  for (unsigned char c : s) ++counts[c];
  double h = 0.0;
  const double n = static_cast<double>(s.size());
  for (size_t c : counts) {
    if (c == 0) continue;
    double p = static_cast<double>(c) / n;
    h -= p * std::log2(p);
  }
  return h;
}

}  // namespace gatos::scan
