#include "gatos/model/cron.h"

#include <vector>

namespace gatos {
namespace {

constexpr const char* kFieldNames[] = {"second", "minute", "hour", "day of month", "month", "day of week"};
constexpr const char* kMonths[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                   "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* kDays[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

struct FieldSpec {
  int index;  // into kFieldNames
  int lo, hi;
};

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return u;
}

// A value of field `f`: digits, or a name for months and days of week.
bool ParseValue(std::string_view s, const FieldSpec& f, int* out) {
  if (s.empty()) return false;
  if (f.index == 4 || f.index == 5) {
    const std::string u = Upper(s);
    const int n = f.index == 4 ? 12 : 7;
    for (int i = 0; i < n; ++i) {
      if (u == (f.index == 4 ? kMonths[i] : kDays[i])) {
        *out = f.index == 4 ? i + 1 : i;
        return true;
      }
    }
  }
  if (s.size() > 4) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

Status FieldError(const FieldSpec& f, int position, std::string m) {
  return InvalidArgumentError("cron field " + std::to_string(position) + " (" + kFieldNames[f.index] +
                                 "): " + m);
}

// Parses one field into `bits` (bit i = value i).
Status ParseField(std::string_view text, const FieldSpec& f, int position, std::vector<bool>* bits, bool* star) {
  bits->assign(static_cast<size_t>(f.hi + 1), false);
  *star = !text.empty() && text[0] == '*';
  // Day of week accepts 7 for Sunday.
  const int hi = f.index == 5 ? 7 : f.hi;
  for (std::string_view item : Split(text, ',')) {
    if (item.empty()) return FieldError(f, position, "an empty list item in \"" + std::string(text) + "\"");
    std::string_view range = item;
    int step = 1;
    bool has_step = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      range = item.substr(0, slash);
      std::string_view st = item.substr(slash + 1);
      FieldSpec plain{0, 0, 0};
      if (!ParseValue(st, plain, &step) || step < 1 || step > hi) {
        return FieldError(f, position, "step \"" + std::string(st) + "\" is not a number from 1 to " +
                                           std::to_string(hi));
      }
      has_step = true;
    }
    int a = f.lo, b = hi;
    if (range == "*") {
      // whole range
    } else if (size_t dash = range.find('-'); dash != std::string_view::npos) {
      if (!ParseValue(range.substr(0, dash), f, &a) || !ParseValue(range.substr(dash + 1), f, &b)) {
        return FieldError(f, position, "\"" + std::string(range) + "\" is not a range A-B");
      }
      if (a > b) return FieldError(f, position, "range " + std::string(range) + " runs backwards");
    } else {
      if (!ParseValue(range, f, &a)) {
        return FieldError(f, position, "\"" + std::string(range) + "\" is not a value");
      }
      b = has_step ? hi : a;
    }
    if (a < f.lo || b > hi) {
      return FieldError(f, position, std::string(range) + " is outside " + std::to_string(f.lo) + "-" +
                                         std::to_string(hi));
    }
    for (int v = a; v <= b; v += step) (*bits)[static_cast<size_t>(f.index == 5 ? v % 7 : v)] = true;
  }
  return OkStatus();
}

template <size_t N>
void Copy(const std::vector<bool>& v, std::bitset<N>* out) {
  for (size_t i = 0; i < N && i < v.size(); ++i) (*out)[i] = v[i];
}

bool DayMatches(const CronExpr& c, int64_t days) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  if (!c.months[m]) return false;
  const unsigned wd = static_cast<unsigned>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  const bool dom = c.days[d], dow = c.weekdays[wd];
  if (c.days_star && c.weekdays_star) return true;
  if (c.days_star) return dow;
  if (c.weekdays_star) return dom;
  return dom || dow;
}

// The UTC instant of local civil second `local` in `tz`: its first
// occurrence, or nullopt when the local time does not exist.
std::optional<int64_t> FromLocal(const TimeZone& tz, int64_t local) {
  std::optional<int64_t> best;
  for (int64_t probe : {local - 86400 * 2, local + 86400 * 2}) {
    const int64_t off = tz.OffsetAt(probe);
    const int64_t u = local - off;
    if (tz.OffsetAt(u) == off && (!best || u < *best)) best = u;
  }
  return best;
}

}  // namespace

