// Fires checked by the auditor (docs/scheduling.md, "Firing";
// docs/auditor-guide.md, "Schedules"): each fire is a job the ledger
// created for a tick of the schedule in force, active, due, after the
// schedule's previous fire; and the ticks an active schedule let pass
// without a fire are counted as missed (a warning).
#include "gatos/audit/log_audit.h"
#include "gatos/ledger/checks.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/time_format.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

std::optional<JobRecord> Replay::Fire(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  fire_schedule_.clear();
  fire_previous_.clear();
  const LogEntry* job = nullptr;
  const LogEntry* chain = nullptr;
  for (const auto& x : t.entries) {
    if (x.ref == JobRef(t.job_hex, "job")) job = &x;
    if (x.ref.rfind(kFirePrefix, 0) == 0) chain = &x;
  }
  if (old) {
    Fail(t, "fire", "job " + Short(t.job_hex) + " is fired again (it exists since " +
                        FormatRfc3339Millis(old->submitted_ms) + "): a tick or a move fires once");
    return std::nullopt;
  }
  if (!job || job->new_id.empty() || !chain || chain->new_id != job->new_id) {
    Fail(t, "log_batch", "a fire must create " + JobRef(t.job_hex, "job") + " and move refs/gatos/fires/<name> to it");
    return std::nullopt;
  }
  auto fire = ParseFireCommit(lookup_, job->new_id);
  if (!fire.ok()) {
    Fail(t, "fire", fire.status().message());
    return std::nullopt;
  }
  const std::string name = chain->ref.substr(std::strlen(kFirePrefix));
  if (fire->schedule != name || fire->job_hex != t.job_hex) {
    Fail(t, "fire", "fire " + Short(fire->commit) + " of schedule " + fire->schedule.substr(0, 64) + " (job " +
                        Short(fire->job_hex) + ") is recorded as " + chain->ref + " and job " + Short(t.job_hex));
    return std::nullopt;
  }
  // The chain of fires: the line's old value, the commit's second parent
  // and the replay's record of the ref agree.
  auto known = notes_.find(chain->ref);
  const std::string previous = known == notes_.end() ? "" : known->second;
  if ((known != notes_.end() || !rep_->incremental) && chain->old_id != previous) {
    Fail(t, "fire", chain->ref + " was " + (previous.empty() ? "absent" : Short(previous)) + ", the batch says " +
                        (chain->old_id.empty() ? "absent" : Short(chain->old_id)));
    return std::nullopt;
  }
  if (fire->previous_fire != chain->old_id) {
    Fail(t, "fire", "fire " + Short(fire->commit) + " does not follow the schedule's previous fire " +
                        (chain->old_id.empty() ? "(none)" : Short(chain->old_id)));
    return std::nullopt;
  }
  // The schedule in force: the one the replay recorded at
  // refs/gatos/schedules/<name>. A fire of a schedule the log never
  // recorded (or recorded at another commit) is refused.
  auto in_force = notes_.find(kSchedulePrefix + name);
  if (in_force == notes_.end() && !rep_->incremental) {
    Fail(t, "fire", "fire " + Short(fire->commit) + " of schedule " + name + ", which the log does not record");
    return std::nullopt;
  }
  if (in_force != notes_.end() && in_force->second != fire->schedule_commit) {
    Fail(t, "fire", "fire " + Short(fire->commit) + " names schedule commit " + Short(fire->schedule_commit) +
                        ", but " + name + " is at " + Short(in_force->second));
    return std::nullopt;
  }
  auto sc = CheckScheduleCommit(lookup_, fire->schedule_commit);
  if (!sc.ok()) {
    Fail(t, "fire", "fire " + Short(fire->commit) + ": its schedule: " + sc.status().message());
    return std::nullopt;
  }
  auto clock = LoadScheduleClock(sc->spec);
  if (!clock.ok()) {
    Fail(t, "fire", "schedule " + name + ": " + clock.status().message());
    return std::nullopt;
  }
  Decision d = CheckFire(*fire, *sc, *clock, batch_key_.Hex(), now_);
  if (!d.ok()) {
    Fail(t, "fire", d.message);
    return std::nullopt;
  }
  if (fire->move) {
    // A trigger fires a ref that moved from the positions the ledger
    // recorded (its baseline or its last reading) under this schedule commit.
    const TriggerMove& mv = *fire->move;
    auto pos = watch_positions_.find(name);
    const bool known = pos != watch_positions_.end() && pos->second.schedule_commit == fire->schedule_commit &&
                       pos->second.refs.count(mv.url);
    if (!known && !rep_->incremental) {
      Fail(t, "fire", "fire " + Short(fire->commit) + " of trigger " + name +
                          " precedes the positions of its watched repository (a trigger's first reading fires nothing)");
      return std::nullopt;
    }
    if (known) {
      const auto& refs = pos->second.refs.at(mv.url);
      auto was = refs.find(mv.ref);
      if (was != refs.end() && was->second == mv.commit) {
        Fail(t, "fire", "fire " + Short(fire->commit) + ": " + mv.ref.substr(0, 200) + " was recorded at " +
                            Short(mv.commit) + " already; a trigger fires a ref that moved");
        return std::nullopt;
      }
    }
  }
  int64_t last = 0;
  if (!chain->old_id.empty()) {
    auto at = FiredAtOf(lookup_, chain->old_id);
    if (!at.ok()) {
      Fail(t, "fire", "the previous fire " + Short(chain->old_id) + ": " + at.status().message());
      return std::nullopt;
    }
    last = *at;
  }
  if (Status p = CheckManifestPolicy(fire->manifest, pol_.policy); !p.ok()) {
    Fail(t, "fire", "fire of job " + Short(t.job_hex) + " of schedule " + name +
                        ": the policy in force refuses its job: " + p.message());
    return std::nullopt;
  }
  AppliedTransition a;
  d = gatos::ApplyTransition(t.job_hex, old,
                             SubmitTransition{t.job_hex, fire->commit, sc->signer_hex,
                                              fire->manifest.pool.value_or(""), kDefaultPriority, name,
                                              fire->tick_ms, last, fire->move.has_value()},
                             Rules(), &a);
  if (!d.ok()) {
    Fail(t, "fire", "fire of job " + Short(t.job_hex) + ": " + d.message);
    return std::nullopt;
  }
  ++rep_->fires;
  fire_schedule_ = name;
  fire_previous_ = chain->old_id;
  notes_[chain->ref] = fire->commit;
  // The ticks between the previous fire (or the activation) and this one.
  auto track = schedules_.find(name);
  if (track != schedules_.end() && track->second.active) {
    CountMissed(name, fire->tick_ms - 1);
    track->second.from_ms = fire->tick_ms;
  }
  return a.record;
}

