// A job's state as the ledger's index keeps it and as status/list report it.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_JOB_RECORD_H_
#define GATOS_JOB_RECORD_H_

#include <cstdint>
#include <string>

#include "gatos/lease.h"

namespace gatos {

struct IndexEntry {
  std::string job_hex;
  std::string job_commit;
  JobState state = JobState::kPending;
  std::string worker_hex;   // lease holder, "" when none
  int64_t epoch = 0;
  int64_t lease_expires_ms = 0;
  bool cancel_requested = false;
  std::string result_commit;
  int64_t seen_ms = 0;            // when this gatosd first saw the job
  int64_t last_published_ms = 0;  // last pending publication (0 = never)
  int64_t published_epoch = -1;   // epoch whose expiry was last republished
};

// The index entry of one job's refs (seen_ms and publication fields zero).
IndexEntry EntryFromSnapshot(const JobSnapshot& snap, int64_t now_ms);

}  // namespace gatos

#endif  // GATOS_JOB_RECORD_H_
