#include "gatos/model/allowed_signers.h"

#include <cstdio>
#include <ctime>

#include "gatos/model/encoding.h"
#include "gatos/model/ssh_wire.h"

namespace gatos {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (Lower(s[i]) != Lower(prefix[i])) return false;
  }
  return true;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && StartsWithNoCase(a, b);
}

// Key type names OpenSSH knows (plain, security-key and certificate types).
// Options never start with these prefixes, which is how a line's second
// field is told apart as options or key type (as sshkey_read does).
bool LooksLikeKeyType(std::string_view word) {
  return word.substr(0, 4) == "ssh-" || word.substr(0, 6) == "ecdsa-" || word.substr(0, 3) == "sk-";
}

void SkipBlanks(std::string_view& s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
}

std::string_view TakeWord(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && !IsBlank(s[n])) ++n;
  std::string_view w = s.substr(0, n);
  s.remove_prefix(n);
  return w;
}

// Splits a comma list; an empty element is an error naming `what`.
Result<std::vector<std::string>> SplitList(std::string_view list, std::string_view what) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t comma = list.find(',', pos);
    std::string_view item =
        list.substr(pos, comma == std::string_view::npos ? list.npos : comma - pos);
    if (item.empty()) {
      return InvalidArgumentError("empty " + std::string(what) + " in \"" +
                                  ssh::QuoteForError(list) + "\"");
    }
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's days_from_civil.
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// OpenSSH parse_absolute_time: YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS,
// then optional "Z"/"UTC" (any case) for UTC; otherwise local time.
Result<int64_t> ParseSshTime(std::string_view s) {
  std::string_view digits = s;
  bool utc = false;
  if (digits.size() > 1 && EqualsNoCase(digits.substr(digits.size() - 1), "z")) {
    utc = true;
    digits.remove_suffix(1);
  } else if (digits.size() > 3 && EqualsNoCase(digits.substr(digits.size() - 3), "utc")) {
    utc = true;
    digits.remove_suffix(3);
  }
  auto bad = [&](std::string why) {
    return InvalidArgumentError("invalid time \"" + ssh::QuoteForError(s) + "\": " + why +
                                " (expected YYYYMMDD[HHMM[SS]][Z])");
  };
  if (digits.size() != 8 && digits.size() != 12 && digits.size() != 14) {
    return bad("wrong length");
  }
  for (char c : digits) {
    if (c < '0' || c > '9') return bad("not all digits");
  }
  auto num = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; ++i) v = v * 10 + (digits[at + i] - '0');
    return v;
  };
  int year = num(0, 4), month = num(4, 2), day = num(6, 2);
  int hour = digits.size() >= 12 ? num(8, 2) : 0;
  int minute = digits.size() >= 12 ? num(10, 2) : 0;
  int second = digits.size() == 14 ? num(12, 2) : 0;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12) return bad("month out of range");
  int mdays = kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
  if (day < 1 || day > mdays) return bad("day out of range");
  if (hour > 23 || minute > 59 || second > 60) return bad("time of day out of range");
  int64_t t;
  if (utc) {
    t = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
        hour * 3600 + minute * 60 + second;
  } else {
    struct tm tm = {};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    tm.tm_isdst = -1;
    time_t tt = mktime(&tm);
    if (tt == static_cast<time_t>(-1)) return bad("not representable in local time");
    t = static_cast<int64_t>(tt);
  }
  if (t < 0) return bad("before 1970");
  return t;
}

std::string FormatSshTime(int64_t t) {
  int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
  int64_t secs = t - days * 86400;
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, y, m, d);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld%02u%02u%02d%02d%02dZ", static_cast<long long>(y), m, d,
                static_cast<int>(secs / 3600), static_cast<int>(secs / 60 % 60),
                static_cast<int>(secs % 60));
  return buf;
}

// opt_dequote: a double-quoted value where \" stands for a quote.
Result<std::string> Dequote(std::string_view& s, std::string_view option) {
  if (s.empty() || s.front() != '"') {
    return InvalidArgumentError("option " + std::string(option) + " needs a double-quoted value");
  }
  std::string out;
  size_t i = 1;
  for (; i < s.size() && s[i] != '"'; ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '"') ++i;
    out.push_back(s[i]);
  }
  if (i >= s.size()) {
    return InvalidArgumentError("option " + std::string(option) + " is missing its closing quote");
  }
  s.remove_prefix(i + 1);
  return out;
}

