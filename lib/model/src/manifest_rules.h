// The rules of a manifest's fields (docs/manifest.md), shared by the parser
// (manifest_parse.cpp, with positions) and ValidateManifest (manifest.cpp,
// for manifests built in code): one definition of each rule.
//
// Thread-safety: pure functions.
#ifndef GATOS_MODEL_SRC_MANIFEST_RULES_H_
#define GATOS_MODEL_SRC_MANIFEST_RULES_H_

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/yaml_tree.h"

namespace gatos {

// The manifest rules on a tree already parsed (a manifest embedded in
// another YAML document: a schedule's template). Errors as ParseManifest's,
// with the positions of `root`'s document.
Result<Manifest> CheckManifestTree(const internal::YamlNode& root, std::string_view source_name,
                                   const ManifestLimits& limits);

namespace manifest_internal {

inline constexpr std::string_view kKnownFields =
    "command, args, timeout, env, cwd, inputs, resources, policy_root, pool, ulid";

// A Manifest built in code names the default pool by leaving `pool` unset.
inline constexpr char kDefaultPoolProblem[] =
    "\"default\" is the pool of a manifest without `pool`; leave the field out";

inline constexpr char kEmptyResourcesProblem[] =
    "is an empty mapping; omit it, or set memory_mb, pids, cpu_millis or disk_mb";

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

inline std::string Quote(std::string_view s) {
  // Error messages quote user text; keep it short and on one line.
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (++n > 60) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// YAML 1.2 core schema: the plain scalars that mean null / booleans.
inline bool IsYamlNull(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}
inline bool IsYamlBool(std::string_view s, bool* value) {
  if (s == "true" || s == "True" || s == "TRUE") return *value = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *value = false, true;
  return false;
}
// [-+]?[0-9]+
inline bool IsYamlInt(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return IsAllDigits(s);
}
// YAML 1.2 core float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?,
// [-+]?\.(inf|Inf|INF), \.nan|\.NaN|\.NAN.
inline bool IsYamlFloat(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  if (t == ".inf" || t == ".Inf" || t == ".INF") return true;
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < t.size() && IsDigit(t[i])) ++i, ++int_digits;
  bool dot = false;
  if (i < t.size() && t[i] == '.') {
    dot = true;
    ++i;
    while (i < t.size() && IsDigit(t[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (int_digits == 0 && !dot) return false;
  bool exp = false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < t.size() && IsDigit(t[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
    exp = true;
  }
  return i == t.size() && (dot || exp);
}
// JSON number grammar is already checked by nlohmann; integers are the
// numbers without fraction or exponent.
inline bool IsJsonInt(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return IsAllDigits(s);
}

// Parses [-+]?[0-9]+ into `*out` when |value| <= 2^53-1.
inline bool ParseSafeInt(std::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int64_t v = 0;
  for (char c : s) {
    v = v * 10 + (c - '0');
    if (v > kMaxSafeInteger) return false;
  }
  *out = negative ? -v : v;
  return true;
}

// The worker's own variables (GATOS_INPUT_<n>, GATOS_STATE_DIR,
// GATOS_OUTPUT_DIR, ...): a manifest that set them could make a program
// shipped with the worker (gatos-scan) act on an input the job never
// declared. Case-insensitive, as some programs read them so.
inline constexpr char kReservedEnvProblem[] =
    " is reserved for the worker (GATOS_* variables describe what the worker gave the job: its "
    "inputs, output and state directories); choose another name";
inline bool IsReservedEnvName(std::string_view s) {
  if (s.size() < 6) return false;
  std::string head(s.substr(0, 6));
  for (char& c : head) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return head == "GATOS_";
}

inline bool IsEnvName(std::string_view s) {
  if (s.empty() || IsDigit(s[0])) return false;
  for (char c : s) {
    if (!(IsDigit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_')) {
      return false;
    }
  }
  return true;
}

// The rules for values that can also be set in code; each returns "" when
// the value is fine, else "what is wrong; what is expected".
inline std::string CwdProblem(std::string_view cwd) {
  if (cwd.empty()) return "is empty; omit cwd to run in the workspace root";
  if (cwd[0] == '/') {
    return Quote(cwd) + " is absolute; use a path relative to the workspace";
  }
  size_t start = 0;
  while (true) {
    const size_t slash = cwd.find('/', start);
    const std::string_view part =
        cwd.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") {
      return Quote(cwd) + " has a '..' component; the working directory must stay inside " +
             "the workspace";
    }
    if (part.empty() || part == ".") {
      return Quote(cwd) + " is not a clean relative path (empty or '.' component); write it " +
             "as dir/subdir, or omit cwd for the workspace root";
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return "";
}

inline std::string PolicyRootProblem(std::string_view s) {
  if (s.size() == 71 && s.substr(0, 7) == "sha256:" && IsLowerHex(s.substr(7), 64)) return "";
  return Quote(s) + " is not a policy digest; expected \"sha256:\" followed by 64 lowercase hex " +
         "digits";
}

inline std::string UlidProblem(std::string_view s) {
  bool ok = s.size() == 26 && s[0] >= '0' && s[0] <= '7';
  for (char c : s) {
    const bool digit = IsDigit(c);
    const bool upper = c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U';
    if (!digit && !upper) ok = false;
  }
  if (ok) return "";
  return Quote(s) + " is not a ULID; expected 26 characters of uppercase Crockford base32 " +
         "(0-9 and A-Z without I, L, O, U), the first one 0-7";
}

inline std::string TextProblem(std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) {
    return "string of " + std::to_string(s.size()) + " bytes exceeds the limit of " +
           std::to_string(max_bytes) + " bytes (max_string_bytes)";
  }
  if (!IsValidUtf8(s)) return "string is not valid UTF-8; encode the text as UTF-8";
  if (s.find('\0') != std::string_view::npos) return "string contains a NUL byte; remove it";
  return "";
}

inline std::string TimeoutRangeProblem(int64_t t, int64_t max) {
  if (t < 0) return std::to_string(t) + " is negative; expected seconds >= 0";
  if (t > max) {
    return std::to_string(t) + " seconds exceeds the maximum of " + std::to_string(max) +
           " seconds (max_timeout_seconds)";
  }
  return "";
}

}  // namespace manifest_internal
}  // namespace gatos

#endif  // GATOS_MODEL_SRC_MANIFEST_RULES_H_
