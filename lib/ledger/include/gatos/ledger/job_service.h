// JobService: gatosd's request handlers, without a transport. Each batch of
// requests (NATS RPC, or the ledger's local socket for hooks and the CLI) is
// decoded, authenticated, turned into operations applied by the
// LedgerWriter as ONE log batch, and answered only after that batch is
// durable. The events to publish (JetStream offers, cancel notices) are
// queued for the transport to send; Sweep drives what time alone changes
// (expired leases, retries due, republication, aborts, pruning).
//
// Every request gets exactly one reply; no input makes Handle throw or
// return without one (an unexpected failure becomes an "internal" reply and
// a log line).
//
// Thread-safety: NOT thread-safe; the ledger thread owns it (and its writer).
#ifndef GATOS_JOB_SERVICE_H_
#define GATOS_JOB_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/watch_poller.h"
#include "gatos/ledger/witness.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/scheduler.h"
#include "gatos/model/trigger.h"

namespace gatos {

struct ServiceRequest {
  std::string subject;  // rpc.h subject
  std::string data;
  int64_t received_ms = 0;  // SystemNowMs() when it arrived, for latency figures
};

struct ServiceEvent {
  enum class Kind { kJetStream, kCore };
  Kind kind = Kind::kJetStream;
  std::string subject;
  std::string data;
  std::string msg_id;  // JetStream Nats-Msg-Id (dedupe)
};

// Metrics and log hooks; every method defaults to doing nothing.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  virtual void OnRequest(std::string_view kind, std::string_view outcome, double seconds) {}
  virtual void OnRejectedSubmit(std::string_view source, std::string_view reason) {}
  virtual void OnBatch(size_t requests, size_t changes, double seconds) {}
  virtual void OnSubmitToClaim(double seconds) {}
  virtual void OnPolicyChanged() {}
  // A log batch was committed (after the writer made it durable): its
  // sequence, commit and entries, in log order. For live views (dashboard).
  // `records`: the committed record of every job the batch changed.
  virtual void OnCommitted(int64_t seq, const std::string& log_commit,
                           const std::vector<LogEntry>& entries,
                           const std::map<std::string, JobRecord>& records) {}
  virtual void Log(const std::string& line) {}
};

struct ServiceOptions {
  int64_t republish_ms = 30'000;  // an offer still unclaimed this long is published again
  size_t prune_per_sweep = 256;   // records the pruning crawl looks at per sweep
  int64_t views_sync_ms = 5'000;  // how often the ref view is marked synced
  // Offers outstanding per pool (docs/scheduling.md): 0 = adaptive (follows
  // the claim rate), Scheduler::kAllOffers = every pending job at once.
  int64_t offer_window = 0;
  // Reads a watched repository's refs for triggers (docs/scheduling.md,
  // "Triggers"); unset: triggers are recorded but never read or fired.
  ListRemoteRefs list_remote_refs;
};

// The reply of a list request over a state index: live records (pending,
// claimed) from `live`, finished ones by walking the index in id order with
// a bounded number of records per page ("next" continues). Used by gatosd
// and by the CLI on a ledger directory.
nlohmann::json ListReply(StateIndex& index, const IndexStats& stats,
                         const std::map<std::string, JobRecord>& live, const rpc::ListRequest& req,
                         int64_t now_ms);

// One job's status (`gatos status --json`, the status RPC): rpc::RecordJson,
// plus "max_attempts" (of `settings`, the policy in force), "backoff_ms" while
// a retried job waits, and "attempts": every attempt so far in order, the
// current one included, each with what the ledger's and the worker's signed
// commits say: n, epoch, status, worker, claimed (ledger clock), waited_ms
// (from the record of the attempt before to this claim), started and ended
// (the worker's proof of execution), finished (when the ledger recorded the
// result), exit_code / signal / timed_out / reason, result_commit; and for a
// retry still waiting, not_before and backoff_ms.
// Reads a few objects per attempt; fields it cannot read are left out.
nlohmann::json JobStatusJson(Ledger& ledger, const JobRecord& r, const PolicySettings& settings,
                             int64_t now_ms);

// The reply to rpc::kLogs for `r`: a page of an attempt's captured stdout or
// stderr from its signed result. `request`: {job, attempt? (default: the
// latest attempt with a result), stream? ("stdout" default | "stderr"),
// offset? (default 0), limit? (1..kMaxLogsPage, default kMaxLogsPage)}.
// Reply: ok, job, attempt, status, stream, size (of the captured bytes),
// offset, data (base64 of at most `limit` bytes from `offset`), truncated
// (the output cap cut the stream), cap (bytes kept per stream). An error
// reply (invalid) for a bad request or an attempt without a result. Used by
// gatosd and by the CLI on a ledger directory.
inline constexpr int64_t kMaxLogsPage = 512 * 1024;
nlohmann::json JobOutputReply(Ledger& ledger, const JobRecord& r, const nlohmann::json& request);

