// Time zones for schedules: UTC, or a zone read from a TZif file
// (RFC 8536; /usr/share/zoneinfo/<name>, read by gatos/sys/zoneinfo.h).
// GCC 12's <chrono> has no tzdb, so the model decodes the file itself.
//
// A TimeZone answers one question: the UTC offset in force at a unix
// second. Transitions after the file's last one follow its footer POSIX TZ
// rule only when the rule has no daylight saving part; a zone with DST
// rules past the table (version 2+ files carry transitions to 2037) keeps
// the last offset. Schedules are not expected to need more.
//
// Thread-safety: value type, pure functions.
#ifndef GATOS_MODEL_TIME_ZONE_H_
#define GATOS_MODEL_TIME_ZONE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

class TimeZone {
 public:
  TimeZone() = default;  // UTC
  static TimeZone Utc() { return TimeZone(); }
  // Decodes TZif bytes (version 1, 2, 3 or 4) for zone `name`.
  // InvalidArgument when the bytes are not a TZif file or are inconsistent.
  static Result<TimeZone> FromTzif(std::string_view name, std::string_view bytes);

  const std::string& name() const { return name_; }
  // Seconds east of UTC at `unix_s`.
  int64_t OffsetAt(int64_t unix_s) const;

 private:
  std::string name_ = "UTC";
  std::vector<int64_t> at_;        // transition times, ascending
  std::vector<int32_t> offset_;    // offset in force from at_[i]
  int32_t initial_offset_ = 0;     // before the first transition
};

// "" when `name` may name a zone file: "UTC", or components of
// [A-Za-z0-9_+-] separated by '/', no "." or ".." component, at most 64
// bytes. Otherwise what is wrong (a name like "../../etc/passwd").
std::string ZoneNameProblem(std::string_view name);

// Civil time helpers (proleptic Gregorian, UTC): days since 1970-01-01.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d);
void CivilFromDays(int64_t days, int64_t* y, unsigned* m, unsigned* d);

}  // namespace gatos

#endif  // GATOS_MODEL_TIME_ZONE_H_
