// A job's proof of execution (poe.h), filled in as the job goes: the fields
// fixed at its claim (StartPoe), then exactly one of how its run ended
// (RecordRun) or why it never ran to an exit (the Record* below), then the
// defaults of a result (FinishPoe). Result building (result_assembly.h)
// signs what this leaves.
//
// Reasons are what the user reads in `gatos status`; they also decide
// retries (policy.h RetriesAttempt): a `failed` result with a reason is
// final unless it is marked `transient` (an input that could not be fetched
// for a reason that may pass), so every reason here says which it is.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_WORKER_POE_ASSEMBLY_H_
#define GATOS_WORKER_POE_ASSEMBLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/git/result.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos::worker {

// Reasons are cut to this many bytes (on a character boundary).
inline constexpr size_t kMaxReasonBytes = 2000;

// Who ran the job: the same for every job of one worker process.
struct RunnerIdentity {
  std::string worker_id;  // "ed25519:<hex>"
  std::string program;    // "blake3:<hex>" of the worker binary
  std::string version;    // e.g. "gatos-worker 0.1.0"
  std::string platform;   // e.g. "linux-x86_64"
};

// The fields known at the claim: job, worker, epoch, runner, the lease's
// output cap (bytes kept of stdout and of stderr each) and the start time.
Poe StartPoe(const RunnerIdentity& runner, const std::string& job_hex, int64_t epoch,
             int64_t output_cap_bytes, int64_t now_ms);

// How the run ended (run_status.h), its exit code or signal as reported,
// its truncation marks and times; stdout and stderr become result files.
// A run that could not be supervised to its end is `failed` with the reason.
void RecordRun(const Result<ExecResult>& run, bool cancelled, Poe* poe,
               std::vector<ResultFile>* files);

// The command could not start (not found, not executable, a bad workspace):
// `failed`, with the launcher's message. Final: it would not start again.
void RecordStartFailure(const Status& why, Poe* poe);

// The job's declared inputs cannot be read by this worker although the
// ledger accepted the manifest: `failed`, final.
void RecordUnreadableInputs(const Status& why, Poe* poe);

// A git input could not be fetched (inputs.h): `failed` with the reason and
// its mark, " [transient: may succeed when retried]" (poe.transient: the
// ledger's retry policy may run the job again) or " [permanent: not retried
// by the worker]".
void RecordInputFailure(const Status& why, bool transient, Poe* poe);

// The ledger cancelled the job before its command ran.
enum class CancelledAt { kBeforeStart, kWhileFetchingInputs };
void RecordCancelled(CancelledAt when, Poe* poe);

// The result of `frame_bytes` bytes could not be sent (the bus refused it
// for its size, `why`): the small failed result that takes its place, in the
// same epoch. Keeps the run's facts; drops the outputs.
Poe UndeliverablePoe(const Poe& reported, size_t frame_bytes, const std::string& why);

// What every result has: a finish time (now, if the run did not say), and
// stdout and stderr files (empty when the command never ran).
void FinishPoe(int64_t now_ms, Poe* poe, std::vector<ResultFile>* files);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_POE_ASSEMBLY_H_
