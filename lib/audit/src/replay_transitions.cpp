// Each logged transition checked by the auditor: the facts of its commits, then the rule every writer applies (ApplyTransition, gatos/model/transition.h).
#include "gatos/audit/log_audit.h"
#include "gatos/model/time_format.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

std::optional<JobRecord> Replay::Submit(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const LogEntry* e = nullptr;
  for (const auto& x : t.entries) {
    if (x.ref == JobRef(t.job_hex, "job")) e = &x;
  }
  if (old) {
    Fail(t, "transition", "job " + Short(t.job_hex) + " is submitted again (it exists since " +
                              FormatRfc3339Millis(old->submitted_ms) + ")");
    return std::nullopt;
  }
  if (!e || e->new_id.empty()) {
    Fail(t, "log_batch", "a submit must create " + JobRef(t.job_hex, "job"));
    return std::nullopt;
  }
  // Its objects read and its signature verified ahead (replay_prefetch.cpp)
  // when they could be: CheckJobCommit reads them from memory then.
  std::optional<PrefetchedJob> pre = TakePrefetchedJob(e->new_id);
  auto check = pre ? CheckJobCommit(BatchLookup(&pre->objects, lookup_), e->new_id, t.job_hex, pol_.policy, now_,
                                    pre->signer ? &*pre->signer : nullptr)
                   : CheckJobCommit(lookup_, e->new_id, t.job_hex, pol_.policy, now_);
  if (!check.ok()) {
    Fail(t, "job_commit", "job commit " + Short(e->new_id) + " would not have been accepted under policy " +
                              Short(pol_.commit) + ": " + check.status().message());
    return std::nullopt;
  }
  {
    auto key = ParseWorkerId("ed25519:" + check->signer_key_hex);
    if (!key.ok() || !pol_.policy.submitters.FindKey(*key, kSignerNamespaceGit, now_ / 1000)) ++rep_->dev_mode_jobs;
  }
  AppliedTransition a;
  Decision d = gatos::ApplyTransition(t.job_hex, old, SubmitTransition{t.job_hex, e->new_id, check->signer_key_hex,
                                                       check->manifest.pool.value_or(""), check->priority},
                                      Rules(), &a);
  if (!d.ok()) {
    Fail(t, "transition", "submit of job " + Short(t.job_hex) + ": " + d.message);
    return std::nullopt;
  }
  return a.record;
}

