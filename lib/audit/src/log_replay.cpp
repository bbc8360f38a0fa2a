// The auditor's walk over the log: each log commit checked and its batch replayed (log_audit.h).
#include "gatos/audit/log_audit.h"
#include "gatos/model/time_format.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

Status Replay::CollectCommits(std::vector<CommitInfo>* commits) {
  if (opt_.head.empty()) {
    GATOS_ASSIGN_OR_RETURN(head_, ledger_.ResolveRef(kLogRef));
  } else {
    head_ = opt_.head;
  }
  if (head_.empty()) {
    return NotFoundError(ledger_.path() + " has no " + std::string(kLogRef) +
                         "; is it a gatos ledger? A plain 'git clone' does not copy refs/gatos/*: use "
                         "'git clone --mirror LEDGER' or 'git fetch LEDGER \"refs/gatos/*:refs/gatos/*\"'");
  }
  rep_->head = head_;
  int64_t stop = opt_.since ? opt_.since->seq : 0;
  std::string cur = head_;
  int64_t expect = -1;  // the seq the next (older) commit must have
  while (true) {
    auto c = ledger_.ReadCommit(cur);
    if (!c.ok()) {
      return DataLossError("log commit " + cur + " cannot be read (" + c.status().message() +
                           "); is the clone complete?");
    }
    auto info = ParseLogMessage(c->message);
    if (!info.ok()) {
      Problem("log_message", "log commit " + Short(cur) + ": " + info.status().message());
      return OkStatus();
    }
    if (commits->empty()) rep_->seq = info->seq;
    if (expect >= 0 && info->seq != expect) {
      Problem("log_seq", "log commit " + Short(cur) + " has Log-Seq " + std::to_string(info->seq) +
                             " but its child has Log-Seq " + std::to_string(expect + 1) +
                             (info->seq < expect ? ": sequence numbers are missing (a gap)" : ": a repeated or reordered sequence"),
              info->seq);
      return OkStatus();
    }
    if (opt_.since && info->seq == stop) {
      if (cur != opt_.since->head) {
        Problem("log_rewritten",
                "the log was rewritten: its commit at sequence " + std::to_string(stop) + " is " + cur +
                    ", but the head verified last time (state file) was " + opt_.since->head +
                    " at that sequence; the history an auditor saw is gone",
                stop);
      }
      seq_commits_[info->seq] = cur;
      std::reverse(commits->begin(), commits->end());
      return OkStatus();
    }
    if (opt_.since && info->seq < stop) {
      Problem("log_rewritten", "the log was rolled back: its head is at sequence " + std::to_string(rep_->seq) +
                                   ", before the head verified last time (sequence " + std::to_string(stop) +
                                   ", commit " + opt_.since->head + ")",
              info->seq);
      return OkStatus();
    }
    seq_commits_[info->seq] = cur;
    expect = info->seq - 1;
    bool root = info->seq == 1;
    std::string parent = c->parents.empty() ? "" : c->parents[0];
    commits->push_back(std::move(*c));
    if (root) break;
    if (parent.empty()) {
      Problem("log_seq", "log commit " + Short(cur) + " (Log-Seq " + std::to_string(info->seq) +
                             ") has no parent: the log was truncated (its root must be Log-Seq 1)",
              info->seq);
      return OkStatus();
    }
    cur = parent;
  }
  std::reverse(commits->begin(), commits->end());
  return OkStatus();
}

Status Replay::LoadStart() {
  if (!opt_.since) return OkStatus();
  rep_->incremental = true;
  rep_->ledger_root = opt_.since->ledger_root;
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(opt_.since->head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo info, ParseLogMessage(c.message));
  pol_.commit = info.policy_commit;
  GATOS_ASSIGN_OR_RETURN(pol_.policy, ledger_.ReadPolicyAt(pol_.commit));
  start_tree_ = c.tree;
  term_ = info.term;
  start_index_.emplace(&ledger_);
  start_index_->Reset(c.tree);
  seq_ = info.seq;
  return OkStatus();
}

