// What the dashboard knows without reading the ledger: a bounded in-memory
// secondary index fed by the ledger thread (docs/dashboard.md, "Filters").
//
//   - every live job (pending or claimed), by id, by state and by worker:
//     exact, as large as the writer's own live set;
//   - a window of the last kWindow finished jobs to change (by the log), for
//     the submitter/worker/time/state filters over finished jobs, filled at
//     start from the newest log batches (WindowBackfill) and then by every
//     committed batch: older finished jobs are found by id (the state index);
//   - per worker key: last seen (its latest claim, takeover or renewal
//     recorded by this gatosd; at start, the request time of the leases it
//     holds), jobs running, jobs finished since start;
//   - the policy's principals (allowed_signers names) by key;
//   - the last kEvents committed log batches as server-sent events.
//
// The state index is ordered by job id only; this is what makes the other
// filters cheap at a million jobs without scanning it per request.
//
// Thread-safety: thread-safe (one mutex). The ledger thread writes (Seed,
// Committed); the HTTP and event-stream threads read.
#ifndef GATOS_GATOSD_DASHBOARD_STATE_H_
#define GATOS_GATOSD_DASHBOARD_STATE_H_

#include <atomic>
#include <condition_variable>
#include <thread>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gatos/ledger/state_index.h"
#include "gatos/model/job_record.h"
#include "gatos/model/job_state.h"
#include "gatos/model/log_format.h"
#include "gatos/model/policy.h"

namespace gatos {
class LedgerWriter;
}

namespace gatos::gatosd {

// One job as the secondary index keeps it.
struct JobSummary {
  std::string job_hex;
  std::string job_commit;
  std::string submitter_hex;
  std::string worker_hex;  // the lease holder; after the end, the last one known
  int64_t submitted_ms = 0;
  int64_t changed_ms = 0;  // when the log last recorded a change of it (0 = at start)
  int64_t changed_seq = 0;
  int64_t finished_ms = 0;
  int64_t attempt = 1;
  JobState state = JobState::kPending;
  bool live = false;
};

struct WorkerSummary {
  std::string key_hex;
  std::string principal;  // from the policy ("" when the key is no longer allowed)
  bool allowed = false;
  int64_t last_seen_ms = 0;    // 0 = not seen by this gatosd
  std::string last_kind;       // claim | takeover | renew | lease (seen at start)
  size_t running = 0;
  std::vector<std::string> running_jobs;  // the first 20, by id
  uint64_t finished_since_start = 0;
};

struct LiveEvent {
  int64_t seq = 0;
  std::string data;  // JSON, one line
};

struct JobQuery {
  std::string state;          // "" | a JobStateName | "live"
  std::string submitter_hex;  // "" = any
  std::string worker_hex;     // "" = any
  int64_t since_ms = 0;       // submitted at or after (0 = any)
  int64_t until_ms = 0;       // submitted before (0 = any)
  std::string cursor;         // from JobPage::next
  size_t limit = 50;
};

struct JobPage {
  std::vector<JobSummary> jobs;
  std::string next;     // cursor of the next page ("" = last page)
  size_t scanned = 0;   // summaries looked at (the cost)
  std::string source;   // "live" or "window"
};

class LiveState {
 public:
  static constexpr size_t kDefaultWindow = 50000;
  static constexpr size_t kEvents = 512;
  explicit LiveState(size_t window = kDefaultWindow) : window_(window) {}

  // ---- the ledger thread ----
  // Every live job, the policy, the head and stats.
  void Seed(const LedgerWriter& w);
  // A committed batch: the records of the jobs it changed (`records`, as
  // the writer committed them), worker sightings, an event. Returns the counts for the metrics' series
  // (submit, claim, and one per final status).
  std::map<std::string, uint64_t> Committed(LedgerWriter& w, int64_t seq, const std::string& log_commit,
                                            const std::vector<LogEntry>& entries,
                                            const std::map<std::string, JobRecord>& records, int64_t now_ms);
  // Records one job (Seed, Committed, and the benchmark's fill).
  void Note(const JobRecord& r, int64_t seq, int64_t now_ms);
  void SetPolicy(const Policy& policy, const std::string& commit);
  void SetHead(int64_t seq, const std::string& log_commit, const IndexStats& stats);
  // The scheduler's view as `gatos pool ls --json` answers it (pools, and
  // submitters' usage against their limits), refreshed about once a second.
  void SetPools(std::string reply_json);
  // A finished job read from an older log batch at start: added only when
  // the job is not held yet and the window has room (newer changes win).
  // False once the window is full.
  bool Backfilled(const JobRecord& r, int64_t seq, int64_t changed_ms, int64_t now_ms);

