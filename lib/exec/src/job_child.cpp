// The job child, from clone to execve (job_child.h). Async-signal-safe.
#include "job_child.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gatos/exec/supervise_protocol.h"
#include "job_seccomp.h"
#include "signal_safe.h"

namespace gatos::exec_internal {
namespace {

using namespace ::gatos::exec_protocol;  // NOLINT: the stages a child reports

[[noreturn]] void ChildFail(const JobChildSpec& s, uint8_t stage, int index, int err) {
  ChildError ce{err, static_cast<uint16_t>(index), stage, 0};
  WriteAll(s.exec_err_w, &ce, sizeof(ce));
  _exit(127);
}

// The job's own mount, IPC, UTS and cgroup namespaces (its user namespace
// comes last, in EnterSandbox).
void UnshareJobNamespaces(const JobChildSpec& s) {
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0) {
    ChildFail(s, kStageUnshare, 0, errno);
  }
}

// A root of its own, built from the slot's template on a fresh tmpfs (the
// slot has no prepared root for this job).
void BuildRoot(const JobChildSpec& s) {
  // A copy of the slot init's mount namespace (every mount in it private):
  // its root is a tmpfs holding the host at /oldroot and the template at /tpl.
  UnshareJobNamespaces(s);
  if (mount("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
    ChildFail(s, kStageRoot, 1, errno);
  }
  for (int i = 0; i < s.n_ops; ++i) {
    if (int e = RunMountOp(s.ops[i], s.network)) {
      ChildFail(s, kStageMount, i < s.n_system_ops ? i : (kJobBindIndex | (i - s.n_system_ops)), e);
    }
  }
  int step = 0;
  if (int e = SwitchToNewRoot(&step)) ChildFail(s, kStageRoot, step, e);
}

// A copy of the slot's prepared root, plus what is the job's alone (s.ops:
// /dev/shm, devpts, /tmp, then its binds, whose mount points the slot made).
// The binds' sources are the host's, which the prepared root does not hold:
// each is cloned here, in the slot's namespace, as a detached tree with its
// flags set, and attached once inside.
void EnterPreparedRoot(const JobChildSpec& s) {
  int trees[kMaxOps];
  const int n_binds = s.n_ops - s.n_system_ops;
  for (int j = 0; j < n_binds; ++j) {
    const MountOp& op = s.ops[s.n_system_ops + j];
    const int index = kJobBindIndex | j;
    int fd = static_cast<int>(
        syscall(SYS_open_tree, AT_FDCWD, op.a, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (fd < 0) ChildFail(s, kStageMount, index, errno);
    struct mount_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.attr_set = MOUNT_ATTR_NOSUID | ((op.flags & MountOp::kDevices) ? 0 : MOUNT_ATTR_NODEV) |
                    ((op.flags & MountOp::kReadOnly) ? MOUNT_ATTR_RDONLY : 0);
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) !=
        0) {
      ChildFail(s, kStageMount, index, errno);
    }
    trees[j] = fd;
  }
  // setns puts our root at the prepared root; unshare gives us a copy of
  // it (every mount in it private), where our mounts stay our own.
  if (setns(s.root_ns_fd, CLONE_NEWNS) != 0) ChildFail(s, kStageRoot, 9, errno);
  UnshareJobNamespaces(s);
  for (int i = 0; i < s.n_system_ops; ++i) {
    if (int e = RunMountOp(s.ops[i], s.network)) ChildFail(s, kStageMount, i, e);
  }
  for (int j = 0; j < n_binds; ++j) {
    const MountOp& op = s.ops[s.n_system_ops + j];
    // The slot made most mount points; the rest (under /tmp, under another
    // bind) are made here.
    auto attach = [&] {
      return syscall(SYS_move_mount, trees[j], "", AT_FDCWD, op.b, MOVE_MOUNT_F_EMPTY_PATH) == 0
                 ? 0
                 : errno;
    };
    int e = attach();
    if (e == ENOENT) {
      e = MakeMountPoint(op.b, op.flags & MountOp::kDir);
      if (e == 0) e = attach();
    }
    if (e != 0) ChildFail(s, kStageMount, kJobBindIndex | j, e);
    ::close(trees[j]);
  }
  if (chdir("/") != 0) ChildFail(s, kStageRoot, 10, errno);
}

// Sandboxed: from the slot's namespaces into the job's own.
void EnterSandbox(const JobChildSpec& s) {
  if (!s.network && setns(s.netns_fd, CLONE_NEWNET) != 0) ChildFail(s, kStageNetns, 0, errno);
  // This process's directory in the template's (writable) /proc, kept for
  // the id maps once the root is switched.
  int self_fd = open("/tpl/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (self_fd < 0) ChildFail(s, kStageRoot, 2, errno);
  if (s.root_ns_fd >= 0) {
    EnterPreparedRoot(s);
  } else {
    BuildRoot(s);
  }
  // Its own user namespace last: the job has no capability over the mount,
  // network, IPC, UTS or PID namespaces (all owned by the slot's), and
  // keyrings and user ids are its own.
  if (unshare(CLONE_NEWUSER) != 0) ChildFail(s, kStageUserns, 0, errno);
  if (!WriteFileAt(self_fd, "setgroups", "deny")) ChildFail(s, kStageUserns, 1, errno);
  if (!WriteFileAt(self_fd, "uid_map", s.uid_map)) ChildFail(s, kStageUserns, 2, errno);
  if (!WriteFileAt(self_fd, "gid_map", s.gid_map)) ChildFail(s, kStageUserns, 3, errno);
  ::close(self_fd);
  if (s.nproc > 0) {
    rlimit rl{static_cast<rlim_t>(s.nproc), static_cast<rlim_t>(s.nproc)};
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) ChildFail(s, kStageRlimit, 1, errno);
  }
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 && errno != ENOSYS) {
    ChildFail(s, kStageKeyring, 0, errno);
  }
}

void DropPrivileges(const JobChildSpec& s) {
  for (int cap = 0; cap < 64; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the last capability
      ChildFail(s, kStagePrivileges, cap, errno);
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(s, kStagePrivileges, 100, errno);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2];
  memset(data, 0, sizeof(data));
  if (syscall(SYS_capset, &hdr, data) != 0) ChildFail(s, kStagePrivileges, 101, errno);
}

}  // namespace

