#include "gatos/audit/replica_apply.h"

#include <map>
#include <unordered_set>

#include "gatos/git/commit_objects.h"
#include "gatos/ledger/wal.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"

namespace gatos {
namespace {

std::string Short(const std::string& id) { return id.substr(0, 12); }

// The batch record of a log commit among the record's own objects.
Result<std::vector<LogEntry>> BatchOf(Ledger& ledger, const CommitInfo& c) {
  GATOS_ASSIGN_OR_RETURN(auto entries, ledger.ReadTree(c.tree));
  for (const auto& e : entries) {
    if (e.name != "batch") continue;
    GATOS_ASSIGN_OR_RETURN(std::string text, ledger.ReadBlob(e.id, 256 << 20));
    return DecodeBatch(text);
  }
  return DataLossError("log commit " + Short(c.id) + " has no batch record");
}

}  // namespace

Result<AppliedRecord> CheckAndApplyRecord(Ledger& ledger, std::string_view bytes, const VerifyOptions& verify,
                                          bool fsync, WriteAheadLog* wal) {
  return CheckAndApplyRecords(ledger, {bytes}, verify, fsync, wal);
}

Result<AppliedRecord> CheckAndApplyRecords(Ledger& ledger, const std::vector<std::string_view>& records,
                                           const VerifyOptions& verify, bool fsync, WriteAheadLog* wal) {
  if (records.empty()) return InvalidArgumentError("no record to apply");
  std::vector<WalRecord> recs;
  recs.reserve(records.size());
  for (std::string_view bytes : records) {
    WalFileContents decoded = DecodeWalFile(bytes);
    if (decoded.records.size() != 1 || decoded.valid_bytes != bytes.size()) {
      return InvalidArgumentError("not one well-formed batch record (" + std::to_string(decoded.records.size()) +
                                  " record(s) in " + std::to_string(decoded.valid_bytes) + " of " +
                                  std::to_string(bytes.size()) + " bytes)");
    }
    recs.push_back(std::move(decoded.records[0]));
  }
  auto what = [](const WalRecord& rec) {
    return "record " + std::to_string(rec.seq) + " (log commit " + Short(rec.log_id) + ")";
  };

  // The local head and its sequence.
  GATOS_ASSIGN_OR_RETURN(std::string head, ledger.ResolveRef(kLogRef));
  if (head.empty()) return FailedPreconditionError(ledger.path() + " has no " + std::string(kLogRef));
  GATOS_ASSIGN_OR_RETURN(CommitInfo head_commit, ledger.ReadCommit(head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo head_info, ParseLogMessage(head_commit.message));
  // Each record's log commit, by the record's own bytes, before anything
  // is written; the group's objects in one pack.
  std::vector<const GitObject*> all;
  std::unordered_set<std::string_view> ids;
  for (size_t i = 0; i < recs.size(); ++i) {
    const WalRecord& rec = recs[i];
    if (rec.seq != head_info.seq + 1 + static_cast<int64_t>(i)) {
      return FailedPreconditionError(what(rec) + " is not the next one: the local log is at sequence " +
                                     std::to_string(head_info.seq + static_cast<int64_t>(i)));
    }
    bool has_log = false;
    for (const auto& o : rec.objects) {
      if (o.id == rec.log_id && o.type == ObjectType::kCommit) has_log = true;
      if (ids.insert(o.id).second) all.push_back(&o);
    }
    if (!has_log) return InvalidArgumentError(what(rec) + ": the log commit is not among its objects");
  }
  // Unreachable until the log ref moves: a refused record leaves only
  // objects that nothing names (git gc removes them).
  const bool sync_repo = fsync && wal == nullptr;
  GATOS_RETURN_IF_ERROR(ledger.WriteObjectsPacked(all, sync_repo, /*remember=*/true));

  std::map<std::string, std::string> view;  // the last value of each view ref
  Status entries_failed;                     // the first batch that does not decode
  std::string parent = head;
  int64_t parent_seq = head_info.seq;
  for (const WalRecord& rec : recs) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger.ReadCommit(rec.log_id));
    if (c.parents.empty() || c.parents[0] != parent) {
      return FailedPreconditionError(what(rec) + ": its first parent is " +
                                     (c.parents.empty() ? std::string("none") : Short(c.parents[0])) +
                                     ", not the local log head " + Short(parent) + " (sequence " +
                                     std::to_string(parent_seq) + ")");
    }
    // Every job commit the batch submits is here with its tree and all
    // under it, from the records or from before: a follower holds
    // everything the leader holds for a job, or refuses the record. (A
    // batch that does not decode is the auditor's to report, below.)
    Result<std::vector<LogEntry>> entries = BatchOf(ledger, c);
    for (size_t i = 0; entries.ok() && i < entries->size(); ++i) {
      const LogEntry& e = (*entries)[i];
      if (e.kind != LogKind::kSubmit || e.new_id.empty()) continue;
      auto objects = CommitObjects(LedgerLookup(&ledger), e.new_id);
      if (!objects.ok()) {
        return PermissionDeniedError(what(rec) + " refused: it records job commit " + Short(e.new_id) + " (" +
                                     e.ref + ") without its objects, and this replica does not have them (" +
                                     objects.status().message() + ")");
      }
    }
    if (entries.ok()) {
      for (const LogEntry& e : *entries) {
        if (!e.ref.empty()) view[e.ref] = e.new_id;
      }
    } else if (entries_failed.ok()) {
      entries_failed = entries.status();
    }
    parent = rec.log_id;
    parent_seq = rec.seq;
  }

