#include "job_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/sys/log.h"
#include "gatos/worker/stop_decision.h"

namespace gatos::worker {

void JobRunner::Run(const std::shared_ptr<Job>& job) const {
  if (DisposeOfRun(job->stale, job->cancel, false) == RunDisposition::kDiscardLeaseLost) {
    Log("job " + Short(job->hex) + ": lease lost before it started; discarded");
    AbandonLease(p_.outbox, *job);
    return;
  }
  Log("claimed job " + Short(job->hex) + " (epoch " + std::to_string(job->epoch) + ")");
  Poe poe =
      StartPoe(*p_.runner, job->hex, job->epoch, job->grant.lease.output_cap_bytes, SystemNowMs());
  std::vector<ResultFile> files;

  // Parsed once, by VerifyGrant (a job.yaml this worker cannot parse is no grant).
  const Manifest& manifest = job->grant.manifest;
  if (job->cancel) {
    RecordCancelled(CancelledAt::kBeforeStart, &poe);
  } else {
    std::vector<ResolvedInput> resolved;
    auto git_inputs = GitInputs(manifest);
    bool inputs_ok = true;
    if (!git_inputs.ok()) {
      // Permanent: the ledger accepted it, but this worker cannot read its inputs.
      RecordUnreadableInputs(git_inputs.status(), &poe);
      inputs_ok = false;
    } else if (!git_inputs->empty()) {
      inputs_ok = ResolveInputs(job, *git_inputs, &resolved, &poe);
      if (!inputs_ok && poe.status.empty()) {  // stopped while fetching
        switch (DisposeOfRun(job->stale, job->cancel, true)) {
          case RunDisposition::kDiscardLeaseLost:
            Log("job " + Short(job->hex) + ": lease lost while fetching its inputs; discarded");
            AbandonLease(p_.outbox, *job);
            return;
          case RunDisposition::kDiscardShutdown:
            Log("job " + Short(job->hex) + ": stopped by shutdown while fetching its inputs");
            AbandonLease(p_.outbox, *job);
            return;
          case RunDisposition::kReport:
            RecordCancelled(CancelledAt::kWhileFetchingInputs, &poe);
            break;
        }
      }
    }
    if (inputs_ok) RunCommand(job, resolved, &poe, &files);
    if (poe.status.empty()) return;  // abandoned (stale lease or shutdown)
  }
  FinishPoe(SystemNowMs(), &poe, &files);
  p_.reporter->Hand(p_.signer->Sign(job, std::move(poe), std::move(files), job->grant.canonical,
                                    job->ws + "/out"));
}

// Fetches the job's git inputs before it starts (the lease is renewed
// meanwhile). Failures become the job's `failed` result: a permanent one
// (not found, authentication refused, ref or commit missing, a refused url)
// at once; a transient one after a few attempts with backoff, saying so, so
// that the ledger's retry policy (PROTOCOL section 12) may run it again
// later. False with poe->status empty: stopped (the caller sees why).
bool JobRunner::ResolveInputs(const std::shared_ptr<Job>& job, const std::vector<GitInput>& inputs,
                              std::vector<ResolvedInput>* resolved, Poe* poe) const {
  InputRetryPolicy policy;
  policy.deadline_ms = SystemNowMs() + std::max<int64_t>(60000, job->grant.lease.lease_ms * 4);
  if (StopBeforeItRuns(job->stale, job->cancel, *p_.shutting_down)) job->halt = true;
  InputResolution res = p_.resolver->ResolveAll(
      inputs, policy, &job->halt,
      [&](const std::string& m) { Log("job " + Short(job->hex) + ": " + m); });
  *resolved = std::move(res.inputs);
  poe->inputs = PoeInputsOf(*resolved);
  if (res.status.ok()) {
    for (const ResolvedInput& r : *resolved) {
      Log("job " + Short(job->hex) + ": input " + std::to_string(r.input.index) + " at " +
          Short(r.commit));
    }
    return true;
  }
  if (res.status.code() == StatusCode::kAborted) return false;
  RecordInputFailure(res.status, IsTransientInputError(res.status), poe);
  Log("job " + Short(job->hex) + ": " + poe->reason);
  return false;
}

// Runs the job's command and fills `poe` and `files` from how it ended;
// leaves poe->status empty when the run was abandoned (its lease was lost,
// or the worker is shutting down).
void JobRunner::RunCommand(const std::shared_ptr<Job>& job,
                           const std::vector<ResolvedInput>& inputs, Poe* poe,
                           std::vector<ResultFile>* files) const {
  JobToRun run{job->hex, job->epoch, &job->grant.manifest, &job->grant.lease, job->ws, &inputs};
  ExecSpec spec = JobExecSpec(run, *p_.host);
  std::shared_ptr<LivePublisher::LiveJob> live;
  if (p_.live) {
    // A scan job publishes progress only: its output may name findings.
    live = p_.live->Begin(job->hex, job->grant.lease.attempt, job->grant.submitter_hex,
                          !IsScanJob(job->grant.manifest), ProgressFilePath(job->ws));
    spec.output_tap = p_.live->Tap(live);
  }
  auto started = p_.launcher->Start(spec);
  if (!started.ok()) {
    if (live) p_.live->End(live);
    RecordStartFailure(started.status(), poe);  // Permanent: the command cannot start
    return;
  }
  std::unique_ptr<Execution> exec = std::move(*started);
  {
    std::lock_guard<std::mutex> l(job->mu);
    job->exec = exec.get();
  }
  // A stop that arrived before exec was set.
  if (StopBeforeItRuns(job->stale, job->cancel, *p_.shutting_down)) exec->Stop();
  Result<ExecResult> result = exec->Wait();
  if (live) p_.live->End(live);
  {
    std::lock_guard<std::mutex> l(job->mu);
    job->exec = nullptr;
  }
  switch (DisposeOfRun(job->stale, job->cancel, result.ok() && result->stopped)) {
    case RunDisposition::kDiscardLeaseLost:  // StaleOwner: stop at once, discard, write nothing
      Log("job " + Short(job->hex) + ": lease lost (stale owner); its run was discarded");
      AbandonLease(p_.outbox, *job);
      return;
    case RunDisposition::kDiscardShutdown:
      Log("job " + Short(job->hex) + ": stopped by shutdown; its lease will run out");
      AbandonLease(p_.outbox, *job);
      return;
    case RunDisposition::kReport:
      RecordRun(result, job->cancel, poe, files);
      return;
  }
}

}  // namespace gatos::worker
