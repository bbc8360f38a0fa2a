// Parsing a manifest: YAML or JSON into a Manifest, every problem reported
// with its position (manifest.h).
#include "gatos/model/manifest.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/yaml_tree.h"
#include "gatos/model/scheduling.h"
#include "manifest_rules.h"

namespace gatos {
namespace {

using namespace manifest_internal;  // NOLINT: this library's own rules
using internal::YamlNode;
using Kind = internal::YamlNode::Kind;

// Walks the tree of one manifest and collects every problem.
class Checker {
 public:
  Checker(std::string_view source, bool json, const ManifestLimits& limits)
      : source_(source), json_(json), limits_(limits) {}

  void Add(const YamlNode& at, std::string_view field, std::string_view what) {
    Add(at.line, at.column, field, what);
  }
  void Add(int line, int column, std::string_view field, std::string_view what) {
    errors_.push_back(source_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                      std::string(field.empty() ? "manifest" : field) + ": " + std::string(what));
  }
  bool ok() const { return errors_.empty(); }
  Status ToStatus() const {
    std::string joined;
    for (const auto& e : errors_) {
      if (!joined.empty()) joined += "\n";
      joined += e;
    }
    return InvalidArgumentError(joined);
  }

  Manifest Check(const YamlNode& root) {
    Manifest m;
    if (root.kind != Kind::kMap) {
      Add(root, "",
          "is " + Describe(root) + "; expected a mapping of fields (" + std::string(kKnownFields) +
              ")");
      return m;
    }
    bool have_command = false, have_timeout = false;
    for (const auto& entry : root.entries) {
      const std::string& name = entry.key.value;
      const YamlNode& v = entry.value;
      if (name == "command") {
        have_command = true;
        CheckStringList(v, name, /*allow_empty_items=*/false, &m.command);
        if (v.kind == Kind::kSequence && v.items.empty()) {
          Add(v, name, "is an empty list; expected the program to run and its leading arguments");
        }
      } else if (name == "args") {
        CheckStringList(v, name, /*allow_empty_items=*/true, &m.args);
      } else if (name == "timeout") {
        have_timeout = true;
        CheckTimeout(v, &m.timeout_seconds);
      } else if (name == "env") {
        CheckEnv(v, &m.env);
      } else if (name == "cwd") {
        std::string s;
        if (GetString(v, name, &s)) {
          if (std::string p = CwdProblem(s); !p.empty()) {
            Add(v, name, p);
          } else {
            m.cwd = s;
          }
        }
      } else if (name == "inputs") {
        CheckInputs(v, &m.inputs);
      } else if (name == "resources") {
        CheckResources(v, &m.resources);
      } else if (name == "policy_root") {
        std::string s;
        if (GetString(v, name, &s)) {
          if (std::string p = PolicyRootProblem(s); !p.empty()) {
            Add(v, name, p);
          } else {
            m.policy_root = s;
          }
        }
      } else if (name == "pool") {
        std::string s;
        if (GetString(v, name, &s)) {
          if (std::string p = PoolNameProblem(s); !p.empty()) {
            Add(v, name, p);
          } else if (s != kDefaultPool) {
            m.pool = s;  // `pool: default` is the manifest without the field
          }
        }
      } else if (name == "ulid") {
        std::string s;
        if (GetString(v, name, &s)) {
          if (std::string p = UlidProblem(s); !p.empty()) {
            Add(v, name, p);
          } else {
            m.ulid = s;
          }
        }
      } else {
        Add(entry.key, name, "unknown field; expected one of " + std::string(kKnownFields));
      }
    }
    if (!have_command) {
      Add(root, "command",
          "missing; expected a non-empty list of strings (the program and its leading "
          "arguments)");
    }
    if (!have_timeout) {
      Add(root, "timeout",
          "missing; expected integer seconds (e.g. 30) or an ISO-8601 "
          "duration (e.g. \"PT30S\")");
    }
    return m;
  }

