#include "gatos/scan/done_ledger.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace gatos::scan {
namespace {

struct StmtFree {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFree>;

constexpr int kSchemaVersion = 1;

// Bumping kSchemaVersion needs a migration; a newer file is refused.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS done_blobs(
  policy TEXT NOT NULL, blob TEXT NOT NULL, size INTEGER NOT NULL, outcome INTEGER NOT NULL,
  PRIMARY KEY(policy, blob)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS findings(
  policy TEXT NOT NULL, blob TEXT NOT NULL, rule TEXT NOT NULL, start INTEGER NOT NULL,
  end_ INTEGER NOT NULL, line INTEGER NOT NULL, fingerprint TEXT NOT NULL,
  PRIMARY KEY(policy, blob, rule, start)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS locations(
  repo TEXT NOT NULL, policy TEXT NOT NULL, blob TEXT NOT NULL, commit_id TEXT NOT NULL,
  path TEXT NOT NULL, PRIMARY KEY(repo, policy, blob)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS watermarks(
  repo TEXT NOT NULL, ref TEXT NOT NULL, policy TEXT NOT NULL, commit_id TEXT NOT NULL,
  updated_unix INTEGER NOT NULL, PRIMARY KEY(repo, ref, policy)) WITHOUT ROWID;
)sql";

void Bind(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void Bind(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }

std::string Column(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, i))
           : std::string();
}

}  // namespace

struct DoneLedger::Statements {
  Stmt is_done, has_findings, insert_done, insert_finding, insert_location, get_watermark,
      set_watermark;
};

DoneLedger::DoneLedger(sqlite3* db, std::string path)
    : db_(db), path_(std::move(path)), stmts_(std::make_unique<Statements>()) {}

DoneLedger::~DoneLedger() {
  stmts_.reset();
  sqlite3_close_v2(db_);
}

Status DoneLedger::Error(const std::string& what) const {
  std::string msg = what + " in scan state " + path_ + ": " + sqlite3_errmsg(db_);
  int code = sqlite3_errcode(db_) & 0xff;
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    return UnavailableError(msg + " (another scan holds the state; retry later)");
  }
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    return DataLossError(msg + " (move the file away to start over)");
  }
  if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN ||
      code == SQLITE_READONLY) {
    return UnavailableError(msg);
  }
  return InternalError(msg);
}

Status DoneLedger::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return Error("running SQL");
  }
  return OkStatus();
}

Result<std::unique_ptr<DoneLedger>> DoneLedger::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close_v2(raw);
    return UnavailableError("cannot open scan state " + path + ": " + msg +
                            " (check the state directory exists and is writable)");
  }
  std::unique_ptr<DoneLedger> l(new DoneLedger(raw, path));
  sqlite3_busy_timeout(raw, 30000);
  // FULL: a committed batch (findings + done markers) survives power loss
  // before the watermark transaction that depends on it is written.
  GATOS_RETURN_IF_ERROR(l->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  // Blob ids are random keys: a batch touches pages all over the done
  // table, which stay cached between batches (64 MiB; SQLite's default is 2).
  GATOS_RETURN_IF_ERROR(l->Exec("PRAGMA cache_size=-65536; PRAGMA wal_autocheckpoint=8192;"));
  GATOS_RETURN_IF_ERROR(l->Exec(kSchema));
  GATOS_RETURN_IF_ERROR(
      l->Exec("INSERT OR IGNORE INTO meta(key, value) VALUES "
              "('schema_version', '1')"));
  {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(raw, "SELECT value FROM meta WHERE key='schema_version'", -1, &s,
                           nullptr) != SQLITE_OK) {
      return l->Error("reading schema version");
    }
    Stmt guard(s);
    if (sqlite3_step(s) != SQLITE_ROW || Column(s, 0) != std::to_string(kSchemaVersion)) {
      return DataLossError("scan state " + path + " has schema version " + Column(s, 0) +
                           ", this gatos-scan reads version " + std::to_string(kSchemaVersion) +
                           " (use a matching gatos-scan or a new --state-dir)");
    }
  }
  auto prep = [&](Stmt* out, const char* sql) -> Status {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(raw, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      return l->Error("preparing statement");
    }
    out->reset(s);
    return OkStatus();
  };
  Statements& st = *l->stmts_;
  GATOS_RETURN_IF_ERROR(prep(&st.is_done, "SELECT 1 FROM done_blobs WHERE policy=?1 AND blob=?2"));
  GATOS_RETURN_IF_ERROR(
      prep(&st.has_findings, "SELECT 1 FROM findings WHERE policy=?1 AND blob=?2 LIMIT 1"));
  GATOS_RETURN_IF_ERROR(prep(&st.insert_done,
                             "INSERT OR IGNORE INTO done_blobs(policy, blob, size, outcome) "
                             "VALUES (?1, ?2, ?3, ?4)"));
  GATOS_RETURN_IF_ERROR(prep(&st.insert_finding,
                             "INSERT OR IGNORE INTO findings(policy, blob, rule, start, end_, "
                             "line, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  GATOS_RETURN_IF_ERROR(prep(&st.insert_location,
                             "INSERT OR IGNORE INTO locations(repo, policy, blob, commit_id, "
                             "path) VALUES (?1, ?2, ?3, ?4, ?5)"));
  GATOS_RETURN_IF_ERROR(prep(&st.get_watermark,
                             "SELECT commit_id FROM watermarks WHERE repo=?1 AND ref=?2 AND "
                             "policy=?3"));
  GATOS_RETURN_IF_ERROR(prep(&st.set_watermark,
                             "INSERT INTO watermarks(repo, ref, policy, commit_id, updated_unix) "
                             "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(repo, ref, policy) DO "
                             "UPDATE SET commit_id=excluded.commit_id, "
                             "updated_unix=excluded.updated_unix"));
  return l;
}

