// Triggers that fire (docs/scheduling.md, "Triggers"): each sweep takes the
// WatchPoller's readings of the watched repositories, fires each watched
// ref that moved since the positions the ledger last recorded
// (refs/gatos/watch/<name>), then records the new positions. The first
// reading of a url under a schedule commit is a baseline: recorded, not
// fired. The positions are read from the refs when the schedules are
// (at start, after each schedule change), so a restart, a crash or a new
// leader continues from what the log recorded.
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/ledger/watch_positions.h"
#include "gatos/model/git_input.h"
#include "gatos/model/refs.h"
#include "gatos/model/schedule.h"
#include "gatos/model/time_format.h"
#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

void JobService::LoadTrigger(const ScheduleCommit& sc) {
  Ledger& ledger = writer_->ledger();
  ActiveTrigger t{sc, "", {}, {}};
  auto at = ledger.ResolveRef(kWatchPrefix + sc.spec.name);
  if (!at.ok()) {
    Log("schedule " + sc.spec.name +
        ": cannot read its watched positions: " + at.status().message());
    schedules_stale_ = true;
    return;
  }
  if (!at->empty()) {
    auto w = ParseWatchCommit(LedgerLookup(&ledger), *at);
    if (!w.ok()) {
      Log("schedule " + sc.spec.name + ": its watched positions: " + w.status().message());
      return;
    }
    t.positions_commit = *at;
    t.positions = w->positions;
  }
  // Positions recorded under another commit of the schedule (before a
  // pause, say) are not this one's: its first readings are a new baseline.
  if (t.positions.schedule_commit != sc.commit) t.positions = WatchPositions{sc.commit, {}};
  triggers_.emplace(sc.spec.name, std::move(t));
}

void JobService::FireTriggers(int64_t now) {
  if (!poller_) return;
  std::vector<WatchPoller::Observation> seen = poller_->Take();
  if (seen.empty()) return;
  struct Pending {
    std::vector<Op> ops;
    std::vector<std::pair<std::string, TriggerMove>> moves;  // (schedule, move) of each op
  } p;
  std::map<std::string, WatchPositions> next;  // schedules whose positions change
  for (auto& o : seen) {
    auto it = triggers_.find(o.schedule);
    if (it == triggers_.end() || it->second.commit.commit != o.schedule_commit) continue;
    ActiveTrigger& t = it->second;
    if (!o.ok) {
      std::string& last = t.errors[o.url];
      if (last != o.error) {
        Log("schedule " + o.schedule + ": cannot read " + GitUrlKey(o.url) + ": " + o.error);
        last = o.error;
      }
      continue;
    }
    if (t.errors.erase(o.url))
      Log("schedule " + o.schedule + ": reads " + GitUrlKey(o.url) + " again");
    // A schedule commit dated after now (within the allowed skew) fires
    // nothing until then: its fires must come after it.
    if (now <= t.commit.time_ms) continue;
    const WatchSpec* w = nullptr;
    for (const auto& x : t.commit.spec.watch) {
      if (x.url == o.url) w = &x;
    }
    if (!w) continue;
    std::map<std::string, std::string> refs = WatchedRefs(*w, o.refs);
    WatchPositions& pos = next.emplace(o.schedule, t.positions).first->second;
    auto known = pos.refs.find(o.url);
    if (known == pos.refs.end()) {
      Log("schedule " + o.schedule + ": watching " + std::to_string(refs.size()) + " ref(s) of " +
          GitUrlKey(o.url) +
          " from now on (their current commits are the baseline; nothing fires for them)");
      pos.refs[o.url] = refs;
      continue;
    }
    for (const auto& [ref, commit] : refs) {
      auto was = known->second.find(ref);
      if (was != known->second.end() && was->second == commit) continue;
      if (p.ops.size() >= kMaxFiresPerPass) break;  // the rest fire at the next reading
      // A fire is a job of the schedule's signer: it counts against that
      // signer's max_pending and per_minute as a submission does. Refused,
      // the ref keeps no position and fires at a later reading, once
      // under the limits (said once per refusal, not every reading).
      if (std::optional<std::string> refused = AdmitFire(t.commit.signer_hex, now)) {
        std::string& last = t.refused[o.url + " " + ref];
        if (last != *refused) {
          Log("schedule " + o.schedule + ": " + ref + " at " + Short(commit) + " not fired yet: " + *refused);
          last = *refused;
        }
        continue;
      }
      t.refused.erase(o.url + " " + ref);
      p.moves.push_back({o.schedule, TriggerMove{o.url, ref, commit}});
      p.ops.push_back(FireOp{t.commit, 0, TriggerMove{o.url, ref, commit}});
    }
    // A moved ref gets its new position once its fire is recorded; until
    // then it has none, so the next reading fires it (a fire refused now,
    // or beyond this pass's limit, is tried again).
    std::map<std::string, std::string> after;
    for (const auto& [ref, commit] : refs) {
      auto was = known->second.find(ref);
      if (was != known->second.end() && was->second == commit) after[ref] = commit;
    }
    known->second = std::move(after);
  }
  if (!p.ops.empty()) {
    BatchStats stats;
    auto results = writer_->Apply(p.ops, &stats);
    scheduler_.EndBatch();  // the fires admitted are tracked below, or were refused
    if (stats.seq)
      observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
    for (size_t i = 0; i < results.size(); ++i) {
      const OpResult& r = results[i];
      const auto& [name, mv] = p.moves[i];
      if (!r.outcome.ok()) {
        Log("schedule " + name + ": " + mv.ref + " at " + Short(mv.commit) +
            " not fired: " + r.outcome.message);
        if (r.outcome.error == TransitionError::kLostRace) schedules_stale_ = true;
        continue;
      }
      if (r.record) Track(*r.record);
      if (!r.existing)
        Log("schedule " + name + " fired job " + Short(r.job_hex) + " (" + mv.ref + " moved to " +
            Short(mv.commit) + ")");
      next[name].refs[mv.url][mv.ref] = mv.commit;
    }
  }
  // The new positions, after the fires they caused.
  std::vector<Op> notes;
  std::vector<std::string> names;
  for (auto& [name, pos] : next) {
    ActiveTrigger& t = triggers_.at(name);
    if (pos == t.positions && !t.positions_commit.empty()) continue;
    auto objects =
        BuildWatchCommit(name, pos, t.positions_commit, writer_->ledger_private_key(), now);
    if (!objects.ok()) {
      Log("schedule " + name + ": cannot build its positions: " + objects.status().message());
      continue;
    }
    notes.push_back(NoteOp{LogKind::kWatch, kWatchPrefix + name, false, std::move(*objects)});
    names.push_back(name);
  }
  if (notes.empty()) return;
  BatchStats stats;
  auto results = writer_->Apply(notes, &stats);
  if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
  for (size_t i = 0; i < results.size(); ++i) {
    ActiveTrigger& t = triggers_.at(names[i]);
    if (!results[i].outcome.ok()) {
      Log("schedule " + names[i] + ": its positions not recorded: " + results[i].outcome.message);
      schedules_stale_ = true;  // read them back from the refs
      continue;
    }
    t.positions_commit = results[i].commit;
    t.positions = next[names[i]];
  }
}

}  // namespace gatos
