// JobIndex: gatosd's in-memory view of every job, a cache rebuilt from refs
// at start (the refs stay the only truth). Lookups, updates and counts are
// O(1) in the number of jobs; sweeps visit only pending jobs and expired
// leases, never the whole ledger.
//
// The inbox: processes other than gatosd that change the ledger (git hooks,
// `gatos cancel --ledger DIR`) append "job <hex>" or "reject <reason>" lines
// to <ledger>/gatos/inbox so gatosd re-reads those jobs without scanning refs.
// A lost line costs latency only: the next start rebuilds from refs.
//
// Thread-safety: JobIndex and InboxReader are NOT thread-safe (gatosd's
// ledger thread owns them). AppendInbox is safe from any process: one
// O_APPEND write per line.
#ifndef GATOS_JOB_INDEX_H_
#define GATOS_JOB_INDEX_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gatos/job_record.h"
#include "gatos/lease.h"
#include "gatos/ledger.h"
#include "gatos/status.h"

namespace gatos {

class JobIndex {
 public:
  // Reads every job's refs. Returns the number of jobs.
  Result<size_t> Rebuild(Ledger& ledger, int64_t now_ms);
  // Re-reads one job from its refs. Returns the entry, or nullptr if the job
  // does not exist. *is_new when the job was not indexed before.
  Result<const IndexEntry*> Refresh(Ledger& ledger, const std::string& job_hex, int64_t now_ms,
                                    bool* is_new);
  const IndexEntry* Find(const std::string& job_hex) const;
  // Applies a transition this process just made, without re-reading refs.
  // False (and no change) when the job is not indexed.
  bool ApplyLease(const std::string& job_hex, const std::string& worker_hex, int64_t epoch,
                  int64_t expires_ms);
  bool ApplyResult(const std::string& job_hex, const std::string& result_commit, JobState state);
  void MarkPublished(const std::string& job_hex, int64_t now_ms, int64_t epoch = -1);

  size_t size() const { return entries_.size(); }
  size_t Count(JobState s) const { return counts_[static_cast<size_t>(s)]; }
  // Pending jobs last published before `before_ms` (at most `limit`), oldest
  // publication first. O(result), not O(pending jobs).
  std::vector<std::string> PendingNotPublishedSince(int64_t before_ms, size_t limit) const;
  // Claimed jobs whose lease expired at or before now and whose expiry was
  // not republished yet.
  std::vector<std::string> ExpiredLeases(int64_t now_ms, size_t limit) const;
  // Jobs in a state (all states when nullopt), ordered by job id, starting
  // after `after` (paging), at most `limit`. O(limit) for one state, O(limit
  // + skipped) otherwise.
  std::vector<const IndexEntry*> List(std::optional<JobState> state, const std::string& after,
                                      size_t limit) const;

 private:
  void Put(IndexEntry e);
  void Remove(const std::string& job_hex);

  std::unordered_map<std::string, IndexEntry> entries_;
  std::array<size_t, 6> counts_{};
  std::array<std::set<std::string>, 6> by_state_;     // ordered ids per state, for listing
  std::multimap<int64_t, std::string> lease_expiry_;  // claimed jobs by expiry
  std::multimap<int64_t, std::string> pending_by_publish_;  // pending jobs by last publication
};

// Path of the inbox file of a ledger directory.
std::string InboxPath(const std::string& ledger_dir);
// Appends one line ("job <hex>" / "reject <reason>"); creates the file.
Status AppendInbox(const std::string& ledger_dir, const std::string& line);

class InboxReader {
 public:
  explicit InboxReader(std::string ledger_dir) : path_(InboxPath(ledger_dir)) {}
  // Skips everything written so far (after a full rebuild).
  void SkipToEnd();
  // Complete lines appended since the last call. The file is never
  // truncated while gatosd runs (a writer could lose a line); about 70 bytes
  // per pushed job. gatosd start rotates it after its rebuild.
  std::vector<std::string> ReadNew();

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace gatos

#endif  // GATOS_JOB_INDEX_H_
