// Scheduling in JobService: admission limits at submit, the workers seen
// serving each pool, and the pools reply (docs/scheduling.md). The offer
// order itself is the Scheduler's (gatos/model/scheduler.h).
#include "gatos/ledger/job_service.h"

#include <algorithm>

#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

std::optional<std::string> JobService::Admission(const Op& op, int64_t now) {
  const SubmitOp* submit = std::get_if<SubmitOp>(&op);
  if (!submit) return std::nullopt;
  if (Decision p = scheduler_.AdmitPool(submit->check.manifest.pool.value_or("")); !p.ok()) {
    if (!writer_->live().count(submit->check.job_hex)) return ErrorText(p);
  }
  const std::string& submitter = submit->check.signer_key_hex;
  const EffectiveLimits limits = LimitsFor(writer_->policy().settings.scheduling, submitter);
  if (limits.max_pending <= 0 && limits.per_minute <= 0) return std::nullopt;
  Decision d = scheduler_.Admit(submitter, limits, now);
  if (!d.ok()) {
    // The same job again is a no-op, never refused.
    if (writer_->live().count(submit->check.job_hex)) return std::nullopt;
    auto known = writer_->Find(submit->check.job_hex);
    if (known.ok() && *known) return std::nullopt;
    Log("submission of job " + Short(submit->check.job_hex) + " " + d.message);
    return ErrorText(d);
  }
  scheduler_.Admitted(submitter, limits, now);
  return std::nullopt;
}

std::optional<std::string> JobService::AdmitFire(const std::string& signer_hex, int64_t now) {
  const EffectiveLimits limits = LimitsFor(writer_->policy().settings.scheduling, signer_hex);
  if (limits.max_pending <= 0 && limits.per_minute <= 0) return std::nullopt;
  Decision d = scheduler_.Admit(signer_hex, limits, now);
  if (!d.ok()) return d.message;
  scheduler_.Admitted(signer_hex, limits, now);
  return std::nullopt;
}

void JobService::NoteWorker(const std::string& worker_hex, std::vector<std::string> pools, int64_t now_ms) {
  std::lock_guard<std::mutex> l(workers_mu_);
  if (!workers_.count(worker_hex) && workers_.size() >= kMaxKnownWorkers) {
    // Full: forget the workers not heard of for a while (at most once a
    // second), and while it is still full of live ones ignore new ones. A
    // flood of made-up workers can neither grow the map nor cost a scan
    // per message.
    if (now_ms - workers_pruned_ms_ >= 1000) {
      workers_pruned_ms_ = now_ms;
      std::erase_if(workers_, [&](const auto& w) { return now_ms - w.second.seen_ms > kWorkerLiveMs; });
    }
    if (workers_.size() >= kMaxKnownWorkers) return;
  }
  workers_[worker_hex] = {std::move(pools), now_ms};
}

std::map<std::string, int64_t> JobService::LiveWorkersByPool(int64_t now_ms) const {
  std::map<std::string, int64_t> out;
  std::lock_guard<std::mutex> l(workers_mu_);
  for (const auto& [hex, w] : workers_) {
    if (now_ms - w.seen_ms > kWorkerLiveMs) continue;
    for (const auto& p : w.pools) ++out[p];
  }
  return out;
}

std::string JobService::PoolsReply(int64_t now) {
  const SchedulingPolicy& sched = writer_->policy().settings.scheduling;
  std::map<std::string, PoolCounts> counts = scheduler_.Pools();
  std::map<std::string, int64_t> workers = LiveWorkersByPool(now);
  std::set<std::string> names = {kDefaultPool};
  for (const auto& [p, c] : counts) names.insert(p);
  for (const auto& [p, n] : workers) names.insert(p);
  names.insert(sched.paused.begin(), sched.paused.end());
  for (const auto& [p, n] : sched.pool_max_running) names.insert(p);
  json pools = json::array();
  for (const std::string& p : names) {
    if (pools.size() >= 1000) break;  // heartbeats may name many; the reply stays bounded
    PoolCounts c = counts.count(p) ? counts[p] : PoolCounts{};
    json e = {{"pool", p},
              {"pending", c.queued + c.offered},
              {"offered", c.offered},
              {"running", c.running},
              {"paused", sched.paused.count(p) > 0},
              {"workers", workers.count(p) ? workers[p] : 0}};
    auto lim = sched.pool_max_running.find(p);
    if (lim != sched.pool_max_running.end()) e["max_running"] = lim->second;
    pools.push_back(std::move(e));
  }
  // Usage against the limits, the busiest submitters first (at most 100).
  std::vector<std::pair<int64_t, std::string>> busiest;
  const auto usage = scheduler_.Submitters();
  for (const auto& [sub, u] : usage) busiest.push_back({-(u.first + u.second), sub});
  std::sort(busiest.begin(), busiest.end());
  json submitters = json::array();
  for (size_t i = 0; i < busiest.size() && i < 100; ++i) {
    const std::string& sub = busiest[i].second;
    const EffectiveLimits l = LimitsFor(sched, sub);
    submitters.push_back({{"submitter", sub.empty() ? std::string("(unsigned)") : "ed25519:" + sub},
                          {"pending", usage.at(sub).first},
                          {"running", usage.at(sub).second},
                          {"max_pending", l.max_pending},
                          {"max_running", l.max_running},
                          {"per_minute", l.per_minute}});
  }
  json reply = rpc::OkReply();
  reply["pools"] = std::move(pools);
  reply["submitters"] = std::move(submitters);
  reply["now_ms"] = now;
  return rpc::Dump(reply);
}

}  // namespace gatos
