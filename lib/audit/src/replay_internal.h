// Internals of the auditor's replay of the log (log_audit.h), shared by its
// files: log_replay.cpp (the walk over the log and each batch),
// replay_transitions.cpp (each logged transition, decided by
// ApplyTransition), replay_compare.cpp (refs and index against the replay),
// replay_witnesses.cpp, and ref_reader.h (reading refs from the files).
#ifndef GATOS_AUDIT_SRC_REPLAY_INTERNAL_H_
#define GATOS_AUDIT_SRC_REPLAY_INTERNAL_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "gatos/crypto/sshsig.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/ledger/watch_positions.h"
#include "gatos/ledger/state_index.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/encoding.h"
#include "gatos/model/job_record.h"
#include "gatos/model/job_state.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/log_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/transition.h"

#include "ref_reader.h"

namespace gatos {
namespace audit_internal {

inline std::string Short(const std::string& id) { return id.substr(0, 12); }

// Why `c` is not signed by `key` ("" when it is).
std::string SignatureProblem(const CommitInfo& c, const Ed25519PublicKey& key);

// Whether `sig_hex` is `key_hex`'s Ed25519 signature of `payload`.
bool Verifies(const std::string& key_hex, const std::string& payload, const std::string& sig_hex);

// A transition: consecutive batch lines with the same kind and job, each
// ref at most once.
struct LoggedTransition {
  LogKind kind;
  std::string job_hex;
  std::vector<LogEntry> entries;
};

std::vector<LoggedTransition> Group(const std::vector<LogEntry>& entries);

// The fields in which `index` (what the ledger wrote) and `replayed` differ.
std::string RecordDifference(const JobRecord& index, const JobRecord& replayed);

// One batch line as the batch record writes it.
std::string EntryText(const LogEntry& e);

// The refs pushes land on (refs/gatos/submit/..., results/..., witness/...).
bool IsPushTarget(const std::string& ref);

// A result commit checked ahead of the replay (replay_prefetch.cpp).
struct PrefetchedResult {
  ResultReport report;
  std::string provenance_job;  // the job commit the provenance was checked against
  ResultCheck provenance;
  bool provenance_present = false;
};

// A lease commit checked ahead of the replay: whose SSH signature verifies
// over it (none: unsigned or bad), and whether its Request-Sig verifies.
struct PrefetchedLease {
  CommitInfo commit;       // read once, there
  LeaseCommitInfo info;    // its parsed message
  std::optional<Ed25519PublicKey> signer;
  std::string job_hex;  // the lease's Job-Id, over which Request-Sig was checked
  bool renew = false;
  bool request_sig_ok = false;
};

// A job commit read ahead of the replay: its objects (commit, tree,
// job.yaml), and the key whose SSH signature over it verifies (none:
// unsigned, or it does not verify, which CheckJobCommit then reports).
struct PrefetchedJob {
  std::vector<GitObject> objects;
  std::optional<Ed25519PublicKey> signer;
};

struct PolicyState {
  std::string commit;
  Policy policy;
};

// A stretch of the log whose commits other threads check ahead of the
// replay (replay_prefetch.cpp).
struct PrefetchJob {
  size_t until = 0;
  std::vector<std::string> ids;
  std::vector<std::optional<PrefetchedResult>> out;
  std::vector<std::pair<std::string, bool>> leases;  // lease commit, renew
  std::vector<std::optional<PrefetchedLease>> lease_out;
  std::vector<std::string> jobs;  // job commits
  std::vector<std::optional<PrefetchedJob>> job_out;
  bool require_provenance = false;
  // The next item to check, over ids, then jobs, then leases: each
  // checking thread, and the replay's own once it waits for them, takes
  // the next one until none is left.
  std::atomic<size_t> next{0};
  std::thread thread;
};

class Replay {
 public:
  ~Replay();
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;
  Replay(Ledger& ledger, const LogAuditOptions& opt, LogAuditReport* rep)
      : ledger_(ledger), opt_(opt), rep_(rep), lookup_(LedgerLookup(&ledger)) {}

