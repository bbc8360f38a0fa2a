// The replay's costly, independent share on every core: the result commits
// a stretch of the log records are checked (CheckResultCommit and the
// provenance envelope: hashes and Ed25519) by worker threads, each with its
// own repository handle, before the replay reaches them. The replay takes
// each report once and checks nothing twice; it stays sequential for the
// transitions, whose order matters.
#include "gatos/audit/log_audit.h"
#include "gatos/sys/parallel.h"
#include "replay_internal.h"

namespace gatos {
namespace audit_internal {
namespace {

constexpr size_t kPrefetchCommits = 256;          // log commits per stretch
constexpr size_t kPrefetchMaxBytes = 256 << 20;   // checked again when a policy limit is lower

}  // namespace

void Replay::PrefetchResults(const std::vector<CommitInfo>& commits, size_t from) {
  if (from < prefetched_until_) return;
  size_t until = std::min(commits.size(), from + kPrefetchCommits);
  prefetched_until_ = until;
  size_t threads = opt_.threads;
  if (threads == 1) return;
  std::vector<std::string> ids;
  for (size_t i = from; i < until; ++i) {
    auto text = BatchText(commits[i]);
    if (!text.ok() || !*text) continue;
    auto entries = DecodeBatch(**text);
    if (!entries.ok()) continue;  // the replay reports it
    for (const LogEntry& e : *entries) {
      if ((e.kind == LogKind::kResult || e.kind == LogKind::kAttempt) && !e.new_id.empty() &&
          (e.ref.size() > 7 && (e.ref.compare(e.ref.size() - 7, 7, "/result") == 0 ||
                                e.ref.find("/attempts/") != std::string::npos))) {
        ids.push_back(e.new_id);
      }
    }
  }
  if (threads == 0) threads = ThreadsFor(ids.size(), 8);
  if (threads <= 1 || ids.empty()) return;
  std::vector<std::optional<PrefetchedResult>> out(ids.size());
  RunOnThreads(threads, [&](size_t t) {
    auto l = Ledger::Open(ledger_.path());
    if (!l.ok()) return;  // the replay checks these itself
    ObjectLookup lookup = LedgerLookup(l->get());
    ResultCheckLimits limits;
    limits.max_file_bytes = kPrefetchMaxBytes;
    for (size_t i = t; i < ids.size(); i += threads) {
      PrefetchedResult p;
      p.report = CheckResultCommit(lookup, ids[i], limits);
      if (p.report.ok() && !p.report.parsed.parents.empty()) {
        p.provenance_job = p.report.parsed.parents[0];
        p.provenance = CheckResultProvenance(**l, p.report.parsed, p.provenance_job, kPrefetchMaxBytes,
                                             opt_.verify.require_provenance, &p.provenance_present);
      }
      out[i] = std::move(p);
    }
  });
  for (size_t i = 0; i < ids.size(); ++i) {
    if (out[i]) prefetched_.emplace(ids[i], std::move(*out[i]));
  }
}

std::optional<PrefetchedResult> Replay::TakePrefetched(const std::string& commit) {
  auto it = prefetched_.find(commit);
  if (it == prefetched_.end()) return std::nullopt;
  PrefetchedResult p = std::move(it->second);
  prefetched_.erase(it);
  // A failure, or a file over the policy's limit (the threads check under a
  // larger one): the replay checks it itself, so its report is the same.
  if (!p.report.ok()) return std::nullopt;
  for (const auto& f : p.report.parsed.tree_files) {
    if (f.size > max_result_bytes_) return std::nullopt;
  }
  return p;
}

}  // namespace audit_internal
}  // namespace gatos