std::optional<JobRecord> Replay::Lease(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const bool renew = t.kind == LogKind::kRenew;
  const LogEntry* e = nullptr;
  for (const auto& x : t.entries) {
    if (x.ref == JobRef(t.job_hex, "lease")) e = &x;
  }
  if (!e || e->new_id.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must move " + JobRef(t.job_hex, "lease"));
    return std::nullopt;
  }
  // Read, parsed and its signatures checked ahead (replay_prefetch.cpp) when
  // it could be; otherwise here.
  std::optional<PrefetchedLease> pre = TakePrefetchedLease(e->new_id);
  auto lc = pre ? Result<CommitInfo>(std::move(pre->commit)) : ledger_.ReadCommit(e->new_id);
  if (!lc.ok()) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " cannot be read: " + lc.status().message());
    return std::nullopt;
  }
  auto info = pre ? Result<LeaseCommitInfo>(std::move(pre->info)) : ParseLeaseCommitMessage(lc->message);
  if (!info.ok()) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + ": " + info.status().message());
    return std::nullopt;
  }
  // Lease commits are unsigned: the signed log commit that names them as
  // parents (log_parents, checked for every new commit) vouches for them.
  // A ledger written before that signed each one; that signature, when
  // present, must be the ledger key's.
  bool signed_ok = lc->signature.empty() || (pre && pre->signer && *pre->signer == batch_key_);
  if (std::string why = signed_ok ? "" : SignatureProblem(*lc, batch_key_); !why.empty()) {
    Fail(t, "lease_signature", "lease commit " + Short(e->new_id) + " is not signed by the ledger key: " + why);
    return std::nullopt;
  }
  std::string why;
  if (info->job_hex != t.job_hex) why = "it is a lease of job " + Short(info->job_hex);
  if (why.empty() && lc->tree != kEmptyTreeId) why = "it has a non-empty tree";
  AppliedTransition a;
  if (why.empty()) {
    Decision d = gatos::ApplyTransition(
        t.job_hex, old, LeaseTransition{renew, info->worker_hex, info->epoch, info->requested_at_ms, e->new_id},
        Rules(), &a);
    if (!d.ok()) {
      why = "the ledger's rules refuse it: " + d.message;
    } else if (a.kind != t.kind) {
      why = std::string("recorded as ") + (a.kind == LogKind::kTakeover ? "a claim but it takes over an expired lease"
                                                                          : "a takeover but no lease had expired");
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(e->new_id) + ": " + why);
    return std::nullopt;
  }
  std::vector<std::string> want_parents = {old->job_commit};
  if (!a.replaced_lease.empty()) want_parents.push_back(a.replaced_lease);
  if (lc->parents != want_parents) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " has the wrong parents (the job commit, then the lease it replaces)");
    return std::nullopt;
  }
  std::string payload = renew ? rpc::RenewPayload(t.job_hex, info->worker_hex, info->epoch, info->requested_at_ms)
                              : rpc::ClaimPayload(t.job_hex, info->worker_hex, info->epoch, info->requested_at_ms);
  bool request_ok = pre && pre->request_sig_ok && pre->job_hex == t.job_hex && pre->renew == renew;
  if (!request_ok && !Verifies(info->worker_hex, payload, info->request_sig_hex)) {
    Fail(t, "request_sig", "lease commit " + Short(e->new_id) + ": Request-Sig does not verify for worker ed25519:" +
                               info->worker_hex + " over its " + (renew ? "renew" : "claim") + " request");
    return std::nullopt;
  }
  int64_t skew = info->requested_at_ms - now_;
  if (skew > rpc::kMaxRequestSkewMs || skew < -(rpc::kMaxRequestSkewMs + 60'000)) {
    Fail(t, "request_sig", "lease commit " + Short(e->new_id) + ": the request is dated " +
                               FormatRfc3339Millis(info->requested_at_ms) + ", too far from the batch time " +
                               FormatRfc3339Millis(now_));
    return std::nullopt;
  }
  if (!WorkerAllowed(info->worker_hex, &why)) {
    Fail(t, "worker_allowed", why);
    return std::nullopt;
  }
  if (info->expires_ms != a.record.expires_ms || info->attempt != old->attempt) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " says it expires at " +
                                FormatRfc3339Millis(info->expires_ms) + " (attempt " + std::to_string(info->attempt) +
                                "); the policy's lease from the batch time ends at " +
                                FormatRfc3339Millis(a.record.expires_ms) + " (attempt " +
                                std::to_string(old->attempt) + ")");
    return std::nullopt;
  }
  if (!renew) runs_[t.job_hex].push_back({a.record.attempt, a.record.epoch, a.record.worker_hex, "", "", false});
  return a.record;
}

