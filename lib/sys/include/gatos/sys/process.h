// The one process launcher of every gatos program and test: start a program
// with an environment built beforehand, its stdin/stdout/stderr redirected,
// optionally in its own process group and killed with its parent; wait for it
// with a timeout; kill it; capture its output.
//
//   SpawnOptions o;
//   o.env = Environment::Current();                   // nothing is inherited
//   o.env.Set("GATOS_STATE_DIR", dir);                // unless given
//   o.out = Stdio::File(dir + "/nats.log");           // appended, created 0644
//   o.err = Stdio::Stdout();                          // 2>&1
//   o.parent_death_signal = SIGKILL;
//   // SpawnOptions::WithLog(dir + "/nats.log", SIGKILL) does all of it but Set
//   Result<Process> p = Process::Spawn({"nats-server", "-js"}, o);
//   if (!p.ok()) return Fail(p.status().message());   // says what and what to do
//   ...
//   ExitStatus st = p->Stop(SIGTERM, std::chrono::seconds(10));  // then SIGKILL
//
//   Result<Captured> r = RunAndCapture({"git", "--version"}, o);  // out, err, status
//
// How a child starts. Everything it needs (argv, "NAME=value" strings, the
// program's path, the opened files) is made before the child exists; the
// child is started with clone(CLONE_VM|CLONE_VFORK), as vfork, and makes only
// system calls until execve: no malloc, no setenv, no lock, so it is safe to
// start children from a process with many threads. In the child every signal
// is unblocked and back to its default action (SIG_IGN included), and only
// fds 0, 1 and 2 stay open, plus SpawnOptions::extra_fds at 3, 4, ... for a
// program that takes channels at fixed numbers (the worker hands
// gatos-supervise its socket and the job's pipes so). A program named without
// a '/' is looked up in the PATH of the child's environment, or, when that
// has none, of this process; a program that cannot be found or run is an
// error of Spawn, not exit 127.
//
// RAII: a Process owns its child. The destructor SIGKILLs it (its whole group
// with new_process_group) and reaps it, unless it was reaped already or
// Detach()ed, so no child outlives a test and no zombie is left behind.
//
// Error messages name the program and what failed; they never contain the
// environment's values.
//
// Thread-safety: a Process is not thread-safe (one thread at a time; it may
// be moved between threads). Spawn and RunAndCapture may be called from any
// thread concurrently. With parent_death_signal, note that Linux sends it when
// the *thread* that called Spawn ends, not the process.
#ifndef GATOS_PROCESS_H_
#define GATOS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

// An owned file descriptor, closed on destruction. Thread-safety: as an int.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Where one of a child's stdin, stdout or stderr goes.
struct Stdio {
  enum class Kind {
    kInherit,  // this process's own fd
    kNull,     // /dev/null
    kFile,     // `path`, opened for writing (stdin: reading), created 0644
    kPipe,     // a pipe; this process holds the other end (Process::stdout_pipe() ...)
    kFd,       // a dup of `fd` (the caller keeps and closes its own)
    kStdout,   // stderr only: the same as stdout (2>&1)
  };
  Kind kind = Kind::kInherit;
  std::string path;
  bool append = true;  // kFile for output: O_APPEND, else O_TRUNC
  int fd = -1;

  static Stdio Inherit() { return {}; }
  static Stdio Null() { return {Kind::kNull, "", true, -1}; }
  static Stdio File(std::string path, bool append = true) {
    return {Kind::kFile, std::move(path), append, -1};
  }
  static Stdio Pipe() { return {Kind::kPipe, "", true, -1}; }
  static Stdio Fd(int fd) { return {Kind::kFd, "", true, fd}; }
  static Stdio Stdout() { return {Kind::kStdout, "", true, -1}; }
};

// A child's whole environment. Empty unless filled: start from Current() to
// pass this process's environment on. Thread-safety: a value type; Current()
// reads environ, so no thread may setenv() meanwhile (none of ours does).
class Environment {
 public:
  Environment() = default;
  static Environment Current();
  // Current() with `overrides` set on top.
  static Environment CurrentWith(const std::map<std::string, std::string>& overrides);

