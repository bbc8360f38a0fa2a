#include "gatos/sys/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

// How much of a bad value an error message quotes.
constexpr size_t kShownValueBytes = 64;

const FlagSpec* FindLong(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char c) {
  for (const auto& s : specs) {
    if (s.short_name != 0 && s.short_name == c) return &s;
  }
  return nullptr;
}

std::string Quoted(std::string_view value) {
  return "\"" + TruncateUtf8(value, kShownValueBytes) + "\"";
}

template <typename T>
bool ParseWhole(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

// "-f|--file FILE" (sep "|") or "-f, --file FILE" (sep ", ").
std::string NameWithValue(const FlagSpec& s, const char* sep) {
  std::string out = s.short_name ? std::string("-") + s.short_name + sep + "--" + s.name : "--" + s.name;
  if (s.takes_value) out += " " + (s.value_name.empty() ? std::string("VALUE") : s.value_name);
  return out;
}

}  // namespace

bool Flags::Fail(FlagErrorKind kind, std::string flag, std::string message) {
  error_kind_ = kind;
  error_flag_ = std::move(flag);
  error_ = std::move(message);
  return false;
}

bool Flags::Parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      help_ = true;
      return true;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = a;
    if (a.starts_with("--")) {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
        shown = "--" + name;
      }
      spec = FindLong(specs, name);
    } else if (a.size() == 2) {
      spec = FindShort(specs, a[1]);
    }
    shown = TruncateUtf8(shown, kShownValueBytes);
    if (!spec) {
      return Fail(FlagErrorKind::kUnknown, shown, "unknown option '" + shown + "' (see --help)");
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return Fail(FlagErrorKind::kMissingValue, shown, "option '" + shown + "' needs a value");
      }
    } else if (inline_value) {
      return Fail(FlagErrorKind::kUnexpectedValue, shown, "option '" + shown + "' takes no value");
    }
    auto& slot = values_[spec->name];
    if (!slot.empty() && !spec->repeatable) {
      return Fail(FlagErrorKind::kRepeated, "--" + spec->name,
                  "option '--" + spec->name + "' given more than once");
    }
    slot.push_back(std::move(value));
  }
  return true;
}

std::optional<std::string> Flags::Get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Flags::GetOr(std::string_view name, const std::string& fallback) const {
  auto v = Get(name);
  return v ? *v : fallback;
}

const std::vector<std::string>& Flags::GetAll(std::string_view name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second;
}

bool Flags::BadValue(std::string_view name, const std::string& value, const std::string& wanted) {
  std::string flag = "--" + std::string(name);
  return Fail(FlagErrorKind::kBadValue, flag, flag + " must be " + wanted + ", got " + Quoted(value));
}

bool Flags::GetInt(std::string_view name, int64_t lo, int64_t hi, int64_t* out) {
  auto v = Get(name);
  if (!v) return true;
  int64_t n = 0;
  if (!ParseWhole(*v, &n) || n < lo || n > hi) {
    return BadValue(name, *v, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = n;
  return true;
}

bool Flags::GetInt(std::string_view name, int lo, int hi, int* out) {
  int64_t n = *out;
  if (!GetInt(name, int64_t{lo}, int64_t{hi}, &n)) return false;
  *out = static_cast<int>(n);
  return true;
}

bool Flags::GetUint(std::string_view name, uint64_t lo, uint64_t hi, uint64_t* out) {
  auto v = Get(name);
  if (!v) return true;
  uint64_t n = 0;
  // from_chars takes no sign for unsigned types: digits only.
  if (!ParseWhole(*v, &n) || n < lo || n > hi) {
    return BadValue(name, *v,
                    hi == std::numeric_limits<uint64_t>::max() && lo == 0
                        ? std::string("a whole number")
                        : "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = n;
  return true;
}

bool Flags::GetDouble(std::string_view name, double lo, double hi, double* out) {
  auto v = Get(name);
  if (!v) return true;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || std::isnan(d) || d < lo || d > hi) {
    auto num = [](double x) {
      std::string s = std::to_string(x);
      while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) s.pop_back();
      return s;
    };
    return BadValue(name, *v,
                    std::isinf(hi) ? "a number >= " + num(lo) : "a number in " + num(lo) + ".." + num(hi));
  }
  *out = d;
  return true;
}

bool Flags::GetChoice(std::string_view name, const std::vector<std::string>& choices,
                      std::string* out) {
  auto v = Get(name);
  if (!v) return true;
  for (const auto& c : choices) {
    if (*v == c) {
      *out = c;
      return true;
    }
  }
  std::string wanted;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) wanted += i + 1 == choices.size() ? " or " : ", ";
    wanted += choices[i];
  }
  return BadValue(name, *v, wanted);
}

std::string FlagSynopsis(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    if (!out.empty()) out += ' ';
    out += "[" + NameWithValue(s, "|") + "]" + (s.repeatable ? "..." : "");
  }
  return out;
}

std::string FlagHelp(const std::vector<FlagSpec>& specs) {
  size_t width = 0;
  for (const auto& s : specs) width = std::max(width, NameWithValue(s, ", ").size());
  std::string out;
  for (const auto& s : specs) {
    std::string left = NameWithValue(s, ", ");
    out += "  " + left;
    if (!s.help.empty()) out += std::string(width - left.size() + 2, ' ') + s.help;
    out += '\n';
  }
  return out;
}

int RunSubcommands(std::string_view program, std::string_view usage, std::string_view version,
                   const std::vector<std::string>& args, const std::vector<Subcommand>& commands) {
  auto put = [](FILE* to, std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), to);
    std::fflush(to);
  };
  if (args.empty()) {
    put(stderr, usage);
    return kExitUsage;
  }
  const std::string& word = args[0];
  if (word == "--help" || word == "-h" || word == "help") {
    put(stdout, usage);
    return kExitOk;
  }
  if (word == "--version" && !version.empty()) {
    put(stdout, std::string(version) + "\n");
    return kExitOk;
  }
  for (const auto& c : commands) {
    if (c.name == word) return c.run({args.begin() + 1, args.end()});
  }
  put(stderr, std::string(program) + ": unknown command '" + TruncateUtf8(word, kShownValueBytes) + "' (see " +
                  std::string(program) + " --help)\n");
  return kExitUsage;
}

}  // namespace gatos