  // ---- readers ----
  struct Head {
    int64_t seq = 0;
    std::string log_commit;
    std::string policy_commit;
    IndexStats stats;
    int64_t lease_ms = 0;
  };
  Head head() const;
  std::optional<JobSummary> Find(const std::string& job_hex) const;
  // Live jobs in id order (state "", "live", "pending", "claimed"), using the
  // per-state or per-worker set.
  JobPage Live(const JobQuery& q) const;
  // The live jobs and the window, newest submission first, walking the
  // smallest of the per-submitter, per-worker and per-state sets the query
  // names (all jobs held when it names none).
  JobPage Recent(const JobQuery& q) const;
  // Every worker the policy allows, plus any other key seen.
  std::vector<WorkerSummary> Workers() const;
  // principal of a key ("" when unknown); key of a principal ("" when none
  // or several).
  std::string PrincipalOf(const std::string& key_hex) const;
  std::string KeyOfPrincipal(const std::string& principal) const;
  // The highest change sequence of any job evicted from the window: a job
  // absent from the index read at a sequence >= this has not changed since.
  int64_t evicted_watermark() const;
  size_t window_size() const;
  size_t live_size() const;

  // Events after `after_seq` (at most kEvents; *reset when older ones were
  // dropped), waiting up to wait_ms for one. False on timeout.
  bool WaitEvents(int64_t after_seq, int wait_ms, std::vector<LiveEvent>* out, bool* reset) const;
  int64_t last_event_seq() const;
  std::string pools() const;  // "" before the first SetPools

 private:
  void NoteLocked(const JobRecord& r, int64_t seq, int64_t now_ms, int64_t changed_ms);
  void Unlink(const JobSummary& s);
  void Link(const JobSummary& s);
  void Evict();

  const size_t window_;
  mutable std::mutex mu_;
  std::string pools_;
  mutable std::condition_variable cv_;
  Head head_;
  std::unordered_map<std::string, JobSummary> jobs_;
  using TimeSet = std::set<std::pair<int64_t, std::string>>;  // (submitted_ms, job hex)
  TimeSet by_submitted_;                                        // every job held
  // The same, per submitter, per worker and per state: Recent() walks the
  // smallest set that holds every match.
  std::map<std::string, TimeSet> by_submitter_, by_worker_, by_state_;
  std::set<std::pair<int64_t, std::string>> finished_by_seq_;   // eviction order
  std::map<std::string, std::set<std::string>> live_by_state_;  // "pending"/"claimed" -> ids
  std::map<std::string, std::set<std::string>> live_by_worker_;
  size_t live_count_ = 0;
  int64_t evicted_watermark_ = 0;
  struct Seen {
    int64_t last_ms = 0;
    std::string kind;
    uint64_t finished = 0;
  };
  std::map<std::string, Seen> workers_seen_;
  std::map<std::string, std::string> worker_principals_;    // key hex -> principal
  std::map<std::string, std::string> submitter_principals_;
  std::deque<LiveEvent> events_;
};

// Fills a LiveState's window at start: walks the log back from the head
// (first parents), reads each batch record and, for every finished job it
// names that the window does not hold, the job's record at the head; stops
// when the window is full, after kMaxBatches log commits, or when told to.
// Runs on a thread of its own with its own libgit2 handle (reads committed
// objects only); gatosd serves while it runs.
//
// Thread-safety: the constructor starts the thread, the destructor stops
// and joins it; call both from one thread.
class WindowBackfill {
 public:
  static constexpr int64_t kMaxBatches = 20000;
  WindowBackfill(std::string ledger_dir, LiveState* live);
  ~WindowBackfill();
  WindowBackfill(const WindowBackfill&) = delete;
  WindowBackfill& operator=(const WindowBackfill&) = delete;

 private:
  void Run();
  std::string dir_;
  LiveState* live_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_DASHBOARD_STATE_H_