Result<std::optional<JobRecord>*> Replay::Record(const std::string& job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return &it->second;
  std::optional<JobRecord> r;
  if (start_index_) {
    auto got = start_index_->Get(job);
    if (!got.ok()) return got.status();
    r = std::move(*got);
  }
  return &jobs_.emplace(job, std::move(r)).first->second;
}

bool Replay::WorkerAllowed(const std::string& worker_hex, std::string* why) {
  auto key = ParseWorkerId("ed25519:" + worker_hex);
  if (!key.ok()) {
    *why = "Worker-Id: " + key.status().message();
    return false;
  }
  bool by_policy = opt_.verify.trust_policy_workers &&
                   pol_.policy.workers.FindKey(*key, kSignerNamespaceGit, now_ / 1000) != nullptr;
  bool by_extra = opt_.verify.extra_workers &&
                  opt_.verify.extra_workers->FindKey(*key, kSignerNamespaceGit, now_ / 1000) != nullptr;
  if (by_policy || by_extra) return true;
  *why = "worker ed25519:" + worker_hex + " is not allowed by " +
         (opt_.verify.trust_policy_workers ? "policy " + Short(pol_.commit) : std::string("--allowed-signers")) +
         " at " + FormatRfc3339Millis(now_);
  return false;
}

Status Replay::Run() {
  std::vector<CommitInfo> commits;
  GATOS_RETURN_IF_ERROR(CollectCommits(&commits));
  if (!rep_->problems.empty()) return OkStatus();
  GATOS_RETURN_IF_ERROR(LoadStart());
  rep_->from_seq = opt_.since ? opt_.since->seq + 1 : 1;
  rep_->settling_after = opt_.settling_after;
  GATOS_RETURN_IF_ERROR(LoadSettlingBeforeStart());
  for (size_t ci = 0; ci < commits.size(); ++ci) {
    const CommitInfo& c = commits[ci];
    PrefetchResults(commits, ci);
    auto info = ParseLogMessage(c.message);
    if (!info.ok()) {
      Problem("log_message", "log commit " + Short(c.id) + ": " + info.status().message());
      break;
    }
    if (info->seq != seq_ + 1) {
      Problem("log_seq", "log commit " + Short(c.id) + " has Log-Seq " + std::to_string(info->seq) + ", expected " +
                             std::to_string(seq_ + 1),
              info->seq);
      break;
    }
    seq_ = info->seq;
    now_ = info->time_ms;
    // Replicated ledgers: a batch written by a leader of an older term
    // than one already in the log is a deposed leader's, which the fence
    // should have stopped. (Single-node batches carry no term.)
    if (info->term > 0 && info->term < term_) {
      Problem("log_term", "log commit " + Short(c.id) + " has Ledger-Term " + std::to_string(info->term) +
                              ", after a batch of term " + std::to_string(term_) + ": terms never decrease",
              info->seq);
    }
    term_ = std::max(term_, info->term);
    Status s = VerifyCommit(c, *info);
    if (!s.ok()) return s;
    ++rep_->commits;
    if (rep_->problems.size() >= kMaxProblems) break;
  }
  FinishSchedules();
  if (rep_->problems.empty()) {
    if (opt_.compare_refs) CompareRefs();
    CompareIndex();
  }
  rep_->jobs_touched = touched_.size();
  for (const auto& [job, runs] : runs_) {
    if (runs.size() > 1) rep_->reruns.push_back({job, runs});
  }
  std::sort(rep_->reruns.begin(), rep_->reruns.end(),
            [](const auto& a, const auto& b) { return a.job_hex < b.job_hex; });
  if (opt_.witnesses) CheckWitnesses();
  if (dropped_) {
    rep_->problems.push_back({"too_many_problems", std::to_string(dropped_) + " more problems not listed", 0, "", ""});
  }
  return OkStatus();
}