  Status Run();

 private:
  void Problem(std::string check, std::string detail, int64_t seq = 0, std::string job = "", std::string ref = "") {
    if (rep_->problems.size() >= kMaxProblems) {
      ++dropped_;
      return;
    }
    rep_->problems.push_back({std::move(check), std::move(detail), seq, std::move(job), std::move(ref)});
  }
  Status CollectCommits(std::vector<CommitInfo>* commits);
  Status LoadStart();
  Status VerifyCommit(const CommitInfo& c, const LogCommitInfo& info);
  // The batch record of a log commit; nullopt when its tree has none.
  Result<std::optional<std::string>> BatchText(const CommitInfo& c);
  void AddSettling(const std::vector<LogEntry>& entries);
  Status LoadSettlingBeforeStart();
  Result<std::optional<JobRecord>*> Record(const std::string& job);
  void ReplayTransition(const LoggedTransition& t, const CommitInfo& c, const LogCommitInfo& info,
                       const std::set<std::string>& parents, bool* batch_ok);
  // Each returns the new record or nullopt after reporting a problem.
  std::optional<JobRecord> Submit(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> Lease(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> ResultOf(const LoggedTransition& t, const std::optional<JobRecord>& old,
                                    const CommitInfo& c);
  TransitionRules Rules() const { return {&pol_.policy, now_}; }
  std::optional<JobRecord> UserRequest(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> Other(const LoggedTransition& t, const std::optional<JobRecord>& old);
  void Note(const LoggedTransition& t, const std::set<std::string>& parents);
  void ScheduleChange(const LoggedTransition& t, const LogEntry& e, const std::string& previous);
  // replay_fires.cpp: a trigger's positions commit (signed by the ledger,
  // following the previous one, under the schedule in force).
  void WatchChange(const LoggedTransition& t, const LogEntry& e);
  // replay_fires.cpp: a fire checked against the schedule in force, and the
  // ticks each active schedule let pass unfired (missed).
  std::optional<JobRecord> Fire(const LoggedTransition& t, const std::optional<JobRecord>& old);
  void TrackSchedule(const ScheduleCommit& next);
  void CountMissed(const std::string& name, int64_t until_ms);
  void FinishSchedules();
  void PolicyChange(const LoggedTransition& t);
  bool WorkerAllowed(const std::string& worker_hex, std::string* why);
  void CompareRefs();
  void CompareAllRefs();
  void CheckRef(const std::string& r, const std::string& have, const std::string* want);
  // The jobs the replay touched, in id order (incremental reports list them so).
  std::vector<std::string> TouchedSorted() const {
    std::vector<std::string> v(touched_.begin(), touched_.end());
    std::sort(v.begin(), v.end());
    return v;
  }
  // replay_prefetch.cpp: the results of the log commits from `from` on,
  // checked on every core (LogAuditOptions::threads).
  void PrefetchResults(const std::vector<CommitInfo>& commits, size_t from);
  std::optional<PrefetchedResult> TakePrefetched(const std::string& commit);
  std::vector<std::string> ResultsIn(const std::vector<CommitInfo>& commits, size_t from, size_t* until,
                                     std::vector<std::pair<std::string, bool>>* leases,
                                     std::vector<std::string>* jobs);
  std::optional<PrefetchedLease> TakePrefetchedLease(const std::string& commit);
  std::optional<PrefetchedJob> TakePrefetchedJob(const std::string& commit);
  void LaunchPrefetch(const std::vector<CommitInfo>& commits, size_t from);
  void FinishPrefetch();
  // replay_behind.cpp: a ref the fetched log does not explain, which a later
  // batch of this ledger could have given the value `have` ("" = deleted).
  bool LaterLogCould(const std::string& ref, const std::string& have);
  std::string JobOfCommit(const CommitInfo& c);
  bool LeaseDescends(const std::string& job, const std::string& job_commit, std::string have,
                     const std::string& recorded);
  void Behind(const std::string& ref) {
    ++rep_->refs_behind;
    if (rep_->behind_refs.size() < 100) rep_->behind_refs.push_back(ref);
  }
  void CompareIndex();
  void CheckWitnesses();
  Result<std::string> LogCommitAt(int64_t seq);
  void Fail(const LoggedTransition& t, const std::string& check, const std::string& detail) {
    Problem(check, detail, seq_, t.job_hex, t.entries.empty() ? "" : t.entries.front().ref);
  }

  static constexpr size_t kMaxProblems = 10'000;

  Ledger& ledger_;
  const LogAuditOptions& opt_;
  LogAuditReport* rep_;
  ObjectLookup lookup_;
  size_t dropped_ = 0;

  // Replay state.
  int64_t seq_ = 0;      // the commit being replayed
  int64_t now_ = 0;      // its Log-Time
  int64_t term_ = 0;     // the last Ledger-Term seen (0: none yet)
  std::string head_;
  PolicyState pol_;                         // in force now (changes inside a batch)
  Ed25519PublicKey batch_key_;              // signs the log commit and the ledger's commits of the batch
  std::optional<Ed25519PublicKey> rotated_key_;  // a rotation earlier in this batch signs later policy commits
  std::unordered_map<std::string, std::optional<JobRecord>> jobs_;  // replayed records (nullopt: no such job)
  std::map<std::string, std::string> notes_;  // other refs (batches/, witness/)
  std::unordered_set<std::string> touched_;  // every job a transition touched
  // Schedules: the active ones' clocks and the tick after which the next
  // one is due; the fire being replayed (its schedule and previous fire).
  struct ScheduleTrack {
    std::optional<ScheduleClock> clock;
    bool active = false;
    int64_t from_ms = 0;
  };
  std::map<std::string, ScheduleTrack> schedules_;
  std::string fire_schedule_, fire_previous_;
  // Triggers: the positions each one last recorded (refs/gatos/watch/<name>).
  std::map<std::string, WatchPositions> watch_positions_;
  // Settling window (LogAuditOptions::settling_after): every value each ref
  // held from that sequence on ("" = absent).
  std::unordered_map<std::string, std::set<std::string>> settling_;
  bool Settles(const std::string& ref, const std::string& have) {
    auto it = settling_.find(ref);
    if (it == settling_.end() || !it->second.count(have)) return false;
    if (torn_window_) {
      Behind(ref);  // no mirror record: the window is a guess, so not verified
    } else {
      ++rep_->refs_settling;
    }
    return true;
  }
  std::unordered_map<std::string, PrefetchedResult> prefetched_;
  std::unordered_map<std::string, PrefetchedLease> prefetched_leases_;
  std::unordered_map<std::string, PrefetchedJob> prefetched_jobs_;
  size_t prefetched_until_ = 0;
  // The stretch being checked in the background (owns its thread).
  std::unique_ptr<PrefetchJob> pending_;
  std::vector<std::unique_ptr<Ledger>> prefetch_ledgers_;  // one per checking thread
  bool torn_window_ = false;  // settling_ comes from fetched_at_ms, not a mirror record
  std::map<int64_t, std::string> seq_commits_;  // sequence -> log commit, as far as known
  std::vector<std::pair<std::string, std::string>> logged_witnesses_;  // (ref, commit) from the log
  std::optional<StateIndex> start_index_;  // incremental: the index at the recorded head
  std::string start_tree_;
  std::unordered_map<std::string, std::vector<RunRecord>> runs_;  // per job, every epoch and attempt
  size_t max_result_bytes_ = 4 << 20;
};

}  // namespace audit_internal
}  // namespace gatos

#endif  // GATOS_AUDIT_SRC_REPLAY_INTERNAL_H_
