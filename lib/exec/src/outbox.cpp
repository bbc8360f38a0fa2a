// The worker's durable outbox and local lease table (SQLite, WAL).
#include "gatos/exec/outbox.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>

#include "gatos/model/time_format.h"

namespace gatos {
namespace {

constexpr int kSchemaVersion = 1;

// Schema v1. Timestamps are unix milliseconds. The UNIQUE key makes Enqueue
// idempotent; the indexes keep Due(), Prune() and Health() off full scans.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE outbox (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  job_hex         TEXT    NOT NULL,
  epoch           INTEGER NOT NULL,
  commit_id       TEXT    NOT NULL,
  payload         BLOB    NOT NULL,
  state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_ms INTEGER NOT NULL,
  last_error      TEXT    NOT NULL DEFAULT '',
  created_ms      INTEGER NOT NULL,
  delivered_ms    INTEGER NOT NULL DEFAULT 0,
  dead_ms         INTEGER NOT NULL DEFAULT 0,
  UNIQUE (job_hex, epoch, commit_id)
);
CREATE INDEX outbox_due ON outbox (state, next_attempt_ms, id);
CREATE INDEX outbox_delivered ON outbox (state, delivered_ms, id);
CREATE TABLE leases (
  job_hex    TEXT    NOT NULL,
  epoch      INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  workspace  TEXT    NOT NULL,
  state      TEXT    NOT NULL CHECK (state IN ('running', 'reporting', 'done', 'abandoned')),
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (job_hex, epoch)
);
CREATE INDEX leases_state ON leases (state, expires_ms);
)sql";

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
// Statements come from Impl's cache: "freeing" one resets it for the next use.
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

Status SqlError(sqlite3* db, int rc, std::string_view what, const std::string& path) {
  std::string msg = "outbox " + path + ": " + std::string(what) + ": " +
                    (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(msg + "; another process holds the database lock, retry later");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLossError(msg +
                           "; the state database is damaged: move it aside and restart "
                           "(pending results in it would be lost)");
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return UnavailableError(msg + "; check free space and permissions of the state dir");
    default:
      return InternalError(msg);
  }
}

std::string_view ItemStateSql(OutboxItemState s) { return OutboxItemStateName(s); }

std::optional<OutboxItemState> ParseItemState(std::string_view s) {
  for (auto v : {OutboxItemState::kPending, OutboxItemState::kDelivered, OutboxItemState::kDead}) {
    if (OutboxItemStateName(v) == s) return v;
  }
  return std::nullopt;
}

std::optional<LeaseState> ParseLeaseState(std::string_view s) {
  for (auto v :
       {LeaseState::kRunning, LeaseState::kReporting, LeaseState::kDone, LeaseState::kAbandoned}) {
    if (LeaseStateName(v) == s) return v;
  }
  return std::nullopt;
}

std::string Quote(std::string_view v) {
  std::string out = "'";
  for (char c : v.substr(0, 32)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (v.size() > 32) out += "...";
  return out + "'";
}

// nullopt for anything but "off" or a decimal integer in [1, 1e9].
std::optional<OutboxKeepSetting> ParseKeep(std::string_view v) {
  OutboxKeepSetting s;
  if (v == "off") {
    s.enabled = false;
    return s;
  }
  if (v.empty() || v.size() > 10) return std::nullopt;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > 1000000000) return std::nullopt;
  s.keep = n;
  return s;
}

}  // namespace

std::string_view LeaseStateName(LeaseState s) {
  switch (s) {
    case LeaseState::kRunning:
      return "running";
    case LeaseState::kReporting:
      return "reporting";
    case LeaseState::kDone:
      return "done";
    case LeaseState::kAbandoned:
      return "abandoned";
  }
  return "unknown";
}

std::string_view OutboxItemStateName(OutboxItemState s) {
  switch (s) {
    case OutboxItemState::kPending:
      return "pending";
    case OutboxItemState::kDelivered:
      return "delivered";
    case OutboxItemState::kDead:
      return "dead";
  }
  return "unknown";
}

std::string_view OutboxLifecycleName(OutboxLifecycle s) {
  switch (s) {
    case OutboxLifecycle::kStaleLease:
      return "stale_lease";
    case OutboxLifecycle::kDeadLetter:
      return "dead_letter";
    case OutboxLifecycle::kRetryingBacklog:
      return "retrying_backlog";
    case OutboxLifecycle::kDraining:
      return "draining";
    case OutboxLifecycle::kIdle:
      return "idle";
  }
  return "unknown";
}

