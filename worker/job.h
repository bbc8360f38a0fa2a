// A claimed job as the worker's threads share it, and a finished job's
// result on its way to the ledger.
//
// Ownership: a Job is held by shared_ptr from its claim until its result is
// handed to the reporter: by the runner thread that runs it, the renewer
// (while its lease is renewed) and the worker's table of running jobs (for
// cancel notices). The flags are atomics any thread may set; `mu` guards
// `exec`, which the renewer and the cancel handler use to stop the job;
// `renewal` belongs to the renewer and is guarded by its mutex.
#ifndef GATOS_WORKER_JOB_H_
#define GATOS_WORKER_JOB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "gatos/exec/exec.h"
#include "gatos/exec/outbox.h"
#include "gatos/git/grant.h"
#include "gatos/model/poe.h"
#include "gatos/worker/lease_renewal.h"

namespace gatos::worker {

// The first 12 hex digits of an id, for log lines.
inline std::string Short(const std::string& hex) { return hex.substr(0, 12); }

struct Job {
  std::string hex;
  int64_t epoch = 0;
  VerifiedGrant grant;  // checked against the ledger key before anything ran
  std::string ws;       // the runner slot's directory: work/ (HOME) and out/
  std::atomic<bool> cancel{false};
  std::atomic<bool> stale{false};  // the lease was lost: stop, report nothing
  std::atomic<bool> halt{false};   // any Stop(): ends an input fetch too
  std::mutex mu;
  Execution* exec = nullptr;  // guarded by mu; set while the command runs
  LeaseRenewal renewal;       // the renewer's (guarded by the renewer's mutex)

  // From any thread; does not block (a write to the supervisor's socket).
  void Stop() {
    halt = true;
    std::lock_guard<std::mutex> l(mu);
    if (exec) exec->Stop();
  }
};

// A finished job's result, built and signed, on its way to the ledger.
struct Finished {
  std::shared_ptr<Job> job;  // null for a result read back from the outbox
  std::string job_hex;
  std::string commit_id;
  std::string frame;   // the result request (rpc::EncodeFrame); "" if none could be built
  std::string status;  // the PoE status, for the log
  Poe poe;             // as reported, for a smaller failed result if this one cannot be sent
  int64_t outbox_id = 0;
};

// Records in the outbox that this worker gave up the job's lease (it runs
// out at the ledger, and the job is taken over); logs a failure.
void AbandonLease(Outbox* outbox, const Job& job);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_JOB_H_
