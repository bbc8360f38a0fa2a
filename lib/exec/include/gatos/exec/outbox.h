// The worker's durable local state: an outbox of results waiting for the
// ledger's acknowledgement, and the local record of the leases it holds.
//
// One SQLite database (WAL mode) in the worker's --state-dir. A result is
// enqueued before it is sent and marked delivered only on the ledger's
// acknowledgement, so a crash at any point leaves it pending and the next
// start delivers it without re-running the job. Schema and lifecycle states:
// docs/worker-execution.md, "Durable outbox".
//
// Thread-safety: an Outbox is thread-safe (one connection guarded by an
// internal mutex). Several processes may open the same state dir (SQLite
// locking plus busy_timeout), but one worker per state dir is the intended use.
// Nothing here logs: payloads and stored errors are never printed except by
// the formatters below, which print counts, ids and the ledger's reply text.
#ifndef GATOS_OUTBOX_H_
#define GATOS_OUTBOX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr int64_t kDefaultOutboxKeep = 1000;

struct OutboxOptions {
  // Most recent delivered rows kept by Prune(); older delivered rows are
  // deleted. Must be >= 1 when prune_enabled (use ResolveOutboxKeep).
  int64_t keep_delivered = kDefaultOutboxKeep;
  bool prune_enabled = true;
  int max_attempts = 10;           // failed deliveries before a row is dead
  int64_t backoff_base_ms = 200;   // first retry delay (before jitter)
  int64_t backoff_cap_ms = 30000;  // no retry waits longer than this
  int busy_timeout_ms = 5000;      // wait this long for another connection's lock
  // synchronous=FULL (default): an Enqueue that returned survives power loss,
  // not only a process crash; NORMAL in WAL mode may lose the last commits on
  // power loss. The cost is one fsync per transaction; the batch calls below
  // (EnqueueResults, SettleDeliveries, RecordLeases) make it one per batch.
  bool sync_full = true;
  // Size caps. A result whose payload is larger than max_payload_bytes, or
  // that would take the payload bytes of pending rows above
  // max_pending_bytes, is stored as a dead letter without its payload, with
  // the reason; it never grows the database. The worker stops claiming
  // jobs while the pending bytes are above half the cap.
  int64_t max_payload_bytes = 64LL << 20;
  int64_t max_pending_bytes = 256LL << 20;
};

// Where the prune cap came from, for one log line at start.
struct OutboxKeepSetting {
  int64_t keep = kDefaultOutboxKeep;
  bool enabled = true;
  std::string source;                 // "env GATOS_OUTBOX_KEEP", "config", "default"
  std::vector<std::string> warnings;  // one per malformed value that was ignored
};

// Resolves the prune cap: env value (GATOS_OUTBOX_KEEP) over config value over
// the default 1000. A value is a decimal integer in [1, 1e9], or "off" to
// disable pruning. Anything else (including 0, negatives, junk, overflow) is
// ignored with a warning and the next source is used; this never fails.
// nullptr means "not set".
OutboxKeepSetting ResolveOutboxKeep(const char* env_value, const char* config_value);

enum class LeaseState { kRunning, kReporting, kDone, kAbandoned };
std::string_view LeaseStateName(LeaseState s);  // "running", "reporting", "done", "abandoned"

enum class OutboxItemState { kPending, kDelivered, kDead };
std::string_view OutboxItemStateName(OutboxItemState s);  // "pending", "delivered", "dead"

struct LocalLease {
  std::string job_hex;
  int64_t epoch = 0;
  int64_t expires_ms = 0;
  std::string workspace;
  LeaseState state = LeaseState::kRunning;
  int64_t updated_ms = 0;
};

struct OutboxItem {
  int64_t id = 0;
  std::string job_hex;
  int64_t epoch = 0;
  std::string commit_id;  // the result commit
  std::string payload;    // serialized object batch; emptied once delivered
  OutboxItemState state = OutboxItemState::kPending;
  int attempts = 0;  // failed deliveries so far
  int64_t next_attempt_ms = 0;
  std::string last_error;  // the ledger's reply message of the last failure
  int64_t created_ms = 0;
  int64_t delivered_ms = 0;  // 0 until delivered
};

// One lifecycle state, chosen by precedence (first that applies):
// stale lease > dead-letter > retrying backlog > draining > idle.
enum class OutboxLifecycle { kStaleLease, kDeadLetter, kRetryingBacklog, kDraining, kIdle };
// "stale_lease", "dead_letter", "retrying_backlog", "draining", "idle"
std::string_view OutboxLifecycleName(OutboxLifecycle s);

struct OutboxHealth {
  OutboxLifecycle state = OutboxLifecycle::kIdle;
  int64_t queue_depth = 0;  // pending rows
  int64_t pending_bytes = 0;  // payload bytes of the pending rows
  int64_t retrying = 0;     // pending rows with attempts > 0
  int64_t dead_letter = 0;  // dead rows
  int64_t delivered_retained = 0;
  int64_t leases_held = 0;   // running or reporting
  int64_t stale_leases = 0;  // running or reporting, and expired at now_ms
  std::optional<int64_t> oldest_pending_age_ms;
  std::optional<int64_t> last_delivered_ms;
  std::string last_dead_error;  // reason of the most recent dead row, if any
  int64_t now_ms = 0;
};

std::string OutboxHealthJson(const OutboxHealth& h);  // one JSON object, one line
std::string OutboxHealthText(const OutboxHealth& h);  // for `gatos-worker status`

struct PruneReport {
  bool ran = false;  // false when pruning is disabled
  int64_t reclaimed_delivered = 0;
  int64_t reclaimed_leases = 0;  // done/abandoned lease rows beyond the same cap
};

