#include "gatos/model/time_zone.h"

#include <algorithm>

namespace gatos {
namespace {

uint32_t Be32(std::string_view b, size_t at) {
  return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) |
         (uint32_t(uint8_t(b[at + 2])) << 8) | uint32_t(uint8_t(b[at + 3]));
}
int64_t Be64(std::string_view b, size_t at) {
  return static_cast<int64_t>((uint64_t(Be32(b, at)) << 32) | Be32(b, at + 4));
}

struct Header {
  char version = 0;
  uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

Status Bad(std::string_view name, std::string m) {
  return InvalidArgumentError("zone " + std::string(name) + ": not a usable TZif file: " + m);
}

bool ReadHeader(std::string_view b, size_t at, Header* h) {
  if (b.size() < at + 44 || b.substr(at, 4) != "TZif") return false;
  h->version = b[at + 4];
  h->isutcnt = Be32(b, at + 20);
  h->isstdcnt = Be32(b, at + 24);
  h->leapcnt = Be32(b, at + 28);
  h->timecnt = Be32(b, at + 32);
  h->typecnt = Be32(b, at + 36);
  h->charcnt = Be32(b, at + 40);
  return true;
}

// Bytes of a data block after its header, or 0 when the counts are absurd.
uint64_t BlockSize(const Header& h, int time_size) {
  if (h.timecnt > 100000 || h.typecnt == 0 || h.typecnt > 256 || h.charcnt > 100000 || h.leapcnt > 100000 ||
      h.isutcnt > 256 || h.isstdcnt > 256) {
    return 0;
  }
  return uint64_t(h.timecnt) * time_size + h.timecnt + uint64_t(h.typecnt) * 6 + h.charcnt +
         uint64_t(h.leapcnt) * (time_size + 4) + h.isstdcnt + h.isutcnt;
}

}  // namespace

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

std::string ZoneNameProblem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 64) return "is longer than 64 bytes";
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return "has an empty, '.' or '..' component";
    for (char c : part) {
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
            c == '-')) {
        return "has a character other than A-Z a-z 0-9 _ + - /";
      }
    }
    start = end + 1;
  }
  return "";
}

Result<TimeZone> TimeZone::FromTzif(std::string_view name, std::string_view b) {
  Header h;
  if (!ReadHeader(b, 0, &h)) return Bad(name, "no TZif header");
  size_t at = 44;
  int time_size = 4;
  uint64_t size = BlockSize(h, 4);
  if (size == 0 || b.size() < at + size) return Bad(name, "truncated or absurd version 1 block");
  if (h.version >= '2') {
    at += size;
    if (!ReadHeader(b, at, &h)) return Bad(name, "no second TZif header");
    at += 44;
    time_size = 8;
    size = BlockSize(h, 8);
    if (size == 0 || b.size() < at + size) return Bad(name, "truncated or absurd version 2 block");
  }
  TimeZone z;
  z.name_ = std::string(name);
  std::vector<int64_t> times(h.timecnt);
  for (uint32_t i = 0; i < h.timecnt; ++i) {
    times[i] = time_size == 8 ? Be64(b, at + size_t(i) * 8) : int64_t(int32_t(Be32(b, at + size_t(i) * 4)));
    if (i > 0 && times[i] <= times[i - 1]) return Bad(name, "transition times are not ascending");
  }
  const size_t idx_at = at + size_t(h.timecnt) * time_size;
  const size_t types_at = idx_at + h.timecnt;
  std::vector<int32_t> offsets(h.typecnt);
  for (uint32_t i = 0; i < h.typecnt; ++i) {
    int32_t off = static_cast<int32_t>(Be32(b, types_at + size_t(i) * 6));
    if (off <= -25 * 3600 || off >= 26 * 3600) return Bad(name, "an offset beyond a day");
    offsets[i] = off;
  }
  for (uint32_t i = 0; i < h.timecnt; ++i) {
    const uint8_t type = static_cast<uint8_t>(b[idx_at + i]);
    if (type >= h.typecnt) return Bad(name, "a transition names a type that does not exist");
    z.at_.push_back(times[i]);
    z.offset_.push_back(offsets[type]);
  }
  // RFC 8536 3.2: local time before the first transition uses type 0.
  z.initial_offset_ = offsets[0];
  // The footer's POSIX rule: a plain one ("CET-1", "<+03>-3") fixes the
  // offset after the table; one with DST ("CET-1CEST,M3.5.0,M10.5.0/3") is
  // left to the table's transitions (to 2037 in the files we read).
  return z;
}

int64_t TimeZone::OffsetAt(int64_t unix_s) const {
  auto it = std::upper_bound(at_.begin(), at_.end(), unix_s);
  if (it == at_.begin()) return initial_offset_;
  return offset_[static_cast<size_t>(it - at_.begin()) - 1];
}

}  // namespace gatos