  // The auditor's checks, from the local head to the last record's commit:
  // every record of the group, in order. One run: the replay alone (a
  // thread per CPU pays off for an auditor's long runs, not for this).
  LogAuditOptions opts;
  opts.verify = verify;
  opts.since = AuditState{"", head, head_info.seq, 0};
  opts.head = recs.back().log_id;
  opts.compare_refs = false;
  opts.threads = 1;
  GATOS_ASSIGN_OR_RETURN(LogAuditReport report, AuditLog(ledger, opts));
  if (!report.ok()) {
    std::string why;
    for (size_t i = 0; i < report.problems.size() && i < 5; ++i) {
      const LogProblem& p = report.problems[i];
      why += (i ? "; " : "") + p.check + ": " + p.detail;
    }
    if (report.problems.size() > 5) why += "; and " + std::to_string(report.problems.size() - 5) + " more";
    std::string which = what(recs[0]);
    if (recs.size() > 1) which = "records " + std::to_string(recs[0].seq) + "-" + std::to_string(recs.back().seq);
    return PermissionDeniedError(which + " refused by the auditor's checks: " + why);
  }

  // They land: the write-ahead log (one sync for the group), the log ref,
  // then the view refs (the last value of each).
  if (!entries_failed.ok()) return entries_failed;
  if (wal) {
    std::string encoded;
    for (const WalRecord& rec : recs) {
      std::vector<const GitObject*> objects;
      objects.reserve(rec.objects.size());
      for (const auto& o : rec.objects) objects.push_back(&o);
      encoded += EncodeWalRecord(rec.seq, rec.log_id, objects);
    }
    GATOS_RETURN_IF_ERROR(wal->AppendEncoded(recs[0].seq, encoded));  // durable from here
  }
  GATOS_RETURN_IF_ERROR(ledger.CasRef(kLogRef, head, recs.back().log_id, sync_repo));
  Status vs = ledger.SetViewRefs({view.begin(), view.end()});
  if (!vs.ok()) {
    return Status(vs.code(), what(recs.back()) + " is in the log, but its view refs were not all written (" +
                                 vs.message() + "); a writer's next open repairs them from the log");
  }
  return AppliedRecord{recs.back().seq, recs.back().log_id, report.transitions};
}

}  // namespace gatos