// Retry delay after the n-th failed attempt (n >= 1), before the cap:
// base * 2^(n-1), capped; "equal jitter": half fixed, half scaled by
// unit in [0, 1). Exposed for tests and docs.
int64_t OutboxBackoffMs(int attempts, double unit, const OutboxOptions& opts);

class Outbox {
 public:
  // Creates state_dir (mode 0700) and outbox.db inside it. FailedPrecondition
  // when the database has a schema version this build does not know;
  // DataLoss when the file is not a usable SQLite database; Internal otherwise.
  static Result<std::unique_ptr<Outbox>> Open(const std::string& state_dir,
                                              OutboxOptions options = {});
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  const std::string& path() const;

  // --- local leases ---
  // Records (or re-records) a lease as running. Idempotent per (job, epoch).
  Status RecordLease(const std::string& job_hex, int64_t epoch, int64_t expires_ms,
                     const std::string& workspace, int64_t now_ms);
  // NotFound when no such lease is recorded.
  Status UpdateLeaseExpiry(const std::string& job_hex, int64_t epoch, int64_t expires_ms,
                           int64_t now_ms);
  // Moves the lease to `state` (reporting, done or abandoned). NotFound when
  // no such lease is recorded.
  Status FinishLease(const std::string& job_hex, int64_t epoch, LeaseState state, int64_t now_ms);
  // Running or reporting leases whose expiry is <= now_ms: what a restarted
  // worker must recover (their jobs are not running any more).
  Result<std::vector<LocalLease>> ExpiredLeases(int64_t now_ms);
  // Running or reporting leases, oldest first.
  Result<std::vector<LocalLease>> HeldLeases();

  // Records several leases as running (as RecordLease) in one transaction.
  Status RecordLeases(const std::vector<LocalLease>& leases, int64_t now_ms);

  // --- outbox ---
  // Stores a result as pending and returns its id. Enqueuing the same
  // (job, epoch, commit) again returns the existing id and changes nothing.
  // Over a size cap (OutboxOptions) the row is stored dead, without payload.
  Result<int64_t> Enqueue(const std::string& job_hex, int64_t epoch, const std::string& commit_id,
                          const std::string& payload, int64_t now_ms);

  struct Entry {
    std::string job_hex;
    int64_t epoch = 0;
    std::string commit_id;
    std::string payload;
  };
  struct Enqueued {
    int64_t id = 0;
    OutboxItemState state = OutboxItemState::kPending;  // kDead: refused by a size cap
    std::string dead_reason;
  };
  // Group commit: stores every entry as Enqueue does, and moves each one's
  // lease (job, epoch; if recorded) to reporting, in ONE transaction (one
  // fsync). Returns one Enqueued per entry, in order. InvalidArgument for an
  // entry without job or commit id (nothing is written then).
  Result<std::vector<Enqueued>> EnqueueResults(const std::vector<Entry>& entries, int64_t now_ms);

  // What one delivery attempt came to, for SettleDeliveries.
  struct Delivery {
    enum class Outcome {
      kDelivered,  // the ledger acknowledged it
      kRetry,      // Retryable: as MarkFailed(retryable=true)
      kRefused,    // Permanent or StaleOwner: dead at once
    };
    int64_t id = 0;
    Outcome outcome = Outcome::kDelivered;
    std::string error_text;  // the ledger's reply message (kRetry, kRefused)
  };
  // Settles several deliveries in ONE transaction: delivered rows drop their
  // payload and their lease becomes done; retried rows back off (dead after
  // max_attempts); refused rows become dead and their lease abandoned.
  // Returns each row's state afterwards, in order. A row that is not
  // pending (already settled, or pruned: NotFound is not an error here) is
  // left as it is and reported in its current state (kDelivered if gone).
  Result<std::vector<OutboxItemState>> SettleDeliveries(const std::vector<Delivery>& deliveries,
                                                        int64_t now_ms);
  // Payload bytes of the pending rows (kept in memory; exact).
  int64_t PendingBytes();
  // Earliest next_attempt_ms of a pending row, if any (to sleep until then).
  Result<std::optional<int64_t>> NextDueMs();
  // Pending rows with next_attempt_ms <= now_ms, earliest first, at most limit.
  Result<std::vector<OutboxItem>> Due(int64_t now_ms, int limit);
  // NotFound for an unknown id.
  Result<OutboxItem> Get(int64_t id);
  // The ledger acknowledged the row. Idempotent; drops the payload (no longer
  // needed). NotFound for an unknown id; FailedPrecondition for a dead row.
  Status MarkDelivered(int64_t id, int64_t now_ms);
  // A delivery failed. Retryable: attempts+1 and the next attempt is backed
  // off (see OutboxBackoffMs); at max_attempts the row becomes dead. Not
  // retryable: dead at once. error_text must be the ledger's reply message
  // (never a payload or credential); it is kept as the reason. Returns the
  // row's new state. NotFound for an unknown id; FailedPrecondition unless
  // the row is pending.
  Result<OutboxItemState> MarkFailed(int64_t id, const std::string& error_text, int64_t now_ms,
                                     bool retryable);
  // Operator action: dead rows become pending again with attempts reset.
  // Returns how many.
  Result<int64_t> RetryDead(int64_t now_ms);
  // Keeps only the keep_delivered most recent delivered rows (by delivery
  // time, then id), and as many finished leases. Never touches pending or
  // dead rows or held leases. Writes no backup file. Run after each drain.
  Result<PruneReport> Prune();

  Result<OutboxHealth> Health(int64_t now_ms);

  struct Impl;

 private:
  explicit Outbox(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gatos

#endif  // GATOS_OUTBOX_H_