 private:
  std::string Describe(const YamlNode& n) const {
    switch (n.kind) {
      case Kind::kNull:
        return "null";
      case Kind::kSequence:
        return "a list";
      case Kind::kMap:
        return "a mapping";
      case Kind::kScalar:
        break;
    }
    if (!n.plain) return "a string";
    if (json_) {
      if (n.value == "true" || n.value == "false") return "a boolean (" + n.value + ")";
      if (n.value == "null") return "null";
      return "a number (" + n.value + ")";
    }
    if (IsYamlNull(n.value)) return "null (" + n.value + ")";
    return "a string";
  }

  // A string position: any quoted scalar; in YAML also any plain scalar except
  // the null forms (`args: [1]` is the string "1"); in JSON only strings.
  bool GetString(const YamlNode& n, const std::string& field, std::string* out) {
    const bool is_string =
        n.kind == Kind::kScalar && (!n.plain || (!json_ && !IsYamlNull(n.value)));
    if (!is_string) {
      Add(n, field,
          "is " + Describe(n) + "; expected a string" +
              (json_ && n.kind == Kind::kScalar ? " (put it in quotes)" : ""));
      return false;
    }
    *out = n.value;
    return true;
  }

  void CheckStringList(const YamlNode& n, const std::string& field, bool allow_empty_items,
                       std::vector<std::string>* out) {
    if (n.kind != Kind::kSequence) {
      Add(n, field, "is " + Describe(n) + "; expected a list of strings");
      return;
    }
    for (size_t i = 0; i < n.items.size(); ++i) {
      const std::string item_field = field + "[" + std::to_string(i) + "]";
      std::string s;
      if (!GetString(n.items[i], item_field, &s)) continue;
      if (s.empty() && !allow_empty_items) {
        Add(n.items[i], item_field, "is an empty string; expected a program or argument");
        continue;
      }
      out->push_back(std::move(s));
    }
  }

  void CheckTimeout(const YamlNode& n, int64_t* out) {
    const std::string field = "timeout";
    const char* kExpected =
        "; expected integer seconds (e.g. 30) or a quoted ISO-8601 duration (e.g. \"PT30S\")";
    if (n.kind != Kind::kScalar) {
      Add(n, field, "is " + Describe(n) + kExpected);
      return;
    }
    const std::string& v = n.value;
    // A plain "PT30S" is a string by YAML's own rules; accept it as written.
    const bool duration =
        !n.plain || (!json_ && !v.empty() && (v[0] == 'P' || v.rfind("-P", 0) == 0));
    if (duration) {
      if (IsYamlInt(v)) {
        Add(n, field,
            Quote(v) + " is quoted; write " + v +
                " without quotes for seconds, or an ISO-8601 duration like \"PT" + v + "S\"");
        return;
      }
      Result<int64_t> seconds = ParseIsoDuration(v, limits_.max_timeout_seconds);
      if (!seconds.ok()) {
        Add(n, field, seconds.status().message());
        return;
      }
      *out = *seconds;
      return;
    }
    if (json_ ? !IsJsonInt(v) && (v == "true" || v == "false" || v == "null") : IsYamlNull(v)) {
      Add(n, field, "is " + Describe(n) + kExpected);
      return;
    }
    if (!v.empty() && v[0] == '-' && (IsYamlInt(v) || IsYamlFloat(v))) {
      Add(n, field, v + " is negative; expected seconds >= 0");
      return;
    }
    if (IsYamlFloat(v) || (json_ && !IsJsonInt(v))) {
      Add(n, field, v + " is not a whole number; floats are not allowed, use integer seconds");
      return;
    }
    if (!IsAllDigits(v)) {
      Add(n, field, Quote(v) + " is not a decimal integer" + std::string(kExpected));
      return;
    }
    if (v.size() > 1 && v[0] == '0') {
      Add(n, field, v + " has a leading zero (octal in YAML 1.1); write plain decimal seconds");
      return;
    }
    if (v.size() > 18) {
      Add(n, field,
          v + " seconds exceeds the maximum of " + std::to_string(limits_.max_timeout_seconds) +
              " seconds (max_timeout_seconds)");
      return;
    }
    const int64_t t = std::stoll(v);
    if (std::string p = TimeoutRangeProblem(t, limits_.max_timeout_seconds); !p.empty()) {
      Add(n, field, p);
      return;
    }
    *out = t;
  }

