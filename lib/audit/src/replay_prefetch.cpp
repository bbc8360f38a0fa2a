// The replay's costly, independent share on other cores: the result commits
// of the next stretch of the log are checked (CheckResultCommit and the
// provenance envelope: hashes and Ed25519) by background threads, each with
// its own repository handle, while the replay works through the current
// stretch. The replay takes each report once and checks nothing twice; it
// stays sequential for the transitions, whose order matters.
#include "gatos/audit/log_audit.h"
#include "gatos/sys/parallel.h"
#include "replay_internal.h"

namespace gatos {
namespace audit_internal {
namespace {

constexpr size_t kPrefetchCommits = 256;         // log commits per stretch, at most
constexpr size_t kPrefetchObjects = 6'000;       // commits to check per stretch, about: the
                                                 // replay of the last one has no other core's help
constexpr size_t kPrefetchMaxBytes = 256 << 20;  // checked again when a policy limit is lower

}  // namespace

// The result commits the log commits [from, *until) record, and their lease
// and job commits (read on the replay's thread: its Ledger is not shared).
// The stretch ends early, setting *until, once it holds kPrefetchObjects.
std::vector<std::string> Replay::ResultsIn(const std::vector<CommitInfo>& commits, size_t from, size_t* until,
                                           std::vector<std::pair<std::string, bool>>* leases,
                                           std::vector<std::string>* jobs) {
  std::vector<std::string> ids;
  for (size_t i = from; i < *until; ++i) {
    if (i > from && ids.size() + leases->size() + jobs->size() >= kPrefetchObjects) {
      *until = i;
      break;
    }
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
      if ((e.kind == LogKind::kClaim || e.kind == LogKind::kTakeover || e.kind == LogKind::kRenew) &&
          !e.new_id.empty() && e.ref.size() > 6 && e.ref.compare(e.ref.size() - 6, 6, "/lease") == 0) {
        leases->emplace_back(e.new_id, e.kind == LogKind::kRenew);
      }
      if (e.kind == LogKind::kSubmit && !e.new_id.empty() && e.ref.size() > 4 &&
          e.ref.compare(e.ref.size() - 4, 4, "/job") == 0) {
        jobs->push_back(e.new_id);
      }
    }
  }
  return ids;
}

namespace {

// Checks item k of `j` (over its ids, then its jobs, then its leases) with
// the repository handle `l`, used by this thread alone.
void CheckPrefetchItem(PrefetchJob* j, size_t k, Ledger* l) {
  ObjectLookup lookup = LedgerLookup(l);
  if (k < j->ids.size()) {
    ResultCheckLimits limits;
    limits.max_file_bytes = kPrefetchMaxBytes;
    PrefetchedResult p;
    ResultTreeData tree;
    p.report = CheckResultCommit(lookup, j->ids[k], limits, &tree);
    if (p.report.ok() && !p.report.parsed.parents.empty()) {
      p.provenance_job = p.report.parsed.parents[0];
      p.provenance = CheckResultProvenance(*l, p.report.parsed, p.provenance_job, kPrefetchMaxBytes,
                                           j->require_provenance, &p.provenance_present, &tree);
    }
    j->out[k] = std::move(p);
    return;
  }
  k -= j->ids.size();
  if (k < j->jobs.size()) {
    // Job commits: their objects, and their SSH signature (whether the
    // signer may submit is the replay's to judge, under the policy then).
    PrefetchedJob pj;
    auto commit = lookup(j->jobs[k]);
    if (!commit.ok() || commit->first != ObjectType::kCommit) return;
    auto raw = ParseRawCommit(commit->second, j->jobs[k]);
    if (!raw.ok()) return;
    auto tree = lookup(raw->tree);
    if (!tree.ok() || tree->first != ObjectType::kTree) return;
    auto entries = ParseTree(tree->second, raw->tree);
    if (!entries.ok()) return;
    auto yaml = std::find_if(entries->begin(), entries->end(), [](const TreeEntry& e) { return e.name == "job.yaml"; });
    if (yaml == entries->end()) return;
    auto blob = lookup(yaml->id);
    if (!blob.ok() || blob->first != ObjectType::kBlob || blob->second.size() > kPrefetchMaxBytes) return;
    if (!raw->signature.empty()) {
      auto sig = ParseSshSignature(raw->signature);
      if (sig.ok() && SshSigVerify(*sig, raw->signed_data, kSignerNamespaceGit).ok()) pj.signer = sig->key;
    }
    pj.objects.push_back({ObjectType::kCommit, std::move(commit->second), j->jobs[k]});
    pj.objects.push_back({ObjectType::kTree, std::move(tree->second), raw->tree});
    pj.objects.push_back({ObjectType::kBlob, std::move(blob->second), yaml->id});
    j->job_out[k] = std::move(pj);
    return;
  }
  k -= j->jobs.size();
  // Lease commits: the worker's Request-Sig, and the ledger's SSH signature
  // on those of ledgers written before lease commits were unsigned.
  auto c = l->ReadCommit(j->leases[k].first);
  if (!c.ok()) return;
  auto info = ParseLeaseCommitMessage(c->message);
  if (!info.ok()) return;
  PrefetchedLease pl;
  auto sig = ParseSshSignature(c->signature);
  if (!c->signature.empty() && sig.ok() && SshSigVerify(*sig, c->signed_data, kSignerNamespaceGit).ok()) pl.signer = sig->key;
  pl.job_hex = info->job_hex;
  pl.renew = j->leases[k].second;
  std::string payload = pl.renew
                            ? rpc::RenewPayload(info->job_hex, info->worker_hex, info->epoch, info->requested_at_ms)
                            : rpc::ClaimPayload(info->job_hex, info->worker_hex, info->epoch, info->requested_at_ms);
  pl.request_sig_ok = Verifies(info->worker_hex, payload, info->request_sig_hex);
  pl.info = std::move(*info);
  pl.commit = std::move(*c);
  j->lease_out[k] = std::move(pl);
}

// Takes and checks items of `j` until none is left.
void CheckPrefetchItems(PrefetchJob* j, Ledger* l) {
  const size_t total = j->ids.size() + j->jobs.size() + j->leases.size();
  for (size_t k = j->next.fetch_add(1); k < total; k = j->next.fetch_add(1)) CheckPrefetchItem(j, k, l);
}

}  // namespace

void Replay::LaunchPrefetch(const std::vector<CommitInfo>& commits, size_t from) {
  auto job = std::make_unique<PrefetchJob>();
  job->until = std::min(commits.size(), from + kPrefetchCommits);
  job->ids = ResultsIn(commits, from, &job->until, &job->leases, &job->jobs);
  job->out.resize(job->ids.size());
  job->lease_out.resize(job->leases.size());
  job->job_out.resize(job->jobs.size());
  job->require_provenance = opt_.verify.require_provenance;
  size_t threads =
      opt_.threads ? opt_.threads - 1 : ThreadsFor(job->ids.size() + job->leases.size() + job->jobs.size(), 8);
  threads = std::max<size_t>(1, threads);
  PrefetchJob* j = job.get();
  // One repository handle per checking thread, kept from stretch to stretch
  // (its caches stay warm); each is used by one thread at a time.
  while (prefetch_ledgers_.size() < threads) {
    auto l = Ledger::Open(ledger_.path());
    prefetch_ledgers_.push_back(l.ok() ? std::move(*l) : nullptr);
  }
  std::vector<Ledger*> ledgers;
  for (const auto& l : prefetch_ledgers_) ledgers.push_back(l.get());
  job->thread = std::thread([j, threads, ledgers] {
    RunOnThreads(threads, [&](size_t t) {
      if (ledgers[t]) CheckPrefetchItems(j, ledgers[t]);  // else the others take its share
    });
  });
  pending_ = std::move(job);
}

void Replay::FinishPrefetch() {
  if (!pending_) return;
  // What the checking threads have not taken yet, the replay checks
  // alongside them instead of waiting idle (with its own handle).
  CheckPrefetchItems(pending_.get(), &ledger_);
  pending_->thread.join();
  for (size_t i = 0; i < pending_->ids.size(); ++i) {
    if (pending_->out[i]) prefetched_.emplace(pending_->ids[i], std::move(*pending_->out[i]));
  }
  for (size_t i = 0; i < pending_->leases.size(); ++i) {
    if (pending_->lease_out[i]) prefetched_leases_.emplace(pending_->leases[i].first, std::move(*pending_->lease_out[i]));
  }
  for (size_t i = 0; i < pending_->jobs.size(); ++i) {
    if (pending_->job_out[i]) prefetched_jobs_.emplace(pending_->jobs[i], std::move(*pending_->job_out[i]));
  }
  prefetched_until_ = pending_->until;
  pending_.reset();
}

void Replay::PrefetchResults(const std::vector<CommitInfo>& commits, size_t from) {
  if (opt_.threads == 1 || from < prefetched_until_) return;
  if (!pending_) LaunchPrefetch(commits, from);  // the first stretch: nothing to overlap with
  FinishPrefetch();
  if (prefetched_until_ < commits.size()) LaunchPrefetch(commits, prefetched_until_);
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

std::optional<PrefetchedLease> Replay::TakePrefetchedLease(const std::string& commit) {
  auto it = prefetched_leases_.find(commit);
  if (it == prefetched_leases_.end()) return std::nullopt;
  PrefetchedLease p = std::move(it->second);
  prefetched_leases_.erase(it);
  return p;
}

std::optional<PrefetchedJob> Replay::TakePrefetchedJob(const std::string& commit) {
  auto it = prefetched_jobs_.find(commit);
  if (it == prefetched_jobs_.end()) return std::nullopt;
  PrefetchedJob p = std::move(it->second);
  prefetched_jobs_.erase(it);
  return p;
}

Replay::~Replay() {
  if (pending_ && pending_->thread.joinable()) pending_->thread.join();
}

}  // namespace audit_internal
}  // namespace gatos
