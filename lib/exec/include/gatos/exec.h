// Job execution: run one job's command as a supervised process tree, with a
// scrubbed environment, captured and capped output, a timeout that escalates
// TERM -> KILL, and (where the host allows) a bubblewrap sandbox.
//
// Process model (docs/worker-execution.md, "Process model"):
//
//   worker --fork--> supervisor --fork--> job (own session; bwrap or the command)
//
// The supervisor is a forked copy of the worker that never execs. It makes
// itself a child subreaper (PR_SET_CHILD_SUBREAPER applies to it alone, not to
// the worker), so every descendant of the job, including ones that setsid() or
// double-fork, stays inside its subtree. When the job's main process exits,
// times out or is stopped, the supervisor signals every descendant (found via
// /proc parent links) and exits only once it has no child left. Wait() returns
// after the supervisor exited, so no process of the job remains. If the worker
// dies, the supervisor sees its control socket close and kills the tree.
//
// Under bubblewrap the job also gets its own PID namespace (--unshare-pid) and
// --die-with-parent, so the kernel kills everything in it once bwrap's init or
// the supervisor goes.
#ifndef GATOS_EXEC_H_
#define GATOS_EXEC_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gatos/status.h"

namespace gatos {

struct ExecSpec {
  // Manifest command + args. argv[0] without '/' is looked up in the PATH of
  // the job environment (not the worker's); with '/' it is used as given
  // (relative to cwd).
  std::vector<std::string> argv;
  // The manifest's env, applied over the scrubbed base (see BuildJobEnv).
  std::map<std::string, std::string> env;
  // Absolute path of a fresh empty directory created by the caller; HOME.
  std::string workspace;
  // Manifest cwd relative to workspace ("" = workspace). Created if missing.
  // Absolute paths and paths that leave the workspace are InvalidArgument.
  std::string cwd;
  // Exported as GATOS_OUTPUT_DIR (absolute); created by Start. "" = none.
  std::string output_dir;
  int64_t timeout_ms = 0;        // 0 = no timeout
  int64_t kill_grace_ms = 2000;  // after SIGTERM, SIGKILL follows this much later
  // Cap for stdout and for stderr, each. The first cap bytes are kept; the rest
  // is read and discarded (the child never blocks on a full pipe) and the
  // matching *_truncated flag is set.
  size_t output_cap_bytes = 1 << 20;
  enum class Sandbox {
    kAuto,     // bubblewrap when its probe succeeds, else unsandboxed + sandbox_note
    kRequire,  // bubblewrap or FailedPrecondition
    kOff,      // never
  };
  Sandbox sandbox = Sandbox::kAuto;
  bool allow_network = false;         // sandboxed jobs get no network unless true
  std::vector<std::string> ro_binds;  // absolute host paths, read-only in the sandbox
  std::vector<std::string> rw_binds;  // absolute host paths, writable in the sandbox (e.g. a cache)
  // Worker-provided variables (GATOS_JOB_ID, GATOS_STATE_DIR, ...), applied
  // after the manifest env so a manifest cannot override them.
  std::map<std::string, std::string> extra_env;
  // The bubblewrap binary. Tests point it at a missing path to exercise the
  // fallback; production leaves the default.
  std::string bwrap_path = "/usr/bin/bwrap";
};

struct ExecResult {
  // Exactly one is set once the process ran. Under bubblewrap a job killed by
  // signal N is reported by bwrap as exit_code 128+N (bwrap does not pass the
  // signal through); unsandboxed runs report `signal`.
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;  // the timeout fired (TERM, then KILL after the grace)
  bool stopped = false;    // Stop() was called before the job finished (cancel / stale owner)
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  int64_t started_ms = 0, finished_ms = 0;  // unix ms
  bool sandboxed = false;
  std::string sandbox_note;  // non-empty when sandboxing was wanted but not used: why
};

// The environment a job sees, in order of precedence (later wins):
// PATH=/usr/local/bin:/usr/bin:/bin, HOME=<workspace>, LANG=C.UTF-8,
// TMPDIR=/tmp; then spec.env; then spec.extra_env; then GATOS_OUTPUT_DIR.
// Nothing is inherited from the worker. InvalidArgument for a name that is
// empty or contains '=' or NUL, or a value with NUL.
Result<std::map<std::string, std::string>> BuildJobEnv(const ExecSpec& spec);

// Whether bubblewrap at `bwrap_path` can build a sandbox on this host. The
// probe runs `bwrap ... /bin/true` once per path and process; later calls
// return the cached answer. OK, or FailedPrecondition saying why not.
Status ProbeSandbox(const std::string& bwrap_path = "/usr/bin/bwrap");

// One running job. Thread-safe: Stop() may be called from any thread while
// Wait() runs in another; Wait() itself must be called by one thread at a
// time. The destructor kills and reaps the process tree if Wait() was not
// called to completion (it blocks until the tree is gone).
class Execution {
 public:
  // InvalidArgument: empty argv, missing workspace, cwd escaping the workspace,
  //   bad env names, relative ro_binds.
  // NotFound: argv[0] not found in the job's PATH, or exec failed with ENOENT.
  // PermissionDenied: exec failed with EACCES (not executable).
  // FailedPrecondition: Sandbox::kRequire and bubblewrap is unusable.
  // Internal: pipe/fork/mkdir failures.
  static Result<std::unique_ptr<Execution>> Start(const ExecSpec& spec);

  ~Execution();
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  // Blocks until the job's whole process tree is gone, reading output as it
  // comes. Returns the result once; later calls return FailedPrecondition.
  Result<ExecResult> Wait();

  // SIGTERM to every process of the job, SIGKILL to all after kill_grace_ms.
  // Idempotent; a no-op after the job finished.
  void Stop();

  // The job's main process (the bwrap monitor when sandboxed). Informational:
  // signal the job through Stop(), never with kill(pid()), since the pid may
  // be reused once the job has been reaped.
  pid_t pid() const;

  struct Impl;

 private:
  explicit Execution(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Entry point of the gatos-supervise program (worker/supervise_main.cpp):
// Execution::Start runs it vfork-style next to the worker binary so that no
// copy of the worker's memory is made per job. Not for other callers.
int SuperviseMain(int argc, char** argv);

}  // namespace gatos

#endif  // GATOS_EXEC_H_