OutboxKeepSetting ResolveOutboxKeep(const char* env_value, const char* config_value) {
  std::vector<std::string> warnings;
  struct Source {
    const char* value;
    const char* name;
  };
  for (Source src : {Source{env_value, "env GATOS_OUTBOX_KEEP"}, Source{config_value, "config"}}) {
    if (!src.value) continue;
    if (auto s = ParseKeep(src.value)) {
      s->source = src.name;
      s->warnings = std::move(warnings);
      return *s;
    }
    warnings.push_back(std::string("outbox keep: ") + src.name + " value " + Quote(src.value) +
                       " is not a whole number from 1 to 1000000000 or 'off'; ignoring it");
  }
  OutboxKeepSetting s;
  s.source = "default";
  s.warnings = std::move(warnings);
  if (!s.warnings.empty()) {
    s.warnings.back() += " and keeping the default " + std::to_string(kDefaultOutboxKeep);
  }
  return s;
}

int64_t OutboxBackoffMs(int attempts, double unit, const OutboxOptions& opts) {
  int64_t d = opts.backoff_base_ms;
  for (int i = 1; i < attempts && d < opts.backoff_cap_ms; ++i) d *= 2;
  d = std::min(d, opts.backoff_cap_ms);
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + static_cast<int64_t>(static_cast<double>(d - d / 2) * unit);
}

std::string OutboxHealthJson(const OutboxHealth& h) {
  nlohmann::json j;
  j["state"] = OutboxLifecycleName(h.state);
  j["queue_depth"] = h.queue_depth;
  j["pending_bytes"] = h.pending_bytes;
  j["retrying"] = h.retrying;
  j["dead_letter"] = h.dead_letter;
  j["delivered_retained"] = h.delivered_retained;
  j["leases_held"] = h.leases_held;
  j["stale_leases"] = h.stale_leases;
  j["oldest_pending_age_ms"] =
      h.oldest_pending_age_ms ? nlohmann::json(*h.oldest_pending_age_ms) : nlohmann::json();
  j["last_delivered_at"] = h.last_delivered_ms
                               ? nlohmann::json(FormatRfc3339Millis(*h.last_delivered_ms))
                               : nlohmann::json();
  j["last_dead_error"] = h.last_dead_error;
  j["now"] = FormatRfc3339Millis(h.now_ms);
  // The reason text comes from the ledger and may hold odd bytes: replace, never throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string OutboxHealthText(const OutboxHealth& h) {
  std::string out;
  out += "state:              " + std::string(OutboxLifecycleName(h.state)) + "\n";
  out += "queue depth:        " + std::to_string(h.queue_depth) + " pending (" +
         std::to_string(h.retrying) + " retrying, " + std::to_string(h.pending_bytes) + " bytes)\n";
  out += "dead letters:       " + std::to_string(h.dead_letter) + "\n";
  out += "leases held:        " + std::to_string(h.leases_held) + " (" +
         std::to_string(h.stale_leases) + " stale)\n";
  out += "oldest pending:     " +
         (h.oldest_pending_age_ms ? std::to_string(*h.oldest_pending_age_ms) + " ms ago"
                                  : std::string("-")) +
         "\n";
  out += "last acknowledged:  " +
         (h.last_delivered_ms ? FormatRfc3339Millis(*h.last_delivered_ms) : std::string("never")) +
         "\n";
  out += "delivered retained: " + std::to_string(h.delivered_retained) + "\n";
  if (!h.last_dead_error.empty()) out += "last dead reason:   " + h.last_dead_error + "\n";
  switch (h.state) {
    case OutboxLifecycle::kStaleLease:
      out +=
          "hint: a lease expired while its job was recorded as running; starting the worker "
          "recovers it\n";
      break;
    case OutboxLifecycle::kDeadLetter:
      out +=
          "hint: results the ledger refused are kept as dead letters; fix the cause, then "
          "requeue them (Outbox::RetryDead) or inspect them with sqlite3\n";
      break;
    default:
      break;
  }
  return out;
}

// ---------------------------------------------------------------------------

struct Outbox::Impl {
  std::string path;
  OutboxOptions opts;
  DbPtr db;
  std::mutex mu;
  std::mt19937_64 rng{std::random_device{}()};
  int64_t pending_bytes = 0;  // payload bytes of pending rows; guarded by mu

  Status Error(int rc, std::string_view what) const { return SqlError(db.get(), rc, what, path); }

  ~Impl() {
    for (auto& [sql, stmt] : statements) sqlite3_finalize(stmt);
  }

  // Several statements (the schema): parsed every time.
  Status ExecScript(const char* sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    if (rc != SQLITE_OK) return Error(rc, msg.empty() ? std::string_view(sql) : msg);
    return OkStatus();
  }

  // One statement that returns no row (BEGIN, COMMIT, a PRAGMA).
  Status Exec(const char* sql) {
    GATOS_ASSIGN_OR_RETURN(StmtPtr s, Prepare(sql));
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) return Error(rc, sql);
    return OkStatus();
  }

  // A prepared statement, compiled once per connection and kept (parsing
  // SQL was a tenth of the worker's CPU per job). The caller holds the mutex;
  // the returned handle resets the statement when it goes out of scope.
  Result<StmtPtr> Prepare(const char* sql) {
    auto it = statements.find(sql);
    if (it != statements.end()) return StmtPtr(it->second);
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "prepare");
    statements.emplace(sql, s);
    return StmtPtr(s);
  }
  std::unordered_map<std::string, sqlite3_stmt*> statements;  // finalized before db closes
};

