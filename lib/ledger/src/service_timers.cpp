// Offers and timers: pending jobs offered (and offered again), expired
// leases of cancelled jobs aborted, finished jobs pruned after the retention.
#include "gatos/ledger/job_service.h"

#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

// ---- offers and timers ----

namespace {

ScheduledJob SchedOf(const JobRecord& r) { return {r.job_hex, r.pool, r.submitter_hex, r.priority}; }

}  // namespace

void JobService::Track(const JobRecord& r) {
  if (!writer_->live().count(r.job_hex)) {
    tracked_.erase(r.job_hex);
    scheduler_.Remove(r.job_hex);
    return;
  }
  const int64_t now = writer_->Now();
  if (!r.worker_hex.empty() && LeaseLive(r, now)) {
    scheduler_.Running(SchedOf(r), now);
  } else if (scheduler_.StateOf(r.job_hex) == "running" || !r.cancel_commit.empty()) {
    // The attempt ended (its next one is queued when it is due), or the job
    // is cancelled: it waits for no offer.
    scheduler_.Remove(r.job_hex);
  }
  Tracked& t = tracked_[r.job_hex];
  t.next_due = 0;
  due_.emplace(0, r.job_hex);
}

void JobService::Offer(const JobRecord& r, int64_t now) {
  Tracked& t = tracked_[r.job_hex];
  int64_t want = r.epoch + 1;
  // The id names the attempt and the epoch the offer opens: an offer of
  // attempt 2 is never dropped as a duplicate of attempt 1's, and a restart
  // that offers the same attempt and epoch again is.
  std::string base = rpc::PendingMsgId(r.job_hex, r.attempt, want);
  std::string id;
  if (t.offered_epoch != want) {
    // Not offered yet for this epoch: the scheduler decides when (Release);
    // look again after a while in case it is still waiting then.
    scheduler_.Ready(SchedOf(r));
    t.next_due = now + options_.republish_ms;
    due_.emplace(t.next_due, r.job_hex);
    return;
  }
  if (now - t.offered_ms >= options_.republish_ms) {
    // Still unclaimed: offered again under a new id, so the stream does not
    // drop it as a duplicate of a message a worker took and lost.
    id = base + ".r" + std::to_string(++t.republished);
  }
  if (!id.empty()) {
    t.offered_ms = now;
    Emit({ServiceEvent::Kind::kJetStream, rpc::PendingSubjectFor(r.pool),
          rpc::EncodePending({r.job_hex, want, r.attempt}), id});
  }
  t.next_due = t.offered_ms + options_.republish_ms;
  due_.emplace(t.next_due, r.job_hex);
}

void JobService::Release(int64_t now) {
  for (const std::string& job : scheduler_.Next(writer_->policy().settings.scheduling, now)) {
    auto it = writer_->live().find(job);
    if (it == writer_->live().end()) {
      scheduler_.Remove(job);
      continue;
    }
    const JobRecord& r = it->second;
    Tracked& t = tracked_[job];
    const int64_t want = r.epoch + 1;
    t.offered_epoch = want;
    t.republished = 0;
    t.offered_ms = now;
    Emit({ServiceEvent::Kind::kJetStream, rpc::PendingSubjectFor(r.pool),
          rpc::EncodePending({r.job_hex, want, r.attempt}), rpc::PendingMsgId(r.job_hex, r.attempt, want)});
    if (r.epoch > 0 && !r.worker_hex.empty()) {
      Log("lease of job " + Short(r.job_hex) + " (epoch " + std::to_string(r.epoch) + ") expired; offered for takeover");
    }
    t.next_due = now + options_.republish_ms;
    due_.emplace(t.next_due, job);
  }
}