Status ParseOptions(std::string_view opts, AllowedSigner& entry) {
  bool have_namespaces = false;
  while (!opts.empty()) {
    if (StartsWithNoCase(opts, "cert-authority")) {
      opts.remove_prefix(14);
      entry.cert_authority = true;
    } else if (StartsWithNoCase(opts, "namespaces=")) {
      opts.remove_prefix(11);
      if (have_namespaces) return InvalidArgumentError("multiple \"namespaces\" options");
      have_namespaces = true;
      GATOS_ASSIGN_OR_RETURN(std::string list, Dequote(opts, "namespaces"));
      GATOS_ASSIGN_OR_RETURN(entry.namespaces, SplitList(list, "namespace"));
    } else if (StartsWithNoCase(opts, "valid-after=") || StartsWithNoCase(opts, "valid-before=")) {
      bool after = StartsWithNoCase(opts, "valid-after=");
      std::string_view name = after ? "valid-after" : "valid-before";
      opts.remove_prefix(name.size() + 1);
      std::optional<int64_t>& slot = after ? entry.valid_after : entry.valid_before;
      if (slot) return InvalidArgumentError("multiple \"" + std::string(name) + "\" options");
      GATOS_ASSIGN_OR_RETURN(std::string value, Dequote(opts, name));
      auto t = ParseSshTime(value);
      if (!t.ok()) return t.status().WithContext(name);
      slot = *t;
    } else {
      size_t comma = opts.find(',');
      return InvalidArgumentError(
          "unknown option \"" + ssh::QuoteForError(opts.substr(0, comma)) +
          "\" (known: cert-authority, namespaces=\"...\", valid-after=\"...\", "
          "valid-before=\"...\")");
    }
    if (opts.empty()) break;
    if (opts.front() != ',') {
      return InvalidArgumentError("unexpected \"" + ssh::QuoteForError(opts) +
                                  "\" after an option (options are separated by commas)");
    }
    opts.remove_prefix(1);
    if (opts.empty()) return InvalidArgumentError("options end with a comma");
  }
  if (entry.valid_after && entry.valid_before && *entry.valid_before <= *entry.valid_after) {
    return InvalidArgumentError("valid-before is not after valid-after");
  }
  return OkStatus();
}

// sshkey_advance_past_options: the options field ends at the first blank
// outside double quotes.
Result<std::string_view> TakeOptions(std::string_view& s) {
  bool quoted = false;
  size_t i = 0;
  for (; i < s.size() && (quoted || !IsBlank(s[i])); ++i) {
    if (s[i] == '\\' && quoted && i + 1 < s.size() && s[i + 1] == '"') {
      ++i;
    } else if (s[i] == '"') {
      quoted = !quoted;
    }
  }
  if (quoted) return InvalidArgumentError("unterminated quote in options");
  std::string_view out = s.substr(0, i);
  s.remove_prefix(i);
  return out;
}

struct LineResult {
  bool has_entry = false;
  AllowedSigner entry;
  std::optional<SkippedSigner> skipped;
};

Result<LineResult> ParseLine(std::string_view s, int line_no) {
  LineResult result;
  SkipBlanks(s);
  if (s.empty() || s.front() == '#') return result;
  AllowedSigner& entry = result.entry;
  entry.line = line_no;

  std::string_view principals;
  if (s.front() == '"') {
    size_t close = s.find('"', 1);
    if (close == std::string_view::npos) {
      return InvalidArgumentError("unterminated quote in principals");
    }
    principals = s.substr(1, close - 1);
    s.remove_prefix(close + 1);
    if (!s.empty() && !IsBlank(s.front())) {
      return InvalidArgumentError("unexpected text right after the quoted principals");
    }
  } else {
    principals = TakeWord(s);
    if (principals.find('"') != std::string_view::npos) {
      return InvalidArgumentError(
          "quote inside the principals field; quote the whole field instead");
    }
  }
  if (principals.empty()) return InvalidArgumentError("empty principals field");
  GATOS_ASSIGN_OR_RETURN(entry.principals, SplitList(principals, "principal"));

  SkipBlanks(s);
  if (s.empty()) return InvalidArgumentError("missing key after the principals");
  std::string_view peek = s;
  if (!LooksLikeKeyType(TakeWord(peek))) {
    GATOS_ASSIGN_OR_RETURN(std::string_view options, TakeOptions(s));
    GATOS_RETURN_IF_ERROR(ParseOptions(options, entry));
    SkipBlanks(s);
    if (s.empty()) return InvalidArgumentError("missing key after the options");
  }
  std::string_view key_type = TakeWord(s);
  if (!LooksLikeKeyType(key_type)) {
    return InvalidArgumentError("expected a key type such as ssh-ed25519, got \"" +
                                ssh::QuoteForError(key_type) + "\"");
  }
  SkipBlanks(s);
  std::string_view b64 = TakeWord(s);
  if (b64.empty()) {
    return InvalidArgumentError("missing base64 key data after \"" + ssh::QuoteForError(key_type) +
                                "\"");
  }
  SkipBlanks(s);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  auto blob = Base64Decode(b64);
  if (!blob.ok()) return blob.status().WithContext("invalid base64 key data");
  if (key_type != kSshEd25519) {
    result.skipped = SkippedSigner{line_no, std::string(key_type)};
    return result;
  }
  std::string_view blob_view(reinterpret_cast<const char*>(blob->data()), blob->size());
  GATOS_ASSIGN_OR_RETURN(entry.key, ParsePublicKeyBlob(blob_view, "ssh-ed25519 key blob"));
  entry.key.comment = std::string(s);
  result.has_entry = true;
  return result;
}