namespace {

// Binds arguments by position: int64, string (text) and a Blob wrapper.
struct Blob {
  const std::string& bytes;
};

void BindOne(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
void BindOne(sqlite3_stmt* s, int i, int v) { sqlite3_bind_int64(s, i, v); }
void BindOne(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void BindOne(sqlite3_stmt* s, int i, std::string_view v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void BindOne(sqlite3_stmt* s, int i, const Blob& b) {
  sqlite3_bind_blob(s, i, b.bytes.data(), static_cast<int>(b.bytes.size()), SQLITE_TRANSIENT);
}

template <typename... Args>
void BindAll(sqlite3_stmt* s, const Args&... args) {
  int i = 0;
  (BindOne(s, ++i, args), ...);
}

std::string ColText(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  int n = sqlite3_column_bytes(s, i);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

constexpr const char* kItemCols =
    "id, job_hex, epoch, commit_id, payload, state, attempts, next_attempt_ms, last_error, "
    "created_ms, delivered_ms";

OutboxItem ReadItem(sqlite3_stmt* s) {
  OutboxItem it;
  it.id = sqlite3_column_int64(s, 0);
  it.job_hex = ColText(s, 1);
  it.epoch = sqlite3_column_int64(s, 2);
  it.commit_id = ColText(s, 3);
  it.payload = ColText(s, 4);
  it.state = ParseItemState(ColText(s, 5)).value_or(OutboxItemState::kDead);
  it.attempts = static_cast<int>(sqlite3_column_int64(s, 6));
  it.next_attempt_ms = sqlite3_column_int64(s, 7);
  it.last_error = ColText(s, 8);
  it.created_ms = sqlite3_column_int64(s, 9);
  it.delivered_ms = sqlite3_column_int64(s, 10);
  return it;
}

constexpr const char* kLeaseCols = "job_hex, epoch, expires_ms, workspace, state, updated_ms";

LocalLease ReadLease(sqlite3_stmt* s) {
  LocalLease l;
  l.job_hex = ColText(s, 0);
  l.epoch = sqlite3_column_int64(s, 1);
  l.expires_ms = sqlite3_column_int64(s, 2);
  l.workspace = ColText(s, 3);
  l.state = ParseLeaseState(ColText(s, 4)).value_or(LeaseState::kAbandoned);
  l.updated_ms = sqlite3_column_int64(s, 5);
  return l;
}

// Rolls back unless Commit() was called.
class Txn {
 public:
  explicit Txn(Outbox::Impl* m) : m_(m) {}
  ~Txn() {
    if (open_) m_->Exec("ROLLBACK").IgnoreError();
  }
  Status Begin() {
    // IMMEDIATE: take the write lock up front, so busy_timeout applies here
    // rather than failing a read-then-write upgrade midway.
    GATOS_RETURN_IF_ERROR(m_->Exec("BEGIN IMMEDIATE"));
    open_ = true;
    return OkStatus();
  }
  Status Commit() {
    GATOS_RETURN_IF_ERROR(m_->Exec("COMMIT"));
    open_ = false;
    return OkStatus();
  }

 private:
  Outbox::Impl* m_;
  bool open_ = false;
};

// For the length of a scope, commits make no fsync (WAL, synchronous=NORMAL):
// for records whose loss in a power failure costs only a repeat — a lease
// the worker no longer knows it held runs out at the ledger; a delivery not
// marked is sent again and the ledger answers "existing". The next durable
// commit (a result's Enqueue) syncs them with it.
class NotSynced {
 public:
  explicit NotSynced(Outbox::Impl* m) : m_(m) {
    if (m_->opts.sync_full) m_->Exec("PRAGMA synchronous=NORMAL").IgnoreError();
  }
  ~NotSynced() {
    if (m_->opts.sync_full) m_->Exec("PRAGMA synchronous=FULL").IgnoreError();
  }

 private:
  Outbox::Impl* m_;
};

Result<OutboxItem> GetLocked(Outbox::Impl* m, int64_t id) {
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s,
      m->Prepare((std::string("SELECT ") + kItemCols + " FROM outbox WHERE id = ?").c_str()));
  BindAll(s.get(), id);
  int rc = sqlite3_step(s.get());
  if (rc == SQLITE_DONE) {
    return NotFoundError("outbox: no result with id " + std::to_string(id) +
                         " (it may have been pruned)");
  }
  if (rc != SQLITE_ROW) return m->Error(rc, "read result");
  return ReadItem(s.get());
}

// Recounts Impl::pending_bytes from the table (length() of a blob reads no
// overflow page). Call with the mutex held, inside the writing transaction.
Status CountPending(Outbox::Impl* m) {
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         m->Prepare("SELECT total(length(payload)) FROM outbox WHERE state = 'pending'"));
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_ROW) return m->Error(rc, "count pending bytes");
  m->pending_bytes = static_cast<int64_t>(sqlite3_column_double(s.get(), 0));
  return OkStatus();
}

// Inserts one result (idempotent per job, epoch, commit) and returns its id
// and state. Over a size cap the row is dead, without its payload.
// `*pending` is the pending payload bytes so far in this transaction.
Result<Outbox::Enqueued> InsertResult(Outbox::Impl* m, const Outbox::Entry& e, int64_t now_ms,
                                      int64_t* pending) {
  if (e.job_hex.empty() || e.commit_id.empty()) {
    return InvalidArgumentError("outbox: Enqueue needs a job id and a result commit id");
  }
  Outbox::Enqueued out;
  const int64_t size = static_cast<int64_t>(e.payload.size());
  if (size > m->opts.max_payload_bytes) {
    out.state = OutboxItemState::kDead;
    out.dead_reason = "the result is " + std::to_string(size) + " bytes, over the outbox's cap of " +
                      std::to_string(m->opts.max_payload_bytes) + " bytes per result; it was not stored";
  } else if (*pending + size > m->opts.max_pending_bytes) {
    out.state = OutboxItemState::kDead;
    out.dead_reason = "the outbox is full (" + std::to_string(*pending) + " bytes pending, cap " +
                      std::to_string(m->opts.max_pending_bytes) +
                      "); the result was not stored; is the ledger reachable?";
  }
  static const std::string kNoPayload;
  bool dead = out.state == OutboxItemState::kDead;
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr ins,
      m->Prepare("INSERT INTO outbox (job_hex, epoch, commit_id, payload, state, attempts, "
                 "next_attempt_ms, created_ms, last_error, dead_ms) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?) "
                 "ON CONFLICT (job_hex, epoch, commit_id) DO NOTHING"));
  BindAll(ins.get(), e.job_hex, e.epoch, e.commit_id, Blob{dead ? kNoPayload : e.payload},
          ItemStateSql(out.state), now_ms, now_ms, out.dead_reason, dead ? now_ms : int64_t{0});
  int rc = sqlite3_step(ins.get());
  if (rc != SQLITE_DONE) return m->Error(rc, "enqueue result");
  bool inserted = sqlite3_changes(m->db.get()) > 0;
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr sel, m->Prepare("SELECT id, state, last_error FROM outbox WHERE job_hex = ? AND epoch = ? AND commit_id = ?"));
  BindAll(sel.get(), e.job_hex, e.epoch, e.commit_id);
  rc = sqlite3_step(sel.get());
  if (rc != SQLITE_ROW) return m->Error(rc, "read enqueued id");
  out.id = sqlite3_column_int64(sel.get(), 0);
  if (!inserted) {  // an earlier Enqueue of the same result: report that row as it is
    out.state = ParseItemState(ColText(sel.get(), 1)).value_or(OutboxItemState::kDead);
    out.dead_reason = out.state == OutboxItemState::kDead ? ColText(sel.get(), 2) : "";
  } else if (!dead) {
    *pending += size;
  }
  return out;
}

