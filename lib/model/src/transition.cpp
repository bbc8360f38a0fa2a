#include "gatos/model/transition.h"

#include "gatos/model/public_key.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"

namespace gatos {
namespace {

Decision Fail(TransitionError e, std::string m) { return Decision{e, std::move(m)}; }

std::string Short(std::string_view hex) { return std::string(hex.substr(0, 12)); }

// The current attempt holds no lease any more. The record keeps no
// deadline without a holder (its encoding has none: EncodeJobRecord), so a
// record read back from the index is the same as the one in memory.
void EndLease(JobRecord* r) {
  r->worker_hex.clear();
  r->expires_ms = 0;
}

Decision NoJob(const std::string& job_hex) {
  return Fail(TransitionError::kInvalid, "no job blake3:" + job_hex + " in this ledger");
}

Decision ApplySubmit(const std::string& job, const std::optional<JobRecord>& old, const SubmitTransition& t, const TransitionRules& rules,
                     AppliedTransition* out) {
  out->kind = t.schedule.empty() ? LogKind::kSubmit : LogKind::kFire;
  if (old) {
    out->record = *old;
    out->unchanged = true;
    return {};
  }
  if (!t.schedule.empty()) {
    // Each tick fires once: the ticks of one schedule fire in order.
    if (t.trigger ? t.fired_at_ms < t.last_fired_ms : t.fired_at_ms <= t.last_fired_ms) {
      return Fail(TransitionError::kInvalid, "tick " + FormatRfc3339Millis(t.fired_at_ms) + " of schedule " +
                                                 t.schedule + (t.trigger ? " is before its last fire (" : " is not after its last fire (") +
                                                 FormatRfc3339Millis(t.last_fired_ms) + ")");
    }
    if (!ScheduleSignerAllowed(*rules.policy, t.submitter_hex, t.pool, rules.now_ms)) {
      return Fail(TransitionError::kUnauthorized,
                  "schedule " + t.schedule + " is signed by ed25519:" + t.submitter_hex +
                      ", which may not submit to pool " + (t.pool.empty() ? std::string(kDefaultPool) : t.pool) +
                      " under the policy in force");
    }
  }
  JobRecord& n = out->record;
  n.job_hex = t.job_hex;
  n.job_commit = t.job_commit;
  n.submitter_hex = t.submitter_hex;
  n.submitted_ms = rules.now_ms;
  n.pool = t.pool == kDefaultPool ? "" : t.pool;
  n.priority = t.priority;
  return {};
}

Decision ApplyLease(const std::string& job, const std::optional<JobRecord>& old, const LeaseTransition& t, const TransitionRules& rules,
                    AppliedTransition* out) {
  if (!old) return NoJob(job);
  if (old->pruned_ms) return Fail(TransitionError::kTerminal, "job " + old->job_hex + " has finished");
  if (!WorkerAllowed(*rules.policy, t.worker_hex, rules.now_ms)) {
    return Fail(TransitionError::kUnauthorized,
                "worker ed25519:" + t.worker_hex + " is not allowed by this ledger's policy");
  }
  if (!t.renew && !WorkerServesPool(*rules.policy, t.worker_hex, old->pool)) {
    return Fail(TransitionError::kUnauthorized,
                "worker ed25519:" + t.worker_hex + " may not serve pool " +
                    (old->pool.empty() ? std::string(kDefaultPool) : old->pool) +
                    " (gatos policy allow-worker KEY --pools ...)");
  }
  JobRecord n = *old;
  if (t.renew) {
    Decision d = DecideRenew(*old, t.worker_hex, t.epoch, t.requested_at_ms, rules.now_ms);
    if (!d.ok()) return d;
    out->kind = LogKind::kRenew;
    out->replaced_lease = old->lease_commit;
  } else {
    ClaimPlan plan;
    Decision d = DecideClaim(*old, t.worker_hex, t.epoch, rules.now_ms, &plan);
    if (!d.ok()) return d;
    out->kind = plan.takeover ? LogKind::kTakeover : LogKind::kClaim;
    out->replaced_lease = plan.expected_lease;
    n.claim_commit = t.lease_commit;
    n.claims[t.worker_hex] = t.lease_commit;
  }
  n.epoch = t.epoch;
  n.lease_commit = t.lease_commit;
  n.worker_hex = t.worker_hex;
  n.expires_ms = rules.now_ms + rules.policy->settings.lease_ms;
  n.requested_at_ms = t.requested_at_ms;
  out->record = std::move(n);
  return {};
}

Decision ApplyResult(const std::string& job, const std::optional<JobRecord>& old, const ResultTransition& t, const TransitionRules& rules,
                     AppliedTransition* out) {
  if (!old) return Fail(TransitionError::kInvalid, "result refused: job " + job + " is not in this ledger");
  if (HoldsResult(*old, t.commit)) {
    out->record = *old;
    out->kind = LogKind::kResult;
    out->unchanged = true;
    return {};
  }
  if (t.parents.size() != 2 || t.parents[0] != old->job_commit) {
    return Fail(TransitionError::kInvalid,
                "result refused: its first parent is not the commit of job " + Short(old->job_hex));
  }
  if (!WorkerAllowed(*rules.policy, t.worker_hex, rules.now_ms)) {
    return Fail(TransitionError::kUnauthorized,
                "result refused: worker ed25519:" + t.worker_hex +
                    " is not allowed by this ledger's policy (gatos policy allow-worker)");
  }
  const PolicySettings& ps = rules.policy->settings;
  Decision d = DecideResult(*old, t.worker_hex, t.epoch, rules.now_ms, ps.result_grace_ms);
  if (!d.ok()) return d;
  if (t.parents[1] != old->claim_commit) {
    return Fail(TransitionError::kStaleOwner, "result refused: its second parent " + Short(t.parents[1]) +
                                                  " is not the claim commit of the current lease of job " +
                                                  Short(old->job_hex));
  }
  JobRecord n = *old;
  if (RetryAfterResult(*old, ps, t.status, t.reason, t.transient)) {
    const int64_t next = old->attempt + 1;
    if (t.backoff_ms < RetryBackoffMinMs(ps, next) || t.backoff_ms > RetryBackoffMs(ps, next)) {
      return Fail(TransitionError::kInvalid,
                  "the backoff before attempt " + std::to_string(next) + " (" + std::to_string(t.backoff_ms) +
                      " ms) is outside the policy's range " + std::to_string(RetryBackoffMinMs(ps, next)) + ".." +
                      std::to_string(RetryBackoffMs(ps, next)) + " ms");
    }
    n.attempts.push_back({old->attempt, t.commit, t.status, t.epoch, rules.now_ms});
    n.attempt = next;
    n.not_before_ms = rules.now_ms + t.backoff_ms;
    out->kind = LogKind::kAttempt;
  } else {
    n.result_commit = t.commit;
    n.result_status = t.status;
    n.finished_ms = rules.now_ms;
    out->kind = LogKind::kResult;
  }
  EndLease(&n);
  out->record = std::move(n);
  return {};
}

Decision MayNot(const JobRecord& r, std::string_view requester_hex, bool retry) {
  return Fail(TransitionError::kUnauthorized,
              "key ed25519:" + std::string(requester_hex.substr(0, 64)) + " may not " +
                  (retry ? "re-run" : "cancel") + " job " + Short(r.job_hex) +
                  ": only its submitter, an operator named in the policy (gatos policy allow-operator) or the "
                  "ledger key may");
}

Decision ApplyCancel(const std::string& job, const std::optional<JobRecord>& old, const CancelTransition& t, const TransitionRules& rules,
                     AppliedTransition* out) {
  if (!old) return NoJob(job);
  if (!MayControlJob(t.requester_hex, old->submitter_hex, *rules.policy, rules.now_ms)) {
    return MayNot(*old, t.requester_hex, false);
  }
  bool already = false;
  Decision d = DecideCancel(*old, rules.now_ms, &already);
  if (!d.ok()) return d;
  out->kind = LogKind::kCancel;
  if (already) {
    out->record = *old;
    out->unchanged = true;
    return {};
  }
  JobRecord n = *old;
  n.cancel_commit = t.commit;
  if (!LeaseLive(*old, rules.now_ms)) {
    // No live lease: the job is aborted now.
    EndLease(&n);
    n.finished_ms = rules.now_ms;
  }
  out->record = std::move(n);
  return {};
}

Decision ApplyRetry(const std::string& job, const std::optional<JobRecord>& old, const RetryTransition& t, const TransitionRules& rules,
                    AppliedTransition* out) {
  if (!old) return NoJob(job);
  if (!MayControlJob(t.requester_hex, old->submitter_hex, *rules.policy, rules.now_ms)) {
    return MayNot(*old, t.requester_hex, true);
  }
  if (old->pruned_ms) {
    // Its refs left the ref namespace after the retention; a re-run would
    // have to put them back, which no transition does.
    return Fail(TransitionError::kTerminal, "job " + Short(old->job_hex) + " was pruned at " +
                                                FormatRfc3339Millis(old->pruned_ms) + "; it cannot be re-run");
  }
  Decision d = DecideRetry(*old, t.attempt, rules.now_ms);
  if (!d.ok()) return d;
  JobRecord n = *old;
  n.attempts.push_back({old->attempt, old->result_commit, old->result_status, old->epoch, old->finished_ms});
  n.result_commit.clear();
  n.result_status.clear();
  n.attempt = t.attempt;
  n.finished_ms = 0;
  n.not_before_ms = 0;
  n.retry_commit = t.commit;
  out->kind = LogKind::kRetry;
  out->record = std::move(n);
  return {};
}

Decision ApplyAbort(const std::string& job, const std::optional<JobRecord>& old, const TransitionRules& rules, AppliedTransition* out) {
  if (!old) return NoJob(job);
  if (!DecideAbort(*old, rules.now_ms)) {
    return Fail(TransitionError::kInvalid, "an abort needs a cancelled job whose lease has run out");
  }
  JobRecord n = *old;
  EndLease(&n);
  n.finished_ms = rules.now_ms;
  out->kind = LogKind::kAbort;
  out->record = std::move(n);
  return {};
}

Decision ApplyRevoke(const std::string& job, const std::optional<JobRecord>& old, const TransitionRules& rules, AppliedTransition* out) {
  if (!old) return NoJob(job);
  if (!LeaseLive(*old, rules.now_ms)) return Fail(TransitionError::kInvalid, "no live lease to end");
  if (WorkerAllowed(*rules.policy, old->worker_hex, rules.now_ms)) {
    return Fail(TransitionError::kInvalid, "the policy in force still allows worker ed25519:" + old->worker_hex);
  }
  JobRecord n = *old;
  n.expires_ms = rules.now_ms;
  out->kind = LogKind::kRevoke;
  out->record = std::move(n);
  return {};
}

Decision ApplyPrune(const std::string& job, const std::optional<JobRecord>& old, const TransitionRules& rules, AppliedTransition* out) {
  if (!old) return NoJob(job);
  out->kind = LogKind::kPrune;
  if (old->pruned_ms) {
    out->record = *old;
    out->unchanged = true;
    return {};
  }
  const PolicySettings& ps = rules.policy->settings;
  if (!DecidePrune(*old, ps, rules.now_ms)) {
    return Fail(TransitionError::kInvalid, "job " + Short(old->job_hex) + " is not finished or not past the retention (" +
                                               std::to_string(ps.retention_ms) + " ms after it ends)");
  }
  JobRecord n = *old;
  n.pruned_ms = rules.now_ms;
  out->record = std::move(n);
  return {};
}

}  // namespace

std::vector<LogEntry> TransitionEntries(LogKind kind, const std::optional<JobRecord>& old, const JobRecord& now) {
  std::vector<LogEntry> out;
  const std::map<std::string, std::string> a = old ? JobRefs(*old) : std::map<std::string, std::string>{};
  const std::map<std::string, std::string> z = JobRefs(now);
  for (const auto& [ref, id] : z) {
    auto it = a.find(ref);
    std::string prev = it == a.end() ? "" : it->second;
    if (prev != id) out.push_back({kind, now.job_hex, ref, prev, id});
  }
  for (const auto& [ref, id] : a) {
    if (!z.count(ref)) out.push_back({kind, now.job_hex, ref, id, ""});
  }
  if (out.empty()) out.push_back({kind, now.job_hex, "", "", ""});
  return out;
}

std::vector<LogEntry> FireEntries(const std::optional<JobRecord>& old, const JobRecord& now,
                                  const std::string& schedule, const std::string& previous_fire) {
  std::vector<LogEntry> out = TransitionEntries(LogKind::kFire, old, now);
  out.push_back({LogKind::kFire, now.job_hex, kFirePrefix + schedule, previous_fire, now.job_commit});
  return out;
}

bool ScheduleSignerAllowed(const Policy& policy, std::string_view key_hex, std::string_view pool, int64_t now_ms) {
  // The rule a schedule commit is recorded under (ScheduleChangeDecision).
  auto key = ParseWorkerId("ed25519:" + std::string(key_hex));
  const bool submitter = key.ok() && policy.submitters.FindKey(*key, kSignerNamespaceGit, now_ms / 1000) != nullptr;
  if (!submitter && !MayControlJob(key_hex, "", policy, now_ms)) return false;
  return KeyMayUsePool(policy.settings.scheduling.submitter_pools, key_hex, pool.empty() ? kDefaultPool : pool);
}

bool DecideAbort(const JobRecord& r, int64_t now_ms) {
  return !r.cancel_commit.empty() && LeaseExpired(r, now_ms) && r.result_commit.empty();
}

bool DecidePrune(const JobRecord& r, const PolicySettings& s, int64_t now_ms) {
  return !r.pruned_ms && IsTerminal(RecordedState(r)) && r.finished_ms != 0 && s.retention_ms != 0 &&
         now_ms >= r.finished_ms + s.retention_ms;
}

bool WorkerAllowed(const Policy& policy, std::string_view worker_hex, int64_t now_ms) {
  auto key = ParseWorkerId("ed25519:" + std::string(worker_hex));
  return key.ok() && policy.workers.FindKey(*key, kSignerNamespaceGit, now_ms / 1000) != nullptr;
}

bool WorkerServesPool(const Policy& policy, std::string_view worker_hex, std::string_view pool) {
  return KeyMayUsePool(policy.settings.scheduling.worker_pools, worker_hex, pool.empty() ? kDefaultPool : pool);
}

bool MayControlJob(std::string_view requester_hex, std::string_view submitter_hex, const Policy& policy,
                   int64_t now_ms) {
  if (requester_hex.empty()) return false;
  if (requester_hex == submitter_hex) return true;
  if (requester_hex == policy.ledger_key.Hex()) return true;
  auto key = ParseWorkerId("ed25519:" + std::string(requester_hex));
  return key.ok() && policy.operators.FindKey(*key, kSignerNamespaceGit, now_ms / 1000) != nullptr;
}

Decision ApplyTransition(std::string_view job_hex, const std::optional<JobRecord>& old, const Transition& t,
                         const TransitionRules& rules, AppliedTransition* out) {
  *out = AppliedTransition{};
  const std::string job(job_hex);
  Decision d = std::visit(
      [&](const auto& x) -> Decision {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, SubmitTransition>) return ApplySubmit(job, old, x, rules, out);
        if constexpr (std::is_same_v<T, LeaseTransition>) return ApplyLease(job, old, x, rules, out);
        if constexpr (std::is_same_v<T, ResultTransition>) return ApplyResult(job, old, x, rules, out);
        if constexpr (std::is_same_v<T, CancelTransition>) return ApplyCancel(job, old, x, rules, out);
        if constexpr (std::is_same_v<T, RetryTransition>) return ApplyRetry(job, old, x, rules, out);
        if constexpr (std::is_same_v<T, AbortTransition>) return ApplyAbort(job, old, rules, out);
        if constexpr (std::is_same_v<T, RevokeTransition>) return ApplyRevoke(job, old, rules, out);
        if constexpr (std::is_same_v<T, PruneTransition>) return ApplyPrune(job, old, rules, out);
      },
      t);
  if (!d.ok()) *out = AppliedTransition{};
  return d;
}

}  // namespace gatos
