// A follower replica applies a record of the replicated write-ahead log
// (docs/replication.md, "Followers") only after the auditor's own checks
// pass on it: the record is the next batch of its local log, and an
// incremental run of AuditLog (log_audit.h) from the local head to the
// record's log commit finds no problem — the commit is signed by the ledger
// key in force, its Log-Seq is the next one, its first parent is the local
// head, every transition it records is valid under the policy at that
// point (ApplyTransition, the one transition function), every commit it
// names is a parent, and its state index holds exactly the replayed
// records. Then it lands: the objects (one pack), refs/gatos/log (moved
// from the head by compare-and-swap), the view refs. So a follower is a
// continuous auditor, and a record that does not check never lands.
//
// Thread-safety: uses `ledger` from the calling thread only. The caller is
// the ledger's only writer while it applies (it holds the writer lock, or
// owns the repository).
#ifndef GATOS_AUDIT_REPLICA_APPLY_H_
#define GATOS_AUDIT_REPLICA_APPLY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/audit/log_audit.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/wal.h"
#include "gatos/model/status.h"

namespace gatos {

struct AppliedRecord {
  int64_t seq = 0;
  std::string log_commit;
  size_t transitions = 0;
};

// `record` is one record in the local write-ahead log's format
// (docs/ledger-format.md, section 7a), as the leader appended it.
// `verify` carries the trust settings of the auditor (a pinned ledger key:
// the operator's, never one read from the bus).
//
// Codes: InvalidArgument  not exactly one well-formed record;
//        FailedPrecondition the record is not the next one (its sequence or
//                         first parent is not the local head's successor);
//                         the message says which;
//        PermissionDenied an auditor's check failed: the message names each
//                         check (log_signature, claim, ...) and why;
//        others           the repository could not be read or written.
// Nothing but unreachable objects is written unless it returns OK.
//
// Durability: with `wal` (the replica's write-ahead log, wal.h), a record
// that checks is appended to it (one fdatasync) and the pack and the log
// ref are written without syncs, as the ledger's writer does; the caller
// checkpoints the log now and then (WriteAheadLog::CheckpointNow), and a
// writer's next open replays what a crash left. Without it, the pack and
// the log ref are synced when `fsync`.
Result<AppliedRecord> CheckAndApplyRecord(Ledger& ledger, std::string_view record, const VerifyOptions& verify,
                                          bool fsync = true, WriteAheadLog* wal = nullptr);

// A group of consecutive records (the first is the next one) checked and
// applied together: the same checks on each, with one pack for the group's
// objects, one run of the auditor's checks from the local head to the last
// record's log commit (each record's transitions replayed in order, each
// checked with the objects of the whole group present, as an auditor of
// the log would), one write-ahead log sync and one move of the log ref.
// All or nothing: when it fails nothing of the group lands (the message
// names the group); apply the records one by one then to land those before
// a bad one and name it. Returns the last record applied (`transitions`:
// the group's).
Result<AppliedRecord> CheckAndApplyRecords(Ledger& ledger, const std::vector<std::string_view>& records,
                                           const VerifyOptions& verify, bool fsync = true,
                                           WriteAheadLog* wal = nullptr);

}  // namespace gatos

#endif  // GATOS_AUDIT_REPLICA_APPLY_H_