Result<std::optional<std::string>> Replay::BatchText(const CommitInfo& c) {
  auto entries = ledger_.ReadTree(c.tree);
  if (!entries.ok()) return DataLossError("log commit " + Short(c.id) + ": " + entries.status().message());
  std::string blob;
  for (const auto& e : *entries) {
    if (e.name == "batch") blob = e.id;
  }
  if (blob.empty()) return std::optional<std::string>();
  auto text = ledger_.ReadBlob(blob, 256 << 20);
  if (!text.ok()) return DataLossError("log commit " + Short(c.id) + ": batch: " + text.status().message());
  return std::optional<std::string>(std::move(*text));
}

void Replay::AddSettling(const std::vector<LogEntry>& entries) {
  for (const LogEntry& e : entries) {
    if (e.ref.empty()) continue;
    auto& values = settling_[e.ref];
    values.insert(e.old_id);
    values.insert(e.new_id);
  }
}

Status Replay::LoadSettlingBeforeStart() {
  // An incremental run whose settling window opens before the recorded
  // head: the batches in between are not replayed, but their refs settle.
  if (!opt_.since || opt_.settling_after < 0 || opt_.settling_after >= opt_.since->seq) return OkStatus();
  std::string cur = opt_.since->head;
  for (int64_t seq = opt_.since->seq; seq > opt_.settling_after && !cur.empty(); --seq) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(cur));
    GATOS_ASSIGN_OR_RETURN(auto text, BatchText(c));
    if (text) {
      auto entries = DecodeBatch(*text);
      if (entries.ok()) AddSettling(*entries);
    }
    cur = c.parents.empty() ? "" : c.parents[0];
  }
  return OkStatus();
}

