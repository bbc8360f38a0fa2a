// The replay's end state against the repository: every ref, and the head's state index.
#include "gatos/audit/log_audit.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

// One ref of the repository against what the replay says it is (`want`;
// null: the replay has no such ref).
void Replay::CheckRef(const std::string& r, const std::string& have, const std::string* want) {
  ++rep_->refs_checked;
  const bool differs = !want || have != *want;
  if (differs && Settles(r, have)) return;
  if (differs && LaterLogCould(r, have)) {
    Behind(r);
    return;
  }
  std::string job, leaf;
  SplitJobRef(r, &job, &leaf);
  if (!want) {
    Problem("ref_extra", r + " -> " + Short(have) + " is not in the log (no logged transition created it)", 0, job, r);
  } else if (have != *want) {
    Problem("ref_moved", r + " is " + Short(have) + " but the log says " + Short(*want) + " (moved outside the log)", 0,
            job, r);
  }
}

// Every ref under refs/gatos/ against the replay, in one pass over the
// repository's refs in name order. A job's refs are consecutive in that
// order, so only the refs of the job being read (JobRefs of its replayed
// record, all under refs/gatos/jobs/<its id>/) are held at a time: no tree of
// every ref (a million jobs have four million). The report is in the same
// order as a comparison of two sorted maps: each ref of the repository in
// name order, then each ref the log has and the repository lacks.
void Replay::CompareAllRefs() {
  std::map<std::string, std::string> other;  // the policy and the notes: few
  other[kPolicyRef] = pol_.commit;
  for (const auto& [r, id] : notes_) other[r] = id;
  std::vector<std::pair<std::string, std::string>> missing;
  std::unordered_set<const std::string*> met;  // jobs_ keys of the jobs whose refs were read
  std::string group;                            // the job whose refs are being read
  std::map<std::string, std::string> group_want;  // its refs not read yet
  auto close_group = [&] {
    for (auto& [r, id] : group_want) missing.emplace_back(r, std::move(id));
    group_want.clear();
  };
  RefReader reader(ledger_.path());
  std::string r, have, job, leaf;
  reader.ForEachUnder("refs/gatos/", [&](std::string_view name, std::string_view id) {
    r.assign(name);
    have.assign(id);
    if (r == kLogRef || IsPushTarget(r)) return;
    std::map<std::string, std::string>* wants = &other;
    if (SplitJobRef(r, &job, &leaf)) {
      if (job != group) {
        close_group();
        group = job;
        auto it = jobs_.find(job);
        if (it != jobs_.end()) {
          met.insert(&it->first);
          if (it->second) group_want = JobRefs(*it->second);
        }
      }
      wants = &group_want;
    }
    auto w = wants->find(r);
    if (w == wants->end()) {
      CheckRef(r, have, nullptr);
      return;
    }
    std::string want = std::move(w->second);
    wants->erase(w);
    CheckRef(r, have, &want);
  });
  close_group();
  for (const auto& [j, rec] : jobs_) {
    if (!rec || met.count(&j)) continue;
    for (auto& [ref, id] : JobRefs(*rec)) missing.emplace_back(ref, std::move(id));
  }
  for (auto& [ref, id] : other) missing.emplace_back(ref, std::move(id));
  std::sort(missing.begin(), missing.end());
  for (const auto& [ref, id] : missing) {
    if (Settles(ref, "")) continue;
    if (LaterLogCould(ref, "")) {
      Behind(ref);
      continue;
    }
    SplitJobRef(ref, &job, &leaf);
    Problem("ref_missing", ref + " is missing; the log says " + Short(id) + " (deleted outside the log)", 0, job, ref);
  }
}

void Replay::CompareRefs() {
  if (!rep_->incremental) {
    CompareAllRefs();
    return;
  }
  // Incremental: the refs of the jobs and records the new transitions touched.
  RefReader reader(ledger_.path());
  auto check = [&](const std::string& r, const std::string& id) {
    ++rep_->refs_checked;
    std::string have = reader.Resolve(r);
    if (have != id && Settles(r, have)) return;
    if (have != id && LaterLogCould(r, have)) {
      Behind(r);
      return;
    }
    std::string job, leaf;
    SplitJobRef(r, &job, &leaf);
    if (have.empty() && !id.empty()) {
      Problem("ref_missing", r + " is missing; the log says " + Short(id) + " (deleted outside the log)", 0, job, r);
    } else if (!have.empty() && id.empty()) {
      Problem("ref_extra", r + " -> " + Short(have) + " is not in the log (no logged transition created it)", 0, job, r);
    } else if (have != id) {
      Problem("ref_moved", r + " is " + Short(have) + " but the log says " + Short(id) + " (moved outside the log)", 0,
              job, r);
    }
  };
  check(kPolicyRef, pol_.commit);
  for (const auto& [r, id] : notes_) check(r, id);
  for (const std::string& job : TouchedSorted()) {
    const auto& rec = jobs_[job];
    std::map<std::string, std::string> want_job = rec ? JobRefs(*rec) : std::map<std::string, std::string>{};
    for (const auto& [r, id] : reader.Under(std::string(kJobsPrefix) + job + "/")) want_job.emplace(r, "");
    for (const auto& [r, id] : want_job) check(r, id);
  }
}

