// How a job handed to a supervisor becomes an Execution (gatos/exec/exec.h): the
// one path after the start, whichever supervisor runs the job (a slot of
// the JobLauncher, or a per-job gatos-supervise of Execution::Start).
#ifndef GATOS_EXEC_SRC_EXECUTION_H_
#define GATOS_EXEC_SRC_EXECUTION_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "gatos/exec/exec.h"
#include "gatos/model/status.h"
#include "gatos/sys/process.h"
#include "prepare_job.h"
#include "supervisor_conn.h"

namespace gatos::exec_internal {

// Called with the connection once the job is over (healthy: the supervisor
// reported 'C' and can take another job). Runs on the thread that ends the
// Execution (Wait() or its destructor).
using ReleaseFn = std::function<void(std::unique_ptr<SupervisorConn>, bool healthy)>;

// Reads the 'S' record of a just-sent job `seq` and builds the Execution
// that follows it (output pipes `out_r`, `err_r`; the spec's timeout, grace
// and output cap); on a start failure, waits for the supervisor's 'C' and
// returns the error of Execution::Start's contract. `release` null: the
// supervisor is closed and reaped after the job. `cgroup`: the job's own
// cgroup (removed after the job), else the slot's (conn->cgroup()) if any.
Result<std::unique_ptr<Execution>> FinishStart(std::unique_ptr<SupervisorConn> conn, uint32_t seq,
                                               UniqueFd out_r, UniqueFd err_r, const ExecSpec& spec,
                                               const PreparedJob& job, ReleaseFn release,
                                               std::unique_ptr<JobCgroup> cgroup = nullptr);

// The job's cgroup for `spec` (per job: a new one named job-N), or null
// when it gets none; Internal when one cannot be made.
Result<std::unique_ptr<JobCgroup>> MakeJobCgroup(const ExecSpec& spec);
// A name for a job cgroup, unique in this process: prefix + a number.
std::string NextCgroupName(const char* prefix);
// The rlimits and tmpfs size a supervisor sets for `limits`.
int64_t DiskLimitBytes(const JobLimits& limits);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_EXECUTION_H_