Status Replay::VerifyCommit(const CommitInfo& c, const LogCommitInfo& info) {
  // The key that signs this batch: the policy's in force before it; for the
  // root, the one its policy names (or the pinned one).
  if (info.seq == 1) {
    rep_->ledger_root = c.id;
    pol_.commit = info.policy_commit;
    auto p = ledger_.ReadPolicyAt(info.policy_commit);
    if (!p.ok()) {
      Problem("log_policy", "the first log commit's policy " + Short(info.policy_commit) +
                                " cannot be read: " + p.status().message(),
              1);
      return OkStatus();
    }
    pol_.policy = std::move(*p);
    if (opt_.verify.ledger_key && pol_.policy.ledger_key != *opt_.verify.ledger_key) {
      Problem("log_signature", "the ledger's first policy names ledger key " + pol_.policy.ledger_key.WorkerId() +
                                   ", not the pinned key " + opt_.verify.ledger_key->WorkerId(),
              1);
      return OkStatus();
    }
  }
  batch_key_ = pol_.policy.ledger_key;
  rotated_key_.reset();
  max_result_bytes_ = std::max<size_t>(max_result_bytes_, static_cast<size_t>(std::max<int64_t>(0, pol_.policy.settings.max_result_bytes)));
  if (std::string why = SignatureProblem(c, batch_key_); !why.empty()) {
    Problem("log_signature", "log commit " + Short(c.id) + " (Log-Seq " + std::to_string(info.seq) +
                                 ") is not signed by the ledger key in force " + batch_key_.WorkerId() + ": " + why,
            info.seq);
    return OkStatus();
  }
  if (info.ledger_key_hex != batch_key_.Hex()) {
    Problem("log_signature", "log commit " + Short(c.id) + " names Ledger-Key ed25519:" + info.ledger_key_hex +
                                 " but the ledger key in force is " + batch_key_.WorkerId(),
            info.seq);
  }
  std::string batch_text;
  {
    auto text = BatchText(c);
    if (!text.ok()) return text.status();
    if (!*text) {
      Problem("log_batch", "log commit " + Short(c.id) + " has no batch record in its tree", info.seq);
      return OkStatus();
    }
    batch_text = std::move(**text);
  }
  auto entries = DecodeBatch(batch_text);
  if (!entries.ok()) {
    Problem("log_batch", "log commit " + Short(c.id) + ": " + entries.status().message(), info.seq);
    return OkStatus();
  }
  if (opt_.settling_after >= 0 && info.seq > opt_.settling_after) {
    AddSettling(*entries);
  } else if (opt_.settling_after < 0 && !opt_.since && opt_.fetched_at_ms > 0 &&
             info.time_ms >= opt_.fetched_at_ms - kTornWindowMs) {
    AddSettling(*entries);  // a ref fetched before this batch's views were written
    torn_window_ = true;
  }
  std::set<std::string> parents(c.parents.begin(), c.parents.end());
  if (info.seq == 1) {
    if (entries->size() != 1 || (*entries)[0].kind != LogKind::kInit || (*entries)[0].ref != kPolicyRef ||
        !(*entries)[0].old_id.empty() || (*entries)[0].new_id != info.policy_commit) {
      Problem("log_batch", "the first log commit must record only init of refs/gatos/policy to its Policy", 1);
      return OkStatus();
    }
    // The root policy is signed by its own ledger key.
    auto pc = ledger_.ReadCommit(info.policy_commit);
    std::string why = pc.ok() ? SignatureProblem(*pc, pol_.policy.ledger_key) : pc.status().message();
    if (!why.empty()) {
      Problem("log_policy", "the first policy commit " + Short(info.policy_commit) +
                                " is not signed by the ledger key it names: " + why,
              1);
    }
    ++rep_->by_kind["init"];
    ++rep_->transitions;
    return OkStatus();
  }
  bool batch_ok = true;
  for (const LoggedTransition& t : Group(*entries)) {
    ++rep_->transitions;
    ++rep_->by_kind[std::string(LogKindName(t.kind))];
    ReplayTransition(t, c, info, parents, &batch_ok);
  }
  if (info.policy_commit != pol_.commit) {
    Problem("log_policy", "log commit " + Short(c.id) + " says the policy in force is " + Short(info.policy_commit) +
                              ", but its transitions leave " + Short(pol_.commit),
            info.seq);
  }
  // A rotation takes effect for the next batch.
  return OkStatus();
}