  // resources: {memory_mb, pids, cpu_millis, disk_mb}, each a plain decimal
  // integer from 1 to its ceiling (job_limits.h): no quotes, floats, signs,
  // leading zeros or overflow.
  void CheckResources(const YamlNode& n, std::optional<JobResources>* out) {
    const char* kExpected =
        "; expected a mapping of memory_mb, pids, cpu_millis and disk_mb to positive integers";
    if (n.kind != Kind::kMap) {
      Add(n, "resources", "is " + Describe(n) + kExpected);
      return;
    }
    if (n.entries.empty()) {
      Add(n, "resources", kEmptyResourcesProblem);
      return;
    }
    JobResources r;
    bool ok = true;
    for (const auto& entry : n.entries) {
      const std::string& key = entry.key.value;
      const std::string field = "resources." + key;
      std::optional<int64_t>* dst = key == "memory_mb"    ? &r.memory_mb
                                    : key == "pids"       ? &r.pids
                                    : key == "cpu_millis" ? &r.cpu_millis
                                    : key == "disk_mb"    ? &r.disk_mb
                                                          : nullptr;
      if (!dst) {
        Add(entry.key, field, "unknown key; expected memory_mb, pids, cpu_millis or disk_mb");
        ok = false;
        continue;
      }
      const YamlNode& v = entry.value;
      const std::string& s = v.value;
      std::string problem;
      if (v.kind != Kind::kScalar) {
        problem = "is " + Describe(v) + "; expected a positive integer";
      } else if (!v.plain) {
        problem = Quote(s) + " is quoted; expected a positive integer without quotes";
      } else if (!s.empty() && s[0] == '-' && (IsYamlInt(s) || IsYamlFloat(s))) {
        problem = s + " is negative; expected a positive integer";
      } else if (IsYamlFloat(s) || (json_ && !IsJsonInt(s))) {
        problem = s + " is not a whole number; expected a positive integer";
      } else if (!IsAllDigits(s)) {
        problem = Quote(s) + " is not a decimal integer; expected a positive integer";
      } else if (s.size() > 1 && s[0] == '0') {
        problem = s + " has a leading zero (octal in YAML 1.1); write plain decimal";
      } else if (s.size() > 15) {
        problem = s + " is over the largest value, " + std::to_string(JobResourceCeiling(key));
      } else {
        problem = JobResourceProblem(key, std::stoll(s));
      }
      if (!problem.empty()) {
        Add(v, field, problem);
        ok = false;
        continue;
      }
      *dst = std::stoll(s);
    }
    if (ok) *out = r;
  }

  void CheckEnv(const YamlNode& n, std::optional<std::map<std::string, std::string>>* out) {
    if (n.kind != Kind::kMap) {
      Add(n, "env", "is " + Describe(n) + "; expected a mapping of NAME: value strings");
      return;
    }
    std::map<std::string, std::string> env;
    for (const auto& entry : n.entries) {
      const std::string field = "env." + entry.key.value;
      if (!IsEnvName(entry.key.value)) {
        Add(entry.key, field,
            Quote(entry.key.value) +
                " is not a valid environment variable name; expected "
                "[A-Za-z_][A-Za-z0-9_]*");
        continue;
      }
      if (IsReservedEnvName(entry.key.value)) {
        Add(entry.key, field, Quote(entry.key.value) + kReservedEnvProblem);
        continue;
      }
      std::string value;
      if (GetString(entry.value, field, &value)) env[entry.key.value] = std::move(value);
    }
    *out = std::move(env);
  }

