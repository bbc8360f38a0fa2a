// Schedules that fire (docs/scheduling.md, "Firing"): each sweep, every
// active schedule whose next tick is due gets its due ticks (DueTicksAt,
// the catch-up rule) applied as fires (FireOp), one log batch per sweep
// (per kMaxFiresPerPass fires).
// The state is read from the refs, so a restart, a crash or a new leader
// continues from the last fire the log recorded.
#include "gatos/ledger/job_service.h"

#include <algorithm>

#include "gatos/ledger/schedule_fire.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"

#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

void JobService::LoadSchedules() {
  schedules_stale_ = false;
  std::map<std::string, ActiveSchedule> next;
  triggers_.clear();
  writer_->FlushViews();
  Ledger& ledger = writer_->ledger();
  auto refs = ledger.ListRefs(kSchedulePrefix);
  if (!refs.ok()) {
    Log("cannot list the schedules: " + refs.status().message());
    schedules_stale_ = true;
    return;
  }
  for (const std::string& ref : *refs) {
    auto id = ledger.ResolveRef(ref);
    if (!id.ok() || id->empty()) continue;
    auto sc = CheckScheduleCommit(LedgerLookup(&ledger), *id);
    if (!sc.ok()) {
      Log(ref + ": " + sc.status().message());
      continue;
    }
    if (sc->state != "active") continue;
    if (sc->spec.is_trigger()) {
      LoadTrigger(*sc);
      continue;
    }
    auto clock = LoadScheduleClock(sc->spec);
    if (!clock.ok()) {
      Log("schedule " + sc->spec.name + " cannot fire: " + clock.status().message());
      continue;
    }
    ActiveSchedule a{*sc, *clock, sc->time_ms, 0};
    // Resumed or new: ticks after its commit. Fired before: after the last
    // fire (the ledger's record, whatever this process remembers).
    auto fire = ledger.ResolveRef(kFirePrefix + sc->spec.name);
    if (fire.ok() && !fire->empty()) {
      auto at = FiredAtOf(LedgerLookup(&ledger), *fire);
      if (!at.ok()) {
        Log("schedule " + sc->spec.name + ": its last fire: " + at.status().message());
        continue;
      }
      a.last_ms = std::max(a.last_ms, *at);
    }
    auto old = schedules_.find(sc->spec.name);
    if (old != schedules_.end() && old->second.commit.commit == sc->commit) {
      a.last_ms = std::max(a.last_ms, old->second.last_ms);  // ticks skipped by the catch-up rule stay skipped
    }
    a.next_ms = a.clock.Next(a.last_ms).value_or(0);
    next.emplace(sc->spec.name, std::move(a));
  }
  schedules_ = std::move(next);
  if (poller_) {
    std::vector<WatchPoller::Watch> watches;
    for (const auto& [name, t] : triggers_) {
      WatchPoller::Watch w{name, t.commit.commit, {}, t.commit.spec.poll_ms};
      for (const auto& x : t.commit.spec.watch) w.urls.push_back(x.url);
      watches.push_back(std::move(w));
    }
    poller_->SetWatches(std::move(watches));
  }
}

void JobService::FireSchedules(int64_t now) {
  if (schedules_stale_) LoadSchedules();
  FireTriggers(now);
  std::vector<Op> ops;
  std::vector<std::pair<std::string, int64_t>> after;  // schedule, its last_ms once fired
  for (auto& [name, s] : schedules_) {
    if (s.next_ms == 0 || s.next_ms > now) continue;
    // A catch-up (`all`) fires what is left of this pass's kMaxFiresPerPass
    // and continues next sweep; on-time ticks of every schedule fire now.
    const size_t room = ops.size() < kMaxFiresPerPass ? kMaxFiresPerPass - ops.size() : 0;
    DueTicks due = DueTicksAt(s.clock, s.commit.spec.catch_up, s.last_ms, now, room);
    if (due.missed > 0) {
      Log("schedule " + name + ": " + std::to_string(due.missed) + " tick(s) since " +
          FormatRfc3339Millis(s.last_ms) + " missed while gatosd was down, skipped (catch_up " +
          std::string(CatchUpName(s.commit.spec.catch_up)) + ")");
    }
    for (int64_t tick : due.fire) {
      if (std::optional<std::string> refused = AdmitFire(s.commit.signer_hex, now)) {
        Log("schedule " + name + ": tick " + TickNonce(tick) + " not fired: " + *refused);
        continue;  // skipped, as a tick the policy refuses
      }
      ops.push_back(FireOp{s.commit, tick});
    }
    after.emplace_back(name, due.after_ms);
  }
  if (ops.empty()) {
    for (const auto& [name, at] : after) {
      ActiveSchedule& s = schedules_.at(name);
      s.last_ms = at;
      s.next_ms = s.clock.Next(at).value_or(0);
    }
    return;
  }
  // Log batches of kMaxFiresPerPass fires at most: a batch's log commit
  // lists each fired job's commit, and a proof bundle carries it.
  std::vector<OpResult> results;
  std::set<std::string> failed;
  for (size_t from = 0; from < ops.size(); from += kMaxFiresPerPass) {
    std::vector<Op> chunk(ops.begin() + static_cast<std::ptrdiff_t>(from),
                          ops.begin() + static_cast<std::ptrdiff_t>(std::min(ops.size(), from + kMaxFiresPerPass)));
    BatchStats stats;
    std::vector<OpResult> part = writer_->Apply(chunk, &stats);
    if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
    const bool wrote = stats.seq != 0 || std::all_of(part.begin(), part.end(), [](const OpResult& r) {
      return r.outcome.ok() || r.outcome.error == TransitionError::kInvalid ||
             r.outcome.error == TransitionError::kUnauthorized;
    });
    for (auto& r : part) results.push_back(std::move(r));
    if (!wrote) {
      // A write failed: later fires would pass the unwritten ones. Their
      // schedules are read again and fire from what the log holds.
      for (size_t i = results.size(); i < ops.size(); ++i) failed.insert(std::get<FireOp>(ops[i]).schedule.spec.name);
      break;
    }
  }
  scheduler_.EndBatch();  // the fires admitted are tracked below, or were refused
  for (size_t i = 0; i < results.size(); ++i) {
    const OpResult& r = results[i];
    const FireOp& op = std::get<FireOp>(ops[i]);
    if (!r.outcome.ok()) {
      Log("schedule " + op.schedule.spec.name + ": tick " + TickNonce(op.tick_ms) + " not fired: " +
          r.outcome.message);
      // Refused by the policy in force: that tick is skipped (gatos verify
      // reports it missed) and the next one is tried. Anything else (the
      // schedule changed, a write failed): read it again and retry.
      if (r.outcome.error != TransitionError::kInvalid && r.outcome.error != TransitionError::kUnauthorized) {
        failed.insert(op.schedule.spec.name);
      }
      continue;
    }
    if (r.record) Track(*r.record);
    if (!r.existing) {
      Log("schedule " + op.schedule.spec.name + " fired job " + Short(r.job_hex) + " (tick " +
          TickNonce(op.tick_ms) + ")");
    }
  }
  for (const auto& [name, at] : after) {
    if (failed.count(name)) {
      // Read the schedule and its last fire again (paused or changed in
      // between, or a write that failed): the next sweep tries again.
      schedules_stale_ = true;
      continue;
    }
    ActiveSchedule& s = schedules_.at(name);
    s.last_ms = at;
    s.next_ms = s.clock.Next(at).value_or(0);
  }
}

}  // namespace gatos
