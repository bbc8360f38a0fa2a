// The ledger log's formats (docs/ledger-format.md, "The log"): the batch
// record each log commit carries, and the log commit's message and trailers.
//
// A batch record is text, one line per change:
//   <kind> <job hex | -> <ref | -> <old id | -> <new id | ->
// Consecutive lines with the same kind and job are one transition; a
// transition that moves no ref (an abort after a cancelled lease ran out, the
// end of a revoked worker's lease) has one line with ref, old and new "-".
//
// Thread-safety: pure functions.
#ifndef GATOS_LOG_FORMAT_H_
#define GATOS_LOG_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

// Transition kinds, as written in batch records.
enum class LogKind {
  kInit,      // the ledger's first commit: its policy
  kSubmit,    // a job adopted
  kClaim,     // first lease of an attempt (epoch n+1)
  kTakeover,  // lease of an attempt whose previous lease expired
  kRenew,
  kResult,    // the final result
  kAttempt,   // a failed attempt's result, the job goes back to pending (retry)
  kCancel,
  kAbort,     // a cancelled job whose lease ran out (no ref moves)
  kRetry,     // a deliberate re-run of a finished job (gatos retry)
  kRevoke,    // a lease ended because its worker was revoked (no ref moves)
  kPrune,     // a finished job's refs removed after the retention
  kPolicy,
  kWitness,   // an auditor's signed statement about the log
  kBatch,     // a batch record of jobs submitted together (gatos batch submit)
  kSchedule,  // a schedule commit added, paused, resumed or removed (refs/gatos/schedules/)
  kFire,      // a job the ledger created for a schedule's tick (and refs/gatos/fires/<name> moved to it)
  kWatch,     // the watched refs' positions a trigger last saw (refs/gatos/watch/<name>)
};
std::string_view LogKindName(LogKind k);
Result<LogKind> ParseLogKind(std::string_view s);

struct LogEntry {
  LogKind kind = LogKind::kSubmit;
  std::string job_hex;  // "" for kinds about no job (policy, witness, init)
  std::string ref;      // "" when the transition moves no ref
  std::string old_id;   // "" = the ref did not exist
  std::string new_id;   // "" = the ref is deleted
  bool operator==(const LogEntry&) const = default;
};

// The batch blob. Decode is strict: known kinds, 64-hex job ids, 40-hex ids,
// refs under refs/gatos/ without spaces, no empty line; InvalidArgument names
// the line.
std::string EncodeBatch(const std::vector<LogEntry>& entries);
Result<std::vector<LogEntry>> DecodeBatch(std::string_view text);

// What a log commit's message says.
struct LogCommitInfo {
  int64_t seq = 0;               // Log-Seq: 1 for the first commit, +1 each
  std::string ledger_key_hex;    // Ledger-Key: the key that signed this commit
  std::string policy_commit;     // Policy: the policy commit in force after the batch
  int64_t time_ms = 0;           // Log-Time: when the batch was committed
  // Ledger-Term: the election term of the replica that led when the batch
  // was written (a replicated ledger, docs/replication.md); 0 = absent
  // (single-node). Present terms never decrease along the log.
  int64_t term = 0;
  std::map<std::string, int64_t> counts;  // transitions by kind, for the title
};
// "gatos log <seq>: 3 submit, 2 claim\n\nLog-Seq: ...\n..." (trailers).
std::string EncodeLogMessage(const LogCommitInfo& info);
// InvalidArgument when a trailer is missing, repeated or malformed.
Result<LogCommitInfo> ParseLogMessage(std::string_view message);

}  // namespace gatos

#endif  // GATOS_LOG_FORMAT_H_