namespace {

// Runs a one-row lookup; true when a row exists.
Result<bool> Exists(sqlite3_stmt* s, const std::string& a, const std::string& b,
                    const std::function<Status(const std::string&)>& err) {
  sqlite3_reset(s);
  Bind(s, 1, a);
  Bind(s, 2, b);
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return err("looking up a blob");
}

}  // namespace

Result<bool> DoneLedger::IsDone(const std::string& policy, const std::string& blob) {
  return Exists(stmts_->is_done.get(), policy, blob,
                [this](const std::string& w) { return Error(w); });
}

Result<bool> DoneLedger::HasFindings(const std::string& policy, const std::string& blob) {
  return Exists(stmts_->has_findings.get(), policy, blob,
                [this](const std::string& w) { return Error(w); });
}

Status DoneLedger::CommitBatch(const std::string& policy, const std::string& repo,
                               const std::vector<BlobRecord>& blobs,
                               const std::vector<BlobLocation>& locations) {
  if (blobs.empty() && locations.empty()) return OkStatus();
  GATOS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [this](const std::string& what) {
    Status s = Error(what);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  };
  auto step = [](sqlite3_stmt* s) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE;
  };
  Statements& st = *stmts_;
  auto add_location = [&](const std::string& blob, const std::string& commit,
                          const std::string& path) {
    sqlite3_stmt* s = st.insert_location.get();
    Bind(s, 1, repo);
    Bind(s, 2, policy);
    Bind(s, 3, blob);
    Bind(s, 4, commit);
    Bind(s, 5, path);
    return step(s);
  };
  // In key order, so neighbouring rows share B-tree pages.
  std::vector<const BlobRecord*> sorted;
  sorted.reserve(blobs.size());
  for (const BlobRecord& b : blobs) sorted.push_back(&b);
  std::sort(sorted.begin(), sorted.end(),
            [](const BlobRecord* a, const BlobRecord* b) { return a->blob < b->blob; });
  for (const BlobRecord* bp : sorted) {
    const BlobRecord& b = *bp;
    // Findings first, then the done marker: done implies findings durable.
    for (const StoredFinding& f : b.findings) {
      sqlite3_stmt* s = st.insert_finding.get();
      Bind(s, 1, policy);
      Bind(s, 2, b.blob);
      Bind(s, 3, f.rule_id);
      Bind(s, 4, static_cast<int64_t>(f.start));
      Bind(s, 5, static_cast<int64_t>(f.end));
      Bind(s, 6, static_cast<int64_t>(f.line));
      Bind(s, 7, f.fingerprint);
      if (!step(s)) return fail("recording a finding");
    }
    if (!b.findings.empty() && !add_location(b.blob, b.commit, b.path)) {
      return fail("recording a finding location");
    }
    sqlite3_stmt* s = st.insert_done.get();
    Bind(s, 1, policy);
    Bind(s, 2, b.blob);
    Bind(s, 3, static_cast<int64_t>(b.size));
    Bind(s, 4, static_cast<int64_t>(b.outcome));
    if (!step(s)) return fail("recording a scanned blob");
  }
  for (const BlobLocation& l : locations) {
    if (!add_location(l.blob, l.commit, l.path)) return fail("recording a finding location");
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail("committing a batch of scanned blobs");
  }
  return OkStatus();
}

