// What each operation of a batch does (LedgerWriter::Do*): the rule is
// ApplyTransition (gatos/model/transition.h); this file turns requests into
// transitions, builds the commits the ledger writes for them, and records
// the result in the batch.
#include "gatos/ledger/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "checkpointer.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/git/commit_objects.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/ledger/wal.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/refs.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/transition.h"
#include "gatos/sys/file.h"
#include "view_writer.h"
#include "writer_internal.h"

namespace gatos {
using namespace writer_internal;  // NOLINT: this library's own internals

namespace {

// The record of a job as the batch sees it so far.
Result<std::optional<JobRecord>> Current(LedgerWriter& w, std::map<std::string, JobRecord>& touched,
                                         const std::string& job_hex) {
  auto it = touched.find(job_hex);
  if (it != touched.end()) return std::optional<JobRecord>(it->second);
  return w.Find(job_hex);
}

}  // namespace

#define GATOS_BATCH_RECORD(b, job, rec_var, r)                                              \
  std::optional<JobRecord> rec_var;                                                         \
  {                                                                                         \
    auto cur = Current(*this, b.touched, job);                                              \
    if (!cur.ok()) {                                                                        \
      r->outcome = Decision::FromStatus(cur.status());                                       \
      return;                                                                               \
    }                                                                                       \
    rec_var = std::move(*cur);                                                              \
  }

namespace {

void RecordTransition(std::map<std::string, JobRecord>& touched,
                      std::map<std::string, std::optional<JobRecord>>& before, std::vector<LogEntry>& entries,
                      std::map<std::string, int64_t>& counts, LogKind kind, const std::optional<JobRecord>& old,
                      const JobRecord& now_rec) {
  const std::string& job = now_rec.job_hex;
  if (!before.count(job)) before[job] = old;
  for (LogEntry& e : TransitionEntries(kind, old, now_rec)) entries.push_back(std::move(e));
  touched[job] = now_rec;
  ++counts[std::string(LogKindName(kind))];
}

}  // namespace

namespace {

// The transition's outcome as a reply: its error class and message.
void Refuse(const Decision& d, OpResult* r) { r->outcome = Decision::Error(d.error, d.message); }

}  // namespace

Result<std::vector<GitObject>> LedgerWriter::PushedObjects(const Batch& b, const std::string& commit, bool job,
                                                          const std::vector<GitObject>* carried) {
  if (!options_.replicate) return std::vector<GitObject>{};
  // Bounded as what a result RPC may carry: the record holds them all.
  CommitObjectLimits limits;
  limits.max_bytes = static_cast<size_t>(BatchPolicy(b).settings.max_result_bytes);
  RawCommit raw;
  auto lookup = [&](const std::string& id) -> Result<std::pair<ObjectType, std::string>> {
    if (carried) {
      for (const auto& o : *carried) {
        if (o.id == id) return std::make_pair(o.type, o.data);
      }
    }
    return LookupIn(*ledger_, b.objects, b.object_at, id);
  };
  auto objects = CommitObjects(lookup, commit, limits, &raw, [&](const std::string& id) { return b.object_at.count(id) > 0; });
  if (!objects.ok()) {
    if (objects.status().code() == StatusCode::kFailedPrecondition) {
      return InvalidArgumentError("a replicated ledger sends a pushed commit's objects to every replica in its log, "
                                  "and " + objects.status().message() + " (max_result_bytes)");
    }
    return objects.status();
  }
  // A job's parents would be needed by every replica as well: a pushed job
  // commit comes without history, as a follower's front door asks.
  if (job && !raw.parents.empty()) {
    return InvalidArgumentError(
        "a replicated ledger takes a pushed job commit without its history (it sends the commit and its tree to "
        "every replica): push a commit with no parent (git checkout --orphan NAME)");
  }
  return objects;
}

const Policy& LedgerWriter::BatchPolicy(const Batch& b) const {
  return b.new_policy ? *b.new_policy : policy_;  // a policy change earlier in the batch counts
}

void LedgerWriter::DoSubmit(Batch& b, SubmitOp& op, OpResult* r) {
  const std::string job = op.check.job_hex;
  r->job_hex = job;
  GATOS_BATCH_RECORD(b, job, rec, r);
  AppliedTransition a;
  Decision d = ApplyTransition(job, rec,
                               SubmitTransition{job, op.check.commit, op.check.signer_key_hex,
                                                op.check.manifest.pool.value_or(""), op.check.priority},
                               {&BatchPolicy(b), b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  r->commit = a.record.job_commit;
  r->record = a.record;
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  if (op.objects.empty()) {  // pushed with stock git
    auto pushed = PushedObjects(b, a.record.job_commit, /*job=*/true);
    if (!pushed.ok()) return Refuse(Decision::FromStatus(pushed.status()), r);
    op.objects = std::move(*pushed);
  }
  for (auto& o : op.objects) AddObject(b, std::move(o));
  b.new_commits.push_back(a.record.job_commit);
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
}

void LedgerWriter::DoLease(Batch& b, LeaseOp& op, OpResult* r) {
  const LeaseRequest& req = op.req;
  r->job_hex = req.job_hex;
  GATOS_BATCH_RECORD(b, req.job_hex, rec, r);
  const Policy& pol = BatchPolicy(b);
  const TransitionRules rules{&pol, b.now};
  // The plan first (claim or takeover, the lease it replaces), then the
  // lease commit that records it, then the transition with its id.
  LeaseTransition t{req.renew, req.worker_hex, req.epoch, req.requested_at_ms, ""};
  AppliedTransition plan;
  Decision d = ApplyTransition(req.job_hex, rec, t, rules, &plan);
  if (!d.ok()) return Refuse(d, r);
  const PolicySettings& ps = pol.settings;
  LeaseCommitInfo info;
  info.kind = std::string(LogKindName(plan.kind));
  info.job_hex = req.job_hex;
  info.worker_hex = req.worker_hex;
  info.epoch = req.epoch;
  info.expires_ms = plan.record.expires_ms;
  info.attempt = rec->attempt;
  info.requested_at_ms = req.requested_at_ms;
  info.request_sig_hex = req.sig_hex;
  info.lease_ms = ps.lease_ms;
  info.output_cap_bytes = ps.output_cap_bytes;
  info.max_result_bytes = ps.max_result_bytes;
  info.allow_network = ps.allow_network;
  info.job_defaults = ps.job_defaults;
  info.job_maxima = ps.job_maxima;
  std::vector<std::string> parents = {rec->job_commit};
  if (!plan.replaced_lease.empty()) parents.push_back(plan.replaced_lease);
  // Not signed: the batch's log commit, which the ledger signs, names it as
  // a parent; the worker gets the ledger's signature over the grants of its
  // reply instead (rpc::GrantsPayload).
  auto commit = BuildCommitObject(kEmptyTreeId, parents, FormatLeaseCommitMessage(info), kLedgerCommitterName,
                                  kLedgerCommitterEmail, b.now, options_.sign_lease_commits ? &key_ : nullptr);
  if (!commit.ok()) {
    r->outcome = Decision::FromStatus(commit.status());
    return;
  }
  t.lease_commit = commit->id;
  AppliedTransition a;
  d = ApplyTransition(req.job_hex, rec, t, rules, &a);
  if (!d.ok()) return Refuse(d, r);
  // The grant: the lease commit and what the worker needs to check that
  // job.yaml is the job it names.
  r->grant.push_back(*commit);
  if (!req.renew) {
    auto job_obj = LookupIn(*ledger_, b.objects, b.object_at, rec->job_commit);
    auto raw = job_obj.ok() ? ParseRawCommit(job_obj->second, rec->job_commit) : Result<RawCommit>(job_obj.status());
    auto tree = raw.ok() ? LookupIn(*ledger_, b.objects, b.object_at, raw->tree) : Result<std::pair<ObjectType, std::string>>(raw.status());
    auto entries = tree.ok() ? ParseTree(tree->second, raw->tree) : Result<std::vector<TreeEntry>>(tree.status());
    if (!entries.ok()) {
      r->outcome = Decision::Error(TransitionError::kInternal, "cannot read job " + Short(req.job_hex) +
                                                                   "'s commit: " + entries.status().message());
      return;
    }
    r->grant.push_back({ObjectType::kCommit, job_obj->second, rec->job_commit});
    r->grant.push_back({ObjectType::kTree, tree->second, raw->tree});
    for (const auto& e : *entries) {
      if (e.name != "job.yaml") continue;
      auto blob = LookupIn(*ledger_, b.objects, b.object_at, e.id);
      if (!blob.ok()) {
        r->outcome = Decision::Error(TransitionError::kInternal, "cannot read job.yaml of " + Short(req.job_hex));
        return;
      }
      r->grant.push_back({ObjectType::kBlob, blob->second, e.id});
    }
  } else if (!rec->cancel_commit.empty()) {
    auto c = LookupIn(*ledger_, b.objects, b.object_at, rec->cancel_commit);
    if (c.ok()) r->notice.push_back({ObjectType::kCommit, c->second, rec->cancel_commit});
  }
  b.new_commits.push_back(commit->id);
  AddObject(b, std::move(*commit));
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->commit = a.record.lease_commit;
  r->record = a.record;
}

void LedgerWriter::DoResult(Batch& b, ResultOp& op, OpResult* r) {
  const ParsedResult& p = op.result;
  r->job_hex = p.job_hex;
  GATOS_BATCH_RECORD(b, p.job_hex, rec, r);
  r->record = rec;
  const Policy& pol = BatchPolicy(b);
  // The backoff, should the result open another attempt (the policy's
  // range, less a random part: retries of many jobs do not come in step).
  const int64_t backoff = rec ? DrawRetryBackoffMs(pol.settings, rec->attempt + 1, BatchRng()()) : 0;
  AppliedTransition a;
  Decision d = ApplyTransition(p.job_hex, rec,
                               ResultTransition{p.commit_id, p.worker_hex, p.epoch, p.parents, p.status,
                                                p.poe.reason, p.poe.transient, backoff},
                               {&pol, b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  r->commit = p.commit_id;
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  if (op.objects.empty()) {  // pushed with stock git
    auto pushed = PushedObjects(b, p.commit_id, /*job=*/false);
    if (!pushed.ok()) return Refuse(Decision::FromStatus(pushed.status()), r);
    op.objects = std::move(*pushed);
  }
  r->retried = a.kind == LogKind::kAttempt;
  for (auto& o : op.objects) AddObject(b, std::move(o));
  b.new_commits.push_back(p.commit_id);
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoUser(Batch& b, UserOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  r->record = rec;
  const TransitionRules rules{&BatchPolicy(b), b.now};
  auto transition = [&](const std::string& commit) -> Transition {
    if (op.retry) return RetryTransition{op.requester_hex, op.attempt, commit};
    return CancelTransition{op.requester_hex, commit};
  };
  AppliedTransition plan;
  Decision d = ApplyTransition(op.job_hex, rec, transition(""), rules, &plan);
  if (!d.ok()) return Refuse(d, r);
  if (plan.unchanged) {  // cancelled already
    r->existing = true;
    r->commit = rec->cancel_commit;
    return;
  }
  UserRequestCommitInfo info;
  info.retry = op.retry;
  info.job_hex = op.job_hex;
  info.requester_hex = op.requester_hex;
  info.recorded_at_ms = b.now;
  info.requested_at_ms = op.requested_at_ms;
  info.request_sig_hex = op.sig_hex;
  if (op.retry) info.attempt = op.attempt;
  std::vector<std::string> parents = {rec->job_commit};
  if (op.retry) parents.push_back(rec->result_commit);
  auto commit = BuildCommitObject(kEmptyTreeId, parents, FormatUserRequestCommitMessage(info), kLedgerCommitterName,
                                  kLedgerCommitterEmail, b.now, &key_);
  if (!commit.ok()) {
    r->outcome = Decision::FromStatus(commit.status());
    return;
  }
  AppliedTransition a;
  d = ApplyTransition(op.job_hex, rec, transition(commit->id), rules, &a);
  if (!d.ok()) return Refuse(d, r);
  // A cancel of a running job: its holder is told, with the signed commit.
  if (!op.retry && LeaseLive(*rec, b.now)) r->notice.push_back(*commit);
  b.new_commits.push_back(commit->id);
  r->commit = commit->id;
  AddObject(b, std::move(*commit));
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoPrune(Batch& b, PruneOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  r->record = rec;
  AppliedTransition a;
  Decision d = ApplyTransition(op.job_hex, rec, PruneTransition{}, {&BatchPolicy(b), b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoAbort(Batch& b, AbortOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  AppliedTransition a;
  if (!ApplyTransition(op.job_hex, rec, AbortTransition{}, {&BatchPolicy(b), b.now}, &a).ok()) {
    r->existing = true;  // nothing to abort (any more)
    r->record = rec;
    return;
  }
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoPolicy(Batch& b, PolicyOp& op, OpResult* r) {
  Policy next = op.policy;
  next.ledger_key = op.new_ledger_key ? op.new_ledger_key->public_key()
                                      : (b.new_key ? b.new_key->public_key() : key_.public_key());
  const std::string parent = b.new_policy ? b.new_policy_commit : policy_commit_;
  // A rotation's policy commit is signed by the key in force before it.
  const Ed25519PrivateKey& signer = b.new_key ? *b.new_key : key_;
  auto objects = BuildPolicyCommit(next, parent, op.message, signer, b.now);
  if (!objects.ok()) {
    r->outcome = Decision::FromStatus(objects.status());
    return;
  }
  std::string commit = objects->front().id;
  b.entries.push_back({LogKind::kPolicy, "", kPolicyRef, parent, commit});
  ++b.counts["policy"];
  b.new_commits.push_back(commit);
  for (auto& o : *objects) AddObject(b, std::move(o));
  b.new_policy = next;
  b.new_policy_commit = commit;
  if (op.new_ledger_key) b.new_key = op.new_ledger_key;
  r->commit = commit;
  // Leases of workers the new policy no longer allows end now: their jobs
  // are offered again, and their later requests and results are refused.
  std::vector<std::string> candidates;
  for (const auto& [job, live] : live_) candidates.push_back(job);
  for (const auto& [job, cur] : b.touched) {
    if (!live_.count(job)) candidates.push_back(job);
  }
  std::vector<std::string> revoked;
  for (const std::string& job : candidates) {
    std::optional<JobRecord> old = b.touched.count(job) ? b.touched[job] : live_[job];
    AppliedTransition a;
    if (!ApplyTransition(job, old, RevokeTransition{}, {&next, b.now}, &a).ok()) continue;
    RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, old, a.record);
    revoked.push_back(job);
  }
  r->revoked_jobs = std::move(revoked);
}

Result<std::string> LedgerWriter::NoteRef(Batch& b, const std::string& ref) {
  auto it = b.notes.find(ref);
  if (it != b.notes.end()) return it->second;
  // The writer's own record of the refs it moved, so that a fire does not
  // wait for the view refs of the batches before it.
  auto known = note_refs_.find(ref);
  if (known != note_refs_.end()) return known->second;
  FlushViews();  // the ref as the batches before this one left it
  GATOS_ASSIGN_OR_RETURN(std::string id, ledger_->ResolveRef(ref));
  if (note_refs_.size() < 100'000) note_refs_[ref] = id;
  return id;
}

void LedgerWriter::DoFire(Batch& b, FireOp& op, OpResult* r) {
  const ScheduleSpec& spec = op.schedule.spec;
  const std::string fire_ref = kFirePrefix + spec.name;
  auto at = NoteRef(b, kSchedulePrefix + spec.name);
  auto previous = at.ok() ? NoteRef(b, fire_ref) : Result<std::string>(at.status());
  if (!previous.ok()) {
    r->outcome = Decision::FromStatus(previous.status());
    return;
  }
  if (*at != op.schedule.commit || op.schedule.state != "active") {
    r->outcome = Decision::Error(TransitionError::kLostRace,
                                 "schedule " + spec.name + " changed (it is at " + Short(*at) + ")");
    return;
  }
  int64_t last_fired = 0;
  if (!previous->empty()) {
    auto lookup = [&](const std::string& id) { return LookupIn(*ledger_, b.objects, b.object_at, id); };
    auto t = FiredAtOf(lookup, *previous);
    if (!t.ok()) {
      r->outcome = Decision::Error(TransitionError::kInternal,
                                   "the last fire of schedule " + spec.name + ": " + t.status().message());
      return;
    }
    last_fired = *t;
  }
  // A trigger fires when the ledger sees the move: at the batch time.
  const int64_t tick = op.move ? b.now : op.tick_ms;
  auto objects = BuildFireCommit(op.schedule, tick, *previous, key_, op.move);
  if (!objects.ok()) {
    r->outcome = Decision::FromStatus(objects.status());
    return;
  }
  const GitObject& commit = objects->front();
  const Manifest fired = FireManifest(spec, tick, op.move);
  // The template was checked when the schedule was added; the policy may
  // have changed since (a lower timeout ceiling, input URL prefixes): the
  // fired job obeys the policy in force, as a submitted one does.
  if (Status p = CheckManifestPolicy(fired, BatchPolicy(b)); !p.ok()) {
    r->outcome = Decision::Error(TransitionError::kInvalid,
                                 "the policy in force refuses the job it would fire: " + p.message());
    return;
  }
  const std::string job = JobIdHex(fired);
  r->job_hex = job;
  GATOS_BATCH_RECORD(b, job, rec, r);
  AppliedTransition a;
  Decision d = ApplyTransition(job, rec,
                               SubmitTransition{job, commit.id, op.schedule.signer_hex, spec.job.pool.value_or(""),
                                                kDefaultPriority, spec.name, tick, last_fired, op.move.has_value()},
                               {&BatchPolicy(b), b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  r->commit = a.record.job_commit;
  r->record = a.record;
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  if (!b.before.count(job)) b.before[job] = rec;
  for (LogEntry& e : FireEntries(rec, a.record, spec.name, *previous)) b.entries.push_back(std::move(e));
  b.touched[job] = a.record;
  ++b.counts[std::string(LogKindName(a.kind))];
  b.notes[fire_ref] = commit.id;
  b.new_commits.push_back(commit.id);
  for (auto& o : *objects) AddObject(b, std::move(o));
}

void LedgerWriter::DoNote(Batch& b, NoteOp& op, OpResult* r) {
  if (op.objects.empty() || op.objects.front().type != ObjectType::kCommit ||
      op.ref.compare(0, 11, "refs/gatos/") != 0 || op.ref.compare(0, std::strlen(kJobsPrefix), kJobsPrefix) == 0) {
    r->outcome = Decision::Error(TransitionError::kInvalid, "not a record the ledger keeps");
    return;
  }
  auto v = NoteRef(b, op.ref);
  if (!v.ok()) {
    r->outcome = Decision::FromStatus(v.status());
    return;
  }
  const std::string current = *v;
  const std::string commit = op.objects.front().id;
  r->commit = commit;
  if (current == commit || (op.create_only && !current.empty())) {
    r->existing = true;
    r->commit = current;
    return;
  }
  // A witness pushed with stock git comes as its commit alone (a follower
  // forwards that commit): its tree is read here for a replicated leader's
  // record.
  if (op.kind == LogKind::kWitness) {
    auto pushed = PushedObjects(b, commit, /*job=*/false, &op.objects);
    if (!pushed.ok()) {
      r->outcome = Decision::FromStatus(pushed.status());
      return;
    }
    for (auto& o : *pushed) {
      if (o.id != commit) op.objects.push_back(std::move(o));
    }
  }
  b.entries.push_back({op.kind, "", op.ref, current, commit});
  ++b.counts[std::string(LogKindName(op.kind))];
  b.notes[op.ref] = commit;
  b.new_commits.push_back(commit);
  for (auto& o : op.objects) AddObject(b, std::move(o));
}

}  // namespace gatos