void Replay::ReplayTransition(const LoggedTransition& t, const CommitInfo& c, const LogCommitInfo& info,
                             const std::set<std::string>& parents, bool* batch_ok) {
  switch (t.kind) {
    case LogKind::kInit:
      Fail(t, "log_batch", "init appears after the first log commit");
      return;
    case LogKind::kPolicy:
      PolicyChange(t);
      return;
    case LogKind::kBatch:
    case LogKind::kWitness:
    case LogKind::kSchedule:
    case LogKind::kWatch:
      Note(t, parents);
      return;
    default:
      break;
  }
  if (t.job_hex.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " transition without a job");
    return;
  }
  auto slot = Record(t.job_hex);
  if (!slot.ok()) {
    Fail(t, "index", "the recorded head's index: " + slot.status().message());
    return;
  }
  std::optional<JobRecord>& rec = **slot;
  touched_.insert(t.job_hex);
  std::optional<JobRecord> next;
  switch (t.kind) {
    case LogKind::kSubmit:
      next = Submit(t, rec);
      break;
    case LogKind::kFire:
      next = Fire(t, rec);
      break;
    case LogKind::kClaim:
    case LogKind::kTakeover:
    case LogKind::kRenew:
      next = Lease(t, rec);
      break;
    case LogKind::kResult:
    case LogKind::kAttempt:
      next = ResultOf(t, rec, c);
      break;
    case LogKind::kCancel:
    case LogKind::kRetry:
      next = UserRequest(t, rec);
      break;
    default:
      next = Other(t, rec);
      break;
  }
  if (!next) {
    *batch_ok = false;
    return;
  }
  // The lines must be exactly the ref changes of the transition.
  std::vector<LogEntry> want = t.kind == LogKind::kFire ? FireEntries(rec, *next, fire_schedule_, fire_previous_)
                                                        : TransitionEntries(t.kind, rec, *next);
  if (want != t.entries) {
    std::string detail = "the batch lines of this " + std::string(LogKindName(t.kind)) +
                         " do not match the transition it records: recorded [";
    for (size_t i = 0; i < t.entries.size() && i < 4; ++i) detail += (i ? "; " : "") + EntryText(t.entries[i]);
    detail += "], the transition implies [";
    for (size_t i = 0; i < want.size() && i < 4; ++i) detail += (i ? "; " : "") + EntryText(want[i]);
    Fail(t, "log_batch", detail + "]");
    *batch_ok = false;
    return;
  }
  // Every commit named for the first time is a parent of the log commit.
  std::optional<std::set<std::string>> known;  // the job's commits before: built only when needed
  for (const LogEntry& e : t.entries) {
    if (e.new_id.empty() || parents.count(e.new_id)) continue;
    if (!known) {
      known.emplace();
      if (rec) {
        for (const auto& [r, id] : JobRefs(*rec)) known->insert(id);
      }
    }
    if (!known->count(e.new_id)) {
      Fail(t, "log_parents", "log commit " + Short(c.id) + " records " + e.ref + " -> " + Short(e.new_id) +
                                 " but does not name that commit as a parent (a clone of the log alone would lack it)");
    }
  }
  (void)info;
  rec = std::move(next);
}

void Replay::PolicyChange(const LoggedTransition& t) {
  for (const LogEntry& e : t.entries) {
    if (e.ref != kPolicyRef || e.old_id != pol_.commit || e.new_id.empty()) {
      Fail(t, "log_policy", "a policy change must move refs/gatos/policy from the policy in force " + Short(pol_.commit));
      return;
    }
    auto c = ledger_.ReadCommit(e.new_id);
    if (!c.ok()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " cannot be read: " + c.status().message());
      return;
    }
    const Ed25519PublicKey& signer = rotated_key_ ? *rotated_key_ : batch_key_;
    if (std::string why = SignatureProblem(*c, signer); !why.empty()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " is not signed by the ledger key in force: " + why);
      return;
    }
    if (c->parents.size() != 1 || c->parents[0] != pol_.commit) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " does not follow the policy in force");
      return;
    }
    auto p = ledger_.ReadPolicyAt(e.new_id);
    if (!p.ok()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + ": " + p.status().message());
      return;
    }
    if (p->ledger_key != signer) rotated_key_ = p->ledger_key;
    pol_.commit = e.new_id;
    pol_.policy = std::move(*p);
  }
}

