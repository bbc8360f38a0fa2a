// Job execution: run one job's command as a supervised process tree, with a
// scrubbed environment, captured and capped output, a timeout that escalates
// TERM -> KILL, and (where the host allows) a sandbox.
//
// Two ways to start a job (docs/worker-execution.md, "Process model"):
//
// * JobLauncher (the worker's path): long-lived `gatos-supervise` processes,
//   one per concurrently running job ("slots"), reused job after job. A job
//   costs one process start. Sandboxed slots are a user + PID namespace whose
//   init is the supervisor, with one empty network namespace; each job gets
//   its own mount, IPC, UTS, cgroup and user namespaces, a fresh root, /tmp
//   and /dev, and no capabilities (no bubblewrap process per job).
//
//   worker --(once per slot)--> gatos-supervise --clone per job--> job
//
// * Execution::Start: one `gatos-supervise` per job, and bubblewrap per job
//   when sandboxed. Kept for callers without a launcher and as the launcher's
//   fallback sandbox engine.
//
// Either way the supervisor is a child subreaper (or the init of the job's
// PID namespace), so every descendant of the job stays in its reach; when the
// job's main process exits, times out or is stopped, it kills them all and
// reports "clean" only once none is left. Wait() returns after that. If the
// worker dies, the supervisor sees its control socket close and kills the
// tree.
#ifndef GATOS_EXEC_H_
#define GATOS_EXEC_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/exec/job_cgroup.h"
#include "gatos/model/job_limits.h"
#include "gatos/model/status.h"

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
  // Optional: sees every byte the job writes, capped or not, as it is read
  // (stream 1 = stdout, 2 = stderr), on the thread that calls Wait(). It must
  // not block (copy and return): the job's pipes are not read meanwhile.
  // Unset, output costs nothing more.
  std::function<void(int stream, std::string_view bytes)> output_tap;
  enum class Sandbox {
    kAuto,     // bubblewrap when its probe succeeds, else unsandboxed + sandbox_note
    kRequire,  // bubblewrap or FailedPrecondition
    kOff,      // never
  };
  Sandbox sandbox = Sandbox::kAuto;
  bool allow_network = false;         // sandboxed jobs get no network unless true
  std::vector<std::string> ro_binds;  // absolute host paths, read-only in the sandbox
  std::vector<std::string> rw_binds;  // absolute host paths, writable in the sandbox (e.g. a cache)
  // Host paths shown inside the sandbox, per job, possibly at another path.
  // Unsandboxed runs cannot remap: the job sees the host file system, so a
  // bind is at its `source` there (and `writable` is up to host permissions).
  // Name the path through `env` so that the job finds it either way.
  struct Bind {
    std::string source;       // absolute host path of an existing file or directory
    std::string destination;  // absolute path in the sandbox; "" = same as source
    bool writable = false;    // read-only (recursively) unless true
    // If set, this variable (worker layer, after extra_env) holds the path
    // the job sees: `destination` when sandboxed, `source` when not.
    std::string env;
  };
  // Rules (InvalidArgument otherwise): source exists; destination is
  // absolute, not "/", not under /proc or /dev, not the workspace or output
  // dir or one of their parents, and not the destination of another bind.
  std::vector<Bind> binds;
  // Worker-provided variables (GATOS_JOB_ID, GATOS_STATE_DIR, ...), applied
  // after the manifest env so a manifest cannot override them.
  std::map<std::string, std::string> extra_env;
  // The bubblewrap binary. Tests point it at a missing path to exercise the
  // fallback; production leaves the default.
  std::string bwrap_path = "/usr/bin/bwrap";
  // Resource limits (0 = none; docs/worker-execution.md, "Resource limits"):
  // memory, processes and CPU through a cgroup of the job's own under
  // `cgroups` (null: none, only the rlimits below apply); disk through
  // RLIMIT_FSIZE (no file larger) and, sandboxed, a /tmp and /dev/shm of
  // that size. Every job gets RLIMIT_CORE 0. A job that hits its memory,
  // process or disk limit is ended (its whole tree) and the result says so.
  JobLimits limits;
  std::shared_ptr<const CgroupHost> cgroups;
};

struct ExecResult {
  // Exactly one is set once the process ran. Under bubblewrap (Execution::Start
  // or the launcher's kBubblewrap engine) a job killed by signal N is reported
  // by bwrap as exit_code 128+N (bwrap does not pass the signal through);
  // unsandboxed runs and the launcher's namespace sandbox report `signal`.
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;  // the timeout fired (TERM, then KILL after the grace)
  bool stopped = false;    // Stop() was called before the job finished (cancel / stale owner)
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  int64_t started_ms = 0, finished_ms = 0;  // unix ms
  bool sandboxed = false;
  std::string sandbox_note;  // non-empty when sandboxing was wanted but not used: why
  // The limits the job ran under (ExecSpec::limits) and the one that ended
  // it: "memory", "pids" or "disk"; "" if none.
  JobLimits limits;
  std::string limit_hit;
  // The limits of ExecSpec::limits this host could not enforce ("cpu",
  // "memory", "pids"; sorted), as CgroupHost::Unenforced says.
  std::vector<std::string> unenforced;
  // What the job used: from its cgroup (with `cgroups`), and disk_bytes, the
  // size of the files in its workspace and output dir at its end.
  JobUsage usage;
};