Result<CronExpr> ParseCron(std::string_view text) {
  std::string t(text);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  size_t lead = t.find_first_not_of(" \t");
  t = lead == std::string::npos ? "" : t.substr(lead);
  if (t.size() > 256) return InvalidArgumentError("cron expression is longer than 256 bytes");
  if (!t.empty() && t[0] == '@') {
    const std::string m = Upper(t);
    if (m == "@YEARLY" || m == "@ANNUALLY") t = "0 0 1 1 *";
    else if (m == "@MONTHLY") t = "0 0 1 * *";
    else if (m == "@WEEKLY") t = "0 0 * * 0";
    else if (m == "@DAILY" || m == "@MIDNIGHT") t = "0 0 * * *";
    else if (m == "@HOURLY") t = "0 * * * *";
    else return InvalidArgumentError("cron macro \"" + t + "\" is not one of @yearly @monthly @weekly @daily @hourly");
  }
  std::vector<std::string_view> fields;
  {
    std::string_view s(t);
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
      size_t j = i;
      while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
      if (j > i) fields.push_back(s.substr(i, j - i));
      i = j;
    }
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return InvalidArgumentError("cron expression \"" + t + "\" has " + std::to_string(fields.size()) +
                                   " fields; expected 5 (minute hour day-of-month month day-of-week) or 6 "
                                   "(seconds first)");
  }
  static const FieldSpec kSpecs[] = {{0, 0, 59}, {1, 0, 59}, {2, 0, 23}, {3, 1, 31}, {4, 1, 12}, {5, 0, 6}};
  CronExpr c;
  const size_t skip = fields.size() == 5 ? 1 : 0;
  if (skip) c.seconds[0] = true;
  std::vector<bool> bits;
  bool star = false;
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldSpec& f = kSpecs[i + skip];
    Status st = ParseField(fields[i], f, static_cast<int>(i + 1), &bits, &star);
    if (!st.ok()) return st;
    switch (f.index) {
      case 0: Copy(bits, &c.seconds); break;
      case 1: Copy(bits, &c.minutes); break;
      case 2: Copy(bits, &c.hours); break;
      case 3: Copy(bits, &c.days); c.days_star = star; break;
      case 4: Copy(bits, &c.months); break;
      case 5: Copy(bits, &c.weekdays); c.weekdays_star = star; break;
    }
  }
  return c;
}

std::optional<int64_t> NextCronTick(const CronExpr& c, const TimeZone& tz, int64_t after_s) {
  // Walk local days from the local day of `after_s` (a day earlier, for a
  // zone whose offset is about to change), and in each matching day its
  // matching seconds in order: the first whose UTC instant exists and lies
  // after `after_s` is the tick.
  const int64_t local_after = after_s + tz.OffsetAt(after_s);
  int64_t day = (local_after >= 0 ? local_after : local_after - 86399) / 86400 - 1;
  const int64_t last_day = day + 366 * 8 + 2;
  // No offset change moves a local time by more than a day and two hours.
  const int64_t floor = local_after - 26 * 3600;
  // Local times tried at most: a zone whose every candidate falls in a gap
  // (no real zone does) ends the search instead of spinning.
  constexpr int64_t kMaxCandidates = 1'000'000;
  int64_t budget = 0;
  for (; day <= last_day; ++day) {
    if (day * 86400 + 86399 < floor || !DayMatches(c, day)) continue;
    for (int h = 0; h < 24; ++h) {
      if (!c.hours[static_cast<size_t>(h)] || day * 86400 + h * 3600 + 3599 < floor) continue;
      for (int m = 0; m < 60; ++m) {
        if (!c.minutes[static_cast<size_t>(m)] || day * 86400 + h * 3600 + m * 60 + 59 < floor) continue;
        for (int s = 0; s < 60; ++s) {
          if (!c.seconds[static_cast<size_t>(s)]) continue;
          const int64_t local = day * 86400 + h * 3600 + m * 60 + s;
          if (local < floor) continue;
          if (++budget > kMaxCandidates) return std::nullopt;
          std::optional<int64_t> u = FromLocal(tz, local);
          if (u && *u > after_s) return u;
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace gatos