void Replay::Note(const LoggedTransition& t, const std::set<std::string>& parents) {
  for (const LogEntry& e : t.entries) {
    const char* prefix = t.kind == LogKind::kBatch      ? kBatchPrefix
                         : t.kind == LogKind::kSchedule ? kSchedulePrefix
                         : t.kind == LogKind::kWatch    ? kWatchPrefix
                                                        : kWitnessPrefix;
    if (e.ref.rfind(prefix, 0) != 0 || e.new_id.empty()) {
      Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " record must move a ref under " + prefix);
      continue;
    }
    auto it = notes_.find(e.ref);
    if (it != notes_.end() && it->second != e.old_id) {
      Fail(t, "log_batch", e.ref + " was " + Short(it->second) + ", the batch says it was " + Short(e.old_id));
    }
    if (t.kind == LogKind::kSchedule) {
      // An incremental run (or a replica's follower) has not seen the
      // schedule's earlier moves: the batch's old value is its previous commit.
      ScheduleChange(t, e, it != notes_.end() ? it->second : rep_->incremental ? e.old_id : "");
    }
    if (t.kind == LogKind::kWatch) WatchChange(t, e);
    notes_[e.ref] = e.new_id;
    if (!parents.count(e.new_id)) {
      Fail(t, "log_parents", e.ref + " -> " + Short(e.new_id) + " is not a parent of the log commit");
    }
    if (t.kind == LogKind::kBatch) {
      if (!e.old_id.empty()) Fail(t, "log_batch", "a batch record is written once: " + e.ref);
      auto c = ledger_.ReadCommit(e.new_id);
      std::string why = c.ok() ? SignatureProblem(*c, batch_key_) : c.status().message();
      if (!why.empty()) Fail(t, "batch_record", "batch record " + Short(e.new_id) + ": " + why);
    } else if (t.kind == LogKind::kWitness) {
      auto w = CheckWitnessCommit(lookup_, e.new_id);
      std::string key = e.ref.substr(std::strlen(kWitnessPrefix));
      if (!w.ok()) {
        Fail(t, "witness_commit", e.ref + ": " + w.status().message());
      } else if (w->key_hex != key) {
        Fail(t, "witness_commit", e.ref + " holds a witness by ed25519:" + w->key_hex);
      }
      logged_witnesses_.emplace_back(e.ref, e.new_id);
    }
  }
}

// A schedule commit moved: the same rule as the ledger's
// (ScheduleChangeDecision), against the policy in force at the batch.
void Replay::ScheduleChange(const LoggedTransition& t, const LogEntry& e, const std::string& previous) {
  auto next = CheckScheduleCommit(lookup_, e.new_id);
  if (!next.ok()) {
    Fail(t, "schedule_commit", e.ref + ": " + next.status().message());
    return;
  }
  if (e.ref != kSchedulePrefix + next->spec.name) {
    Fail(t, "schedule_commit", e.ref + " holds schedule " + next->spec.name);
    return;
  }
  std::optional<ScheduleCommit> current;
  if (!previous.empty()) {
    auto cur = CheckScheduleCommit(lookup_, previous);
    if (!cur.ok()) {
      Fail(t, "schedule_commit", e.ref + " before: " + cur.status().message());
      return;
    }
    current = std::move(*cur);
  }
  if (std::abs(next->time_ms - now_) > rpc::kMaxRequestSkewMs + 1000) {
    // Ticks fire from the commit's time on: the ledger records it only
    // when it is within the skew of a signed request.
    Fail(t, "schedule_commit", e.ref + " -> " + Short(e.new_id) + " is dated " + FormatRfc3339Millis(next->time_ms) +
                                   ", more than 60 s from the batch time " + FormatRfc3339Millis(now_));
  }
  Decision d = ScheduleChangeDecision(current, *next, pol_.policy, now_);
  if (!d.ok()) Fail(t, "schedule_commit", e.ref + " -> " + Short(e.new_id) + ": " + d.message);
  TrackSchedule(*next);
}

Result<std::string> Replay::LogCommitAt(int64_t seq) {
  auto it = seq_commits_.find(seq);
  if (it != seq_commits_.end()) return it->second;
  // Walk down from the nearest known later commit.
  auto up = seq_commits_.upper_bound(seq);
  if (up == seq_commits_.end()) return std::string();
  int64_t s = up->first;
  std::string cur = up->second;
  while (s > seq) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(cur));
    if (c.parents.empty()) return std::string();
    cur = c.parents[0];
    --s;
    seq_commits_[s] = cur;
  }
  return cur;
}

}  // namespace audit_internal

Result<LogAuditReport> AuditLog(Ledger& ledger, const LogAuditOptions& options) {
  LogAuditReport rep;
  audit_internal::Replay replay(ledger, options, &rep);
  GATOS_RETURN_IF_ERROR(replay.Run());
  // A jobs_touched figure for the report.
  return rep;
}

}  // namespace gatos
