// Internals of the worker side of gatos_exec (exec.cpp, launcher.cpp): the
// plan of one job and the worker's end of a supervisor. The wire protocol
// to the supervisor side is gatos/exec/supervise_protocol.h.
#ifndef GATOS_EXEC_SRC_EXEC_INTERNAL_H_
#define GATOS_EXEC_SRC_EXEC_INTERNAL_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gatos/exec.h"
#include "gatos/exec/supervise_protocol.h"
#include "gatos/status.h"

namespace gatos::exec_internal {

using namespace ::gatos::exec_protocol;  // NOLINT: the wire types are the internals' vocabulary

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(o.Release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// ---- worker side ----------------------------------------------------------

// The worker's end of one gatos-supervise process (or forked supervisor).
// Not thread-safe: its owner serializes calls (Execution::Impl::ctrl_mu for
// SendControl, which may come from Stop() while Wait() reads).
class SupervisorConn {
 public:
  SupervisorConn(Fd sock, pid_t pid, bool ns) : sock_(std::move(sock)), pid_(pid), ns_(ns) {}
  // Closes the socket (an idle slot then exits) and reaps the process.
  ~SupervisorConn();
  SupervisorConn(const SupervisorConn&) = delete;
  SupervisorConn& operator=(const SupervisorConn&) = delete;

  int fd() const { return sock_.get(); }
  pid_t pid() const { return pid_; }
  bool ns() const { return ns_; }  // a namespace-sandbox slot
  uint32_t NextSeq() { return ++seq_; }
  // The workspace of the last job sent (a slot keeps the mount points of
  // the binds its next job makes again).
  const std::string& last_workspace() const { return last_workspace_; }
  void set_last_workspace(std::string ws) { last_workspace_ = std::move(ws); }

  // One record: 1, or 0 when none is complete within timeout_ms (-1 =
  // block), or -1 at EOF / on error. *cred_pid: the pid from
  // SCM_CREDENTIALS on that record, if any.
  int Read(Record* rec, pid_t* cred_pid, int timeout_ms);
  bool SendJob(const std::string& payload, int out_w, int err_w);
  bool SendControl(char type, uint32_t seq);
  // True if the supervisor sent something or hung up while idle (a dead or
  // misbehaving slot, never to be used again).
  bool IdleButReadable() const;

 private:
  Fd sock_;
  pid_t pid_;
  bool ns_;
  uint32_t seq_ = 0;
  std::string last_workspace_;
  char buf_[sizeof(Record)];
  size_t have_ = 0;
  pid_t cred_pid_ = 0;
};

// Starts the supervisor program argv[0] (a path) with an empty environment,
// stdio inherited (it points 0-2 at /dev/null itself) and `fds` at
// descriptors 3, 4, ... (Process::Spawn with extra_fds). The caller reaps
// the returned pid (SupervisorConn does). Internal on failure, saying what
// failed. Thread-safe.
Result<pid_t> StartSupervisor(const std::vector<std::string>& argv, const std::vector<int>& fds);

// gatos-supervise next to the running binary or $GATOS_SUPERVISE; "" if none.
const std::string& DefaultSuperviseBinary();

// A job's own copies of the device nodes bubblewrap's --dev binds from the
// host (/dev/null, /dev/zero, ...), in a new directory of the worker's,
// removed with this object. bwrap binds the host's nodes writable (it has no
// read-only device bind), and a job run as uid 0 (a root worker's) owns
// them: `chmod 0 /dev/null` in the job would change the host's. Bound over
// them, these are what such a job can change, for itself alone.
class PrivateDevices {
 public:
  // In a new directory in `parent` (which is not bound into the sandbox), when
  // this process's user owns one of the host's nodes (the job would run as
  // that user); nullptr when it owns none (the host's are safe to bind).
  // Needs root (mknod) and a file system that allows device nodes.
  static Result<std::unique_ptr<PrivateDevices>> Make(const std::string& parent);
  ~PrivateDevices();
  PrivateDevices(const PrivateDevices&) = delete;
  PrivateDevices& operator=(const PrivateDevices&) = delete;
  const std::string& dir() const { return dir_; }
  const std::vector<std::string>& names() const { return names_; }  // the nodes made

 private:
  explicit PrivateDevices(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::vector<std::string> names_;
};

// bubblewrap's arguments that build a job's sandbox, up to and excluding
// "--": /usr and the merged-/usr links, a minimal /etc, /proc, /dev (the
// nodes from `devices` when given), a /tmp of its own, then `binds`, and
// `chdir_to`. No network unless `network`; no capability. Also how the
// worker runs git on a local input (inputs.cpp).
// With `seccomp`, bwrap applies the job's system-call filter, read from
// kBwrapSeccompFd (job_seccomp.h), which the job's supervisor provides.
std::vector<std::string> BwrapArgs(const std::string& bwrap, bool network,
                                   const std::vector<BindPlan>& binds, const std::string& chdir_to,
                                   const PrivateDevices* devices = nullptr, bool seccomp = false);

// A validated job, ready to be sent to a supervisor.
struct PreparedJob {
  std::string program;             // the resolved command (as the job sees it)
  std::vector<std::string> argv;   // argv[0] = program
  std::vector<std::string> env;    // "NAME=value"
  std::string cwd;                 // absolute
  std::vector<BindPlan> binds;     // workspace, output dir, spec binds
  bool sandboxed = false;
  std::string sandbox_note;
  std::shared_ptr<PrivateDevices> devices;  // bubblewrap run by root: the job's own /dev nodes
};
// The checks and decisions of Execution::Start up to the process start.
// `sandbox_ok` says whether the sandbox the caller would use works here.
Result<PreparedJob> PrepareJob(const ExecSpec& spec, const Status& sandbox_ok);

// Reads the 'S' record of a just-sent job and builds the Execution; on a
// start failure, waits for the supervisor's 'C' and returns the error.
// `release` is called with the connection once the job is over (healthy:
// the supervisor reported 'C' and can take another job).
using ReleaseFn = std::function<void(std::unique_ptr<SupervisorConn>, bool healthy)>;
Result<std::unique_ptr<Execution>> FinishStart(std::unique_ptr<SupervisorConn> conn, uint32_t seq,
                                               Fd out_r, Fd err_r, const ExecSpec& spec,
                                               const PreparedJob& job, ReleaseFn release);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_EXEC_INTERNAL_H_
