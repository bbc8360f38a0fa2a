// Schedules in the model: cron expressions, intervals, time zones read from
// TZif files (daylight-saving gaps and overlaps), the catch-up rule on a
// fake clock, schedule.yaml and the job a tick fires.
#include "gatos/model/schedule.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gatos/model/cron.h"
#include "gatos/model/manifest.h"
#include "gatos/model/time_format.h"
#include "gatos/model/time_zone.h"

namespace gatos {
namespace {

int64_t T(const char* rfc3339) {
  auto t = ParseRfc3339Millis(rfc3339);
  EXPECT_TRUE(t.ok()) << rfc3339;
  return t.ok() ? *t : 0;
}
int64_t S(const char* rfc3339) { return T(rfc3339) / 1000; }
std::string F(std::optional<int64_t> unix_s) { return unix_s ? FormatRfc3339Millis(*unix_s * 1000) : "none"; }

TimeZone Zone(const std::string& name) {
  std::ifstream in("/usr/share/zoneinfo/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto z = TimeZone::FromTzif(name, ss.str());
  EXPECT_TRUE(z.ok()) << name << ": " << z.status().message();
  return z.ok() ? *z : TimeZone::Utc();
}

std::string NextUtc(const char* expr, const char* after) {
  auto c = ParseCron(expr);
  EXPECT_TRUE(c.ok()) << expr << ": " << c.status().message();
  return c.ok() ? F(NextCronTick(*c, TimeZone::Utc(), S(after))) : "";
}

TEST(CronTest, ParsesFieldsListsRangesStepsAndNames) {
  EXPECT_EQ(NextUtc("*/15 * * * *", "2026-11-29T10:07:30Z"), "2026-11-29T10:15:00.000Z");
  EXPECT_EQ(NextUtc("0 2 * * *", "2026-11-29T02:00:00Z"), "2026-11-30T02:00:00.000Z");
  EXPECT_EQ(NextUtc("*/10 * * * * *", "2026-11-29T10:07:35Z"), "2026-11-29T10:07:40.000Z");
  EXPECT_EQ(NextUtc("5,35 9-17/4 * * MON-fri", "2026-11-28T12:00:00Z"), "2026-11-30T09:05:00.000Z");  // Sat -> Mon
  EXPECT_EQ(NextUtc("0 0 1 JAN,jul *", "2026-02-01T00:00:00Z"), "2026-07-01T00:00:00.000Z");
  EXPECT_EQ(NextUtc("0 12 * * 7", "2026-11-29T12:00:00Z"), "2026-12-06T12:00:00.000Z");  // 7 = Sunday
  EXPECT_EQ(NextUtc("0 12 * * 0", "2026-11-28T00:00:00Z"), "2026-11-29T12:00:00.000Z");
  // Both day fields restricted: either matches (Vixie cron).
  EXPECT_EQ(NextUtc("0 0 13 * FRI", "2026-11-29T00:00:00Z"), "2026-12-04T00:00:00.000Z");
  EXPECT_EQ(NextUtc("0 0 29 2 *", "2026-03-01T00:00:00Z"), "2028-02-29T00:00:00.000Z");
  EXPECT_EQ(NextUtc("30 */2 * * * *", "2026-11-29T10:00:31Z"), "2026-11-29T10:02:30.000Z");
  EXPECT_EQ(NextUtc("@hourly", "2026-11-29T10:00:00Z"), "2026-11-29T11:00:00.000Z");
  EXPECT_EQ(NextUtc("@daily", "2026-11-29T10:00:00Z"), "2026-11-30T00:00:00.000Z");
  EXPECT_EQ(NextUtc("0 0 30 2 *", "2026-01-01T00:00:00Z"), "none");
}

TEST(CronTest, RefusesWithTheReason) {
  struct Case {
    const char* expr;
    const char* says;
  } cases[] = {
      {"* * * *", "has 4 fields"},
      {"* * * * * * *", "has 7 fields"},
      {"60 * * * *", "cron field 1 (minute): 60 is outside 0-59"},
      {"* 24 * * *", "cron field 2 (hour): 24 is outside 0-23"},
      {"* * 0 * *", "(day of month): 0 is outside 1-31"},
      {"* * * 13 *", "(month): 13 is outside 1-12"},
      {"* * * * 8", "(day of week): 8 is outside 0-7"},
      {"*/0 * * * *", "step \"0\""},
      {"5-1 * * * *", "runs backwards"},
      {"a * * * *", "\"a\" is not a value"},
      {"1,,2 * * * *", "an empty list item"},
      {"* * * FOO *", "\"FOO\" is not a value"},
      {"@often", "is not one of"},
      {"", "has 0 fields"},
  };
  for (const auto& c : cases) {
    auto r = ParseCron(c.expr);
    ASSERT_FALSE(r.ok()) << c.expr;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.expr << " -> " << r.status().message();
  }
}

TEST(CronTest, DaylightSavingGapIsSkippedAndOverlapFiresOnce) {
  const TimeZone paris = Zone("Europe/Paris");
  auto c = ParseCron("30 2 * * *");
  ASSERT_TRUE(c.ok());
  // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
  EXPECT_EQ(F(NextCronTick(*c, paris, S("2026-03-28T01:30:00Z"))), "2026-03-30T00:30:00.000Z");
  EXPECT_EQ(F(NextCronTick(*c, paris, S("2026-03-27T12:00:00Z"))), "2026-03-28T01:30:00.000Z");
  // 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 occurs twice
  // (00:30Z and 01:30Z) and fires once, at the first.
  EXPECT_EQ(F(NextCronTick(*c, paris, S("2026-10-24T12:00:00Z"))), "2026-10-25T00:30:00.000Z");
  EXPECT_EQ(F(NextCronTick(*c, paris, S("2026-10-25T00:30:00Z"))), "2026-10-26T01:30:00.000Z");
  // Every 10 minutes through the overlap: the repeated hour's ticks fire once.
  auto ten = ParseCron("*/10 * * * *");
  ASSERT_TRUE(ten.ok());
  std::vector<std::string> ticks;
  int64_t t = S("2026-10-24T23:55:00Z");
  while (t < S("2026-10-25T02:05:00Z")) {
    t = *NextCronTick(*ten, paris, t);
    ticks.push_back(F(t).substr(11, 5));
  }
  // 01:00Z-01:50Z is local 02:00-02:50 CET a second time: skipped.
  const std::vector<std::string> want = {"00:00", "00:10", "00:20", "00:30", "00:40", "00:50", "02:00", "02:10"};
  EXPECT_EQ(ticks, want);
  // New York, the other way round (UTC-5/-4).
  const TimeZone ny = Zone("America/New_York");
  auto nine = ParseCron("0 9 * * *");
  ASSERT_TRUE(nine.ok());
  EXPECT_EQ(F(NextCronTick(*nine, ny, S("2026-07-01T00:00:00Z"))), "2026-07-01T13:00:00.000Z");
  EXPECT_EQ(F(NextCronTick(*nine, ny, S("2026-12-01T00:00:00Z"))), "2026-12-01T14:00:00.000Z");
}

TEST(TimeZoneTest, RefusesBadFilesAndNames) {
  EXPECT_FALSE(TimeZone::FromTzif("X", "").ok());
  EXPECT_FALSE(TimeZone::FromTzif("X", "TZif2 but far too short").ok());
  EXPECT_EQ(ZoneNameProblem("Europe/Paris"), "");
  EXPECT_EQ(ZoneNameProblem("Etc/GMT+5"), "");
  EXPECT_NE(ZoneNameProblem("../../etc/passwd"), "");
  EXPECT_NE(ZoneNameProblem("/etc/passwd"), "");
  EXPECT_NE(ZoneNameProblem("Europe//Paris"), "");
  EXPECT_NE(ZoneNameProblem("Europe/Pa ris"), "");
  EXPECT_NE(ZoneNameProblem(""), "");
  EXPECT_EQ(TimeZone::Utc().OffsetAt(S("2026-07-01T00:00:00Z")), 0);
  EXPECT_EQ(Zone("Europe/Paris").OffsetAt(S("2026-07-01T00:00:00Z")), 7200);
  EXPECT_EQ(Zone("Europe/Paris").OffsetAt(S("2026-12-01T00:00:00Z")), 3600);
}

TEST(EveryTest, ParsesAndFormats) {
  EXPECT_EQ(*ParseEvery("2s"), 2000);
  EXPECT_EQ(*ParseEvery("5m"), 300000);
  EXPECT_EQ(*ParseEvery("1h30m"), 5400000);
  EXPECT_EQ(*ParseEvery("1d"), 86400000);
  for (const char* bad : {"", "0s", "2", "s", "1.5s", "2x", "1s1s", "367d", "-1s", "99999999999999999d"}) {
    EXPECT_FALSE(ParseEvery(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatEvery(5400000), "1h30m");
  EXPECT_EQ(FormatEvery(2000), "2s");
}

ScheduleSpec Every(int64_t ms, CatchUp rule) {
  ScheduleSpec s;
  s.name = "tick";
  s.every_ms = ms;
  s.catch_up = rule;
  s.job.command = {"true"};
  s.job.timeout_seconds = 10;
  return s;
}

TEST(ScheduleClockTest, IntervalsTickOnMultiplesOfTheEpoch) {
  auto c = ScheduleClock::Make(Every(2000, CatchUp::kOne), TimeZone::Utc());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->Next(10000), 12000);
  EXPECT_EQ(*c->Next(10001), 12000);
  EXPECT_EQ(*c->Next(11999), 12000);
  EXPECT_EQ(*c->Next(-1), 0);
}

TEST(ScheduleClockTest, CatchUpRulesOnAFakeClock) {
  // Running: each pass fires what became due.
  for (CatchUp rule : {CatchUp::kNone, CatchUp::kOne, CatchUp::kAll}) {
    auto c = ScheduleClock::Make(Every(2000, rule), TimeZone::Utc());
    ASSERT_TRUE(c.ok());
    int64_t last = 1'000'000;
    std::vector<int64_t> fired;
    for (int64_t now = 1'000'000; now <= 1'010'000; now += 100) {
      DueTicks d = DueTicksAt(*c, rule, last, now);
      fired.insert(fired.end(), d.fire.begin(), d.fire.end());
      EXPECT_EQ(d.missed, 0);
      last = d.after_ms;
    }
    EXPECT_EQ(fired, (std::vector<int64_t>{1'002'000, 1'004'000, 1'006'000, 1'008'000, 1'010'000}));
  }
  // Down from 1,000,000 to 1,060,100: ticks 1,002,000..1,060,000 are due;
  // those older than the grace (<= 1,055,100) were missed.
  const int64_t last = 1'000'000, now = 1'060'100;
  auto none = DueTicksAt(*ScheduleClock::Make(Every(2000, CatchUp::kNone), TimeZone::Utc()), CatchUp::kNone, last, now);
  EXPECT_EQ(none.fire, (std::vector<int64_t>{1'056'000, 1'058'000, 1'060'000}));
  EXPECT_EQ(none.missed, 27);
  EXPECT_EQ(none.after_ms, now);
  auto one = DueTicksAt(*ScheduleClock::Make(Every(2000, CatchUp::kOne), TimeZone::Utc()), CatchUp::kOne, last, now);
  EXPECT_EQ(one.fire, (std::vector<int64_t>{1'054'000, 1'056'000, 1'058'000, 1'060'000}));
  EXPECT_EQ(one.missed, 26);
  auto all = DueTicksAt(*ScheduleClock::Make(Every(2000, CatchUp::kAll), TimeZone::Utc()), CatchUp::kAll, last, now);
  ASSERT_EQ(all.fire.size(), 30u);
  EXPECT_EQ(all.fire.front(), 1'002'000);
  EXPECT_EQ(all.fire.back(), 1'060'000);
  EXPECT_EQ(all.missed, 0);
  // A long outage under `all` continues in the next pass, never twice.
  auto clock = *ScheduleClock::Make(Every(1000, CatchUp::kAll), TimeZone::Utc());
  auto first = DueTicksAt(clock, CatchUp::kAll, 0, 2'500'000);
  ASSERT_EQ(first.fire.size(), kMaxFiresPerPass);
  auto second = DueTicksAt(clock, CatchUp::kAll, first.after_ms, 2'500'000);
  EXPECT_EQ(second.fire.front(), first.fire.back() + 1000);
  // A very long outage of a frequent schedule: one still fires the newest.
  auto longone = DueTicksAt(clock, CatchUp::kOne, 0, 400'000'000);
  ASSERT_FALSE(longone.fire.empty());
  EXPECT_EQ(longone.fire.front(), 400'000'000 - kFireGraceMs);
}

constexpr char kSchedule[] =
    "name: nightly-scan\n"
    "cron: \"0 2 * * *\"\n"
    "tz: Europe/Paris\n"
    "catch_up: all\n"
    "template:\n"
    "  command: [scan, --all]\n"
    "  timeout: PT10M\n"
    "  pool: scanners\n";

TEST(ScheduleSpecTest, ParsesEncodesAndRoundTrips) {
  auto s = ParseSchedule(kSchedule);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "nightly-scan");
  EXPECT_EQ(s->cron, "0 2 * * *");
  EXPECT_EQ(s->tz, "Europe/Paris");
  EXPECT_EQ(s->catch_up, CatchUp::kAll);
  EXPECT_EQ(s->job.timeout_seconds, 600);
  auto again = ParseSchedule(EncodeSchedule(*s));
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << EncodeSchedule(*s);
  EXPECT_EQ(*again, *s);
  auto e = ParseSchedule("name: t\nevery: 2s\ntemplate: {command: [\"true\"], timeout: 5}\n");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->every_ms, 2000);
  EXPECT_EQ(e->catch_up, CatchUp::kOne);
  EXPECT_EQ(*ParseSchedule(EncodeSchedule(*e)), *e);
}

TEST(ScheduleSpecTest, RefusesBadInputWithTheReason) {
  struct Case {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"name: t\ncron: \"61 * * * *\"\ntemplate: {command: [x], timeout: 5}\n", "schedule.yaml:2:7: cron: cron field 1"},
      {"name: t\ncron: \"* * * * *\"\nevery: 2s\ntemplate: {command: [x], timeout: 5}\n", "exactly one of cron and every"},
      {"name: t\ntemplate: {command: [x], timeout: 5}\n", "exactly one of cron and every"},
      {"name: t\nevery: 0s\ntemplate: {command: [x], timeout: 5}\n", "outside 1s..366d"},
      {"name: t\nevery: 2s\ntemplate: {timeout: 5}\n", "schedule.yaml template:3:11: command"},
      {"name: t\nevery: 2s\ntemplate: [x]\n", "template"},
      {"name: t\nevery: 2s\n", "template: is missing"},
      {"cron: \"* * * * *\"\ntemplate: {command: [x], timeout: 5}\n", "name: is missing"},
      {"name: Bad.Name\nevery: 2s\ntemplate: {command: [x], timeout: 5}\n", "name: \"Bad.Name\""},
      {"name: t\ncron: \"* * * * *\"\ntz: ../../etc/passwd\ntemplate: {command: [x], timeout: 5}\n", "zone name"},
      {"name: t\nevery: 2s\ntz: Europe/Paris\ntemplate: {command: [x], timeout: 5}\n", "applies to cron only"},
      {"name: t\nevery: 2s\ncatch_up: some\ntemplate: {command: [x], timeout: 5}\n", "is not none, one or all"},
      {"name: t\nevery: 2s\nretries: 3\ntemplate: {command: [x], timeout: 5}\n", "retries: is not a schedule field"},
      {"name: t\nevery: 2s\ntemplate: {command: [x], timeout: 5, inputs: [{kind: schedule, nonce: x}]}\n",
       "the ledger adds it"},
      {"[1, 2", "schedule.yaml:"},
  };
  for (const auto& c : cases) {
    auto r = ParseSchedule(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.yaml << " -> " << r.status().message();
  }
}

TEST(ScheduleSpecTest, EachTickOfEachScheduleIsItsOwnValidJob) {
  ScheduleSpec a = Every(2000, CatchUp::kOne);
  ScheduleSpec b = a;
  b.name = "other";
  const Manifest m1 = FiredManifest(a, 2000), m2 = FiredManifest(a, 4000), m3 = FiredManifest(b, 2000);
  EXPECT_TRUE(ValidateManifest(m1).ok());
  EXPECT_EQ(JobIdHex(m1), JobIdHex(FiredManifest(a, 2000)));
  EXPECT_NE(JobIdHex(m1), JobIdHex(m2));
  EXPECT_NE(JobIdHex(m1), JobIdHex(m3));
  EXPECT_NE(JobIdHex(m1), JobIdHex(a.job));
  ASSERT_TRUE(m1.inputs.has_value());
  EXPECT_EQ((*m1.inputs)[0]["nonce"], "1970-01-01T00:00:02.000Z");
  EXPECT_EQ((*m1.inputs)[0]["schedule"], "tick");
}

}  // namespace
}  // namespace gatos
