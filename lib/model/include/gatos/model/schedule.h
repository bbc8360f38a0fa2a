// Schedules (docs/scheduling.md, "Schedules"): the schedule.yaml document,
// its ticks, which ticks are due under the catch-up rule, and the job a
// tick fires.
//
//   name: nightly-scan            # 1-63 of [a-z0-9_-], as a pool name
//   cron: "0 2 * * *"             # or  every: 2s   (one of the two)
//   tz: Europe/Paris              # cron only; default UTC
//   catch_up: one                 # none | one | all; default one
//   template:                     # a job manifest, checked like any
//     command: [scan]
//     timeout: 600
//
// or, instead of cron / every, a trigger (gatos/model/trigger.h):
//
//   watch:                        # fires when a matching ref moves
//     - {url: /srv/repos/app, refs: [refs/heads/main]}
//   poll: 30s                     # default 30s, 1s..1d
//
// An `every` schedule ticks at the multiples of its interval since the unix
// epoch (`every: 2s` at each even second, `every: 1h` on the hour UTC): the
// ticks follow from the document alone, so the auditor computes the same.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_MODEL_SCHEDULE_H_
#define GATOS_MODEL_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/cron.h"
#include "gatos/model/manifest.h"
#include "gatos/model/status.h"
#include "gatos/model/time_zone.h"
#include "gatos/model/trigger.h"

namespace gatos {

enum class CatchUp { kNone, kOne, kAll };
std::string_view CatchUpName(CatchUp c);
Result<CatchUp> ParseCatchUp(std::string_view s);

inline constexpr int64_t kMinEveryMs = 1000;
inline constexpr int64_t kMaxEveryMs = 366LL * 86400 * 1000;
// A tick fired within this long of its time is on time; older due ticks
// were missed (gatosd was down) and follow the catch-up rule.
inline constexpr int64_t kFireGraceMs = 5000;
// Ticks fired in one pass at most, over every schedule (catch_up all after
// a long outage continues in the next pass). A pass's fires are one log
// batch, and a batch as large as gatosd's largest (max_batch) keeps a fired
// job's proof bundle as small as any other's.
inline constexpr size_t kMaxFiresPerPass = 128;

struct ScheduleSpec {
  std::string name;
  int64_t every_ms = 0;  // > 0 for an interval schedule
  std::string cron;      // the expression, for a cron schedule
  std::string tz = "UTC";
  CatchUp catch_up = CatchUp::kOne;
  Manifest job;          // the template
  // A trigger: the repositories and ref patterns it watches (no cron or
  // interval), read every poll_ms.
  std::vector<WatchSpec> watch;
  int64_t poll_ms = 0;
  bool is_trigger() const { return !watch.empty(); }
  bool operator==(const ScheduleSpec&) const = default;
};

// "2s", "90s", "5m", "1h30m", "1d": whole units of s, m, h, d, at least 1 s
// and at most 366 days. InvalidArgument with the reason.
Result<int64_t> ParseEvery(std::string_view text);
// The shortest such text for `ms` (a whole number of seconds).
std::string FormatEvery(int64_t ms);

// Parses schedule.yaml. Checks every field (cron syntax, zone name syntax,
// the template as a manifest); not whether the zone exists (the caller
// loads it: gatos/sys/zoneinfo.h). InvalidArgument, one problem per line,
// "SOURCE:LINE:COL: FIELD: what".
Result<ScheduleSpec> ParseSchedule(std::string_view bytes, std::string_view source_name = "schedule.yaml");
// schedule.yaml text for `spec`; ParseSchedule(EncodeSchedule(s)) == s.
std::string EncodeSchedule(const ScheduleSpec& spec);

// A schedule ready to compute ticks.
class ScheduleClock {
 public:
  // InvalidArgument for a cron that does not parse or a zone whose name is
  // not the spec's. A trigger's clock has no ticks (Next is nullopt).
  static Result<ScheduleClock> Make(const ScheduleSpec& spec, const TimeZone& tz);
  // The first tick strictly after `after_ms` (unix ms), or nullopt.
  std::optional<int64_t> Next(int64_t after_ms) const;

 private:
  int64_t every_ms_ = 0;
  bool trigger_ = false;
  CronExpr cron_;
  TimeZone tz_;
};

struct DueTicks {
  std::vector<int64_t> fire;  // ticks to fire now, oldest first
  int64_t missed = 0;         // due ticks the rule skips (none, one)
  int64_t after_ms = 0;       // what the caller's `last_ms` becomes
};

// Which ticks in (last_ms, now_ms] fire now. `last_ms` is the last tick
// fired, or the time the schedule became active. Ticks younger than
// kFireGraceMs always fire; older ones (missed while gatosd was down):
// none skips them, one fires the newest of them, all fires each (at most
// `max_fires` per call; `after_ms` then stops at the last one fired).
DueTicks DueTicksAt(const ScheduleClock& clock, CatchUp rule, int64_t last_ms, int64_t now_ms,
                    size_t max_fires = kMaxFiresPerPass);

// The manifest a tick fires: the template with an input
// {kind: schedule, schedule: NAME, nonce: TICK} appended (TICK as RFC 3339
// UTC with milliseconds), so each tick of each schedule is its own job.
Manifest FiredManifest(const ScheduleSpec& spec, int64_t tick_ms);
// The nonce text of `tick_ms`, and back.
std::string TickNonce(int64_t tick_ms);

}  // namespace gatos

#endif  // GATOS_MODEL_SCHEDULE_H_