// The reason of a result whose job a limit ended, naming the limit
// (job_limits.h: "killed: memory limit 256 MB", ...); "" when none did.
std::string LimitReason(const ExecResult& result);

// The environment a job sees, in order of precedence (later wins):
// PATH=/usr/local/bin:/usr/bin:/bin, HOME=<workspace>, LANG=C.UTF-8,
// TMPDIR=/tmp; then spec.env; then spec.extra_env; then GATOS_OUTPUT_DIR.
// Then, for each bind with `env`, that variable = where the job sees the bind
// (its destination when `sandboxed`, its source when not).
// Nothing is inherited from the worker. InvalidArgument for a name that is
// empty or contains '=' or NUL, or a value with NUL.
Result<std::map<std::string, std::string>> BuildJobEnv(const ExecSpec& spec,
                                                       bool sandboxed = false);

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
  //   bad env names, relative ro_binds, bad binds.
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

  // The job's main process, in the worker's PID namespace (the bwrap monitor
  // under bubblewrap; the job itself in the launcher's sandbox). Informational:
  // signal the job through Stop(), never with kill(pid()), since the pid may
  // be reused once the job has been reaped.
  pid_t pid() const;

  struct Impl;
  explicit Execution(std::unique_ptr<Impl> impl);  // internal

 private:
  std::unique_ptr<Impl> impl_;
};

// How the launcher sandboxes jobs whose spec asks for it.
enum class SandboxEngine {
  kAuto,        // kNamespaces if its probe passes, else kBubblewrap if bwrap's does
  kNamespaces,  // gatos-supervise's own namespaces, set up per slot (fast)
  kBubblewrap,  // one gatos-supervise and one bwrap per job (Execution::Start)
};

struct LauncherOptions {
  // The supervisor program. "" = $GATOS_SUPERVISE, else gatos-supervise next
  // to the running binary. Without it every job takes the Execution::Start
  // path (a forked supervisor per job) and kNamespaces is unavailable.
  std::string supervise_path;
  SandboxEngine engine = SandboxEngine::kAuto;
  // Probe the sandbox in Create (one sandboxed slot is started and runs
  // /bin/true; the slot is kept). Otherwise the first sandboxed Start does it.
  bool probe_in_create = true;
  // Idle slots kept per kind (sandboxed, unsandboxed); more are closed when
  // their job ends. Slots are started on demand, so at most as many exist as
  // jobs ran at the same time.
  int max_idle_slots = 16;
  std::string bwrap_path = "/usr/bin/bwrap";  // for kBubblewrap and its probe
  // Where job cgroups are made when a spec has none (null: only specs that
  // bring their own get one). `cgroup_per_slot`: one cgroup per slot, reset
  // for each job, instead of one made and removed per job (bench/exec_bench
  // compares them; per job is the default, docs/benchmarks.md).
  std::shared_ptr<const CgroupHost> cgroups;
  bool cgroup_per_slot = false;
};

// Starts jobs on long-lived supervisors (docs/worker-execution.md, "Job
// launcher"). Create one per worker; Start() has the contract of
// Execution::Start (same ExecSpec, errors, ExecResult, Wait/Stop semantics),
// except that ExecSpec::bwrap_path is replaced by LauncherOptions::bwrap_path
// and the namespace sandbox reports signals as `signal`.
//
// Thread-safe: Start() may be called from any number of threads at once.
// Executions may outlive the launcher. Destroying the launcher closes its
// idle slots (their supervisors exit; nothing runs in them).
class JobLauncher {
 public:
  // FailedPrecondition only if supervise_path is set and not executable, or
  // engine is kNamespaces or kBubblewrap and that engine cannot sandbox here
  // (with probe_in_create). Otherwise OK: an
  // unusable sandbox shows in SandboxStatus() and in each kAuto result's
  // sandbox_note, and kRequire jobs fail to start.
  static Result<std::unique_ptr<JobLauncher>> Create(const LauncherOptions& options = {});
  ~JobLauncher();
  JobLauncher(const JobLauncher&) = delete;
  JobLauncher& operator=(const JobLauncher&) = delete;

  Result<std::unique_ptr<Execution>> Start(const ExecSpec& spec);

  // OK if sandboxed jobs can run (probing now if not done yet), else
  // FailedPrecondition saying why. Log it once at startup.
  Status SandboxStatus();
  // The engine sandboxed jobs use: kNamespaces or kBubblewrap (kAuto when
  // none works). Probes like SandboxStatus().
  SandboxEngine ActiveEngine();

  struct Stats {
    int64_t jobs = 0;             // jobs started on slots
    int64_t slots_started = 0;    // supervisor processes started for slots
    int64_t slots_discarded = 0;  // slots closed because they died or misbehaved
    int64_t idle_slots = 0;       // slots waiting for a job now
  };
  Stats stats() const;

  struct Pool;  // internal

 private:
  explicit JobLauncher(std::shared_ptr<Pool> pool);
  std::shared_ptr<Pool> pool_;
};

// Entry point of the gatos-supervise program (worker/supervise_main.cpp):
// started vfork-style next to the worker binary (no copy of the worker's
// memory), once per job by Execution::Start and once per slot by
// JobLauncher. Not for other callers.
int SuperviseMain(int argc, char** argv);

}  // namespace gatos

#endif  // GATOS_EXEC_H_
