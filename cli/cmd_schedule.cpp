// gatos schedule add | ls | pause | resume | rm (docs/scheduling.md,
// "Schedules"): schedule commits signed by a submitter, recorded by the
// ledger at refs/gatos/schedules/<name> and logged as `schedule`.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/model/clock.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/schedule.h"
#include "gatos/model/time_format.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/manifest_file.h"
#include "gatos/sys/zoneinfo.h"
#include "ledger_client.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

constexpr char kAddHelp[] =
    "usage: gatos schedule add NAME (--cron EXPR | --every DURATION) --template job.yaml\n"
    "                          --sign-key KEY --ledger DIR [--tz ZONE] [--catch-up none|one|all]\n"
    "       gatos schedule add NAME --watch URL --refs PATTERN [--refs PATTERN]...\n"
    "                          [--watch URL --refs PATTERN...]... [--poll DURATION]\n"
    "                          --template job.yaml --sign-key KEY --ledger DIR\n\n"
    "Adds a schedule: a commit signed by KEY (an allowed submitter) holding\n"
    "schedule.yaml, recorded by the ledger at refs/gatos/schedules/NAME and logged.\n"
    "At each tick the ledger creates the job: the template plus an input\n"
    "{kind: schedule, schedule: NAME, nonce: <tick time>}.\n"
    "--cron: 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds\n"
    "first); *, values, A-B, steps */S, lists, JAN-DEC, SUN-SAT, @daily, @hourly...\n"
    "--every: 30s, 5m, 1h30m, 1d (ticks at multiples of it since the unix epoch).\n"
    "--tz ZONE: cron only, an IANA zone such as Europe/Paris (default UTC); a local\n"
    "time a daylight-saving jump skips is no tick, one that occurs twice fires once.\n"
    "--catch-up: ticks missed while gatosd was down: none (skip them), one (fire\n"
    "the newest; the default), all (fire each).\n"
    "NAME: 1-63 of a-z 0-9 - _. Bad input is refused with the reason; nothing is\n"
    "written.\n"
    "gatosd fires each tick as a job signed by the ledger key (trailers Schedule\n"
    "and Fired-At), logged as fire; refs/gatos/fires/NAME is the schedule's last\n"
    "fire (docs/scheduling.md, \"Firing\").\n\n"
    "A trigger (--watch) fires instead when a watched ref moves: gatosd reads each\n"
    "URL with git ls-remote every --poll (default 30s, 1s..1d; the workers'\n"
    "credential rules, gatosd --input-credentials) and fires one job per ref that\n"
    "moved to a new commit: the template with its git input of that URL pinned to\n"
    "{ref, commit} (one is added if the template has none) and an input\n"
    "{kind: schedule, schedule: NAME, nonce: REF@COMMIT}. Each --refs belongs to\n"
    "the --watch before it: a full ref name (refs/heads/main) or a pattern with one\n"
    "'*' (refs/heads/*, refs/tags/v*), or HEAD. URL: a git input URL without\n"
    "credentials (refused otherwise: credentials belong to gatosd's\n"
    "--input-credentials). The first reading records the refs' current commits\n"
    "and fires nothing (docs/scheduling.md, \"Triggers\").\n";

int Fail(const std::string& cmd, const std::string& m) { return UsageError("schedule " + cmd, m); }

Result<std::string> LedgerDir(const Flags& flags, const std::string& cmd) {
  auto dir = LedgerTarget(flags.Get("ledger"));
  if (!dir) return InvalidArgumentError("--ledger DIR is required (or set GATOS_LEDGER)");
  if (ClassifyLedger(*dir) != LedgerKind::kDirectory) {
    return InvalidArgumentError("--ledger must be the ledger directory (schedules are changed on the ledger host)");
  }
  return *dir;
}

// The schedule's current commit, checked; nullopt when there is none.
Result<std::optional<ScheduleCommit>> Current(const std::string& dir, const std::string& name) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  GATOS_ASSIGN_OR_RETURN(std::string at, ledger->ResolveRef(kSchedulePrefix + name));
  if (at.empty()) return std::optional<ScheduleCommit>();
  GATOS_ASSIGN_OR_RETURN(ScheduleCommit c, CheckScheduleCommit(LedgerLookup(ledger.get()), at));
  return std::optional<ScheduleCommit>(std::move(c));
}

// Sends the commit to the ledger; prints the outcome.
int Send(const std::string& dir, const std::vector<GitObject>& objects, const std::string& done) {
  json header = {{"commit", objects.front().id}};
  auto reply = LedgerCall(dir, rpc::kLocalSchedule, rpc::EncodeFrame(header, EncodeObjectBatch(objects)), 30000);
  if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
  if (!reply->value("ok", false)) {
    std::string err = reply->value("error", "");
    return ReportError(reply->value("message", "schedule refused"),
                       err == "retry" || err == "internal" ? kExitFailure : kExitUsage);
  }
  std::cout << done << " (schedule commit " << reply->value("commit", "").substr(0, 12) << ")";
  if (reply->value("forwarded", false)) {
    // A follower's ledger: it forwarded the commit to the leader.
    std::cout << "; recorded by the leader, and this replica applied it at log sequence "
              << reply->value("log_seq", int64_t{0});
  }
  std::cout << "\n";
  return kExitOk;
}

