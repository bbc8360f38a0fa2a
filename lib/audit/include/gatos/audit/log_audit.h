// The auditor's completeness proof: a replay of the ledger log
// (docs/auditor-guide.md, "The log"; PROTOCOL sections 10-12).
//
// AuditLog walks refs/gatos/log from its root (or from the head an earlier
// run recorded, AuditState) and checks, for every log commit:
//   log_message    its Log-Seq / Log-Time / Ledger-Key / Policy trailers parse
//   log_seq        Log-Seq is the previous one + 1 (no gap, no repeat)
//   log_signature  it is signed (SSHSIG, namespace git) by the ledger key of
//                  the policy in force before the batch, and names that key
//   log_batch      its tree holds a batch record that decodes; every
//                  transition's lines are exactly the ref changes the
//                  transition implies for the job's replayed record
//   log_parents    every commit the batch records for the first time is a
//                  parent of the log commit (a clone of the log holds it)
//   log_policy     the Policy trailer is the policy in force after the batch
// and for every transition, under the policy in force at that point and the
// batch's Log-Time as "now" (the ledger's clock):
//   submit         the job commit passes the ledger's own checks (job.yaml,
//                  job id, Job-Id, signed by a submitter unless dev mode)
//   claim/takeover/renew  a lease commit of this job signed by the ledger
//                  key, parents as the protocol says, the worker's signed
//                  request verifies, the worker is allowed, and the ledger's
//                  decision (DecideClaim / DecideRenew) allows it
//   result/attempt the result commit verifies (CheckResultCommit: hashes,
//                  Attest-Sig, commit signature; provenance), its parents are
//                  the job and the claim of the current epoch, the worker
//                  holds that lease (DecideResult, fencing), and it is an
//                  attempt (retried) exactly when the policy retries it:
//                  never after a success, never past max_attempts
//   cancel/retry   a ledger-signed request commit by a key that may control
//                  the job, whose signature verifies; DecideCancel/DecideRetry
//   abort/revoke/prune  allowed by the record and the clock / the policy
//   policy         a policy commit whose parent is the one in force, signed
//                  by the ledger key in force (a rotation: by the old key)
//   batch/witness  a ledger-signed batch record; a witness signed by the key
//                  its ref names, about this ledger
// Then the replayed state must equal what the ledger shows:
//   ref_missing / ref_extra / ref_moved   every ref under refs/gatos/ (but
//                  the log and the push targets) against the replay, by name;
//                  a ref that a later batch of this ledger could have moved
//                  there (a mirror fetched while the ledger wrote) is counted
//                  as behind (refs_behind: fetch again), not as a problem
//   index          the state index of the head names the replayed records
// A full run compares every ref and every record; an incremental run (since
// a recorded head) those of the jobs the new transitions touched, and proves
// that the index changed only for them.
//
// Thread-safety: uses the Ledger from the calling thread only.
#ifndef GATOS_LOG_AUDIT_H_
#define GATOS_LOG_AUDIT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/audit/verify.h"
#include "gatos/git/ledger.h"
#include "gatos/model/status.h"