// Moves a lease to `state`; a lease that is not recorded is no error here.
Status SetLeaseState(Outbox::Impl* m, const std::string& job_hex, int64_t epoch, LeaseState state,
                     int64_t now_ms) {
  GATOS_ASSIGN_OR_RETURN(StmtPtr s, m->Prepare("UPDATE leases SET state = ?, updated_ms = ? "
                                               "WHERE job_hex = ? AND epoch = ?"));
  BindAll(s.get(), LeaseStateName(state), now_ms, job_hex, epoch);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return m->Error(rc, "set lease state");
  return OkStatus();
}

}  // namespace

Outbox::Outbox(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Outbox::~Outbox() = default;

const std::string& Outbox::path() const { return impl_->path; }

Result<std::unique_ptr<Outbox>> Outbox::Open(const std::string& state_dir, OutboxOptions options) {
  if (state_dir.empty()) {
    return InvalidArgumentError("outbox: empty state dir; pass --state-dir DIR");
  }
  if (options.prune_enabled && options.keep_delivered < 1) {
    return InvalidArgumentError("outbox: keep_delivered must be >= 1 (use ResolveOutboxKeep)");
  }
  if (options.max_payload_bytes < 1 || options.max_pending_bytes < options.max_payload_bytes) {
    return InvalidArgumentError("outbox: max_payload_bytes must be >= 1 and max_pending_bytes >= it");
  }
  if (options.max_attempts < 1 || options.backoff_base_ms < 1 ||
      options.backoff_cap_ms < options.backoff_base_ms) {
    return InvalidArgumentError(
        "outbox: max_attempts and backoff_base_ms must be >= 1 and "
        "backoff_cap_ms >= backoff_base_ms");
  }
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return UnavailableError("outbox: cannot create state dir " + state_dir + ": " + ec.message() +
                            "; check the path and its permissions");
  }
  ::chmod(state_dir.c_str(), 0700);  // results and leases are the worker's alone
  auto m = std::make_unique<Impl>();
  m->path = state_dir + "/outbox.db";
  m->opts = options;
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(m->path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  m->db.reset(raw);
  if (rc != SQLITE_OK) return m->Error(rc, "open");
  sqlite3_extended_result_codes(m->db.get(), 1);
  sqlite3_busy_timeout(m->db.get(), options.busy_timeout_ms);

  {
    GATOS_ASSIGN_OR_RETURN(StmtPtr s, m->Prepare("PRAGMA journal_mode=WAL"));
    rc = sqlite3_step(s.get());
    if (rc != SQLITE_ROW) return m->Error(rc, "set journal_mode=WAL");
    std::string mode = ColText(s.get(), 0);
    if (mode != "wal") {
      return UnavailableError("outbox " + m->path + ": journal_mode is '" + mode +
                              "', not 'wal'; the state dir must be on a local file system");
    }
  }
  GATOS_RETURN_IF_ERROR(
      m->Exec(options.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  GATOS_RETURN_IF_ERROR(m->Exec("PRAGMA foreign_keys=ON"));

  Txn txn(m.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  int64_t version = 0;
  {
    GATOS_ASSIGN_OR_RETURN(StmtPtr s, m->Prepare("PRAGMA user_version"));
    rc = sqlite3_step(s.get());
    if (rc != SQLITE_ROW) return m->Error(rc, "read user_version");
    version = sqlite3_column_int64(s.get(), 0);
  }
  if (version == 0) {
    GATOS_RETURN_IF_ERROR(m->ExecScript(kSchemaV1));
    GATOS_RETURN_IF_ERROR(m->Exec("PRAGMA user_version=1"));
  } else if (version != kSchemaVersion) {
    return FailedPreconditionError(
        "outbox " + m->path + ": schema version " + std::to_string(version) +
        " is unknown to this gatos-worker (it understands " + std::to_string(kSchemaVersion) +
        "); run the worker version that wrote it, or use a fresh --state-dir");
  }
  GATOS_RETURN_IF_ERROR(CountPending(m.get()));
  GATOS_RETURN_IF_ERROR(txn.Commit());
  return std::unique_ptr<Outbox>(new Outbox(std::move(m)));
}

Status Outbox::RecordLease(const std::string& job_hex, int64_t epoch, int64_t expires_ms,
                           const std::string& workspace, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s,
      impl_->Prepare(
          "INSERT INTO leases (job_hex, epoch, expires_ms, workspace, state, updated_ms) "
          "VALUES (?, ?, ?, ?, 'running', ?) "
          "ON CONFLICT (job_hex, epoch) DO UPDATE SET expires_ms = excluded.expires_ms, "
          "workspace = excluded.workspace, state = 'running', "
          "updated_ms = excluded.updated_ms"));
  BindAll(s.get(), job_hex, epoch, expires_ms, workspace, now_ms);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "record lease");
  return OkStatus();
}

Status Outbox::RecordLeases(const std::vector<LocalLease>& leases, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (leases.empty()) return OkStatus();
  NotSynced lazy(impl_.get());
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s,
      impl_->Prepare(
          "INSERT INTO leases (job_hex, epoch, expires_ms, workspace, state, updated_ms) "
          "VALUES (?, ?, ?, ?, 'running', ?) "
          "ON CONFLICT (job_hex, epoch) DO UPDATE SET expires_ms = excluded.expires_ms, "
          "workspace = excluded.workspace, state = 'running', "
          "updated_ms = excluded.updated_ms"));
  for (const LocalLease& l : leases) {
    sqlite3_reset(s.get());
    BindAll(s.get(), l.job_hex, l.epoch, l.expires_ms, l.workspace, now_ms);
    int rc = sqlite3_step(s.get());
    if (rc != SQLITE_DONE) return impl_->Error(rc, "record lease");
  }
  return txn.Commit();
}

Status Outbox::UpdateLeaseExpiry(const std::string& job_hex, int64_t epoch, int64_t expires_ms,
                                 int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  NotSynced lazy(impl_.get());
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         impl_->Prepare("UPDATE leases SET expires_ms = ?, updated_ms = ? "
                                        "WHERE job_hex = ? AND epoch = ?"));
  BindAll(s.get(), expires_ms, now_ms, job_hex, epoch);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "update lease expiry");
  if (sqlite3_changes(impl_->db.get()) == 0) {
    return NotFoundError("outbox: no local lease for job " + job_hex + " epoch " +
                         std::to_string(epoch) + "; RecordLease must come first");
  }
  return OkStatus();
}

