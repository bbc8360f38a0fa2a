#include "gatos/worker/poe_assembly.h"

#include <optional>

#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"  // FormatRfc3339Millis
#include "gatos/worker/run_status.h"

namespace gatos::worker {

Poe StartPoe(const RunnerIdentity& runner, const std::string& job_hex, int64_t epoch,
             int64_t output_cap_bytes, int64_t now_ms) {
  Poe poe;
  poe.job_id = "blake3:" + job_hex;
  poe.worker_id = runner.worker_id;
  poe.lease_epoch = epoch;
  poe.runner_program = runner.program;
  poe.runner_version = runner.version;
  poe.runner_platform = runner.platform;
  poe.stdout_cap = output_cap_bytes;
  poe.started_at = FormatRfc3339Millis(now_ms);
  return poe;
}

void RecordRun(const Result<ExecResult>& run, bool cancelled, Poe* poe,
               std::vector<ResultFile>* files) {
  if (!run.ok()) {
    poe->status = "failed";
    poe->reason = "supervising the job failed: " + run.status().message();
    return;
  }
  const ExecResult& x = *run;
  poe->exit_code = x.exit_code ? std::optional<int64_t>(*x.exit_code) : std::nullopt;
  poe->signal = x.signal ? std::optional<int64_t>(*x.signal) : std::nullopt;
  poe->timed_out = x.timed_out;
  poe->stdout_truncated = x.stdout_truncated;
  poe->stderr_truncated = x.stderr_truncated;
  poe->started_at = FormatRfc3339Millis(x.started_ms);
  poe->finished_at = FormatRfc3339Millis(x.finished_ms);
  RunStatus status = StatusOfRun(x, cancelled);
  poe->status = std::move(status.status);
  poe->reason = std::move(status.reason);
  files->push_back({"stdout", x.stdout_data, false});
  files->push_back({"stderr", x.stderr_data, false});
}

void RecordStartFailure(const Status& why, Poe* poe) {
  poe->status = "failed";
  poe->reason = why.message();
}

void RecordUnreadableInputs(const Status& why, Poe* poe) {
  poe->status = "failed";
  poe->reason = "the job's inputs cannot be read: " + why.message();
}

void RecordInputFailure(const Status& why, bool transient, Poe* poe) {
  poe->status = "failed";
  poe->transient = transient;
  poe->reason =
      TruncateUtf8(why.message() + (transient ? " [transient: may succeed when retried]"
                                              : " [permanent: not retried by the worker]"),
                   kMaxReasonBytes);
}

void RecordCancelled(CancelledAt when, Poe* poe) {
  poe->status = "aborted";
  poe->reason = when == CancelledAt::kBeforeStart
                    ? "cancelled by the ledger before it started"
                    : "cancelled by the ledger while its inputs were fetched";
}

Poe UndeliverablePoe(const Poe& reported, size_t frame_bytes, const std::string& why) {
  Poe poe = reported;
  poe.status = "failed";
  poe.outputs.clear();
  poe.reason = TruncateUtf8("the result of " + std::to_string(frame_bytes) +
                                " bytes could not be sent to the ledger: " + why,
                            kMaxReasonBytes);
  return poe;
}

void FinishPoe(int64_t now_ms, Poe* poe, std::vector<ResultFile>* files) {
  if (poe->finished_at.empty()) poe->finished_at = FormatRfc3339Millis(now_ms);
  if (files->empty()) *files = {{"stdout", ""}, {"stderr", ""}};
}

}  // namespace gatos::worker
