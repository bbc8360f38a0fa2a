// What a job runs and what it can reach (docs/worker-execution.md, "What a
// job can reach"): the ExecSpec the worker starts for a job, from its
// verified manifest, its lease and the worker's settings.
//
//   - the manifest's command and args, env and cwd, its timeout;
//   - the lease's output cap and network permission;
//   - its resource limits: the manifest's `resources` over the lease's
//     defaults, capped by the lease's maxima (EffectiveJobLimits);
//   - its runner slot's work/ (HOME) and out/ (GATOS_OUTPUT_DIR);
//   - read-only: each --ro-bind, the worker's program directory (gatos-scan
//     and friends, on the default PATH), each git input at
//     /gatos/inputs/<n>;
//   - GATOS_JOB_ID, GATOS_LEASE_EPOCH and GATOS_PROGRESS_FILE, which a
//     manifest cannot override.
//
// The scan-state rule: a scan job (its command is `gatos-scan`) runs the
// gatos-scan shipped next to the worker, whatever PATH its manifest sets,
// with every loader variable glibc drops for a setuid program removed from
// its environment, and sees the scan state read-write as GATOS_STATE_DIR.
// Every other job gets no scan state at all.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_WORKER_JOB_SPEC_H_
#define GATOS_WORKER_JOB_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/inputs.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/manifest.h"

namespace gatos::worker {

// What the worker gives every job it runs.
struct JobHost {
  std::string self_dir;               // the worker's program directory
  std::string scan_state;             // <state>/scan (absolute)
  std::vector<std::string> ro_binds;  // --ro-bind paths
  int64_t kill_grace_ms = 2000;
  ExecSpec::Sandbox sandbox = ExecSpec::Sandbox::kAuto;
  // Where job cgroups are made (null: none; limits then are rlimits only).
  std::shared_ptr<const CgroupHost> cgroups;
};

// One claimed job as it is about to run.
struct JobToRun {
  std::string job_hex;
  int64_t epoch = 0;
  const Manifest* manifest = nullptr;      // verified with the grant; not owned
  const LeaseCommitInfo* lease = nullptr;  // the granted lease; not owned
  std::string slot;                        // the runner slot: <slot>/work and <slot>/out
  const std::vector<ResolvedInput>* inputs = nullptr;  // fetched git inputs; not owned
};

// A scan job: its command is `gatos-scan` (by that name, not a path).
bool IsScanJob(const Manifest& manifest);

// Variables glibc removes from a setuid program's environment, and every
// LD_*: none of them reaches the scanner, which runs with the scan state.
bool IsLoaderVariable(const std::string& name);

// The host paths a job sees besides its workspace, output dir and inputs.
std::vector<ExecSpec::Bind> JobBinds(const JobHost& host, bool scan);

// Where a job in `slot` may write progress lines (GATOS_PROGRESS_FILE;
// live_output.h has the line protocol): a file in its workspace, which it
// sees at the same path sandboxed or not. The worker creates nothing there:
// a job that reports no progress costs nothing.
std::string ProgressFilePath(const std::string& slot);

ExecSpec JobExecSpec(const JobToRun& job, const JobHost& host);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_JOB_SPEC_H_