std::optional<JobRecord> Replay::ResultOf(const LoggedTransition& t, const std::optional<JobRecord>& old,
                                          const CommitInfo& c) {
  std::string commit;
  for (const auto& x : t.entries) {
    if (!x.new_id.empty() && (x.ref == JobRef(t.job_hex, "result") || x.ref.find("/attempts/") != std::string::npos)) {
      commit = x.new_id;
    }
  }
  if (commit.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must record a result commit");
    return std::nullopt;
  }
  ++rep_->results;
  ResultCheckLimits limits;
  limits.max_file_bytes = max_result_bytes_;
  std::optional<PrefetchedResult> pre = TakePrefetched(commit);
  ResultTreeData tree;  // the blobs read by CheckResultCommit, for the provenance check
  ResultReport rr = pre ? std::move(pre->report) : CheckResultCommit(lookup_, commit, limits, &tree);
  if (const ResultCheck* bad = rr.first_failure()) {
    Fail(t, "result", "result " + Short(commit) + " " + bad->name + ": " + bad->detail);
    return std::nullopt;
  }
  const ParsedResult& p = rr.parsed;
  const PolicySettings& ps = pol_.policy.settings;
  // The backoff before the attempt it opens, as the ledger drew it: the
  // state index this log commit carries holds the job's next claim time.
  // (A result recorded as final is checked with the policy's shortest
  // backoff: whether it should have opened an attempt is the question.)
  int64_t backoff = old ? RetryBackoffMinMs(ps, old->attempt + 1) : 0;
  if (old && t.kind == LogKind::kAttempt) {
    StateIndex at(&ledger_);
    at.Reset(c.tree);
    auto rec = at.Get(t.job_hex);
    if (!rec.ok() || !*rec) {
      Fail(t, "index", "the state index of log commit " + Short(c.id) + " lacks job " + Short(t.job_hex) +
                           (rec.ok() ? "" : ": " + rec.status().message()));
      return std::nullopt;
    }
    backoff = (*rec)->not_before_ms - now_;
  }
  std::string why;
  AppliedTransition a;
  if (p.job_hex != t.job_hex) {
    why = "it is a result of job " + Short(p.job_hex);
  } else {
    Decision d = gatos::ApplyTransition(t.job_hex, old,
                                        ResultTransition{commit, p.worker_hex, p.epoch, p.parents, p.status,
                                                         p.poe.reason, p.poe.transient, backoff},
                                        Rules(), &a);
    if (!d.ok()) {
      why = old && !old->result_commit.empty()
                ? "the job already had its final result " + Short(old->result_commit) + " (" + old->result_status +
                      "); no attempt may follow it"
                : "the ledger's rules refuse it (fencing): " + d.message;
    } else if (a.unchanged) {
      why = "the log recorded this result before";
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(commit) + ": " + why);
    return std::nullopt;
  }
  if (!WorkerAllowed(p.worker_hex, &why)) {
    Fail(t, "worker_allowed", why);
    return std::nullopt;
  }
  if (opt_.verify.trusted_programs && !opt_.verify.trusted_programs->count(p.attest_program)) {
    Fail(t, "attest_program", "result " + Short(commit) + ": Attest-Program " + p.attest_program +
                                  " is not in the trusted programs list");
    return std::nullopt;
  }
  bool present = false;
  ResultCheck prov;
  if (pre && pre->provenance_job == old->job_commit) {
    prov = std::move(pre->provenance);
    present = pre->provenance_present;
  } else {
    // Checked ahead against another job commit (a result grafted onto
    // another job): the tree was not kept, so it is read again.
    prov = CheckResultProvenance(ledger_, p, old->job_commit, max_result_bytes_, opt_.verify.require_provenance,
                                 &present, pre ? nullptr : &tree);
  }
  if (!prov.ok) {
    Fail(t, "provenance", "result " + Short(commit) + ": " + prov.detail);
    return std::nullopt;
  }
  if (opt_.verified) opt_.verified->results.insert(commit);
  // The same decision the ledger made (transition.h): a refused run is final.
  const bool retry = a.kind == LogKind::kAttempt;
  if (a.kind != t.kind) {
    std::string what = retry ? "recorded as the final result, but policy " + Short(pol_.commit) + " retries a " +
                                   p.status + " attempt " + std::to_string(old->attempt) + " of " +
                                   std::to_string(ps.max_attempts)
                             : "recorded as a retried attempt, but policy " + Short(pol_.commit) +
                                   " allows no retry of a " + p.status + " attempt " + std::to_string(old->attempt) +
                                   " (max_attempts " + std::to_string(ps.max_attempts) +
                                   (old->cancel_commit.empty() ? "" : ", the job is cancelled") +
                                   (p.poe.reason.empty() ? "" : ", the run was refused: a reason is final") + ")";
    Fail(t, "retry_policy", "result " + Short(commit) + " " + what);
    return std::nullopt;
  }
  auto& runs = runs_[t.job_hex];
  if (!runs.empty() && runs.back().epoch == p.epoch && runs.back().result_commit.empty()) {
    runs.back().status = p.status;
    runs.back().result_commit = commit;
    runs.back().final = !retry;
  }
  return a.record;
}