bool NamespaceAllowed(const AllowedSigner& e, std::string_view ns) {
  return e.namespaces.empty() || MatchPatternList(ns, e.namespaces) == 1;
}

bool InWindow(const AllowedSigner& e, int64_t when) {
  return (!e.valid_after || when >= *e.valid_after) && (!e.valid_before || when <= *e.valid_before);
}

bool KeyEntryMatches(const AllowedSigner& e, const Ed25519PublicKey& key, std::string_view ns,
                     int64_t when) {
  return !e.cert_authority && e.key == key && NamespaceAllowed(e, ns) && InWindow(e, when);
}

std::string QuoteOptionValue(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out += items[i];
  }
  return out;
}

}  // namespace

bool MatchPattern(std::string_view s, std::string_view pattern) {
  // Iterative glob with single backtrack point: linear-ish, no recursion, so
  // hostile patterns cannot blow the stack or take exponential time.
  size_t si = 0, pi = 0;
  size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < pattern.size() && (pattern[pi] == '?' || pattern[pi] == s[si])) {
      ++si;
      ++pi;
    } else if (pi < pattern.size() && pattern[pi] == '*') {
      star_p = pi++;
      star_s = si;
    } else if (star_p != std::string_view::npos) {
      pi = star_p + 1;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < pattern.size() && pattern[pi] == '*') ++pi;
  return pi == pattern.size();
}

int MatchPatternList(std::string_view s, const std::vector<std::string>& patterns) {
  bool positive = false;
  for (const std::string& p : patterns) {
    std::string_view pat = p;
    bool negated = !pat.empty() && pat.front() == '!';
    if (negated) pat.remove_prefix(1);
    if (MatchPattern(s, pat)) {
      if (negated) return -1;
      positive = true;
    }
  }
  return positive ? 1 : 0;
}

const AllowedSigner* AllowedSigners::FindKey(const Ed25519PublicKey& key, std::string_view ns,
                                             int64_t when) const {
  for (const AllowedSigner& e : entries_) {
    if (KeyEntryMatches(e, key, ns, when)) return &e;
  }
  return nullptr;
}

bool AllowedSigners::IsAllowed(std::string_view principal, const Ed25519PublicKey& key,
                               std::string_view ns, int64_t when) const {
  for (const AllowedSigner& e : entries_) {
    if (MatchPatternList(principal, e.principals) == 1 && KeyEntryMatches(e, key, ns, when)) {
      return true;
    }
  }
  return false;
}

std::string AllowedSigners::Format() const {
  std::string out;
  for (const AllowedSigner& e : entries_) {
    std::string principals = JoinList(e.principals);
    if (principals.find_first_of(" \t#") != std::string::npos) {
      principals = "\"" + principals + "\"";
    }
    out += principals;
    std::vector<std::string> opts;
    if (e.cert_authority) opts.push_back("cert-authority");
    if (!e.namespaces.empty()) {
      opts.push_back("namespaces=" + QuoteOptionValue(JoinList(e.namespaces)));
    }
    if (e.valid_after)
      opts.push_back("valid-after=" + QuoteOptionValue(FormatSshTime(*e.valid_after)));
    if (e.valid_before) {
      opts.push_back("valid-before=" + QuoteOptionValue(FormatSshTime(*e.valid_before)));
    }
    if (!opts.empty()) out += " " + JoinList(opts);
    out += " " + e.key.ToOpenSsh() + "\n";
  }
  return out;
}

Result<AllowedSigners> ParseAllowedSigners(std::string_view text, std::string_view source_name) {
  AllowedSigners out;
  int line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto parsed = ParseLine(line, line_no);
    if (!parsed.ok()) {
      return InvalidArgumentError(std::string(source_name) + ":" + std::to_string(line_no) + ": " +
                                  parsed.status().message());
    }
    if (parsed->has_entry) out.entries_.push_back(std::move(parsed->entry));
    if (parsed->skipped) out.skipped_.push_back(std::move(*parsed->skipped));
  }
  return out;
}

}  // namespace gatos