// The policy requests are checked against, shared with the threads that
// predecode (immutable once published).
struct PolicySnapshot {
  Policy policy;
  std::string commit;
};

// A request decoded and authenticated (signatures verified) before the
// ledger thread applies it. Predecode does this on any thread, so the
// expensive part of a request (Ed25519 verification) runs in parallel with
// the ledger thread's writes.
struct DecodedRequest {
  ServiceRequest req;
  std::string kind;                  // "claim", "result", ... (metrics label)
  std::optional<std::string> reply;  // refused before the batch
  std::optional<Op> op;              // what the batch applies
  bool read = false;                 // status / list: answered after the batch
  bool deferred = false;             // needs the ledger thread to decode (local pushes, policy)
  std::string policy_commit;         // the policy the checks used
  std::string rejected_reason;       // a refused submit, for metrics
  std::string log_line;              // worth a log line (refused results)
  std::string rotated_key_path;      // rotate-ledger-key: the new key file
  // A granted claim or renew: its reply waits for the ledger's signature over
  // every grant of the reply message it belongs to (rpc::GrantsPayload).
  std::optional<rpc::Grant> grant;
  nlohmann::json grant_reply;
};

// Raw requests decoded and authenticated (JobService::Prepare), ready for
// the ledger thread (JobService::Finish). A batch request (claim-batch,
// result-batch) is one span of several decoded entries.
struct PreparedBatch {
  struct Span {
    size_t first = 0, count = 0;
    bool batch = false;
    std::optional<std::string> refused;  // a malformed batch: refused as a whole
  };
  std::vector<Span> spans;  // one per raw request
  std::vector<DecodedRequest> decoded;
};

// Appends `more` to `into` (as if both had been prepared together): the
// requests of two prepared batches applied in one log batch.
void AppendPrepared(PreparedBatch* into, PreparedBatch more);

class JobService {
 public:
  JobService(LedgerWriter* writer, ServiceOptions options, ServiceObserver* observer = nullptr);

  // Thread-safe: decodes `r` and checks its signatures against `policy`.
  // Jobs and results pushed with git are read through `objects` (a
  // repository handle of the calling thread's own); without it, and for the
  // other requests that need the ledger, the request comes back deferred.
  static DecodedRequest Predecode(ServiceRequest r, const PolicySnapshot& policy, int64_t now_ms,
                                  Ledger* objects = nullptr);
  // The policy in force, for Predecode on other threads. Thread-safe.
  std::shared_ptr<const PolicySnapshot> policy_snapshot() const;

  // Offers every pending job and schedules every lease (at start).
  void Start();
  // Handles a batch of predecoded requests; replies[i] answers batch[i].
  std::vector<std::string> Handle(std::vector<DecodedRequest> batch);
  // The same for raw requests, predecoded here (in parallel for big batches):
  // Finish(Prepare(requests)).
  std::vector<std::string> Handle(const std::vector<ServiceRequest>& requests);
  // Thread-safe: flattens batch requests and predecodes every request (in
  // parallel for big batches) against the policy in force. gatosd runs it on
  // its own thread, so the next batch is authenticated while the ledger
  // thread applies this one (Finish re-checks a request whose policy changed
  // in between).
  PreparedBatch Prepare(const std::vector<ServiceRequest>& requests) const;
  // The ledger thread: applies a prepared batch; replies[i] answers the
  // i-th raw request.
  std::vector<std::string> Finish(PreparedBatch prepared);
  // Time-driven work; cheap when nothing is due.
  void Sweep();
  // Events produced since the last call, in order.
  std::vector<ServiceEvent> TakeEvents();

  LedgerWriter& writer() { return *writer_; }
  size_t offers_outstanding() const { return tracked_.size(); }
  const Scheduler& scheduler() const { return scheduler_; }

  // Thread-safe: a worker's heartbeat (rpc::kWorkerHeartbeat) at `now_ms`:
  // it serves `pools` for kWorkerLiveMs. Status and the pools reply say
  // when no live worker serves a pool. Informational only.
  static constexpr int64_t kWorkerLiveMs = 15'000;
  static constexpr size_t kMaxKnownWorkers = 10'000;
  void NoteWorker(const std::string& worker_hex, std::vector<std::string> pools, int64_t now_ms);
  // Pool -> live workers serving it at `now_ms`.
  std::map<std::string, int64_t> LiveWorkersByPool(int64_t now_ms) const;
  // The ledger thread: the `gatos pool ls` reply (pools; submitters' usage
  // against their limits, the busiest 100), also the dashboard's /pools.
  std::string PoolsReply(int64_t now);