Result<std::optional<std::string>> DoneLedger::Watermark(const std::string& repo,
                                                         const std::string& ref,
                                                         const std::string& policy) {
  sqlite3_stmt* s = stmts_->get_watermark.get();
  sqlite3_reset(s);
  Bind(s, 1, repo);
  Bind(s, 2, ref);
  Bind(s, 3, policy);
  int rc = sqlite3_step(s);
  std::optional<std::string> out;
  if (rc == SQLITE_ROW) out = Column(s, 0);
  sqlite3_reset(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("reading a watermark");
  return out;
}

Status DoneLedger::AdvanceWatermarks(
    const std::string& repo, const std::string& policy,
    const std::vector<std::pair<std::string, std::string>>& ref_commits) {
  if (ref_commits.empty()) return OkStatus();
  GATOS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const auto& [ref, commit] : ref_commits) {
    sqlite3_stmt* s = stmts_->set_watermark.get();
    Bind(s, 1, repo);
    Bind(s, 2, ref);
    Bind(s, 3, policy);
    Bind(s, 4, commit);
    Bind(s, 5, now);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
      Status e = Error("advancing watermark of " + ref);
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      return e;
    }
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    Status e = Error("committing watermarks");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return e;
  }
  return OkStatus();
}

Result<std::vector<ListedFinding>> DoneLedger::ListFindings(const std::string& repo,
                                                            const std::string& policy) {
  sqlite3_stmt* raw = nullptr;
  const char* sql =
      "SELECT f.blob, f.rule, f.start, f.end_, f.line, f.fingerprint, l.commit_id, l.path "
      "FROM findings f JOIN locations l ON l.policy = f.policy AND l.blob = f.blob "
      "WHERE l.repo = ?1 AND f.policy = ?2";
  if (sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr) != SQLITE_OK) {
    return Error("listing findings");
  }
  Stmt s(raw);
  Bind(raw, 1, repo);
  Bind(raw, 2, policy);
  std::vector<ListedFinding> out;
  int rc;
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    ListedFinding f;
    f.blob = Column(raw, 0);
    f.finding.rule_id = Column(raw, 1);
    f.finding.start = static_cast<uint64_t>(sqlite3_column_int64(raw, 2));
    f.finding.end = static_cast<uint64_t>(sqlite3_column_int64(raw, 3));
    f.finding.line = static_cast<uint64_t>(sqlite3_column_int64(raw, 4));
    f.finding.fingerprint = Column(raw, 5);
    f.commit = Column(raw, 6);
    f.path = Column(raw, 7);
    out.push_back(std::move(f));
  }
  if (rc != SQLITE_DONE) return Error("listing findings");
  return out;
}

Result<bool> DoneLedger::AnyDone(const std::string& policy) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT 1 FROM done_blobs WHERE policy=?1 LIMIT 1", -1, &raw,
                         nullptr) != SQLITE_OK) {
    return Error("reading done blobs");
  }
  Stmt s(raw);
  Bind(raw, 1, policy);
  const int rc = sqlite3_step(raw);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("reading done blobs");
  return rc == SQLITE_ROW;
}

Result<int64_t> DoneLedger::DoneCount(const std::string& policy) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM done_blobs WHERE policy=?1", -1, &raw,
                         nullptr) != SQLITE_OK) {
    return Error("counting done blobs");
  }
  Stmt s(raw);
  Bind(raw, 1, policy);
  if (sqlite3_step(raw) != SQLITE_ROW) return Error("counting done blobs");
  return static_cast<int64_t>(sqlite3_column_int64(raw, 0));
}

}  // namespace gatos::scan