Result<Ed25519PrivateKey> SignKey(const Flags& flags) {
  auto k = flags.Get("sign-key");
  if (!k) return InvalidArgumentError("--sign-key KEY is required (an allowed submitter's private key)");
  return ReadPrivateKeyFile(*k);
}

int ChangeState(const Args& args, const std::string& cmd, const std::string& state) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"sign-key"}})) return Fail(cmd, flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos schedule " << cmd << " NAME --sign-key KEY --ledger DIR\n\n"
              << (state == "paused"    ? "Pauses a schedule: no tick fires until it is resumed (ticks in between are\n"
                                         "not caught up).\n"
                  : state == "active" ? "Resumes a paused schedule from its next tick.\n"
                                      : "Removes a schedule; its name stays taken (the record is kept).\n")
              << "A commit signed by KEY (the schedule's signer, an operator or the ledger key)\n"
                 "whose parent is the schedule's current commit, recorded and logged.\n";
    return kExitOk;
  }
  if (flags.positional().size() != 1) return Fail(cmd, "expects one NAME");
  const std::string name = flags.positional()[0];
  auto dir = LedgerDir(flags, cmd);
  if (!dir.ok()) return Fail(cmd, dir.status().message());
  auto key = SignKey(flags);
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  auto cur = Current(*dir, name);
  if (!cur.ok()) return ReportError(cur.status().message(), kExitFailure);
  if (!*cur || (*cur)->state == "removed") return ReportError("no schedule " + name + " in this ledger", kExitUsage);
  if ((*cur)->state == state) {
    std::cout << "schedule " << name << " is " << state << " already; nothing changed\n";
    return kExitOk;
  }
  auto objects = BuildScheduleCommit((*cur)->spec, state, (*cur)->commit, *key, SystemNowMs());
  if (!objects.ok()) return ReportError(objects.status().message(), kExitFailure);
  return Send(*dir, *objects, "schedule " + name + " " + state);
}

std::string When(std::optional<int64_t> ms) { return ms ? FormatRfc3339Millis(*ms) : "-"; }

}  // namespace

// The --watch URL --refs PATTERN... groups in command-line order: each
// --refs belongs to the --watch before it.
Result<std::vector<WatchSpec>> WatchGroups(const Args& args) {
  std::vector<WatchSpec> out;
  auto value = [&](size_t* i, std::string_view flag, std::string* v) {
    const std::string& a = args[*i];
    if (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=') {
      *v = a.substr(flag.size() + 1);
      return true;
    }
    if (a != flag) return false;
    if (*i + 1 < args.size()) *v = args[++*i];
    return true;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    std::string v;
    if (value(&i, "--watch", &v)) {
      out.push_back({v, {}});
    } else if (value(&i, "--refs", &v)) {
      if (out.empty()) return InvalidArgumentError("--refs " + v.substr(0, 80) + " comes before any --watch URL");
      out.back().refs.push_back(v);
    }
  }
  return out;
}