void JobChildMain(const JobChildSpec& s) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != s.supervisor) _exit(127);
  // Into the job's cgroup before anything else: from here on every process
  // of the job is counted and limited there.
  for (int i = 0; i < s.n_cgroup_fds; ++i) {
    if (write(s.cgroup_fds[i], "0", 1) != 1) ChildFail(s, kStageCgroup, i, errno);
  }
  // No core dumps (they would be written outside any limit); files no
  // larger than the disk limit.
  rlimit core{0, 0};
  if (setrlimit(RLIMIT_CORE, &core) != 0) ChildFail(s, kStageRlimit, 0, errno);
  if (s.fsize_bytes > 0) {
    rlimit fsize{static_cast<rlim_t>(s.fsize_bytes), static_cast<rlim_t>(s.fsize_bytes)};
    if (setrlimit(RLIMIT_FSIZE, &fsize) != 0) ChildFail(s, kStageRlimit, 2, errno);
  }
  if (dup2(s.devnull, 0) < 0 || dup2(s.out_w, 1) < 0 || dup2(s.err_w, 2) < 0) {
    ChildFail(s, kStageStdio, 0, errno);
  }
  if (s.ns) EnterSandbox(s);
  if (s.chdir_path && s.chdir_path[0] && chdir(s.chdir_path) != 0)
    ChildFail(s, kStageChdir, 0, errno);
  if (s.ns) DropPrivileges(s);
  // Under bubblewrap the filter goes to bwrap at kBwrapSeccompFd (its
  // --seccomp argument, BwrapArgs), which installs it inside the sandbox it
  // builds; otherwise it is installed here, just before execve.
  if (int e = s.bwrap ? WriteSeccompFd(s.seccomp) : InstallJobSeccomp(s.seccomp)) {
    ChildFail(s, kStageSeccomp, 0, e);
  }
  execve(s.exec_path, s.argv, s.envp);
  ChildFail(s, kStageExec, 0, errno);
}

}  // namespace gatos::exec_internal