Status Outbox::FinishLease(const std::string& job_hex, int64_t epoch, LeaseState state,
                           int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  NotSynced lazy(impl_.get());
  GATOS_ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare("UPDATE leases SET state = ?, updated_ms = ? "
                                                   "WHERE job_hex = ? AND epoch = ?"));
  BindAll(s.get(), LeaseStateName(state), now_ms, job_hex, epoch);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "finish lease");
  if (sqlite3_changes(impl_->db.get()) == 0) {
    return NotFoundError("outbox: no local lease for job " + job_hex + " epoch " +
                         std::to_string(epoch));
  }
  return OkStatus();
}

Result<std::vector<LocalLease>> Outbox::ExpiredLeases(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         impl_->Prepare((std::string("SELECT ") + kLeaseCols +
                                         " FROM leases WHERE state IN ('running', 'reporting') AND "
                                         "expires_ms <= ? ORDER BY expires_ms, job_hex")
                                            .c_str()));
  BindAll(s.get(), now_ms);
  std::vector<LocalLease> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(ReadLease(s.get()));
  if (rc != SQLITE_DONE) return impl_->Error(rc, "list expired leases");
  return out;
}

Result<std::vector<LocalLease>> Outbox::HeldLeases() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         impl_->Prepare((std::string("SELECT ") + kLeaseCols +
                                         " FROM leases WHERE state IN ('running', 'reporting') "
                                         "ORDER BY updated_ms, job_hex")
                                            .c_str()));
  std::vector<LocalLease> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(ReadLease(s.get()));
  if (rc != SQLITE_DONE) return impl_->Error(rc, "list held leases");
  return out;
}