  void CheckInputs(const YamlNode& n, std::optional<nlohmann::json>* out) {
    if (n.kind != Kind::kSequence) {
      Add(n, "inputs", "is " + Describe(n) + "; expected a list of objects");
      return;
    }
    nlohmann::json inputs = nlohmann::json::array();
    size_t git_inputs = 0;
    for (size_t i = 0; i < n.items.size(); ++i) {
      const std::string field = "inputs[" + std::to_string(i) + "]";
      if (n.items[i].kind != Kind::kMap) {
        Add(n.items[i], field, "is " + Describe(n.items[i]) + "; expected an object");
        continue;
      }
      if (IsGitInput(n.items[i])) {
        if (++git_inputs == kMaxGitInputs + 1) {
          Add(n.items[i], field,
              "is git input number " + std::to_string(git_inputs) + "; a job may declare at most " +
                  std::to_string(kMaxGitInputs) + " (split the work into several jobs)");
        }
        inputs.push_back(CheckGitInput(n.items[i], field));
        continue;
      }
      inputs.push_back(ToJson(n.items[i], field));
    }
    *out = std::move(inputs);
  }

  // `kind: git` (plain or quoted) selects the strict rules of git_input.h;
  // any other entry stays opaque data.
  static bool IsGitInput(const YamlNode& entry) {
    for (const auto& e : entry.entries) {
      if (e.key.value == "kind") {
        return e.value.kind == Kind::kScalar && e.value.value == kGitInputKind;
      }
    }
    return false;
  }

  // Every field of a git input is a string position (a plain 40-digit commit
  // id stays a string, never a number).
  nlohmann::json CheckGitInput(const YamlNode& entry, const std::string& field) {
    nlohmann::json o = nlohmann::json::object();
    std::map<std::string, std::string> fields;
    std::map<std::string, const YamlNode*> nodes;
    for (const auto& e : entry.entries) {
      const std::string& name = e.key.value;
      const std::string sub = field + "." + name;
      if (name != "kind" && name != "url" && name != "ref" && name != "commit" && name != "nonce") {
        Add(e.key, sub, "unknown field of a git input; expected one of " +
                            std::string(kGitInputFields));
        continue;
      }
      std::string value;
      if (!GetString(e.value, sub, &value)) continue;
      o[name] = value;
      if (name != "kind") {
        fields[name] = std::move(value);
        nodes[name] = &e.value;
      }
    }
    for (const GitInputProblem& p : CheckGitInputFields(fields)) {
      auto at = nodes.find(p.field);
      const YamlNode& where = at == nodes.end() ? entry : *at->second;
      Add(where, p.field.empty() ? field : field + "." + p.field, p.what);
    }
    return o;
  }

  // Opaque data: typed by YAML 1.2 core rules (or JSON's own), floats refused.
  nlohmann::json ToJson(const YamlNode& n, const std::string& field) {
    switch (n.kind) {
      case Kind::kNull:
        return nullptr;
      case Kind::kSequence: {
        nlohmann::json a = nlohmann::json::array();
        for (size_t i = 0; i < n.items.size(); ++i) {
          a.push_back(ToJson(n.items[i], field + "[" + std::to_string(i) + "]"));
        }
        return a;
      }
      case Kind::kMap: {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& e : n.entries) {
          o[e.key.value] = ToJson(e.value, field + "." + e.key.value);
        }
        return o;
      }
      case Kind::kScalar:
        break;
    }
    const std::string& v = n.value;
    if (!n.plain) return v;
    bool b = false;
    if (json_) {
      if (v == "null") return nullptr;
      if (v == "true" || v == "false") return v == "true";
    } else {
      if (IsYamlNull(v)) return nullptr;
      if (IsYamlBool(v, &b)) return b;
    }
    const bool is_int = json_ ? IsJsonInt(v) : IsYamlInt(v);
    if (is_int) {
      const std::string_view digits =
          (v[0] == '-' || v[0] == '+') ? std::string_view(v).substr(1) : std::string_view(v);
      if (!json_ && digits.size() > 1 && digits[0] == '0') {
        Add(n, field,
            v + " has a leading zero (octal in YAML 1.1); write it in decimal or " +
                "quote it to keep it a string");
        return nullptr;
      }
      int64_t value = 0;
      if (!ParseSafeInt(v, &value)) {
        Add(n, field, v + " is outside +-(2^53-1); quote it to keep it as a string");
        return nullptr;
      }
      return value;
    }
    if (json_ || IsYamlFloat(v)) {
      Add(n, field, v + " is a float; floats are not allowed, use an integer or a quoted string");
      return nullptr;
    }
    if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'o')) {
      Add(n, field, v + " is a hexadecimal or octal number; write it in decimal or quote it");
      return nullptr;
    }
    return v;
  }

  std::string source_;
  bool json_;
  const ManifestLimits& limits_;
  std::vector<std::string> errors_;
};

