#include "gatos/model/time_format.h"

#include <cstdio>
#include <ctime>

namespace gatos {

std::string FormatRfc3339Millis(int64_t unix_ms) {
  int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  int ms = static_cast<int>(unix_ms - secs * 1000);
  time_t t = static_cast<time_t>(secs);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

Result<int64_t> ParseRfc3339Millis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("\"" + std::string(text.substr(0, 40)) +
                                "\" is not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SS[.fff]Z)");
  };
  if (text.size() < 20 || text.size() > 40 || text.back() != 'Z') return bad();
  auto digits = [&](size_t pos, size_t n, int* v) {
    *v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      *v = *v * 10 + (text[i] - '0');
    }
    return true;
  };
  int y, mo, d, h, mi, s;
  if (!digits(0, 4, &y) || text[4] != '-' || !digits(5, 2, &mo) || text[7] != '-' ||
      !digits(8, 2, &d) || text[10] != 'T' || !digits(11, 2, &h) || text[13] != ':' ||
      !digits(14, 2, &mi) || text[16] != ':' || !digits(17, 2, &s)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  int ms = 0;
  size_t pos = 19;
  if (text[pos] == '.') {
    size_t start = ++pos;
    int scale = 100;
    while (pos < text.size() - 1) {
      char c = text[pos];
      if (c < '0' || c > '9') return bad();
      if (scale > 0) ms += (c - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad();
  }
  if (pos != text.size() - 1) return bad();
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  int64_t secs = static_cast<int64_t>(timegm(&tm));
  return secs * 1000 + ms;
}

}  // namespace gatos
