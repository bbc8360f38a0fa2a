#include "gatos/model/scheduler.h"

#include <algorithm>

namespace gatos {
namespace {

std::string PoolName(std::string_view pool) { return pool.empty() ? std::string(kDefaultPool) : std::string(pool); }

std::string ShortKey(std::string_view hex) {
  return hex.empty() ? std::string("(unsigned)") : "ed25519:" + std::string(hex.substr(0, 16));
}

}  // namespace

Decision Scheduler::AdmitPool(std::string_view pool) const {
  const std::string name = PoolName(pool);
  if (pools_.count(name) || pools_.size() < kMaxLivePools) return {};
  return Decision::Error(TransitionError::kInvalid,
                         "refused: pool " + name + " would be a pool beyond this ledger's " +
                             std::to_string(kMaxLivePools) + " pools with live jobs");
}

void Scheduler::Leave(Entry& e) {
  PoolState& ps = pools_[e.pool];
  SubmitterState& ss = submitters_[e.submitter];
  switch (e.state) {
    case State::kQueued:
      --ps.counts.queued;
      --ss.pending;
      break;
    case State::kOffered:
      --ps.counts.offered;
      --ss.offered;
      --ss.pending;
      break;
    case State::kRunning:
      --ps.counts.running;
      --ss.running;
      break;
  }
}

void Scheduler::Forget(const std::string& pool) {
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  const PoolCounts& c = it->second.counts;
  if (c.queued == 0 && c.offered == 0 && c.running == 0) pools_.erase(it);
}

void Scheduler::Enqueue(const std::string& job, Entry& e) {
  e.state = State::kQueued;
  e.gen = next_gen_++;
  PoolState& ps = pools_[e.pool];
  ++ps.counts.queued;
  ++submitters_[e.submitter].pending;
  Level& level = ps.levels[e.priority];
  auto& q = level.by_submitter[e.submitter];
  if (q.empty()) level.turn.push_back(e.submitter);
  q.push_back({job, e.gen});
}

void Scheduler::Ready(const ScheduledJob& j) {
  auto it = jobs_.find(j.job_hex);
  if (it != jobs_.end()) {
    if (it->second.state != State::kRunning) return;
    Leave(it->second);
    Enqueue(j.job_hex, it->second);
    return;
  }
  Entry& e = jobs_[j.job_hex];
  e.pool = PoolName(j.pool);
  e.submitter = j.submitter;
  e.priority = std::clamp<int64_t>(j.priority, 0, kMaxPriority);
  Enqueue(j.job_hex, e);
}

void Scheduler::Running(const ScheduledJob& j, int64_t now_ms) {
  auto it = jobs_.find(j.job_hex);
  if (it == jobs_.end()) {
    Entry& e = jobs_[j.job_hex];
    e.pool = PoolName(j.pool);
    e.submitter = j.submitter;
    e.priority = std::clamp<int64_t>(j.priority, 0, kMaxPriority);
    e.state = State::kRunning;
    ++pools_[e.pool].counts.running;
    ++submitters_[e.submitter].running;
    return;
  }
  Entry& e = it->second;
  if (e.state == State::kRunning) return;
  Leave(e);
  e.state = State::kRunning;
  PoolState& ps = pools_[e.pool];
  ++ps.counts.running;
  ++submitters_[e.submitter].running;
  ps.claims.push_back(now_ms);
}

void Scheduler::Remove(std::string_view job_hex) {
  auto it = jobs_.find(std::string(job_hex));
  if (it == jobs_.end()) return;
  Leave(it->second);
  const std::string pool = it->second.pool;
  jobs_.erase(it);
  Forget(pool);  // a pool without live jobs holds nothing (its stale queue entries go too)
}

bool Scheduler::SubmitterBlocked(const std::string& submitter, const SchedulingPolicy& policy) const {
  const int64_t max = LimitsFor(policy, submitter).max_running;
  if (max <= 0) return false;
  auto it = submitters_.find(submitter);
  return it != submitters_.end() && it->second.running + it->second.offered >= max;
}

bool Scheduler::TakeFrom(PoolState& ps, Level& level, const SchedulingPolicy& policy, std::string* job) {
  std::vector<std::string> blocked;
  bool found = false;
  const size_t n = level.turn.size();
  for (size_t i = 0; i < n && !found; ++i) {
    std::string sub = std::move(level.turn.front());
    level.turn.pop_front();
    auto qi = level.by_submitter.find(sub);
    if (qi == level.by_submitter.end()) continue;
    auto& q = qi->second;
    while (!q.empty()) {
      auto e = jobs_.find(q.front().job);
      if (e != jobs_.end() && e->second.state == State::kQueued && e->second.gen == q.front().gen) break;
      q.pop_front();  // stale: claimed, removed or queued again since
    }
    if (q.empty()) {
      level.by_submitter.erase(qi);
      continue;
    }
    if (SubmitterBlocked(sub, policy)) {
      blocked.push_back(std::move(sub));
      continue;
    }
    *job = q.front().job;
    q.pop_front();
    found = true;
    if (q.empty()) {
      level.by_submitter.erase(qi);
    } else {
      level.turn.push_back(std::move(sub));
    }
  }
  // Blocked submitters keep their turn: they come first once they may run.
  for (auto it = blocked.rbegin(); it != blocked.rend(); ++it) level.turn.push_front(std::move(*it));
  (void)ps;
  return found;
}

int64_t Scheduler::Window(std::string_view pool, int64_t now_ms) {
  auto it = pools_.find(PoolName(pool));
  if (it == pools_.end()) return kMinWindow;
  auto& claims = it->second.claims;
  while (!claims.empty() && claims.front() <= now_ms - kWindowRateMs) claims.pop_front();
  return std::clamp<int64_t>(static_cast<int64_t>(claims.size()), kMinWindow, kMaxWindow);
}

std::vector<std::string> Scheduler::Next(const SchedulingPolicy& policy, int64_t now_ms) {
  std::vector<std::string> out;
  for (auto& [pool, ps] : pools_) {
    if (ps.counts.queued <= 0 || policy.paused.count(pool)) continue;
    const int64_t window = fixed_window_ > 0 ? fixed_window_ : Window(pool, now_ms);
    auto lim = policy.pool_max_running.find(pool);
    const int64_t pool_max = lim == policy.pool_max_running.end() ? 0 : lim->second;
    while (ps.counts.offered < window && ps.counts.queued > 0 &&
           (pool_max <= 0 || ps.counts.running + ps.counts.offered < pool_max)) {
      std::string job;
      bool found = false;
      for (auto li = ps.levels.begin(); li != ps.levels.end() && !found;) {
        found = TakeFrom(ps, li->second, policy, &job);
        if (li->second.turn.empty()) {
          li = ps.levels.erase(li);
        } else {
          ++li;
        }
      }
      if (!found) break;
      Entry& e = jobs_[job];
      e.state = State::kOffered;
      --ps.counts.queued;
      ++ps.counts.offered;
      ++submitters_[e.submitter].offered;
      out.push_back(std::move(job));
    }
  }
  return out;
}

Decision Scheduler::Admit(std::string_view submitter, const EffectiveLimits& limits, int64_t now_ms) {
  auto it = submitters_.find(std::string(submitter));
  if (it == submitters_.end()) return {};  // nothing pending, nothing admitted: under every limit
  SubmitterState& ss = it->second;
  while (!ss.admitted.empty() && ss.admitted.front() <= now_ms - 60'000) ss.admitted.pop_front();
  const int64_t pending = ss.pending + ss.admitting;
  if (limits.max_pending > 0 && pending >= limits.max_pending) {
    return Decision::Error(TransitionError::kInvalid,
                           "refused: submitter " + ShortKey(submitter) + " has " + std::to_string(pending) +
                               " pending jobs (max_pending " + std::to_string(limits.max_pending) + ")");
  }
  const int64_t recent = static_cast<int64_t>(ss.admitted.size());
  if (limits.per_minute > 0 && recent >= limits.per_minute) {
    return Decision::Error(TransitionError::kInvalid,
                           "refused: submitter " + ShortKey(submitter) + " submitted " + std::to_string(recent) +
                               " jobs in the last minute (per_minute " + std::to_string(limits.per_minute) + ")");
  }
  return {};
}

void Scheduler::Admitted(std::string_view submitter, const EffectiveLimits& limits, int64_t now_ms) {
  if (limits.max_pending <= 0 && limits.per_minute <= 0) return;
  SubmitterState& ss = submitters_[std::string(submitter)];
  ++ss.admitting;
  if (limits.per_minute > 0) ss.admitted.push_back(now_ms);
}

void Scheduler::EndBatch() {
  for (auto& [sub, ss] : submitters_) ss.admitting = 0;
}

PoolCounts Scheduler::Pool(std::string_view pool) const {
  auto it = pools_.find(PoolName(pool));
  return it == pools_.end() ? PoolCounts{} : it->second.counts;
}

std::map<std::string, PoolCounts> Scheduler::Pools() const {
  std::map<std::string, PoolCounts> out;
  for (const auto& [pool, ps] : pools_) out[pool] = ps.counts;
  return out;
}

int64_t Scheduler::Pending(std::string_view submitter) const {
  auto it = submitters_.find(std::string(submitter));
  return it == submitters_.end() ? 0 : it->second.pending;
}

std::map<std::string, std::pair<int64_t, int64_t>> Scheduler::Submitters() const {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const auto& [sub, ss] : submitters_) {
    if (ss.pending > 0 || ss.running > 0) out[sub] = {ss.pending, ss.running};
  }
  return out;
}

int64_t Scheduler::RunningOf(std::string_view submitter) const {
  auto it = submitters_.find(std::string(submitter));
  return it == submitters_.end() ? 0 : it->second.running;
}

std::string_view Scheduler::StateOf(std::string_view job_hex) const {
  auto it = jobs_.find(std::string(job_hex));
  if (it == jobs_.end()) return "";
  switch (it->second.state) {
    case State::kQueued: return "queued";
    case State::kOffered: return "offered";
    case State::kRunning: return "running";
  }
  return "";
}

}  // namespace gatos
