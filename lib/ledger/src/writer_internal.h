// Internals of the ledger writer shared by its files (ledger_writer.cpp: the
// batch and its commit; writer_transitions.cpp: what each op does;
// writer_recovery.cpp: opening, replaying the write-ahead log, repairing the
// ref view; view_writer.h and checkpointer.h: its two background threads):
// the batch being built, and small helpers about the writer's files.
#ifndef GATOS_LEDGER_SRC_WRITER_INTERNAL_H_
#define GATOS_LEDGER_SRC_WRITER_INTERNAL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gatos/ledger/writer.h"

namespace gatos {

// The batch Apply builds: what it changes, in memory, until Commit.
struct LedgerWriter::Batch {
  int64_t now = 0;
  std::map<std::string, JobRecord> touched;
  std::map<std::string, std::optional<JobRecord>> before;
  std::vector<LogEntry> entries;
  std::vector<GitObject> objects;               // what the batch writes, in order (AddObject)
  std::unordered_map<std::string, size_t> object_at;  // id -> index in `objects`
  std::vector<std::string> new_commits;
  std::map<std::string, int64_t> counts;
  std::optional<Policy> new_policy;
  std::string new_policy_commit;
  std::optional<Ed25519PrivateKey> new_key;
  std::map<std::string, std::string> notes;  // other refs moved in this batch
  std::vector<size_t> changing;  // indexes of ops whose result depends on the commit
  size_t current = 0;
};

namespace writer_internal {

inline constexpr char kViewsSyncedFile[] = "views-synced";
inline constexpr char kLockFile[] = "writer.lock";

inline std::string Short(const std::string& hex) { return hex.substr(0, 12); }

// `d` without trailing slashes.
std::string TrimDir(std::string d);

// The batch record (the "batch" blob) of a log commit.
Result<std::string> ReadLogBatch(Ledger& ledger, const std::string& log_commit);

// The crash failpoint `point` of WriterOptions::crash_at: SIGKILLs this
// process when it is the one configured.
void Crash(const WriterOptions& o, const char* point);

// The writer lock (gatos/writer.lock, flock): its descriptor, or
// Unavailable naming the holder after `wait_ms`.
Result<int> TakeLock(const std::string& dir, int wait_ms);

// syncfs of the file system that holds `dir`: everything written there so
// far is on disk. Unavailable when it cannot be made so.
Status SyncFileSystem(const std::string& dir);

// The writer's spool (Ledger::SetSpool): gatos/spool/00..63, spread over the
// file system's block groups, emptied of what a writer that died left.
void PrepareSpool(const std::string& dir, Ledger* ledger);

// Retry backoff jitter, seeded once per thread.
std::mt19937_64& BatchRng();

// An object by id: first among the batch's new objects, then in the ledger.
Result<std::pair<ObjectType, std::string>> LookupIn(Ledger& ledger, const std::vector<GitObject>& objects,
                                                    const std::unordered_map<std::string, size_t>& object_at,
                                                    const std::string& id);

}  // namespace writer_internal
}  // namespace gatos

#endif  // GATOS_LEDGER_SRC_WRITER_INTERNAL_H_
