// Schedule commits (docs/scheduling.md, "Schedules"; PROTOCOL section 14):
// a schedule is a commit signed by a submitter whose tree holds
// schedule.yaml (gatos/model/schedule.h) and whose message says its name
// and state:
//
//   gatos: schedule nightly-scan active
//
//   Schedule-Name: nightly-scan
//   Schedule-State: active            (active | paused | removed)
//
// Pause, resume and removal are new commits whose parent is the schedule's
// current commit. The ledger keeps the latest at refs/gatos/schedules/<name>
// and logs each move as `schedule`; the auditor applies the same rule
// (ScheduleChangeDecision) to each logged move.
//
// Thread-safety: pure functions.
#ifndef GATOS_LEDGER_SCHEDULE_COMMIT_H_
#define GATOS_LEDGER_SCHEDULE_COMMIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/model/decision.h"
#include "gatos/model/policy.h"
#include "gatos/model/schedule.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kScheduleNameTrailer[] = "Schedule-Name";
inline constexpr char kScheduleStateTrailer[] = "Schedule-State";

// A checked schedule commit.
struct ScheduleCommit {
  std::string commit;
  std::string parent;      // "" for the first commit of a schedule
  std::string state;       // active | paused | removed
  std::string signer_hex;  // the key that signed it
  int64_t time_ms = 0;     // its committer time
  ScheduleSpec spec;
};

// The commit (first) and its tree and schedule.yaml blob.
Result<std::vector<GitObject>> BuildScheduleCommit(const ScheduleSpec& spec, std::string_view state,
                                                   const std::string& parent, const Ed25519PrivateKey& key,
                                                   int64_t time_ms);

// Parses and checks a schedule commit: at most one parent, schedule.yaml a
// regular file parsing as a schedule, the trailers present once and
// agreeing with it, signed (SSH signature, namespace git) and verifying.
// InvalidArgument / PermissionDenied with the reason.
Result<ScheduleCommit> CheckScheduleCommit(const ObjectLookup& lookup, const std::string& commit_id);

// A schedule commit as `gatos schedule` sends it (rpc::kLocalSchedule, and
// rpc::kForwardSchedule from a follower): a frame whose header names the
// commit and whose object batch (at most kMaxScheduleBatchBytes in
// kMaxScheduleObjects objects) starts with it, followed by its tree and
// schedule.yaml. Decoded and checked by CheckScheduleCommit; the leader
// and a follower's front door both read it here. InvalidArgument for a
// malformed frame, else CheckScheduleCommit's error.
inline constexpr size_t kMaxScheduleBatchBytes = 2u << 20;
inline constexpr size_t kMaxScheduleObjects = 8;
struct ScheduleFrame {
  std::vector<GitObject> objects;  // the commit first
  ScheduleCommit schedule;
};
Result<ScheduleFrame> DecodeScheduleFrame(std::string_view data);

// Whether `next` may replace `current` (nullopt: no such schedule yet)
// under the policy in force at `now_ms`: its signer is an allowed
// submitter who may use the template's pool; its parent is the current
// commit; a schedule is created active or paused; a change to an existing
// one is by its last signer, an operator or the ledger key; nothing follows
// a removal but a new schedule (parent "" again is refused: the name stays
// taken).
Decision ScheduleChangeDecision(const std::optional<ScheduleCommit>& current, const ScheduleCommit& next,
                                const Policy& policy, int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_LEDGER_SCHEDULE_COMMIT_H_
