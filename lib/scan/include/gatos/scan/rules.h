// Secret-detection rules: the YAML format, its parser, and the canonical form
// that feeds the scan policy hash.
//
// A rules file (rules/default.yaml is the shipped one; the format is in
// docs/scan.md):
//
//   version: "gatos-default-1"
//   allowlist: {paths: [...], regexes: [...], stopwords: [...]}
//   rules:
//     - id: aws-access-token
//       description: AWS access key id
//       regex: '\b((?:AKIA|ASIA)[A-Z2-7]{16})\b'
//       secret_group: 1        # optional; default 1 if the regex has a group, else 0
//       keywords: [akia, asia] # optional; one must occur in the match (any case)
//       entropy: 3.0           # optional; minimum Shannon entropy of the secret
//       window: 256            # optional; longest match confirmed, in bytes
//       path: '\.ya?ml$'       # optional; the rule applies only to blobs whose
//                              # path matches (without `regex`: the path alone
//                              # is the finding, e.g. a PKCS#12 file)
//       allowlist: {...}       # optional; same shape as the global one
//       examples:              # true and false positives the rule is tested on
//         tp: ['...', {path: a.yaml, text: '...'}]
//         fp: ['...']
//
// Regexes are PCRE2 syntax in the subset Vectorscan accepts in prefilter mode
// (see docs/scan.md); both engines run with multiline `^`/`$`.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_SCAN_RULES_H_
#define GATOS_SCAN_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos::scan {

// A finding is dropped when any entry matches it.
struct Allowlist {
  std::vector<std::string> paths;          // regexes over the blob's path
  std::vector<std::string> regexes;        // regexes over the secret bytes
  std::vector<std::string> match_regexes;  // regexes over the whole match of the rule
  std::vector<std::string> line_regexes;   // regexes over the line(s) holding the match
  // Regexes over the secret decoded (DecodedValue in gatos/scan/value_decode.h:
  // percent-encoding, or base64 of printable text); not applied to a secret
  // that is neither.
  std::vector<std::string> decoded_regexes;
  std::vector<std::string> stopwords;  // lowercase substrings of the secret (any case)
  bool empty() const {
    return paths.empty() && regexes.empty() && match_regexes.empty() && line_regexes.empty() &&
           decoded_regexes.empty() && stopwords.empty();
  }
};

// One example of a rule: text to scan, and the path it is scanned under
// (empty: no path; rules with a `path` condition then do not apply).
struct RuleExample {
  std::string text;
  std::string path;
  std::string origin;  // "file:line" of the example, for reports (never its text)
};

// What a rule must find (tp) and must not find (fp). Not part of the policy:
// examples document and test a rule, they do not change what it reports.
struct RuleExamples {
  std::vector<RuleExample> tp;
  std::vector<RuleExample> fp;
};

struct Rule {
  std::string id;  // [a-z0-9][a-z0-9._-]*, unique in a RuleSet
  std::string description;
  std::string regex;  // empty only for a path-only rule (then `path` is set)
  std::string path;   // regex over the blob's path; empty: any path
  std::vector<std::string> keywords;  // lowercase
  std::optional<double> entropy;      // minimum, in bits per byte
  int secret_group = -1;              // -1: decided when compiled (see above)
  uint32_t window = 0;                // 0: kDefaultWindow
  Allowlist allowlist;
  RuleExamples examples;
  std::string origin;  // "file:line" of the rule, for error messages only
  bool path_only() const { return regex.empty(); }
};

inline constexpr uint32_t kDefaultWindow = 512;
inline constexpr uint32_t kMaxWindow = 1 << 20;

struct RuleSet {
  std::string version;  // the files' `version` values joined with "+"
  std::vector<Rule> rules;
  Allowlist allowlist;  // global
};

// Parses one rules document. `origin` names it in errors, which read
// "origin:line: what" (InvalidArgument): YAML syntax, unknown keys, missing
// id/regex, duplicate ids, regexes that PCRE2 rejects, bad numbers, examples
// that are neither a string nor {path, text}. Never throws; bounded in memory
// and stack for hostile input.
Result<RuleSet> ParseRules(std::string_view yaml, const std::string& origin);
// ParseRules on a file's bytes; NotFound/Unavailable if it cannot be read.
Result<RuleSet> LoadRulesFile(const std::string& path);

// An allow-list file holds the top-level keys `paths`, `regexes`,
// `stopwords` (and an optional `description`). Errors as ParseRules.
Result<Allowlist> ParseAllowlist(std::string_view yaml, const std::string& origin);
Result<Allowlist> LoadAllowlistFile(const std::string& path);

// The rules compiled into the program (rules/default.yaml at build time).
std::string_view DefaultRulesYaml();
// ParseRules(DefaultRulesYaml(), "rules/default.yaml").
Result<RuleSet> DefaultRules();

// Appends `more` to `*base`: a rule whose id already exists replaces the
// earlier one in place (so a user file can retune a shipped rule); allow-list
// entries are appended; versions are joined with "+".
void MergeRules(RuleSet* base, RuleSet more);
void MergeAllowlist(Allowlist* base, const Allowlist& more);

// The RFC 8785 canonical JSON of the rule set (rules in order, every field
// that changes findings, entropy as integer thousandths; not descriptions or
// examples). Same rules => same bytes.
std::string CanonicalRuleSet(const RuleSet& rules);

// Shannon entropy of the bytes of `s` in bits per byte (0 for empty input).
double ShannonEntropy(std::string_view s);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_RULES_H_