std::optional<JobRecord> Replay::UserRequest(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const bool retry = t.kind == LogKind::kRetry;
  std::string ref = JobRef(t.job_hex, retry ? "retry" : "cancel");
  std::string commit;
  for (const auto& x : t.entries) {
    if (x.ref == ref) commit = x.new_id;
  }
  if (commit.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must move " + ref);
    return std::nullopt;
  }
  auto c = ledger_.ReadCommit(commit);
  auto info = c.ok() ? ParseUserRequestCommitMessage(c->message) : Result<UserRequestCommitInfo>(c.status());
  if (!info.ok()) {
    Fail(t, "request_commit", Short(commit) + ": " + info.status().message());
    return std::nullopt;
  }
  if (std::string why = SignatureProblem(*c, batch_key_); !why.empty()) {
    Fail(t, "request_commit", Short(commit) + " is not signed by the ledger key: " + why);
    return std::nullopt;
  }
  std::string why;
  AppliedTransition a;
  if (info->retry != retry || info->job_hex != t.job_hex) {
    why = "the commit is not a " + std::string(retry ? "re-run" : "cancel") + " of this job";
  } else {
    Transition tr = retry ? Transition(RetryTransition{info->requester_hex, info->attempt, commit})
                          : Transition(CancelTransition{info->requester_hex, commit});
    Decision d = gatos::ApplyTransition(t.job_hex, old, tr, Rules(), &a);
    if (!d.ok()) {
      why = "the ledger's rules refuse it: " + d.message;
    } else if (a.unchanged) {
      why = "the job was already cancelled";
    }
  }
  if (why.empty()) {
    std::vector<std::string> want_parents = {old->job_commit};
    if (retry) want_parents.push_back(old->result_commit);
    if (c->parents != want_parents) {
      why = "it has the wrong parents";
    } else if (!Verifies(info->requester_hex,
                         retry ? rpc::RetryPayload(t.job_hex, info->requester_hex, info->attempt, info->requested_at_ms)
                               : rpc::CancelPayload(t.job_hex, info->requester_hex, info->requested_at_ms),
                         info->request_sig_hex)) {
      why = "Request-Sig does not verify for ed25519:" + info->requester_hex;
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(commit) + ": " + why);
    return std::nullopt;
  }
  if (retry) {
    auto& runs = runs_[t.job_hex];
    if (!runs.empty()) runs.back().final = false;
  }
  return a.record;
}

std::optional<JobRecord> Replay::Other(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  Transition tr;
  switch (t.kind) {
    case LogKind::kAbort: tr = AbortTransition{}; break;
    case LogKind::kRevoke: tr = RevokeTransition{}; break;
    case LogKind::kPrune: tr = PruneTransition{}; break;
    default:
      Fail(t, "transition", std::string(LogKindName(t.kind)) + " of job " + Short(t.job_hex) + ": unexpected kind");
      return std::nullopt;
  }
  AppliedTransition a;
  Decision d = gatos::ApplyTransition(t.job_hex, old, tr, Rules(), &a);
  std::string why = !d.ok() ? d.message : a.unchanged ? "the job was pruned already" : "";
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " of job " + Short(t.job_hex) + ": " + why);
    return std::nullopt;
  }
  return a.record;
}

}  // namespace audit_internal
}  // namespace gatos
