// A mirror fetched while the ledger wrote (git's ref advertisement is no
// snapshot) can hold refs newer than the log head it fetched. Such a ref is
// "behind": not a tamper finding, but a reason to fetch again. A ref is
// behind only when a later batch of this ledger could have given it the
// value it holds; anything the fetched log contradicts stays a problem.
#include "gatos/audit/log_audit.h"
#include "gatos/model/clock.h"
#include "gatos/model/trailers.h"
#include "replay_internal.h"

namespace gatos {
namespace audit_internal {
namespace {

constexpr int kMaxLeaseChain = 256;

}  // namespace

// The job a commit names in its Job-Id trailer ("" when none).
std::string Replay::JobOfCommit(const CommitInfo& c) {
  auto m = ParseCommitMessage(c.message);
  if (!m.ok()) return "";
  auto id = FindTrailer(m->trailers, "Job-Id");
  if (!id || id->rfind("blake3:", 0) != 0) return "";
  return id->substr(7);
}

// `have` is a lease commit of `job` (its first parent the job commit) whose
// chain of earlier leases (second parents) reaches `recorded` ("" = any).
bool Replay::LeaseDescends(const std::string& job, const std::string& job_commit, std::string have,
                           const std::string& recorded) {
  for (int i = 0; i < kMaxLeaseChain && !have.empty(); ++i) {
    if (have == recorded) return true;
    auto c = ledger_.ReadCommit(have);
    if (!c.ok() || c->parents.empty() || JobOfCommit(*c) != job) return false;
    if (!job_commit.empty() && c->parents[0] != job_commit) return false;
    if (c->parents.size() < 2) return recorded.empty();  // the job's first claim
    have = c->parents[1];
  }
  return false;
}

bool Replay::LaterLogCould(const std::string& ref, const std::string& have) {
  std::string job, leaf;
  if (!SplitJobRef(ref, &job, &leaf)) {
    if (have.empty()) return false;  // the ledger deletes no policy, batch or witness ref
    auto c = ledger_.ReadCommit(have);
    if (!c.ok()) return false;
    if (ref == kPolicyRef) {
      // A later policy commit descends from the one in force.
      std::string cur = have;
      for (int i = 0; i < kMaxLeaseChain; ++i) {
        if (cur == pol_.commit) return true;
        auto p = ledger_.ReadCommit(cur);
        if (!p.ok() || p->parents.empty()) return false;
        cur = p->parents[0];
      }
      return false;
    }
    return ref.rfind("refs/gatos/witness/", 0) == 0 || ref.rfind("refs/gatos/batches/", 0) == 0;
  }
  auto it = jobs_.find(job);
  const JobRecord* rec = it != jobs_.end() && it->second ? &*it->second : nullptr;
  if (have.empty()) {
    // Deleted by a later batch: a prune of a finished job after its
    // retention, or the result of a failed job re-run (moved to attempts/).
    if (!rec) return false;
    JobState st = RecordedState(*rec);
    if (!IsTerminal(st)) return false;
    int64_t retention = pol_.policy.settings.retention_ms;
    if (retention > 0 && rec->finished_ms > 0 && rec->finished_ms + retention <= SystemNowMs()) return true;
    // A re-run keeps the job's other refs: with its job ref gone too, the
    // deletion is not the ledger's.
    if (leaf != "result" || (rec->result_status != "failed" && rec->result_status != "timed-out")) return false;
    auto job_ref = ledger_.ResolveRef(JobRef(job, "job"));
    return job_ref.ok() && *job_ref == rec->job_commit;
  }
  auto c = ledger_.ReadCommit(have);
  if (!c.ok() || JobOfCommit(*c) != job) return false;  // not this job's commit: contradicted
  if (leaf == "job") return !rec;                        // a later submission
  std::string job_commit = rec ? rec->job_commit : "";
  if (!job_commit.empty() && (c->parents.empty() || c->parents[0] != job_commit)) return false;
  if (leaf == "lease" || leaf.rfind("claims/", 0) == 0) {
    // After a success nothing claims the job again (a re-run needs a failure).
    if (rec && !rec->result_commit.empty() && rec->result_status == "succeeded") return false;
    return LeaseDescends(job, job_commit, have, rec ? rec->lease_commit : "");
  }
  if (leaf == "result" || leaf.rfind("attempts/", 0) == 0) {
    if (rec && have == rec->result_commit) return leaf != "result";  // a re-run moves it to attempts/
    if (rec && !rec->result_commit.empty() && rec->result_status == "succeeded") return false;  // final
    // A later result: made under a lease that descends from the recorded one.
    return c->parents.size() == 2 && LeaseDescends(job, job_commit, c->parents[1], rec ? rec->lease_commit : "");
  }
  return leaf == "cancel" || leaf == "retry";  // a later request about this job
}

}  // namespace audit_internal
}  // namespace gatos
