// The offer scheduler (docs/scheduling.md): which waiting jobs gatosd offers
// next, per pool. Higher priorities first; within a priority, round-robin
// across submitters; no offers in a paused pool, none beyond a pool's or a
// submitter's running limit; and only a few offers outstanding (offered,
// not yet claimed) per pool, so that a job that arrives later with a higher
// priority is not queued behind a stream full of earlier offers.
//
// The window of outstanding offers follows the pool's claim rate: at least
// kMinWindow, and as many as the pool claims in kWindowRateMs, so a busy
// pool with many workers is not throttled by it (a bandwidth-delay product)
// while a slow pool keeps its stream nearly empty.
//
// It also answers admission (Admit): a new job of a submitter over its
// max_pending or per_minute limit is refused with the limit's name and the
// numbers.
//
// Pure: no I/O, no clock (every call is given the time). What the ledger
// records decides each job's state; the caller tells the scheduler (Ready,
// Running, Remove) after each transition and asks Next for offers.
//
// Thread-safety: not thread-safe; the ledger thread owns it.
#ifndef GATOS_SCHEDULER_H_
#define GATOS_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gatos/model/decision.h"
#include "gatos/model/scheduling.h"

namespace gatos {

struct ScheduledJob {
  std::string job_hex;
  std::string pool;       // "" = the default pool
  std::string submitter;  // key hex ("" = unsigned)
  int64_t priority = kDefaultPriority;
};

struct PoolCounts {
  int64_t queued = 0;   // waiting for an offer
  int64_t offered = 0;  // offered, not claimed yet
  int64_t running = 0;  // holding a lease
};

class Scheduler {
 public:
  static constexpr int64_t kMinWindow = 2;
  static constexpr int64_t kMaxWindow = 1024;
  static constexpr int64_t kWindowRateMs = 40;
  // Pools with live jobs at most: each pool has a JetStream consumer, so a
  // submitter cannot make gatosd create one per job (Admit refuses a job of
  // a new pool beyond it).
  static constexpr size_t kMaxLivePools = 256;

  // A fixed window of outstanding offers per pool instead of the adaptive
  // one (0 = adaptive; kAllOffers = every waiting job at once, in priority
  // and round-robin order).
  static constexpr int64_t kAllOffers = INT64_MAX;
  void set_fixed_window(int64_t w) { fixed_window_ = w; }

  // The job waits for an offer (new, its lease ran out, its backoff ended).
  // A job already queued or offered stays where it is.
  void Ready(const ScheduledJob& job);
  // The job holds a lease (a claim, or a lease seen at start).
  void Running(const ScheduledJob& job, int64_t now_ms);
  // The job left the live set (finished, aborted, cancelled while waiting).
  void Remove(std::string_view job_hex);

  // The jobs to offer now, in order; each is marked offered.
  std::vector<std::string> Next(const SchedulingPolicy& policy, int64_t now_ms);

  // Whether a new job of `submitter` is admitted at `now_ms` under `limits`
  // (kInvalid naming the limit and the numbers if not). An admitted job
  // counts against the per-minute limit at once (Admitted), and against
  // max_pending as soon as it is Ready.
  Decision Admit(std::string_view submitter, const EffectiveLimits& limits, int64_t now_ms);
  // Whether a job of `pool` may join: kInvalid when it is a pool without
  // live jobs and kMaxLivePools pools have some.
  Decision AdmitPool(std::string_view pool) const;
  void Admitted(std::string_view submitter, const EffectiveLimits& limits, int64_t now_ms);
  // Jobs admitted in a batch count as pending until the batch ends (by then
  // the ledger recorded them and they are Ready, or it refused them).
  void EndBatch();

  // Counts, for status, gatos pool ls and limits.
  PoolCounts Pool(std::string_view pool) const;
  std::map<std::string, PoolCounts> Pools() const;
  int64_t Pending(std::string_view submitter) const;
  // Submitter key hex -> {pending, running}, for those with either.
  std::map<std::string, std::pair<int64_t, int64_t>> Submitters() const;
  int64_t RunningOf(std::string_view submitter) const;
  int64_t Window(std::string_view pool, int64_t now_ms);
  // The state of one job: "queued", "offered", "running" or "" (unknown).
  std::string_view StateOf(std::string_view job_hex) const;

 private:
  enum class State { kQueued, kOffered, kRunning };
  struct Entry {
    std::string pool, submitter;
    int64_t priority = kDefaultPriority;
    State state = State::kQueued;
    uint64_t gen = 0;  // queue entries of an older generation are stale
  };
  struct Slot {
    std::string job;
    uint64_t gen = 0;
  };
  // One priority of one pool: a queue per submitter, and the submitters
  // with queued jobs in round-robin order.
  struct Level {
    std::unordered_map<std::string, std::deque<Slot>> by_submitter;
    std::deque<std::string> turn;
  };
  struct PoolState {
    std::map<int64_t, Level, std::greater<int64_t>> levels;
    PoolCounts counts;
    std::deque<int64_t> claims;  // claim times within kWindowRateMs
  };
  struct SubmitterState {
    int64_t pending = 0, offered = 0, running = 0;
    int64_t admitting = 0;  // admitted in the batch being applied
    std::deque<int64_t> admitted;  // admission times within the last minute
  };

  void Leave(Entry& e);
  void Forget(const std::string& pool);
  void Enqueue(const std::string& job, Entry& e);
  bool TakeFrom(PoolState& ps, Level& level, const SchedulingPolicy& policy, std::string* job);
  bool SubmitterBlocked(const std::string& submitter, const SchedulingPolicy& policy) const;

  std::unordered_map<std::string, Entry> jobs_;
  std::map<std::string, PoolState> pools_;
  std::unordered_map<std::string, SubmitterState> submitters_;
  uint64_t next_gen_ = 1;
  int64_t fixed_window_ = 0;
};

}  // namespace gatos

#endif  // GATOS_SCHEDULER_H_
