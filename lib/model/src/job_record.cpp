#include "gatos/job_record.h"

namespace gatos {

IndexEntry EntryFromSnapshot(const JobSnapshot& snap, int64_t now_ms) {
  IndexEntry e;
  e.job_hex = snap.job_hex;
  e.job_commit = snap.job_commit;
  e.state = DeriveView(snap, now_ms).state;
  if (snap.lease) {
    e.worker_hex = snap.lease->worker_hex;
    e.epoch = snap.lease->epoch;
    e.lease_expires_ms = snap.lease->expires_ms;
  }
  e.cancel_requested = !snap.cancel_commit.empty();
  e.result_commit = snap.result_commit;
  return e;
}

}  // namespace gatos