Result<int64_t> Outbox::Enqueue(const std::string& job_hex, int64_t epoch,
                                const std::string& commit_id, const std::string& payload,
                                int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  int64_t pending = impl_->pending_bytes;
  GATOS_ASSIGN_OR_RETURN(Enqueued e, InsertResult(impl_.get(), {job_hex, epoch, commit_id, payload}, now_ms, &pending));
  GATOS_RETURN_IF_ERROR(txn.Commit());
  impl_->pending_bytes = pending;
  return e.id;
}

Result<std::vector<Outbox::Enqueued>> Outbox::EnqueueResults(const std::vector<Entry>& entries,
                                                             int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Enqueued> out;
  if (entries.empty()) return out;
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  int64_t pending = impl_->pending_bytes;
  for (const Entry& e : entries) {
    GATOS_ASSIGN_OR_RETURN(Enqueued r, InsertResult(impl_.get(), e, now_ms, &pending));
    GATOS_RETURN_IF_ERROR(SetLeaseState(impl_.get(), e.job_hex, e.epoch, LeaseState::kReporting, now_ms));
    out.push_back(std::move(r));
  }
  GATOS_RETURN_IF_ERROR(txn.Commit());
  impl_->pending_bytes = pending;
  return out;
}

Result<std::vector<OutboxItemState>> Outbox::SettleDeliveries(const std::vector<Delivery>& deliveries,
                                                              int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<OutboxItemState> out;
  if (deliveries.empty()) return out;
  NotSynced lazy(impl_.get());
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const Delivery& d : deliveries) {
    auto it = GetLocked(impl_.get(), d.id);
    if (!it.ok()) {
      if (it.status().code() != StatusCode::kNotFound) return it.status();
      out.push_back(OutboxItemState::kDelivered);  // pruned: it was delivered long ago
      continue;
    }
    if (it->state != OutboxItemState::kPending) {
      out.push_back(it->state);
      continue;
    }
    OutboxItemState next = OutboxItemState::kDelivered;
    std::string reason = d.error_text.substr(0, 4096);
    int attempts = it->attempts;
    int64_t next_ms = it->next_attempt_ms;
    if (d.outcome == Delivery::Outcome::kRetry) {
      ++attempts;
      next = OutboxItemState::kPending;
      if (attempts >= impl_->opts.max_attempts) {
        next = OutboxItemState::kDead;
        reason = "gave up after " + std::to_string(attempts) + " attempts; last error: " + reason;
      }
      next_ms = now_ms + OutboxBackoffMs(attempts, unit(impl_->rng), impl_->opts);
    } else if (d.outcome == Delivery::Outcome::kRefused) {
      ++attempts;
      next = OutboxItemState::kDead;
    }
    if (next == OutboxItemState::kDelivered) {
      GATOS_ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare("UPDATE outbox SET state = 'delivered', delivered_ms = ?, "
                                                       "payload = X'' WHERE id = ?"));
      BindAll(s.get(), now_ms, d.id);
      int rc = sqlite3_step(s.get());
      if (rc != SQLITE_DONE) return impl_->Error(rc, "mark delivered");
      GATOS_RETURN_IF_ERROR(SetLeaseState(impl_.get(), it->job_hex, it->epoch, LeaseState::kDone, now_ms));
    } else {
      GATOS_ASSIGN_OR_RETURN(
          StmtPtr s, impl_->Prepare("UPDATE outbox SET state = ?, attempts = ?, next_attempt_ms = ?, "
                                    "last_error = ?, dead_ms = ? WHERE id = ?"));
      BindAll(s.get(), ItemStateSql(next), attempts, next_ms, reason,
              next == OutboxItemState::kDead ? now_ms : int64_t{0}, d.id);
      int rc = sqlite3_step(s.get());
      if (rc != SQLITE_DONE) return impl_->Error(rc, "mark failed");
      if (d.outcome == Delivery::Outcome::kRefused) {
        GATOS_RETURN_IF_ERROR(SetLeaseState(impl_.get(), it->job_hex, it->epoch, LeaseState::kAbandoned, now_ms));
      }
    }
    out.push_back(next);
  }
  GATOS_RETURN_IF_ERROR(CountPending(impl_.get()));
  GATOS_RETURN_IF_ERROR(txn.Commit());
  return out;
}