int RunScheduleAdd(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"sign-key"}, {"cron"}, {"every"}, {"template"}, {"tz"}, {"catch-up"},
                          {"watch", 0, true, true}, {"refs", 0, true, true}, {"poll"}})) {
    return Fail("add", flags.error());
  }
  if (flags.help()) {
    std::cout << kAddHelp;
    return kExitOk;
  }
  if (flags.positional().size() != 1) return Fail("add", "expects one NAME");
  ScheduleSpec spec;
  spec.name = flags.positional()[0];
  auto cron = flags.Get("cron");
  auto every = flags.Get("every");
  const bool watch = flags.Has("watch") || flags.Has("refs");
  if (watch) {
    if (cron || every) {
      return Fail("add", "--watch fires when a ref moves, --cron and --every on a clock: give one kind (--poll "
                         "DURATION sets how often the watched repositories are read)");
    }
    if (flags.Has("tz") || flags.Has("catch-up")) return Fail("add", "--tz and --catch-up apply to --cron and --every");
    auto groups = WatchGroups(args);
    if (!groups.ok()) return Fail("add", groups.status().message());
    if (std::string p = WatchListProblem(*groups); !p.empty()) return Fail("add", p);
    spec.watch = *groups;
    spec.poll_ms = kDefaultPollMs;
    if (auto poll = flags.Get("poll")) {
      auto ms = ParseEvery(*poll);
      if (!ms.ok()) return Fail("add", "--poll: " + ms.status().message());
      if (*ms > kMaxPollMs) return Fail("add", "--poll: " + *poll + " is over 1d");
      spec.poll_ms = *ms;
    }
  } else if (flags.Has("poll")) {
    return Fail("add", "--poll applies to --watch (how often the watched repositories are read)");
  } else if (cron.has_value() == every.has_value()) {
    return Fail("add", "give exactly one of --cron EXPR, --every DURATION and --watch URL --refs PATTERN");
  }
  if (cron) {
    auto c = ParseCron(*cron);
    if (!c.ok()) return Fail("add", "--cron: " + c.status().message());
    spec.cron = *cron;
  } else if (every) {
    auto ms = ParseEvery(*every);
    if (!ms.ok()) return Fail("add", "--every: " + ms.status().message());
    spec.every_ms = *ms;
  }
  if (auto tz = flags.Get("tz")) {
    if (every && *tz != "UTC") return Fail("add", "--tz applies to --cron only (an interval ticks in unix time)");
    auto zone = LoadTimeZone(*tz);
    if (!zone.ok()) return Fail("add", "--tz: " + zone.status().message());
    spec.tz = *tz;
  }
  if (auto c = flags.Get("catch-up")) {
    auto rule = ParseCatchUp(*c);
    if (!rule.ok()) return Fail("add", "--catch-up: " + rule.status().message());
    spec.catch_up = *rule;
  }
  auto tmpl = flags.Get("template");
  if (!tmpl) return Fail("add", "--template job.yaml is required");
  auto m = LoadManifestFile(*tmpl);
  if (!m.ok()) return ReportError("--template: " + m.status().message(), kExitUsage);
  spec.job = *m;
  // The document the ledger will read, checked as it will check it.
  auto again = ParseSchedule(EncodeSchedule(spec));
  if (!again.ok()) return ReportError(again.status().message(), kExitUsage);
  auto dir = LedgerDir(flags, "add");
  if (!dir.ok()) return Fail("add", dir.status().message());
  auto key = SignKey(flags);
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  auto cur = Current(*dir, spec.name);
  if (!cur.ok()) return ReportError(cur.status().message(), kExitFailure);
  if (*cur) {
    return ReportError("schedule " + spec.name + " exists already (" + (*cur)->state +
                           "); choose another name" + ((*cur)->state == "removed" ? "" : " or gatos schedule rm it"),
                       kExitUsage);
  }
  auto objects = BuildScheduleCommit(*again, "active", "", *key, SystemNowMs());
  if (!objects.ok()) return ReportError(objects.status().message(), kExitFailure);
  return Send(*dir, *objects, "schedule " + spec.name + " added");
}

int RunSchedulePause(const Args& args) { return ChangeState(args, "pause", "paused"); }
int RunScheduleResume(const Args& args) { return ChangeState(args, "resume", "active"); }
int RunScheduleRm(const Args& args) { return ChangeState(args, "rm", "removed"); }

int RunScheduleLs(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"all", 0, false}, {"json", 0, false}})) return Fail("ls", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos schedule ls --ledger DIR [--all] [--json]\n\n"
                 "Lists the ledger's schedules: name, state, cron or interval, zone, catch-up\n"
                 "rule, next tick, last fire and signer. --all includes removed ones. --json\n"
                 "prints one array of objects (name, state, cron|every, tz, catch_up, next_tick,\n"
                 "last_fire, last_fire_commit, overdue, signer, commit, template). overdue:\n"
                 "ticks more than 5 s old since the last fire that have not fired (0 while\n"
                 "gatosd keeps up).\n";
    return kExitOk;
  }
  auto dir = LedgerDir(flags, "ls");
  if (!dir.ok()) return Fail("ls", dir.status().message());
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  std::vector<std::string> problems;
  const json out = ScheduleListJson(**ledger, flags.Has("all"), SystemNowMs(), &problems);
  for (const auto& p : problems) std::cerr << "gatos schedule ls: " << p << "\n";
  if (flags.Has("json")) {
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (out.empty()) {
    std::cout << "no schedules\n";
    return kExitOk;
  }
  std::printf("%-24s %-8s %-22s %-16s %-8s %-24s %-24s\n", "NAME", "STATE", "WHEN", "TZ", "CATCH-UP", "NEXT TICK",
              "LAST FIRE");
  for (const auto& s : out) {
    std::string when = s.contains("every")   ? "every " + s["every"].get<std::string>()
                       : s.contains("watch") ? "watch " + std::to_string(s["watch"].size()) + " repo(s) every " +
                                                   s["poll"].get<std::string>()
                                             : s["cron"].get<std::string>();
    std::printf("%-24s %-8s %-22s %-16s %-8s %-24s %-24s\n", s["name"].get<std::string>().c_str(),
                s["state"].get<std::string>().c_str(), when.c_str(), s.value("tz", "UTC").c_str(),
                s["catch_up"].get<std::string>().c_str(),
                s["next_tick"].is_null() ? "-" : s["next_tick"].get<std::string>().c_str(),
                s["last_fire"].is_null() ? "-" : s["last_fire"].get<std::string>().c_str());
  }
  return kExitOk;
}

}  // namespace gatos::cli
