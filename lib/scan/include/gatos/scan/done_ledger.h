// The scanner's durable state in one SQLite database (WAL mode) in the state
// directory: the done-ledger of blobs scanned per policy, their findings
// (positions and fingerprints only, never secret bytes), where each blob
// with findings was first seen per repository, and per-ref watermarks.
//
// Replay safety: every row has a deterministic primary key and is written
// with INSERT OR IGNORE, so re-running a crashed scan converges to the same
// rows. A blob's findings and its done marker are written in one
// transaction, so "done" implies its findings are durable. Watermarks move
// only through AdvanceWatermarks, which callers invoke after the last batch.
//
// Thread-safety: a DoneLedger is one SQLite connection: use it from one
// thread at a time. Several connections (threads or processes) may share the
// file; writers wait up to 30 s for each other.
#ifndef GATOS_SCAN_DONE_LEDGER_H_
#define GATOS_SCAN_DONE_LEDGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gatos/model/status.h"

struct sqlite3;

namespace gatos::scan {

enum class BlobOutcome : int {
  kScanned = 0,
  kBinary = 1,    // NUL in the first 8 KiB: not scanned
  kTooLarge = 2,  // over the size cap: not scanned
};

struct StoredFinding {
  std::string rule_id;
  uint64_t start = 0;  // byte span of the secret in the blob
  uint64_t end = 0;
  uint64_t line = 0;
  std::string fingerprint;  // "blake3k:<hex>"
};

// A blob that was read and decided under a policy.
struct BlobRecord {
  std::string blob;  // 40-hex oid
  uint64_t size = 0;
  BlobOutcome outcome = BlobOutcome::kScanned;
  std::vector<StoredFinding> findings;
  std::string commit;  // where it was first seen in this run
  std::string path;
};

// First sighting of a blob (that has findings) in a repository.
struct BlobLocation {
  std::string blob;
  std::string commit;
  std::string path;
};

struct ListedFinding {
  std::string blob;
  StoredFinding finding;
  std::string commit;
  std::string path;
  // Filled by the scanner from the repository, not stored: when `commit`
  // was made (seconds; 0 when unknown, e.g. pruned by a force-push), its
  // position among the listing's commits (oldest first; -1 unknown), and
  // whether `blob` is in the tree of a scanned ref's tip.
  int64_t commit_time = 0;
  int64_t commit_rank = -1;
  bool at_tip = false;
};

class DoneLedger {
 public:
  // Opens (creating the file and schema if needed) `path`.
  // Unavailable if the file cannot be opened; DataLoss if it is not a
  // database of this schema.
  static Result<std::unique_ptr<DoneLedger>> Open(const std::string& path);
  ~DoneLedger();
  DoneLedger(const DoneLedger&) = delete;
  DoneLedger& operator=(const DoneLedger&) = delete;

  Result<bool> IsDone(const std::string& policy, const std::string& blob);
  Result<bool> HasFindings(const std::string& policy, const std::string& blob);

  // In one transaction: each blob's findings, its location in `repo` (for
  // blobs with findings) and its done marker; then `locations` (sightings of
  // already-done blobs with findings). Idempotent.
  Status CommitBatch(const std::string& policy, const std::string& repo,
                     const std::vector<BlobRecord>& blobs,
                     const std::vector<BlobLocation>& locations);

  // The last completely scanned commit of (repo, ref) under `policy`.
  Result<std::optional<std::string>> Watermark(const std::string& repo, const std::string& ref,
                                               const std::string& policy);
  // Sets every (ref, commit) pair in one transaction.
  Status AdvanceWatermarks(const std::string& repo, const std::string& policy,
                           const std::vector<std::pair<std::string, std::string>>& ref_commits);

  // Every finding recorded for `repo` under `policy`, with its first location,
  // in no particular order.
  Result<std::vector<ListedFinding>> ListFindings(const std::string& repo,
                                                  const std::string& policy);

  // Number of done markers under `policy` (for tests and the summary).
  Result<int64_t> DoneCount(const std::string& policy);
  // Whether any blob is done under `policy` (cheap: one index probe).
  Result<bool> AnyDone(const std::string& policy);

 private:
  struct Statements;  // prepared statements reused across calls
  DoneLedger(sqlite3* db, std::string path);
  Status Exec(const char* sql);
  Status Error(const std::string& what) const;
  sqlite3* db_;  // owned; closed by the destructor after stmts_ is finalized
  std::string path_;
  std::unique_ptr<Statements> stmts_;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_DONE_LEDGER_H_