int64_t Outbox::PendingBytes() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pending_bytes;
}

Result<std::optional<int64_t>> Outbox::NextDueMs() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  GATOS_ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare("SELECT min(next_attempt_ms) FROM outbox WHERE state = 'pending'"));
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_ROW) return impl_->Error(rc, "read next due time");
  if (sqlite3_column_type(s.get(), 0) == SQLITE_NULL) return std::optional<int64_t>();
  return std::optional<int64_t>(sqlite3_column_int64(s.get(), 0));
}

Result<std::vector<OutboxItem>> Outbox::Due(int64_t now_ms, int limit) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s, impl_->Prepare((std::string("SELECT ") + kItemCols +
                                 " FROM outbox WHERE state = 'pending' AND next_attempt_ms <= ? "
                                 "ORDER BY next_attempt_ms, id LIMIT ?")
                                    .c_str()));
  BindAll(s.get(), now_ms, static_cast<int64_t>(limit));
  std::vector<OutboxItem> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(ReadItem(s.get()));
  if (rc != SQLITE_DONE) return impl_->Error(rc, "list due results");
  return out;
}


Result<OutboxItem> Outbox::Get(int64_t id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return GetLocked(impl_.get(), id);
}

Status Outbox::MarkDelivered(int64_t id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  GATOS_ASSIGN_OR_RETURN(OutboxItem it, GetLocked(impl_.get(), id));
  if (it.state == OutboxItemState::kDelivered) return OkStatus();
  if (it.state == OutboxItemState::kDead) {
    return FailedPreconditionError("outbox: result " + std::to_string(id) +
                                   " is a dead letter; requeue it before marking it delivered");
  }
  // The payload is not needed once the ledger holds the result.
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         impl_->Prepare("UPDATE outbox SET state = 'delivered', delivered_ms = ?, "
                                        "payload = X'' WHERE id = ?"));
  BindAll(s.get(), now_ms, id);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "mark delivered");
  GATOS_RETURN_IF_ERROR(CountPending(impl_.get()));
  return txn.Commit();
}

Result<OutboxItemState> Outbox::MarkFailed(int64_t id, const std::string& error_text,
                                           int64_t now_ms, bool retryable) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  GATOS_ASSIGN_OR_RETURN(OutboxItem it, GetLocked(impl_.get(), id));
  if (it.state != OutboxItemState::kPending) {
    return FailedPreconditionError("outbox: result " + std::to_string(id) + " is " +
                                   std::string(OutboxItemStateName(it.state)) +
                                   ", not pending; only pending results can fail delivery");
  }
  int attempts = it.attempts + 1;
  OutboxItemState next = OutboxItemState::kPending;
  std::string reason = error_text.substr(0, 4096);
  if (!retryable) {
    next = OutboxItemState::kDead;
  } else if (attempts >= impl_->opts.max_attempts) {
    next = OutboxItemState::kDead;
    reason = "gave up after " + std::to_string(attempts) + " attempts; last error: " + reason;
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int64_t next_ms = now_ms + OutboxBackoffMs(attempts, unit(impl_->rng), impl_->opts);
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s, impl_->Prepare("UPDATE outbox SET state = ?, attempts = ?, next_attempt_ms = ?, "
                                "last_error = ?, dead_ms = ? WHERE id = ?"));
  BindAll(s.get(), ItemStateSql(next), attempts, next_ms, reason,
          next == OutboxItemState::kDead ? now_ms : int64_t{0}, id);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "mark failed");
  GATOS_RETURN_IF_ERROR(CountPending(impl_.get()));
  GATOS_RETURN_IF_ERROR(txn.Commit());
  return next;
}

Result<int64_t> Outbox::RetryDead(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  // A dead letter stored without its payload (refused by a size cap) has
  // nothing to send: it stays dead.
  GATOS_ASSIGN_OR_RETURN(StmtPtr s,
                         impl_->Prepare("UPDATE outbox SET state = 'pending', attempts = 0, "
                                        "next_attempt_ms = ?, dead_ms = 0 WHERE state = 'dead' "
                                        "AND length(payload) > 0"));
  BindAll(s.get(), now_ms);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "requeue dead letters");
  int64_t n = sqlite3_changes(impl_->db.get());
  GATOS_RETURN_IF_ERROR(CountPending(impl_.get()));
  GATOS_RETURN_IF_ERROR(txn.Commit());
  return n;
}

