// The worker's end of a supervisor: starting gatos-supervise (with gatos_sys
// Process, its channels at fds 3, 4, ...) and the connection over which the
// worker sends it frames and reads its records
// (gatos/exec/supervise_protocol.h).
#ifndef GATOS_EXEC_SRC_SUPERVISOR_CONN_H_
#define GATOS_EXEC_SRC_SUPERVISOR_CONN_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gatos/exec/job_cgroup.h"
#include "gatos/exec/supervise_protocol.h"
#include "gatos/model/status.h"
#include "gatos/sys/process.h"

namespace gatos::exec_internal {

// gatos-supervise next to the running binary or $GATOS_SUPERVISE; "" if
// none (or GATOS_SUPERVISE=fork). Looked up once per process; thread-safe.
const std::string& DefaultSuperviseBinary();

// Starts the supervisor program argv[0] (a path) with an empty environment,
// stdio inherited (it points 0-2 at /dev/null itself) and `fds` at
// descriptors 3, 4, ... (Process::Spawn with extra_fds). The caller reaps
// the returned pid (SupervisorConn does). Internal on failure, saying what
// failed. Thread-safe.
Result<pid_t> StartSupervisor(const std::vector<std::string>& argv, const std::vector<int>& fds);

// The worker's end of one gatos-supervise process (or forked supervisor).
// Not thread-safe: its owner serializes calls (Execution::Impl::ctrl_mu for
// SendControl, which may come from Stop() while Wait() reads).
class SupervisorConn {
 public:
  SupervisorConn(UniqueFd sock, pid_t pid, bool ns) : sock_(std::move(sock)), pid_(pid), ns_(ns) {}
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
  int Read(exec_protocol::Record* rec, pid_t* cred_pid, int timeout_ms);
  // A 'J' frame with `payload` (EncodeJob), the job's stdout and stderr
  // pipes attached, then `cgroup_fds` (at most kMaxCgroupFds). False if the
  // supervisor is gone.
  bool SendJob(const std::string& payload, int out_w, int err_w,
               const std::vector<int>& cgroup_fds = {});
  // A 'T' or 'K' frame for job `seq`. False if the supervisor is gone.
  bool SendControl(char type, uint32_t seq);
  // True if the supervisor sent something or hung up while idle (a dead or
  // misbehaving slot, never to be used again).
  bool IdleButReadable() const;

  // The slot's own job cgroup, reset for each job (LauncherOptions::
  // cgroup_per_slot); null otherwise.
  std::unique_ptr<JobCgroup>& cgroup() { return cgroup_; }

 private:
  std::unique_ptr<JobCgroup> cgroup_;
  UniqueFd sock_;
  pid_t pid_;
  bool ns_;
  uint32_t seq_ = 0;
  std::string last_workspace_;
  char buf_[sizeof(exec_protocol::Record)];
  size_t have_ = 0;
  pid_t cred_pid_ = 0;
};

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SUPERVISOR_CONN_H_
