// Runs one claimed job in its runner slot, from its verified grant to the
// result handed to the reporter: fetches its git inputs, starts its command
// on the launcher, waits for it, and has its result signed; or discards it
// when its lease was lost or the worker is shutting down (the decisions are
// gatos/worker/stop_decision.h, poe_assembly.h and job_spec.h).
//
// Thread-safety: Run is called by the runner threads at once, each with its
// own job; the launcher, the resolver, the signer, the reporter and the
// outbox are thread-safe. Owns nothing: everything it uses must outlive it.
#ifndef GATOS_WORKER_JOB_RUNNER_H_
#define GATOS_WORKER_JOB_RUNNER_H_

#include <atomic>
#include <memory>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/inputs.h"
#include "gatos/exec/outbox.h"
#include "gatos/model/git_input.h"
#include "gatos/worker/job_spec.h"
#include "gatos/worker/poe_assembly.h"
#include "job.h"
#include "live_publisher.h"
#include "reporter.h"
#include "result_signer.h"

namespace gatos::worker {

class JobRunner {
 public:
  struct Parts {
    JobLauncher* launcher = nullptr;
    InputResolver* resolver = nullptr;
    const JobHost* host = nullptr;           // what every job is given
    const RunnerIdentity* runner = nullptr;  // every job's PoE runner fields
    const ResultSigner* signer = nullptr;
    Reporter* reporter = nullptr;
    Outbox* outbox = nullptr;                          // to record abandoned leases
    const std::atomic<bool>* shutting_down = nullptr;  // the worker is stopping
    LivePublisher* live = nullptr;                     // live output and progress; null = none
  };
  explicit JobRunner(const Parts& parts) : p_(parts) {}

  // `job->ws` is its slot (empty work/ and out/).
  void Run(const std::shared_ptr<Job>& job) const;

 private:
  bool ResolveInputs(const std::shared_ptr<Job>& job, const std::vector<GitInput>& inputs,
                     std::vector<ResolvedInput>* resolved, Poe* poe) const;
  void RunCommand(const std::shared_ptr<Job>& job, const std::vector<ResolvedInput>& inputs,
                  Poe* poe, std::vector<ResultFile>* files) const;

  Parts p_;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_JOB_RUNNER_H_