// Records the first JSON syntax error; builds nothing.
class JsonSyntaxCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    position_ = position;
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception...] parse error at line 1, column 2: ".
    if (size_t col = what.find("column "); col != std::string::npos) {
      if (size_t colon = what.find(": ", col); colon != std::string::npos) {
        what = what.substr(colon + 2);
      }
    }
    message_ = what;
    return false;
  }
  size_t position_ = 0;
  std::string message_;
};

void LineColumn(std::string_view text, size_t offset, int* line, int* column) {
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 1;
    } else {
      ++*column;
    }
  }
}

std::string ErrorLine(std::string_view source, int line, int column, std::string_view field,
                      std::string_view what) {
  return std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
         std::string(field) + ": " + std::string(what);
}

}  // namespace

Result<int64_t> ParseIsoDuration(std::string_view text, int64_t max_seconds) {
  const std::string q = Quote(text);
  const std::string malformed =
      q + " is not an ISO-8601 duration; expected e.g. \"PT30S\", \"PT2M\", \"P1DT2H\" or \"P2W\"";
  if (text.empty()) return InvalidArgumentError(malformed);
  if (text[0] == '-') return InvalidArgumentError(q + " is negative; expected a duration >= 0");
  if (text[0] != 'P') return InvalidArgumentError(malformed);
  // Units in the order ISO 8601 writes them; each at most once.
  enum Unit { kWeek, kDay, kHour, kMinute, kSecond };
  static constexpr int64_t kSeconds[] = {604800, 86400, 3600, 60, 1};
  int next_unit = kWeek;
  bool in_time = false, time_component = false, any_component = false;
  unsigned __int128 total = 0;
  size_t i = 1;
  while (i < text.size()) {
    if (text[i] == 'T') {
      if (in_time) return InvalidArgumentError(malformed);
      in_time = true;
      next_unit = kHour;
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start) return InvalidArgumentError(malformed);
    unsigned __int128 n = 0;
    for (size_t k = start; k < i; ++k) {
      n = n * 10 + static_cast<unsigned>(text[k] - '0');
      if (n > (static_cast<unsigned __int128>(1) << 80))
        n = static_cast<unsigned __int128>(1) << 80;
    }
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      while (i < text.size() && text[i] != 'S' && !(text[i] >= 'A' && text[i] <= 'Z')) ++i;
      if (i < text.size() && text[i] == 'S') {
        return InvalidArgumentError(q + " has fractional seconds; use whole seconds");
      }
      return InvalidArgumentError(q +
                                  " has a fractional value; use whole units (e.g. \"PT90M\" "
                                  "instead of \"PT1.5H\")");
    }
    if (i >= text.size()) return InvalidArgumentError(malformed);
    const char designator = text[i++];
    int unit;
    if (!in_time && designator == 'Y') {
      return InvalidArgumentError(q +
                                  " uses years, which have no fixed length in seconds; use "
                                  "weeks, days, hours, minutes or seconds (e.g. \"P365D\")");
    } else if (!in_time && designator == 'M') {
      return InvalidArgumentError(q +
                                  " uses months, which have no fixed length in seconds; use "
                                  "weeks, days, hours, minutes or seconds (e.g. \"P30D\")");
    } else if (!in_time && designator == 'W') {
      unit = kWeek;
    } else if (!in_time && designator == 'D') {
      unit = kDay;
    } else if (in_time && designator == 'H') {
      unit = kHour;
    } else if (in_time && designator == 'M') {
      unit = kMinute;
    } else if (in_time && designator == 'S') {
      unit = kSecond;
    } else {
      return InvalidArgumentError(malformed);
    }
    if (unit < next_unit) return InvalidArgumentError(malformed);
    next_unit = unit + 1;
    total += n * static_cast<unsigned __int128>(kSeconds[unit]);
    any_component = true;
    if (in_time) time_component = true;
  }
  if (!any_component || (in_time && !time_component)) return InvalidArgumentError(malformed);
  if (total > static_cast<unsigned __int128>(max_seconds)) {
    return InvalidArgumentError(q + " exceeds the maximum of " + std::to_string(max_seconds) +
                                " seconds (max_timeout_seconds)");
  }
  return static_cast<int64_t>(total);
}