void Replay::CompareIndex() {
  auto head = ledger_.ReadCommit(head_);
  if (!head.ok()) return;
  StateIndex index(&ledger_);
  index.Reset(head->tree);
  auto same = [&](const std::string& job, const std::optional<JobRecord>& got) {
    const std::optional<JobRecord>& want = jobs_[job];
    if (!want && !got) return;
    if (!want || !got) {
      Problem("index", "the head's state index " + std::string(got ? "has" : "lacks") + " job " + Short(job) +
                           ", the log " + (want ? "has it" : "does not"),
              rep_->seq, job);
      return;
    }
    if (*want != *got) {
      Problem("index", "the head's state index record of job " + Short(job) +
                           " differs from the record the log's transitions produce (" +
                           RecordDifference(*got, *want) + ")",
              rep_->seq, job);
    }
  };
  if (!rep_->incremental) {
    // A record whose blob is exactly the encoding of the replayed record
    // (what the ledger's writer stores) is that record: its id is compared,
    // and only a record that differs is read and decoded for the report.
    size_t matched = 0;               // records equal to the replayed one, by blob id
    std::unordered_set<std::string> seen;  // the jobs of the other records
    Status s = index.ForEachJobBlob([&](const std::string& job, const std::string& blob) -> Result<bool> {
      auto it = jobs_.find(job);
      if (it != jobs_.end() && it->second &&
          GitObjectId(ObjectType::kBlob, EncodeJobRecord(*it->second)) == blob) {
        ++matched;
        return true;
      }
      GATOS_ASSIGN_OR_RETURN(std::optional<JobRecord> got, index.Get(job));
      if (got) {
        seen.insert(got->job_hex);
        same(got->job_hex, *got);
      }
      return rep_->problems.size() < kMaxProblems;
    });
    if (!s.ok()) {
      Problem("index", "the head's state index cannot be read: " + s.message(), rep_->seq);
      return;
    }
    size_t replayed = 0;
    for (const auto& [job, rec] : jobs_) replayed += rec ? 1 : 0;
    if (matched == replayed) return;
    for (const auto& [job, rec] : jobs_) {
      if (!rec || seen.count(job)) continue;
      auto got = index.Get(job);  // matched by blob id above?
      if (got.ok() && *got && (*got)->job_hex == job) continue;
      same(job, std::nullopt);
    }
    return;
  }
  for (const std::string& job : TouchedSorted()) {
    auto got = index.Get(job);
    if (!got.ok()) {
      Problem("index", "job " + Short(job) + ": " + got.status().message(), rep_->seq, job);
      continue;
    }
    same(job, *got);
  }
  // Only the touched jobs' records changed between the recorded head and this one.
  std::function<void(const std::string&, const std::string&, const std::string&, int)> diff =
      [&](const std::string& a, const std::string& b, const std::string& prefix, int depth) {
        if (a == b) return;
        auto ta = a.empty() ? Result<std::vector<TreeEntry>>(std::vector<TreeEntry>{}) : ledger_.ReadTree(a);
        auto tb = b.empty() ? Result<std::vector<TreeEntry>>(std::vector<TreeEntry>{}) : ledger_.ReadTree(b);
        if (!ta.ok() || !tb.ok()) {
          Problem("index", "the state index cannot be read under jobs/" + prefix, rep_->seq);
          return;
        }
        std::map<std::string, std::pair<std::string, std::string>> m;
        for (const auto& e : *ta) m[e.name].first = e.id;
        for (const auto& e : *tb) m[e.name].second = e.id;
        for (const auto& [name, ids] : m) {
          if (ids.first == ids.second) continue;
          if (depth == 4) {
            std::string job = prefix + name;
            if (!touched_.count(job)) {
              Problem("index", "the state index record of job " + Short(job) +
                                   " changed, but no new transition of the log touches it",
                      rep_->seq, job);
            }
          } else {
            diff(ids.first, ids.second, prefix + name, depth + 1);
          }
        }
      };
  auto sub = [&](const std::string& tree) -> std::string {
    auto t = ledger_.ReadTree(tree);
    if (!t.ok()) return "";
    for (const auto& e : *t) {
      if (e.name == "jobs") return e.id;
    }
    return "";
  };
  diff(sub(start_tree_), sub(head->tree), "", 0);
}

}  // namespace audit_internal
}  // namespace gatos
