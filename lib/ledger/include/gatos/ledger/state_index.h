// The ledger's state index, kept in the tree of every log commit
// (docs/ledger-format.md, "The log"):
//
//   batch                         the batch record (log_format.h)
//   stats                         counts of jobs by state (canonical JSON)
//   jobs/<a>/<b>/<c>/<d>/<rest>   one job record per job (job_record.h), where
//                                 a..d are the first four hex digits of the
//                                 job id and rest the other 60
//   live/<a>/<b>/<rest>           the same record blob, for jobs that are not
//                                 finished (pending or claimed)
//
// A batch rewrites only the paths it touches, so its cost grows with the
// depth of the tree (log16 of the jobs), not with their number; gatosd
// restarts by reading live/ and stats, never the whole index.
//
// Thread-safety: NOT thread-safe; owned by one thread with its Ledger.
#ifndef GATOS_STATE_INDEX_H_
#define GATOS_STATE_INDEX_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/model/job_record.h"
#include "gatos/model/status.h"

namespace gatos {

// Jobs by state, as of the last log commit (stats blob).
struct IndexStats {
  std::array<int64_t, 6> by_state{};  // indexed by JobState
  int64_t jobs = 0;
  int64_t pruned = 0;
  bool operator==(const IndexStats&) const = default;
};
std::string EncodeIndexStats(const IndexStats& s);
Result<IndexStats> DecodeIndexStats(std::string_view json);

// Paths of a job in the index.
std::string JobIndexPath(std::string_view job_hex);
std::string LiveIndexPath(std::string_view job_hex);

class StateIndex {
 public:
  explicit StateIndex(Ledger* ledger) : ledger_(ledger) {}

  // Points the index at a log commit's tree ("" = an empty index).
  void Reset(const std::string& root_tree);
  const std::string& root() const { return root_; }

  // The committed record of a job; nullopt when the job is not in the index.
  // DataLoss when the blob is not a valid record (a corrupt ledger).
  Result<std::optional<JobRecord>> Get(const std::string& job_hex);
  // Every live record (live/), in job id order.
  Status ForEachLive(const std::function<Status(const JobRecord&)>& fn);
  // Records under jobs/ in job id order, starting after `after` ("" = from
  // the start); fn returns false to stop.
  Status ForEachJob(const std::string& after, const std::function<bool(const JobRecord&)>& fn);
  // Every job under jobs/ in job id order with the id of its record's blob,
  // without reading the record (Get reads it); fn returns false to stop, or
  // an error, which ends the walk with it.
  Status ForEachJobBlob(const std::function<Result<bool>(const std::string& job_hex, const std::string& blob_id)>& fn);
  Result<IndexStats> Stats();
  // The batch blob of the committed tree ("" for an empty index).
  Result<std::string> BatchText();

  struct Change {
    const JobRecord* record;  // new record
    bool live;                // keep it under live/
    bool was_live;            // it was under live/ before
  };
  // Builds the tree of the next log commit from the committed one: every
  // change, the batch record and the stats. New objects are appended to
  // *objects; returns the new root tree id. The committed state is
  // unchanged until Commit(root) (a batch that fails to write is dropped).
  Result<std::string> Build(const std::vector<Change>& changes, const std::string& batch_text,
                            const IndexStats& stats, std::vector<GitObject>* objects);
  // Adopts the tree Build returned.
  void Commit(const std::string& new_root);
  void DropPending() { pending_.clear(); }

 private:
  struct Dir {
    std::string id;                   // tree id ("" = absent/empty)
    std::vector<TreeEntry> entries;   // sorted by name
  };
  // The directory at `path` ("" = root, "jobs/a/b") in the committed tree,
  // loaded on demand. An absent directory is an empty Dir.
  Result<const Dir*> Load(const std::string& path);
  Result<const Dir*> LoadPending(const std::string& path);
  Result<std::optional<JobRecord>> ReadRecordAt(const std::string& dir, const std::string& name);

  Ledger* ledger_;
  std::string root_;
  std::unordered_map<std::string, Dir> cache_;    // committed dirs by path
  std::unordered_map<std::string, Dir> pending_;  // dirs of the last Build
  std::string pending_root_;
};

}  // namespace gatos

#endif  // GATOS_STATE_INDEX_H_
