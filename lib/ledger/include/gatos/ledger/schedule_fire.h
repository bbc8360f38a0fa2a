// Fires (docs/scheduling.md, "Firing"; docs/ledger-format.md, "Fire
// commits"): the job commit the ledger creates for one tick of a schedule.
//
//   tree:     job.yaml  (FiredManifest: the template and the tick's input)
//   parents:  the schedule commit in force, then the schedule's previous
//             fire (none for the first), so refs/gatos/fires/<name> is the
//             chain of every fire of the schedule
//   message:  gatos: fire nightly-scan at 2026-11-29T02:00:00.000Z
//
//             Job-Id: blake3:<hex>
//             Schedule: nightly-scan
//             Fired-At: 2026-11-29T02:00:00.000Z
//   signed by the ledger key; committer time the tick.
//
// A trigger's fire (docs/scheduling.md, "Triggers") is the same commit for
// a moved ref instead of a tick: its job is TriggeredManifest (the template
// with the watched input pinned to the commit the ref moved to), Fired-At is
// when the ledger saw the move (the batch time), and three more trailers
// say what moved:
//
//             Trigger-Url: /srv/repos/app
//             Trigger-Ref: refs/heads/main
//             Trigger-Commit: <40 or 64 hex>
//
// The ledger builds it (JobService's schedule timer) and the auditor checks
// it (CheckFire) against the schedule commit it names.
//
// Thread-safety: pure functions.
#ifndef GATOS_LEDGER_SCHEDULE_FIRE_H_
#define GATOS_LEDGER_SCHEDULE_FIRE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/model/decision.h"
#include "gatos/model/manifest.h"
#include "gatos/model/schedule.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kScheduleTrailer[] = "Schedule";
inline constexpr char kFiredAtTrailer[] = "Fired-At";
inline constexpr char kTriggerUrlTrailer[] = "Trigger-Url";
inline constexpr char kTriggerRefTrailer[] = "Trigger-Ref";
inline constexpr char kTriggerCommitTrailer[] = "Trigger-Commit";

// A watched ref that moved: what a trigger fires for.
struct TriggerMove {
  std::string url;
  std::string ref;
  std::string commit;
  bool operator==(const TriggerMove&) const = default;
};

// The job a fire creates: FiredManifest for a tick, TriggeredManifest for a
// move.
Manifest FireManifest(const ScheduleSpec& spec, int64_t tick_ms, const std::optional<TriggerMove>& move);

// The schedule's clock, its zone loaded from the zoneinfo files
// (gatos/sys/zoneinfo.h) for a cron schedule.
Result<ScheduleClock> LoadScheduleClock(const ScheduleSpec& spec);

// The fire commit (first) and its tree and job.yaml blob; `move` for a
// trigger's fire.
Result<std::vector<GitObject>> BuildFireCommit(const ScheduleCommit& schedule, int64_t tick_ms,
                                               const std::string& previous_fire, const Ed25519PrivateKey& key,
                                               const std::optional<TriggerMove>& move = std::nullopt);

// A fire commit's facts, parsed (not judged).
struct FireCommit {
  std::string commit;
  std::string job_hex;
  std::string schedule;         // its Schedule trailer
  int64_t tick_ms = 0;          // its Fired-At trailer
  std::string schedule_commit;  // its first parent
  std::string previous_fire;    // its second parent, "" for none
  std::string signer_hex;       // the key whose signature verifies, "" unsigned
  Manifest manifest;
  std::optional<TriggerMove> move;  // its Trigger-* trailers (all three or none)
};

// Whether the commit message carries a Schedule trailer (a fire, not a
// submitted job).
bool IsFireMessage(std::string_view message);

// Parses a fire commit: job.yaml a regular file that parses and hashes to
// its Job-Id, the three trailers once each (and the three Trigger-*
// trailers once each or not at all), one or two parents, and a signature
// that verifies when present. InvalidArgument with the reason.
Result<FireCommit> ParseFireCommit(const ObjectLookup& lookup, const std::string& commit_id);

// The last tick fired by the fire commit `commit` (its Fired-At).
Result<int64_t> FiredAtOf(const ObjectLookup& lookup, const std::string& commit);

// Whether `fire` is a fire of `schedule` the ledger may create at `now_ms`:
// signed by `ledger_key`; naming `schedule` (active, the same name) as its
// first parent; its job the template with this tick's input
// (FiredManifest); the tick one of the schedule's (clock), after the
// schedule commit's time and not after `now_ms`. A trigger's fire instead:
// its schedule is a trigger watching Trigger-Url with a pattern matching
// Trigger-Ref, its job TriggeredManifest of that move, Fired-At after the
// schedule commit's time and not after `now_ms`. kInvalid / kUnauthorized
// with the reason.
Decision CheckFire(const FireCommit& fire, const ScheduleCommit& schedule, const ScheduleClock& clock,
                   const std::string& ledger_key_hex, int64_t now_ms);

// The ledger's schedules as `gatos schedule ls --json` and the dashboard's
// /schedules.json show them, by name: name, state, every | cron and tz,
// catch_up, signer, commit, template, next_tick (active ones), last_fire and
// last_fire_commit (refs/gatos/fires/<name>), and overdue: ticks of an
// active schedule older than the grace (kFireGraceMs) after its last fire
// (or its commit) at `now_ms`, which have not fired (0 while gatosd keeps
// up). Removed schedules only with `all`. Unreadable ones are skipped and
// named in *problems.
nlohmann::json ScheduleListJson(Ledger& ledger, bool all, int64_t now_ms, std::vector<std::string>* problems);

}  // namespace gatos

#endif  // GATOS_LEDGER_SCHEDULE_FIRE_H_