Result<PruneReport> Outbox::Prune() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  PruneReport report;
  if (!impl_->opts.prune_enabled) return report;
  report.ran = true;
  Txn txn(impl_.get());
  GATOS_RETURN_IF_ERROR(txn.Begin());
  // The kept set is "the N most recent", whatever their age: recency never
  // protects a row beyond the cap.
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr s, impl_->Prepare("DELETE FROM outbox WHERE state = 'delivered' AND id NOT IN ("
                                "SELECT id FROM outbox WHERE state = 'delivered' "
                                "ORDER BY delivered_ms DESC, id DESC LIMIT ?)"));
  BindAll(s.get(), impl_->opts.keep_delivered);
  int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "prune delivered results");
  report.reclaimed_delivered = sqlite3_changes(impl_->db.get());
  GATOS_ASSIGN_OR_RETURN(
      StmtPtr l, impl_->Prepare("DELETE FROM leases WHERE state IN ('done', 'abandoned') AND "
                                "rowid NOT IN (SELECT rowid FROM leases WHERE state IN "
                                "('done', 'abandoned') ORDER BY updated_ms DESC, rowid DESC "
                                "LIMIT ?)"));
  BindAll(l.get(), impl_->opts.keep_delivered);
  rc = sqlite3_step(l.get());
  if (rc != SQLITE_DONE) return impl_->Error(rc, "prune finished leases");
  report.reclaimed_leases = sqlite3_changes(impl_->db.get());
  GATOS_RETURN_IF_ERROR(txn.Commit());
  return report;
}

Result<OutboxHealth> Outbox::Health(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  OutboxHealth h;
  h.now_ms = now_ms;
  // One read transaction, so the counts agree with each other.
  GATOS_RETURN_IF_ERROR(impl_->Exec("BEGIN"));
  struct Done {
    Outbox::Impl* m;
    ~Done() { m->Exec("COMMIT").IgnoreError(); }
  } done{impl_.get()};
  {
    GATOS_ASSIGN_OR_RETURN(
        StmtPtr s,
        impl_->Prepare("SELECT "
                       "(SELECT count(*) FROM outbox WHERE state = 'pending'), "
                       "(SELECT count(*) FROM outbox WHERE state = 'pending' AND attempts > 0), "
                       "(SELECT count(*) FROM outbox WHERE state = 'dead'), "
                       "(SELECT count(*) FROM outbox WHERE state = 'delivered'), "
                       "(SELECT min(created_ms) FROM outbox WHERE state = 'pending'), "
                       "(SELECT max(delivered_ms) FROM outbox WHERE state = 'delivered'), "
                       "(SELECT count(*) FROM leases WHERE state IN ('running', 'reporting')), "
                       "(SELECT count(*) FROM leases WHERE state IN ('running', 'reporting') "
                       "AND expires_ms <= ?1), "
                       "(SELECT last_error FROM outbox WHERE state = 'dead' "
                       "ORDER BY dead_ms DESC, id DESC LIMIT 1)"));
    BindAll(s.get(), now_ms);
    int rc = sqlite3_step(s.get());
    if (rc != SQLITE_ROW) return impl_->Error(rc, "read health");
    h.queue_depth = sqlite3_column_int64(s.get(), 0);
    h.pending_bytes = impl_->pending_bytes;
    h.retrying = sqlite3_column_int64(s.get(), 1);
    h.dead_letter = sqlite3_column_int64(s.get(), 2);
    h.delivered_retained = sqlite3_column_int64(s.get(), 3);
    if (sqlite3_column_type(s.get(), 4) != SQLITE_NULL) {
      h.oldest_pending_age_ms = std::max<int64_t>(0, now_ms - sqlite3_column_int64(s.get(), 4));
    }
    if (sqlite3_column_type(s.get(), 5) != SQLITE_NULL) {
      h.last_delivered_ms = sqlite3_column_int64(s.get(), 5);
    }
    h.leases_held = sqlite3_column_int64(s.get(), 6);
    h.stale_leases = sqlite3_column_int64(s.get(), 7);
    h.last_dead_error = ColText(s.get(), 8);
  }
  if (h.stale_leases > 0) {
    h.state = OutboxLifecycle::kStaleLease;
  } else if (h.dead_letter > 0) {
    h.state = OutboxLifecycle::kDeadLetter;
  } else if (h.retrying > 0) {
    h.state = OutboxLifecycle::kRetryingBacklog;
  } else if (h.queue_depth > 0) {
    h.state = OutboxLifecycle::kDraining;
  } else {
    h.state = OutboxLifecycle::kIdle;
  }
  return h;
}

}  // namespace gatos
