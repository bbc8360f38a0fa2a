// The job child: the process a supervisor clones for a job, from the clone
// to its execve. It resets signals, starts its own session, connects its
// stdio and, in the launcher's namespace sandbox, enters the job's own
// namespaces and root (a copy of the slot's prepared root, or one it builds
// from the template), takes its own user namespace and drops every
// capability; then it installs the job's system-call filter (or, under
// bubblewrap, hands it to bwrap at kBwrapSeccompFd) and execs the command.
// docs/worker-execution.md, "The launcher's namespace sandbox".
//
// Async-signal-safe: JobChildMain runs on a stack of the supervisor's,
// sharing its memory until execve (clone(CLONE_VM|CLONE_VFORK)), and the
// supervisor may itself be a forked copy of a multithreaded worker. It
// makes system calls only; everything it needs is in JobChildSpec, made
// before the clone. A failure is reported as a ChildError on exec_err_w
// (stage, index, errno) and the child exits 127.
#ifndef GATOS_EXEC_SRC_JOB_CHILD_H_
#define GATOS_EXEC_SRC_JOB_CHILD_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>

#include "mount_ops.h"

namespace gatos::exec_internal {

// Everything a job child needs, prepared before the clone.
struct JobChildSpec {
  const char* exec_path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* chdir_path = nullptr;
  int out_w = -1, err_w = -1, devnull = -1, exec_err_w = -1;
  pid_t supervisor = 0;
  bool bwrap = false;  // legacy: the job is bwrap's monitor
  bool ns = false;     // namespace sandbox
  bool network = false;
  int netns_fd = -1;
  const MountOp* ops = nullptr;
  int n_ops = 0;
  int n_system_ops = 0;  // ops after these are the job's binds
  // The slot's prepared root for this job (a mount namespace), or -1: the
  // job builds its root from the template (ops then name /newroot paths).
  int root_ns_fd = -1;
  const char* uid_map = nullptr;  // "U U 1"
  const char* gid_map = nullptr;
  // The job's system-call filter (job_seccomp.h): installed before execve,
  // or handed to bwrap (`bwrap`), which installs it inside its sandbox.
  const sock_fprog* seccomp = nullptr;
  // The job's cgroup: a cgroup.procs file per hierarchy (opened by the
  // worker), joined first, so every process of the job is in it.
  const int* cgroup_fds = nullptr;
  int n_cgroup_fds = 0;
  // RLIMIT_FSIZE (0 = unchanged); RLIMIT_NPROC, set in the namespace sandbox
  // only, once the job is in its own user namespace, where the kernel counts
  // the job's processes alone (elsewhere it counts every process of the uid).
  int64_t fsize_bytes = 0;
  int64_t nproc = 0;
};

// What a job child that failed before its execve writes to exec_err_w.
struct ChildError {
  int32_t err;
  uint16_t index;
  uint8_t stage;  // exec_protocol::Stage
  uint8_t pad;
};

[[noreturn]] void JobChildMain(const JobChildSpec& s);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_JOB_CHILD_H_