namespace gatos {

// What an auditor remembers between runs (gatos verify --state FILE).
struct AuditState {
  std::string ledger_root;  // the log commit of sequence 1: the ledger's identity
  std::string head;         // the last log commit verified
  int64_t seq = 0;          // its Log-Seq
  int64_t verified_at_ms = 0;
  bool operator==(const AuditState&) const = default;
};
// Text, one "key value" per line after a version line:
//   gatos-audit-state 1
//   ledger <40 hex>
//   head <40 hex>
//   seq <n>
//   verified-at <RFC 3339 UTC>
std::string EncodeAuditState(const AuditState& s);
// Strict; InvalidArgument names the line.
Result<AuditState> ParseAuditState(std::string_view text);

// What `gatos mirror` records in <mirror>/gatos-mirror about the fetch that
// brought the mirror up to date: the ledger's log head read before the refs
// were fetched and read again after. git's ref advertisement is not a
// snapshot: refs fetched while batches landed may show the state of any
// batch in between. The ledger writes each batch's log commit before its
// view refs, so with the log fetched last no ref is ahead of the mirror's
// log, and none lags further back than the batch before `seq_before`.
// Text, one "key value" per line after a version line:
//   gatos-mirror 1
//   log-before <40 hex>
//   seq-before <n>
//   log-after <40 hex>
//   seq-after <n>
//   fetched-at <RFC 3339 UTC>
struct MirrorRecord {
  std::string log_before;
  int64_t seq_before = 0;
  std::string log_after;
  int64_t seq_after = 0;
  int64_t fetched_at_ms = 0;
  bool operator==(const MirrorRecord&) const = default;
};
inline constexpr char kMirrorRecordFile[] = "gatos-mirror";
std::string EncodeMirrorRecord(const MirrorRecord& m);
// Strict; InvalidArgument names the line. seq_before <= seq_after.
Result<MirrorRecord> ParseMirrorRecord(std::string_view text);

struct LogAuditOptions {
  VerifyOptions verify;              // trust lists, pinned ledger key, required provenance
  std::optional<AuditState> since;   // verify only what was added after this head
  bool witnesses = false;            // check every witness (refs/gatos/witness*/ and the log's)
  // A mirror fetched while the ledger wrote (MirrorRecord): a ref that a
  // batch after this sequence changed may hold any value it held from this
  // sequence on (counted as settling, not a problem); every other ref must
  // be exactly what the log says. -1: compare every ref exactly.
  int64_t settling_after = -1;
  // A mirror without that record (plain `git clone --mirror` or `git
  // fetch`), fetched at about this time (unix ms; 0 = unknown): a ref may
  // hold a value it held in a batch of the last kTornWindowMs before it, or
  // one a later batch could give it; such refs are behind (fetch again), not
  // problems. Full runs only.
  int64_t fetched_at_ms = 0;
  // Threads in all, the replay's included: N - 1 check the result commits of
  // the next stretch of the log in the background while the replay works
  // (each result once). 0 = one per CPU besides the replay, 1 = the replay
  // alone. The report is the same.
  size_t threads = 0;
  // A replica's follower checking a record before it applies it
  // (replica_apply.h): the log is read from this commit instead of
  // refs/gatos/log, and the refs are not compared (the record's view refs
  // are written only once it checks). "" / true: an auditor's run.
  std::string head;
  bool compare_refs = true;
  // When set, the result commits the replay checked completely are recorded
  // there, for the per-job pass after it (VerifyOptions::replay_verified).
  ReplayVerified* verified = nullptr;
};
inline constexpr int64_t kTornWindowMs = 60'000;

struct LogProblem {
  std::string check;   // stable name (see above; also log_rewritten, witness_*, forked_history)
  std::string detail;
  int64_t seq = 0;     // the log commit it is about (0 = none)
  std::string job_hex;
  std::string ref;
};

// One attempt (or epoch) of a job that ran more than once.
struct RunRecord {
  int64_t attempt = 0;
  int64_t epoch = 0;
  std::string worker_hex;
  std::string status;         // result status, "" while running / none
  std::string result_commit;
  bool final = false;         // the job's final result
};
struct JobRuns {
  std::string job_hex;
  std::vector<RunRecord> runs;
};

struct WitnessCheck {
  std::string ref;
  std::string commit;
  std::string key_hex;
  int64_t seq = 0;
  std::string log_commit;
  bool ok = false;
  std::string detail;
};

// Ticks of a schedule that were due while it was active and did not fire
// (gatosd down, or the catch-up rule skipping them): a warning, not a
// problem (docs/auditor-guide.md).
struct MissedTicks {
  std::string schedule;
  int64_t count = 0;  // at least this many (counting stops at 100,000 per gap)
  int64_t first_ms = 0, last_ms = 0;
};

struct LogAuditReport {
  std::string ledger_root;
  std::string head;
  int64_t from_seq = 0;   // first sequence verified by this run
  int64_t seq = 0;        // the head's sequence
  size_t commits = 0;     // log commits verified by this run
  size_t transitions = 0;
  size_t results = 0;     // results and attempts verified
  size_t jobs_touched = 0;
  size_t refs_checked = 0;
  size_t refs_settling = 0;     // refs a batch after settling_after moved, fetched mid-move
  int64_t settling_after = -1;  // as in LogAuditOptions
  // Refs newer than the log head fetched (a mirror made while the ledger
  // wrote): values a later batch of this ledger could have given them, so
  // not problems, but the mirror must be fetched again to be verified.
  size_t refs_behind = 0;
  std::vector<std::string> behind_refs;  // the first 100
  size_t dev_mode_jobs = 0;
  bool incremental = false;
  std::map<std::string, int64_t> by_kind;
  std::vector<LogProblem> problems;
  std::vector<JobRuns> reruns;  // jobs with more than one epoch or attempt, by id
  std::vector<WitnessCheck> witnesses;
  size_t fires = 0;                       // fires checked
  std::vector<MissedTicks> missed_ticks;  // by schedule name
  bool forked = false;  // witnesses prove two different histories
  bool ok() const { return problems.empty(); }
  AuditState state() const;  // what to record after an ok run
};

// NotFound when the repository has no refs/gatos/log (not a ledger, or a
// clone without refs/gatos/*). Problems found in the ledger are reported in
// the report, not as errors; errors are for unreadable repositories.
Result<LogAuditReport> AuditLog(Ledger& ledger, const LogAuditOptions& options);

nlohmann::json LogAuditReportToJson(const LogAuditReport& r);

}  // namespace gatos

#endif  // GATOS_LOG_AUDIT_H_
