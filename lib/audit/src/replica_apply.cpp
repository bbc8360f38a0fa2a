#include "gatos/audit/replica_apply.h"

#include <map>

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
  WalFileContents decoded = DecodeWalFile(bytes);
  if (decoded.records.size() != 1 || decoded.valid_bytes != bytes.size()) {
    return InvalidArgumentError("not one well-formed batch record (" + std::to_string(decoded.records.size()) +
                                " record(s) in " + std::to_string(decoded.valid_bytes) + " of " +
                                std::to_string(bytes.size()) + " bytes)");
  }
  const WalRecord& rec = decoded.records[0];
  const std::string what = "record " + std::to_string(rec.seq) + " (log commit " + Short(rec.log_id) + ")";

  // The local head and its sequence.
  GATOS_ASSIGN_OR_RETURN(std::string head, ledger.ResolveRef(kLogRef));
  if (head.empty()) return FailedPreconditionError(ledger.path() + " has no " + std::string(kLogRef));
  GATOS_ASSIGN_OR_RETURN(CommitInfo head_commit, ledger.ReadCommit(head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo head_info, ParseLogMessage(head_commit.message));
  if (rec.seq != head_info.seq + 1) {
    return FailedPreconditionError(what + " is not the next one: the local log is at sequence " +
                                   std::to_string(head_info.seq));
  }
  // Its log commit, by the record's own bytes, before anything is written.
  const GitObject* log = nullptr;
  for (const auto& o : rec.objects) {
    if (o.id == rec.log_id && o.type == ObjectType::kCommit) log = &o;
  }
  if (!log) return InvalidArgumentError(what + ": the log commit is not among its objects");
  std::vector<const GitObject*> all;
  all.reserve(rec.objects.size());
  for (const auto& o : rec.objects) all.push_back(&o);
  // Unreachable until the log ref moves: a refused record leaves only
  // objects that nothing names (git gc removes them).
  const bool sync_repo = fsync && wal == nullptr;
  GATOS_RETURN_IF_ERROR(ledger.WriteObjectsPacked(all, sync_repo, /*remember=*/true));
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger.ReadCommit(rec.log_id));
  if (c.parents.empty() || c.parents[0] != head) {
    return FailedPreconditionError(what + ": its first parent is " +
                                   (c.parents.empty() ? std::string("none") : Short(c.parents[0])) +
                                   ", not the local log head " + Short(head) + " (sequence " +
                                   std::to_string(head_info.seq) + ")");
  }

  // Every job commit the batch submits is here with its tree and all under
  // it, from the record or from before: a follower holds everything the
  // leader holds for a job, or refuses the record. (A batch that does not
  // decode is the auditor's to report, below.)
  Result<std::vector<LogEntry>> entries = BatchOf(ledger, c);
  for (size_t i = 0; entries.ok() && i < entries->size(); ++i) {
    const LogEntry& e = (*entries)[i];
    if (e.kind != LogKind::kSubmit || e.new_id.empty()) continue;
    auto objects = CommitObjects(LedgerLookup(&ledger), e.new_id);
    if (!objects.ok()) {
      return PermissionDeniedError(what + " refused: it records job commit " + Short(e.new_id) + " (" + e.ref +
                                   ") without its objects, and this replica does not have them (" +
                                   objects.status().message() + ")");
    }
  }

  // The auditor's checks, from the local head to the record's commit.
  LogAuditOptions opts;
  opts.verify = verify;
  opts.since = AuditState{"", head, head_info.seq, 0};
  opts.head = rec.log_id;
  opts.compare_refs = false;
  GATOS_ASSIGN_OR_RETURN(LogAuditReport report, AuditLog(ledger, opts));
  if (!report.ok()) {
    std::string why;
    for (size_t i = 0; i < report.problems.size() && i < 5; ++i) {
      const LogProblem& p = report.problems[i];
      why += (i ? "; " : "") + p.check + ": " + p.detail;
    }
    if (report.problems.size() > 5) why += "; and " + std::to_string(report.problems.size() - 5) + " more";
    return PermissionDeniedError(what + " refused by the auditor's checks: " + why);
  }

  // It lands: the log ref, then the view refs (the last value of each).
  if (!entries.ok()) return entries.status();
  if (wal) GATOS_RETURN_IF_ERROR(wal->Append(rec.seq, rec.log_id, all));  // durable from here
  GATOS_RETURN_IF_ERROR(ledger.CasRef(kLogRef, head, rec.log_id, sync_repo));
  std::map<std::string, std::string> view;
  for (const LogEntry& e : *entries) {
    if (!e.ref.empty()) view[e.ref] = e.new_id;
  }
  Status vs = ledger.SetViewRefs({view.begin(), view.end()});
  if (!vs.ok()) {
    return Status(vs.code(), what + " is in the log, but its view refs were not all written (" + vs.message() +
                                 "); a writer's next open repairs them from the log");
  }
  return AppliedRecord{rec.seq, rec.log_id, report.transitions};
}

}  // namespace gatos