void JobService::ProcessDue(int64_t now) {
  std::vector<Op> aborts;
  while (!due_.empty() && due_.begin()->first <= now) {
    const int64_t when = due_.begin()->first;
    const std::string job = due_.begin()->second;
    due_.erase(due_.begin());
    auto tr = tracked_.find(job);
    if (tr == tracked_.end() || tr->second.next_due != when) continue;  // stale entry
    auto it = writer_->live().find(job);
    if (it == writer_->live().end()) {
      tracked_.erase(tr);
      continue;
    }
    const JobRecord& r = it->second;
    auto schedule = [&](int64_t at) {
      tr->second.next_due = at;
      due_.emplace(at, job);
    };
    if (!r.worker_hex.empty()) {
      if (LeaseLive(r, now)) {
        schedule(r.expires_ms);
      } else if (DecideAbort(r, now)) {
        aborts.push_back(AbortOp{job});
        schedule(now + options_.republish_ms);
      } else {
        Offer(r, now);
      }
      continue;
    }
    if (!r.cancel_commit.empty()) {
      tracked_.erase(tr);
      continue;
    }
    if (r.not_before_ms > now) {
      schedule(r.not_before_ms);
      continue;
    }
    Offer(r, now);
  }
  if (!aborts.empty()) ApplyTimerOps(std::move(aborts));
  Release(now);
}

void JobService::ApplyTimerOps(std::vector<Op> ops) {
  BatchStats stats;
  auto results = writer_->Apply(ops, &stats);
  if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
  for (size_t i = 0; i < results.size(); ++i) {
    const OpResult& r = results[i];
    if (!r.outcome.ok()) {
      if (!std::holds_alternative<PruneOp>(ops[i])) Log("timer transition of job " + Short(r.job_hex) + ": " + r.outcome.message);
      continue;
    }
    if (r.record) Track(*r.record);
    if (std::holds_alternative<AbortOp>(ops[i]) && !r.existing) {
      Emit({ServiceEvent::Kind::kJetStream, rpc::kAbortedSubject, rpc::Dump({{"job", "blake3:" + r.job_hex}}),
            r.job_hex + ".a"});
    }
  }
}

void JobService::Sweep() {
  int64_t now = writer_->Now();
  FireSchedules(now);
  ProcessDue(now);
  // Pruning: a crawl through the index, a few records per step, so no sweep
  // costs more than a bounded amount at any ledger size. The steps are paced
  // so that a whole pass takes about a quarter of the retention (a job is
  // pruned at most that long after its retention ends), at least one sweep
  // and at most a minute apart: crawling every sweep decoded over a thousand
  // records a second on an idle ledger, for jobs that stay for days.
  int64_t retention = writer_->policy().settings.retention_ms;
  if (retention > 0 && now >= next_prune_step_ms_) {
    const int64_t jobs = std::max<int64_t>(writer_->stats().jobs - writer_->stats().pruned, 1);
    const double pass_ms = static_cast<double>(retention) / 4.0;
    const double step_ms = pass_ms * static_cast<double>(options_.prune_per_sweep) / static_cast<double>(jobs);
    next_prune_step_ms_ = now + static_cast<int64_t>(std::clamp(step_ms, 0.0, 60'000.0));
    std::vector<Op> prunes;
    size_t seen = 0;
    std::string last;
    Status s = writer_->index().ForEachJob(prune_cursor_, [&](const JobRecord& rec) {
      ++seen;
      last = rec.job_hex;
      if (!writer_->live().count(rec.job_hex) && DecidePrune(rec, writer_->policy().settings, now)) {
        prunes.push_back(PruneOp{rec.job_hex});
      }
      return seen < options_.prune_per_sweep;
    });
    prune_cursor_ = s.ok() && seen >= options_.prune_per_sweep ? last : "";
    if (!prunes.empty()) ApplyTimerOps(std::move(prunes));
  }
  if (now - last_views_sync_ms_ >= options_.views_sync_ms) {
    last_views_sync_ms_ = now;
    Status s = writer_->SyncViews();
    if (!s.ok()) Log("cannot mark the ref view synced: " + s.message());
  }
}


}  // namespace gatos
