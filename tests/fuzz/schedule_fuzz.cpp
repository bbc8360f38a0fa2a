// libFuzzer target: schedules (gatos/model/schedule.h, cron.h, time_zone.h).
// The first byte picks what the rest is:
//   0: a cron expression: accepted ones give ticks that strictly increase,
//      in UTC and in a zone made from a fixed table;
//   1: TZif bytes: accepted zones answer OffsetAt within a day, and a cron
//      search in them ends;
//   2: schedule.yaml: accepted documents round-trip through
//      EncodeSchedule, their ticks increase, the catch-up rule fires only
//      due ticks in order, and a fired manifest is a valid manifest;
//   3+: an interval: accepted ones round-trip through FormatEvery.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/model/cron.h"
#include "gatos/model/manifest.h"
#include "gatos/model/schedule.h"
#include "gatos/model/time_zone.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr int64_t kStart = 1'795'000'000;  // 2026-11-18, unix seconds

void Ticks(const gatos::CronExpr& c, const gatos::TimeZone& tz) {
  int64_t t = kStart;
  for (int i = 0; i < 4; ++i) {
    auto n = gatos::NextCronTick(c, tz, t);
    if (!n) return;
    Check(*n > t);
    t = *n;
  }
}

void Schedule(std::string_view text) {
  auto s = gatos::ParseSchedule(text);
  if (!s.ok()) return;
  auto again = gatos::ParseSchedule(gatos::EncodeSchedule(*s));
  Check(again.ok() && *again == *s);
  Check(gatos::ValidateManifest(gatos::FiredManifest(*s, kStart * 1000)).ok());
  // Zones are not loaded here (no I/O): cron schedules tick in UTC.
  gatos::ScheduleSpec utc = *s;
  utc.tz = "UTC";
  auto clock = gatos::ScheduleClock::Make(utc, gatos::TimeZone::Utc());
  Check(clock.ok());
  const int64_t last = kStart * 1000, now = last + static_cast<int64_t>(text.size()) * 7919;
  gatos::DueTicks d = gatos::DueTicksAt(*clock, s->catch_up, last, now);
  int64_t prev = last;
  for (int64_t t : d.fire) {
    Check(t > prev && t <= now);
    prev = t;
  }
  Check(d.after_ms >= last && d.after_ms <= now);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto c = gatos::ParseCron(rest);
      if (!c.ok()) return 0;
      Ticks(*c, gatos::TimeZone::Utc());
      break;
    }
    case 1: {
      auto z = gatos::TimeZone::FromTzif("Fuzz/Zone", rest);
      if (!z.ok()) return 0;
      for (int64_t t : {INT64_MIN / 2, int64_t{0}, kStart, INT64_MAX / 2}) {
        const int64_t off = z->OffsetAt(t);
        Check(off > -26 * 3600 && off < 26 * 3600);
      }
      auto c = gatos::ParseCron("*/7 * * * *");
      Check(c.ok());
      Ticks(*c, *z);
      break;
    }
    case 2:
      Schedule(rest);
      break;
    default: {
      auto ms = gatos::ParseEvery(rest);
      if (!ms.ok()) return 0;
      auto back = gatos::ParseEvery(gatos::FormatEvery(*ms));
      Check(back.ok() && *back == *ms);
      break;
    }
  }
  return 0;
}
