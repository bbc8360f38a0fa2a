// The checks and decisions of starting a job, up to the process start,
// shared by Execution::Start and JobLauncher::Start: the spec's argv, cwd,
// workspace, output dir and binds (docs/worker-execution.md, "Execution
// contract"), the job's environment (BuildJobEnv, gatos/exec/exec.h), whether it
// is sandboxed, and the command resolved in the job's PATH.
//
// Thread-safety: plain functions; they read the file system (stat, the cwd
// and output dir are created), nothing else.
#ifndef GATOS_EXEC_SRC_PREPARE_JOB_H_
#define GATOS_EXEC_SRC_PREPARE_JOB_H_

#include <memory>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/supervise_protocol.h"
#include "gatos/model/status.h"

namespace gatos::exec_internal {

class PrivateDevices;

// A validated job, ready to be sent to a supervisor.
struct PreparedJob {
  std::string program;                         // the resolved command (as the job sees it)
  std::vector<std::string> argv;               // argv[0] = program
  std::vector<std::string> env;                // "NAME=value"
  std::string cwd;                             // absolute
  std::vector<exec_protocol::BindPlan> binds;  // sandboxed: workspace, output dir, spec binds
  bool sandboxed = false;
  std::string sandbox_note;
  std::shared_ptr<PrivateDevices> devices;  // bubblewrap run by root: the job's own /dev nodes
};

// The checks and decisions of Execution::Start up to the process start,
// with its errors (gatos/exec/exec.h). `sandbox_ok` says whether the sandbox the
// caller would use works here.
Result<PreparedJob> PrepareJob(const ExecSpec& spec, const Status& sandbox_ok);

// Lexically normal absolute path without a trailing '/'.
std::string CleanPath(const std::string& p);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_PREPARE_JOB_H_