 private:
  void DecodeOnLedgerThread(DecodedRequest* d);
  std::optional<Op> DecodePolicy(const nlohmann::json& j, DecodedRequest* d);
  // A schedule commit (rpc::kLocalSchedule): checked against the schedule's
  // current commit and the policy (schedule_commit.h).
  std::optional<Op> DecodeSchedule(std::string_view data, DecodedRequest* d);
  // A pushed or forwarded witness (read through `lookup`): well formed,
  // signed by `key_hex`, about this ledger and about the commit its log has
  // at that sequence.
  Result<WitnessStatement> CheckWitness(const std::string& commit, const std::string& key_hex,
                                       const ObjectLookup& lookup);
  std::string ReadReply(const ServiceRequest& r);
  // Applies a batch; the replies of granted claims and renews are left
  // empty, their requests' `grant` set, for SignGrants.
  std::vector<std::string> Apply(std::vector<DecodedRequest>& batch);
  // One reply message's grants (batch[first, first + count)): signs them
  // once and writes their replies.
  void SignGrants(std::vector<DecodedRequest>& batch, size_t first, size_t count,
                  std::vector<std::string>* replies);
  void AfterBatch(std::vector<DecodedRequest>& batch, const std::vector<int>& op_of,
                  const std::vector<OpResult>& results);
  void PublishPolicy();
  void Track(const JobRecord& r);
  void ProcessDue(int64_t now);
  void Offer(const JobRecord& r, int64_t now);
  // Offers what the scheduler lets go now (after every batch and sweep).
  void Release(int64_t now);
  // A submit over its submitter's admission limits is refused before the
  // batch (an existing job is not: it is a no-op).
  std::optional<std::string> Admission(const Op& op, int64_t now);
  // A schedule's timed fire counts against its signer's max_pending and
  // per_minute as a submit does: refused, the tick is skipped.
  std::optional<std::string> AdmitFire(const std::string& signer_hex, int64_t now);
  void ApplyTimerOps(std::vector<Op> ops);
  // Schedules (service_schedules.cpp): each active one's clock and the
  // last tick it fired (or the time it became active), read again from
  // refs/gatos/schedules/ and refs/gatos/fires/ after a schedule changes.
  void LoadSchedules();
  void FireSchedules(int64_t now);
  // Triggers (service_triggers.cpp): the positions each one last recorded
  // (refs/gatos/watch/<name>), read with the schedules; each sweep, the
  // poller's readings fire the moved refs and record the new positions.
  void LoadTrigger(const ScheduleCommit& sc);
  void FireTriggers(int64_t now);
  void Emit(ServiceEvent e) { events_.push_back(std::move(e)); }
  void Log(const std::string& line);

  LedgerWriter* writer_;
  ServiceOptions options_;
  ServiceObserver default_observer_;
  ServiceObserver* observer_;
  std::vector<ServiceEvent> events_;
  // Offers: per live job, the epoch last offered and when.
  struct Tracked {
    int64_t offered_epoch = 0;
    int64_t offered_ms = 0;
    int64_t republished = 0;
    int64_t next_due = -1;  // the due_ entry that is current
  };
  std::map<std::string, Tracked> tracked_;
  Scheduler scheduler_;
  struct LiveWorker {
    std::vector<std::string> pools;
    int64_t seen_ms = 0;
  };
  mutable std::mutex workers_mu_;
  std::map<std::string, LiveWorker> workers_;
  int64_t workers_pruned_ms_ = 0;
  std::multimap<int64_t, std::string> due_;  // when to look at a job again
  struct ActiveSchedule {
    ScheduleCommit commit;
    ScheduleClock clock;
    int64_t last_ms = 0;  // ticks after this may fire
    int64_t next_ms = 0;  // the next tick (0 = none)
  };
  std::map<std::string, ActiveSchedule> schedules_;
  bool schedules_stale_ = true;
  struct ActiveTrigger {
    ScheduleCommit commit;
    std::string positions_commit;  // refs/gatos/watch/<name>, "" = none
    WatchPositions positions;      // as recorded there
    std::map<std::string, std::string> errors;  // url -> the last reading's error (logged once)
    std::map<std::string, std::string> refused;  // "url ref" -> its fire's last admission refusal (logged once)
  };
  std::map<std::string, ActiveTrigger> triggers_;
  std::string prune_cursor_;
  int64_t next_prune_step_ms_ = 0;  // the pruning crawl's next step (ledger clock)
  mutable std::mutex policy_mu_;
  // Prepare's repository handle for pushed jobs and results (its caller's
  // thread; a concurrent Prepare opens its own).
  mutable std::mutex prepare_mu_;
  mutable std::unique_ptr<Ledger> prepare_ledger_;
  std::shared_ptr<const PolicySnapshot> policy_;
  int64_t last_views_sync_ms_ = 0;
  std::string log_root_;                       // the log commit of sequence 1
  std::map<int64_t, std::string> log_by_seq_;  // log commits by sequence, as far as walked
  // Triggers' readings (service_triggers.cpp); null without list_remote_refs.
  std::unique_ptr<WatchPoller> poller_;
};

}  // namespace gatos

#endif  // GATOS_JOB_SERVICE_H_