void Replay::WatchChange(const LoggedTransition& t, const LogEntry& e) {
  const std::string name = e.ref.substr(std::strlen(kWatchPrefix));
  auto w = ParseWatchCommit(lookup_, e.new_id);
  if (!w.ok()) {
    Fail(t, "watch_commit", e.ref + ": " + w.status().message());
    return;
  }
  if (w->signer_hex != batch_key_.Hex()) {
    Fail(t, "watch_commit", e.ref + " -> " + Short(e.new_id) + " is not signed by the ledger key");
    return;
  }
  if (w->parent != e.old_id) {
    Fail(t, "watch_commit", e.ref + " -> " + Short(e.new_id) + " does not follow the previous positions " +
                                (e.old_id.empty() ? "(none)" : Short(e.old_id)));
    return;
  }
  auto in_force = notes_.find(kSchedulePrefix + name);
  if ((in_force != notes_.end() || !rep_->incremental) &&
      (in_force == notes_.end() || in_force->second != w->positions.schedule_commit)) {
    Fail(t, "watch_commit", e.ref + " -> " + Short(e.new_id) + " records positions under schedule commit " +
                                Short(w->positions.schedule_commit) + ", not the schedule " + name + " in force");
    return;
  }
  watch_positions_[name] = w->positions;
}

void Replay::TrackSchedule(const ScheduleCommit& next) {
  ScheduleTrack& s = schedules_[next.spec.name];
  // Until this change (the batch time, less the grace a tick has to fire).
  if (s.active) CountMissed(next.spec.name, now_ - kFireGraceMs);
  s.active = next.state == "active";
  if (!s.active) return;
  auto clock = LoadScheduleClock(next.spec);
  if (!clock.ok()) {
    s.active = false;
    return;
  }
  s.clock = *clock;
  s.from_ms = std::max(s.from_ms, next.time_ms);
}

void Replay::CountMissed(const std::string& name, int64_t until_ms) {
  ScheduleTrack& s = schedules_[name];
  if (!s.active || !s.clock || until_ms <= s.from_ms) return;
  constexpr int64_t kCap = 100'000;
  int64_t count = 0, first = 0, last = 0;
  for (auto t = s.clock->Next(s.from_ms); t && *t <= until_ms && count < kCap; t = s.clock->Next(*t)) {
    if (!count) first = *t;
    last = *t;
    ++count;
  }
  s.from_ms = std::max(s.from_ms, until_ms);
  if (!count) return;
  for (auto& m : rep_->missed_ticks) {
    if (m.schedule != name) continue;
    m.count += count;
    m.last_ms = last;
    return;
  }
  rep_->missed_ticks.push_back({name, count, first, last});
}

void Replay::FinishSchedules() {
  for (auto& [name, s] : schedules_) {
    if (s.active) CountMissed(name, now_ - kFireGraceMs);
  }
}

}  // namespace audit_internal
}  // namespace gatos