  Environment& Set(std::string name, std::string value);
  Environment& Unset(std::string_view name);
  std::optional<std::string> Get(std::string_view name) const;
  bool empty() const { return vars_.empty(); }
  // "NAME=value", sorted by name.
  std::vector<std::string> ToStrings() const;

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

struct SpawnOptions {
  Environment env;                   // the child's environment: empty by default
  std::string cwd;                   // empty: this process's working directory
  Stdio in = Stdio::Null();          // stdin: /dev/null by default (never a terminal's input)
  Stdio out = Stdio::Inherit();
  Stdio err = Stdio::Inherit();
  // The child leads a new process group (setpgid(0, 0)): a terminal's Ctrl-C
  // does not reach it, and Kill()/the destructor/Stop()'s SIGKILL reach all of it.
  bool new_process_group = false;
  // PR_SET_PDEATHSIG: the child gets this signal (SIGKILL, SIGTERM) when the
  // thread that spawned it ends, e.g. when a test binary crashes. 0: none.
  int parent_death_signal = 0;
  // Descriptors of this process the child gets at fixed numbers: extra_fds[i]
  // becomes the child's fd 3 + i (without close-on-exec); every other fd
  // above 2 is still closed. The caller keeps and closes its own. At most
  // kMaxExtraFds; more, or one that is not open, is InvalidArgument.
  std::vector<int> extra_fds;
  static constexpr size_t kMaxExtraFds = 16;

  // A service child (nats-server, gatosd, a worker): this process's
  // environment, stdin /dev/null, stdout and stderr appended to `log_path`,
  // and `parent_death_signal` when the spawning thread ends.
  static SpawnOptions WithLog(const std::string& log_path, int parent_death_signal);
};

// How a child ended.
struct ExitStatus {
  int code = -1;   // exit code, or -1 when killed by a signal or unknown
  int signal = 0;  // the signal that killed it, or 0

  bool exited() const { return signal == 0 && code >= 0; }
  bool ok() const { return signal == 0 && code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL)", "status unknown".
  std::string ToString() const;
  static ExitStatus FromWaitStatus(int wait_status);
};

class Process {
 public:
  // Starts argv[0] with argv. Errors: InvalidArgument (empty argv, a NUL in
  // a string, bad extra_fds), NotFound (no such program), and the errno of what failed
  // (opening a redirection, chdir, execve, clone) in the message.
  static Result<Process> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

  Process() = default;  // no child
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;  // kills and reaps the child it held
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The child's pid; -1 when there is none (never started, reaped, detached).
  pid_t pid() const { return reaped_ ? -1 : pid_; }
  // True while the child has not exited (reaps it when it has).
  bool running();
  // Set once the child has been reaped.
  const std::optional<ExitStatus>& exit_status() const { return status_; }

  // Reaps the child if it has exited; nullopt while it runs.
  std::optional<ExitStatus> TryWait();
  // Blocks until the child exits.
  ExitStatus Wait();
  // Waits up to `timeout`; nullopt if the child still runs then.
  std::optional<ExitStatus> WaitFor(std::chrono::milliseconds timeout);
  // Sends `signo` to the child (not its group). False when there is no child.
  bool Signal(int signo);
  // Sends `signo` to the child's process group (new_process_group only).
  bool SignalGroup(int signo);
  // Sends `signo`, waits up to `grace`, then SIGKILLs (the group with
  // new_process_group) and reaps. The status says which ended it.
  ExitStatus Stop(int signo, std::chrono::milliseconds grace);
  // SIGKILL (the group with new_process_group) and reap.
  ExitStatus Kill();
  // Gives the child up: it is no longer killed or reaped here (the caller
  // reaps it, or it becomes a zombie until this process exits). Returns its pid.
  pid_t Detach();

  // This process's ends of the Stdio::Pipe() redirections (else invalid).
  // Reset stdin_pipe() to send EOF.
  UniqueFd& stdin_pipe() { return stdin_pipe_; }
  UniqueFd& stdout_pipe() { return stdout_pipe_; }
  UniqueFd& stderr_pipe() { return stderr_pipe_; }

 private:
  void KillAndReap();
  bool Reaped(int wait_status);

  pid_t pid_ = -1;
  bool reaped_ = true;
  bool own_group_ = false;
  std::string name_;  // argv[0], for messages
  UniqueFd pidfd_;    // readable once the child exits (timed waits without polling)
  UniqueFd stdin_pipe_, stdout_pipe_, stderr_pipe_;
  std::optional<ExitStatus> status_;
};

struct Captured {
  ExitStatus status;
  std::string out;
  std::string err;         // empty when options.err was Stdio::Stdout() (it is in `out`)
  bool timed_out = false;  // the timeout ran out and the child was SIGKILLed
};

// Runs argv to its end: `input` is written to its stdin (then closed), its
// stdout and stderr are collected (stderr into `out` when options.err is
// Stdio::Stdout()), whatever options.in/out/err say otherwise. After
// `timeout` the child is SIGKILLed (its group with new_process_group) and
// timed_out is set. Errors are those of Spawn.
Result<Captured> RunAndCapture(const std::vector<std::string>& argv, SpawnOptions options,
                               std::string_view input = {},
                               std::chrono::milliseconds timeout = std::chrono::hours(24 * 365));

}  // namespace gatos

#endif  // GATOS_PROCESS_H_