Result<Manifest> ParseManifest(std::string_view bytes, std::string_view source_name,
                               ManifestFormat format, const ManifestLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    return InvalidArgumentError(ErrorLine(source_name, 1, 1, "manifest",
                                          "is " + std::to_string(bytes.size()) +
                                              " bytes, over the limit of " +
                                              std::to_string(limits.max_bytes) +
                                              " bytes (max_bytes); keep large data in inputs "
                                              "referenced by hash"));
  }
  if (format == ManifestFormat::kAuto) {
    const bool json =
        source_name.size() >= 5 && source_name.substr(source_name.size() - 5) == ".json";
    format = json ? ManifestFormat::kJson : ManifestFormat::kYaml;
  }
  const bool json = format == ManifestFormat::kJson;

  size_t bad = 0;
  if (!IsValidUtf8(bytes, &bad)) {
    int line, column;
    LineColumn(bytes, bad, &line, &column);
    return InvalidArgumentError(ErrorLine(
        source_name, line, column, "manifest",
        "is not valid UTF-8 (bad byte at offset " + std::to_string(bad) + "); save it as UTF-8"));
  }
  if (size_t nul = bytes.find('\0'); nul != std::string_view::npos) {
    int line, column;
    LineColumn(bytes, nul, &line, &column);
    return InvalidArgumentError(ErrorLine(source_name, line, column, "manifest",
                                          "contains a NUL byte; a manifest is UTF-8 text"));
  }

  std::string rewritten;
  std::string_view text = bytes;
  if (json) {
    // Strict JSON first (nlohmann's parser is iterative, so deep input cannot
    // exhaust the stack); yaml-cpp then gives the tree and positions.
    JsonSyntaxCheck check;
    bool ok = false;
    try {
      ok = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &check);
    } catch (const std::exception& e) {
      check.message_ = e.what();
    }
    if (!ok) {
      int line, column;
      LineColumn(bytes, check.position_ > 0 ? check.position_ - 1 : 0, &line, &column);
      return InvalidArgumentError(
          ErrorLine(source_name, line, column, "manifest",
                    "invalid JSON: " + check.message_ + "; fix the syntax"));
    }
    rewritten = internal::RewriteJsonSurrogatePairs(bytes);
    text = rewritten;
  }

  internal::YamlTreeLimits tree_limits;
  tree_limits.max_nodes = limits.max_nodes;
  tree_limits.max_depth = limits.max_depth;
  tree_limits.max_string_bytes = limits.max_string_bytes;
  tree_limits.max_total_bytes = limits.max_bytes;
  internal::YamlNode root;
  internal::YamlTreeError tree_error;
  if (!internal::ParseYamlTree(text, tree_limits, &root, &tree_error)) {
    return InvalidArgumentError(ErrorLine(source_name, tree_error.line, tree_error.column,
                                          tree_error.path.empty() ? "manifest" : tree_error.path,
                                          tree_error.message));
  }
  Checker checker(source_name, json, limits);
  Manifest m = checker.Check(root);
  if (!checker.ok()) return checker.ToStatus();
  return m;
}

Result<Manifest> CheckManifestTree(const internal::YamlNode& root, std::string_view source_name,
                                   const ManifestLimits& limits) {
  Checker checker(source_name, false, limits);
  Manifest m = checker.Check(root);
  if (!checker.ok()) return checker.ToStatus();
  return m;
}

}  // namespace gatos
