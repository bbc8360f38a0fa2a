// Cron expressions for schedules (docs/scheduling.md, "Schedules").
//
//   [SEC] MIN HOUR DOM MON DOW     5 fields, or 6 with seconds first
//
// Each field: `*`, a value, a range `A-B`, a step `*/S`, `A-B/S` or `A/S`
// (from A to the field's end), or a comma list of those. Months take
// JAN-DEC and days of week SUN-SAT (any case); day of week 0 and 7 are both
// Sunday. As in Vixie cron, when both day of month and day of week are
// restricted (neither starts with `*`) a day matches if either does.
// Macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight),
// @hourly. Without seconds a tick is at second 0.
//
// Ticks are computed in a time zone's local time (time_zone.h): a local
// time that does not exist (skipped by a daylight-saving jump) is no tick;
// one that occurs twice (the clock set back) is one tick, at its first
// occurrence.
//
// Thread-safety: value type, pure functions.
#ifndef GATOS_MODEL_CRON_H_
#define GATOS_MODEL_CRON_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/status.h"
#include "gatos/model/time_zone.h"

namespace gatos {

struct CronExpr {
  std::bitset<60> seconds, minutes;
  std::bitset<24> hours;
  std::bitset<32> days;      // 1..31
  std::bitset<13> months;    // 1..12
  std::bitset<7> weekdays;   // 0 = Sunday
  bool days_star = true, weekdays_star = true;
  bool operator==(const CronExpr&) const = default;
};

// InvalidArgument naming the field and what is wrong ("cron field 2
// (hour): 24 is outside 0-23").
Result<CronExpr> ParseCron(std::string_view text);

// The first tick strictly after `after_s` (unix seconds) in zone `tz`, or
// nullopt when there is none within 8 years (e.g. "0 0 30 2 *") or within
// a million candidate local times (only a zone made of gaps gets there).
std::optional<int64_t> NextCronTick(const CronExpr& cron, const TimeZone& tz, int64_t after_s);

}  // namespace gatos

#endif  // GATOS_MODEL_CRON_H_
