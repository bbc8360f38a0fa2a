// The supervisor side of job execution: the gatos-supervise program (one-shot
// per job, or a long-lived slot) and the forked fallback. Process model:
// gatos/exec.h, docs/worker-execution.md; protocol:
// gatos/exec/supervise_protocol.h.
//
// Everything reachable from RunJob() may run in a forked copy of a
// multithreaded worker (ForkedSupervisorMain), so it only makes system calls:
// no allocation, no locks, no stdio. The slot server (ServeSlot) runs in the
// exec'd single-threaded gatos-supervise and may allocate between jobs.
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "exec_internal.h"
#include "job_seccomp.h"
#include "gatos/exec.h"

namespace gatos {
namespace {

using namespace exec_internal;  // NOLINT: this file implements them

int64_t MonoMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == ENOTSOCK) k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool ParseUint(const char* s, long* out) {
  if (*s < '0' || *s > '9') return false;
  long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return true;
}

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Calls fn(number) for each numeric entry of an open /proc-style directory.
template <typename Fn>
void ForEachNumericEntry(int dirfd, Fn fn) {
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      long v;
      if (ParseUint(d->d_name, &v)) fn(v);
      off += d->d_reclen;
    }
  }
}

// Parent pid of `pid` from /proc/<pid>/stat, or -1.
pid_t ReadPpid(int proc_fd, long pid) {
  char path[32];
  // Hand-rolled "<pid>/stat": snprintf is not async-signal-safe.
  char digits[24];
  int nd = 0;
  for (long v = pid; v > 0 && nd < 23; v /= 10) digits[nd++] = static_cast<char>('0' + v % 10);
  int k = 0;
  while (nd > 0) path[k++] = digits[--nd];
  const char* suffix = "/stat";
  for (int i = 0; suffix[i]; ++i) path[k++] = suffix[i];
  path[k] = '\0';
  int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so use the last ')'.
  char* rp = nullptr;
  for (char* p = buf; *p; ++p) {
    if (*p == ')') rp = p;
  }
  if (!rp || rp[1] != ' ' || !rp[2] || rp[3] != ' ') return -1;
  long ppid = 0;
  for (char* p = rp + 4; *p >= '0' && *p <= '9'; ++p) ppid = ppid * 10 + (*p - '0');
  return static_cast<pid_t>(ppid);
}

// Fills tracked with the descendants of this process; returns how many.
// Repeats full /proc passes until no new descendant appears, so the order in
// which /proc lists processes does not matter.
int ScanDescendants(pid_t* tracked) {
  pid_t self = getpid();
  int count = 0;
  int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_fd < 0) return 0;
  for (bool grew = true; grew && count < kMaxTracked;) {
    grew = false;
    lseek(proc_fd, 0, SEEK_SET);
    ForEachNumericEntry(proc_fd, [&](long pid) {
      if (count >= kMaxTracked || pid == self) return;
      for (int i = 0; i < count; ++i) {
        if (tracked[i] == pid) return;
      }
      pid_t ppid = ReadPpid(proc_fd, pid);
      if (ppid <= 0) return;
      bool ours = ppid == self;
      for (int i = 0; !ours && i < count; ++i) ours = tracked[i] == ppid;
      if (ours) {
        tracked[count++] = static_cast<pid_t>(pid);
        grew = true;
      }
    });
  }
  ::close(proc_fd);
  return count;
}

// ---------------------------------------------------------------------------
// The namespace sandbox (slot mode). The system part of a job's root (/usr,
// /etc, /proc, /dev) is built once per slot, as a read-only template at /tpl
// in the slot init's own mount namespace, whose root is a tmpfs with the host
// at /oldroot. From it the slot prepares the jobs' root once (a mount
// namespace of its own made of recursive binds of the template's entries: a
// bind keeps each mount's read-only, nosuid and nodev flags), and each job
// enters a copy of that root and adds a fresh /tmp, /dev/shm and devpts and
// its own binds (EnterPreparedRoot). A job that binds something under /etc
// builds the same kind of root on a fresh tmpfs at /newroot in its own copy
// of the init's namespace instead (BuildRoot). All are built from these
// operations: "a" is a source (/oldroot/... on the host, /tpl/... in the
// template), an fs option string or a link target; "b" is a destination
// under /tpl or /newroot, or in the job's root once it is entered.

struct MountOp {
  enum Kind : uint8_t {
    kMkdir, kSymlink, kBind, kRbind, kTmpfs, kProc, kDevpts, kCover, kHide, kRemountReadOnly
  };
  enum Flags : uint8_t {
    kReadOnly = 1,
    kDevices = 2,     // keep device nodes usable (no nodev)
    kOptional = 4,    // skip if the source is missing
    kDir = 8,         // the source is a directory (else a file)
    kNetOnly = 16,    // only for jobs with network
    kNoNetOnly = 32,  // only for jobs without network
    kNoExec = 64,     // kRemountReadOnly: noexec too
    kFile = 128,      // kRbind: the source is a file (else a directory)
  };
  Kind kind;
  uint8_t flags;
  const char* a;
  const char* b;
};

constexpr int kMaxOps = 512;

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
};

struct ChildError {
  int32_t err;
  uint16_t index;
  uint8_t stage;
  uint8_t pad;
};

[[noreturn]] void ChildFail(const JobChildSpec& s, uint8_t stage, int index, int err) {
  ChildError ce{err, static_cast<uint16_t>(index), stage, 0};
  WriteAll(s.exec_err_w, &ce, sizeof(ce));
  _exit(127);
}

// mkdir -p for an absolute path (async-signal-safe).
int MkdirP(const char* path, bool last_too) {
  char buf[4096];
  size_t n = strlen(path);
  if (n >= sizeof(buf)) return ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; ++i) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    if (buf[i] == '\0' && !last_too) break;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
    buf[i] = c;
  }
  return 0;
}

bool WriteFileAt(int dir_fd, const char* path, const char* data) {
  int fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t n = strlen(data);
  bool ok = ::write(fd, data, n) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok;
}

bool WriteFile(const char* path, const char* data) { return WriteFileAt(AT_FDCWD, path, data); }

// Read-only / nosuid / nodev on a bind mount and everything under it.
int SetBindFlags(const char* src, const char* dst, uint8_t flags) {
#ifdef SYS_mount_setattr
  struct mount_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.attr_set = MOUNT_ATTR_NOSUID | ((flags & MountOp::kDevices) ? 0 : MOUNT_ATTR_NODEV) |
                  ((flags & MountOp::kReadOnly) ? MOUNT_ATTR_RDONLY : 0);
  if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) == 0) return 0;
  if (errno != ENOSYS) return errno;
#endif
  // Before Linux 5.12 only the top mount can be changed: bind without the
  // mounts below it, so that none of them stays writable.
  if (umount2(dst, MNT_DETACH) != 0 || mount(src, dst, nullptr, MS_BIND, nullptr) != 0) return errno;
  unsigned long f = MS_REMOUNT | MS_BIND | MS_NOSUID | ((flags & MountOp::kDevices) ? 0 : MS_NODEV) |
                    ((flags & MountOp::kReadOnly) ? MS_RDONLY : 0);
  return mount("none", dst, nullptr, f, nullptr) == 0 ? 0 : errno;
}

// A directory, or an empty file, to mount on (with its parents). A file that
// is there already is opened read-only, so that one in a read-only mount
// (/etc/hosts) can be mounted over.
int MakeMountPoint(const char* path, bool dir) {
  if (dir) return MkdirP(path, true);
  if (int e = MkdirP(path, false)) return e;
  int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

int RunMountOp(const MountOp& op, bool network) {
  if ((op.flags & MountOp::kNetOnly) && !network) return 0;
  if ((op.flags & MountOp::kNoNetOnly) && network) return 0;
  switch (op.kind) {
    case MountOp::kMkdir:
      return MkdirP(op.b, true);
    case MountOp::kRbind:
      // A part of the slot's template, with every mount below it as it is.
      if ((op.flags & MountOp::kOptional) && access(op.a, F_OK) != 0 && errno == ENOENT) return 0;
      if (int e = MakeMountPoint(op.b, !(op.flags & MountOp::kFile))) return e;
      return mount(op.a, op.b, nullptr, MS_BIND | MS_REC, nullptr) == 0 ? 0 : errno;
    case MountOp::kSymlink:
      return symlink(op.a, op.b) == 0 ? 0 : errno;
    case MountOp::kTmpfs:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("tmpfs", op.b, "tmpfs", MS_NOSUID | MS_NODEV, op.a) == 0 ? 0 : errno;
    case MountOp::kProc:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("proc", op.b, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0 : errno;
    case MountOp::kDevpts:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("devpts", op.b, "devpts", MS_NOSUID | MS_NOEXEC,
                   "newinstance,ptmxmode=0666,mode=620") == 0
                 ? 0
                 : errno;
    case MountOp::kHide:
      // An empty read-only directory over it.
      return mount("tmpfs", op.b, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "size=4k,mode=0555") == 0
                 ? 0
                 : errno;
    case MountOp::kRemountReadOnly: {
      unsigned long f = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                        ((op.flags & MountOp::kNoExec) ? MS_NOEXEC : 0);
      return mount("none", op.b, nullptr, f, nullptr) == 0 ? 0 : errno;
    }
    case MountOp::kCover:
      // Hide a writable part of the job's /proc behind a read-only view of itself.
      if (access(op.b, F_OK) != 0) return (op.flags & MountOp::kOptional) ? 0 : errno;
      if (mount(op.b, op.b, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      return SetBindFlags(op.b, op.b, MountOp::kReadOnly);
    case MountOp::kBind: {
      struct stat st;
      if (stat(op.a, &st) != 0) return (op.flags & MountOp::kOptional) && errno == ENOENT ? 0 : errno;
      if (int e = MakeMountPoint(op.b, op.flags & MountOp::kDir)) return e;
      if (mount(op.a, op.b, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      return SetBindFlags(op.a, op.b, op.flags);
    }
  }
  return EINVAL;
}

// The job's own mount, IPC, UTS and cgroup namespaces (its user namespace
// comes last, in EnterSandbox).
void UnshareJobNamespaces(const JobChildSpec& s) {
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0) {
    ChildFail(s, kStageUnshare, 0, errno);
  }
}

// Makes the root built at /newroot (a mount) read-only, with every mount
// point in it, and switches to it: the new root goes over the old one, which
// is then detached with the host and the template under it. 0, or an errno
// with *step: 8 for the remount, 7 for the switch.
int SwitchToNewRoot(int* step) {
  *step = 8;
  if (mount("none", "/newroot", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    return errno;
  }
  *step = 7;
  if (chdir("/newroot") != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
      umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    return errno;
  }
  return 0;
}

// In the job child: a root of its own, built from the slot's template on a
// fresh tmpfs (the slot has no prepared root for this job).
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

// In the job child: a copy of the slot's prepared root, plus what is the
// job's alone (s.ops: /dev/shm, devpts, /tmp, then its binds, whose mount
// points the slot made). The binds' sources are the host's, which the
// prepared root does not hold: each is cloned here, in the slot's namespace,
// as a detached tree with its flags set, and attached once inside.
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

// In the job child, sandboxed: from the slot's namespaces into the job's own.
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

[[noreturn]] void JobChildMain(const JobChildSpec& s) {
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
  if (dup2(s.devnull, 0) < 0 || dup2(s.out_w, 1) < 0 || dup2(s.err_w, 2) < 0) {
    ChildFail(s, kStageStdio, 0, errno);
  }
  if (s.ns) EnterSandbox(s);
  if (s.chdir_path && s.chdir_path[0] && chdir(s.chdir_path) != 0) ChildFail(s, kStageChdir, 0, errno);
  if (s.ns) DropPrivileges(s);
  if (int e = s.bwrap ? WriteSeccompFd(s.seccomp) : InstallJobSeccomp(s.seccomp)) {
    ChildFail(s, kStageSeccomp, 0, e);
  }
  execve(s.exec_path, s.argv, s.envp);
  ChildFail(s, kStageExec, 0, errno);
}

// ---------------------------------------------------------------------------
// Supervision of one job.

struct SupCtx {
  int sock = -1;
  bool sock_open = true;
  bool is_init = false;  // pid 1 of the job's PID namespace
  bool creds = false;    // report the job's pid through SCM_CREDENTIALS
  int sfd = -1;          // signalfd for SIGCHLD (may be -1)
  int devnull = -1;
  int netns_fd = -1;
  pid_t* tracked = nullptr;
  // Bytes read from the worker but not consumed yet, and received descriptors.
  char in[512];
  size_t in_len = 0;
  int fds[8];
  int nfds = 0;
};

void SendRecord(SupCtx& c, Record rec, pid_t cred_pid = 0) {
  if (!c.sock_open) return;
  if (cred_pid > 0) {
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(ucred))];
    memset(cbuf, 0, sizeof(cbuf));
    iovec iov{&rec, sizeof(rec)};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_CREDENTIALS;
    cm->cmsg_len = CMSG_LEN(sizeof(ucred));
    ucred cr{cred_pid, getuid(), getgid()};
    memcpy(CMSG_DATA(cm), &cr, sizeof(cr));
    ssize_t n;
    do {
      n = sendmsg(c.sock, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof(rec))) return;
    if (n > 0) {
      WriteAll(c.sock, reinterpret_cast<char*>(&rec) + n, sizeof(rec) - static_cast<size_t>(n));
      return;
    }
    rec.index &= static_cast<uint16_t>(~kPidInCredentials);
  }
  WriteAll(c.sock, &rec, sizeof(rec));
}

void CloseReceivedFds(SupCtx& c) {
  for (int i = 0; i < c.nfds; ++i) ::close(c.fds[i]);
  c.nfds = 0;
}

// Reads what the worker sent; false on EOF or error (the worker is gone).
bool FillInput(SupCtx& c) {
  if (c.in_len == sizeof(c.in)) return false;  // a frame that never completes
  alignas(cmsghdr) char cbuf[CMSG_SPACE(8 * sizeof(int))];
  iovec iov{c.in + c.in_len, sizeof(c.in) - c.in_len};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  ssize_t n = recvmsg(c.sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (c.nfds < 8) {
        c.fds[c.nfds++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  if (n == 0) return false;
  c.in_len += static_cast<size_t>(n);
  return true;
}

void Consume(SupCtx& c, size_t n) {
  memmove(c.in, c.in + n, c.in_len - n);
  c.in_len -= n;
}

void KillAll(const SupCtx& c, bool bwrap, pid_t job, bool job_reaped, int sig, pid_t spare) {
  if (c.is_init) {
    ::kill(-1, sig);  // from a PID namespace's init: every other process in it
    return;
  }
  if (!bwrap && !job_reaped) ::kill(-job, sig);  // the job's own group, incl. fresh forks
  int n = ScanDescendants(c.tracked);
  for (int i = 0; i < n; ++i) {
    if (c.tracked[i] == spare && sig != SIGKILL) continue;
    ::kill(c.tracked[i], sig);
  }
}

alignas(16) char g_job_stack[256 * 1024];

// Starts the job, reports 'S', 'X' and 'C', and returns once no process of
// the job is left. Closes s.out_w and s.err_w. Async-signal-safe.
void RunJob(SupCtx& c, JobChildSpec s, uint32_t seq, int64_t grace_ms) {
  int ep[2] = {-1, -1};
  pid_t job = -1;
  int clone_err = 0;
  if (pipe2(ep, O_CLOEXEC) != 0) {
    clone_err = errno;
  } else {
    s.exec_err_w = ep[1];
    s.devnull = c.devnull;
    s.supervisor = getpid();
    // vfork-style: the child shares our memory until it execs (no page
    // tables copied); we are suspended until then. It only makes system
    // calls and writes to a pipe, what a vfork child may do. Its signal
    // dispositions are its own (no CLONE_SIGHAND).
    job = clone(
        [](void* p) -> int { JobChildMain(*static_cast<const JobChildSpec*>(p)); },
        g_job_stack + sizeof(g_job_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
    if (job < 0) clone_err = errno;
    ::close(ep[1]);
  }
  ::close(s.out_w);
  ::close(s.err_w);
  Record started{kRecStarted, 0, 0, seq, job, 0};
  if (job < 0) {
    if (ep[0] >= 0) ::close(ep[0]);
    started.stage = kStageFork;
    started.value2 = clone_err;
    SendRecord(c, started);
    SendRecord(c, Record{kRecClean, 0, 0, seq, 0, 0});
    return;
  }
  ChildError ce{};
  size_t got = 0;
  while (got < sizeof(ce)) {
    ssize_t n = ::read(ep[0], reinterpret_cast<char*>(&ce) + got, sizeof(ce) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(ep[0]);
  if (got == sizeof(ce)) {
    started.stage = ce.stage;
    started.index = ce.index;
    started.value2 = ce.err;
  }
  if (c.creds) started.index |= kPidInCredentials;
  SendRecord(c, started, c.creds ? job : 0);

  bool job_reaped = false;
  bool term_sent = false;
  bool kill_now = false;
  int64_t kill_at = -1;
  const pid_t spare = s.bwrap ? job : -1;
  for (;;) {
    // Reap whatever exited: the job, or orphans re-parented to us.
    for (;;) {
      int st = 0;
      pid_t p = waitpid(-1, &st, WNOHANG);
      if (p > 0) {
        if (p == job && !job_reaped) {
          job_reaped = true;
          SendRecord(c, Record{kRecExited, 0, 0, seq, st, 0});
        }
        continue;
      }
      if (p < 0 && errno == ECHILD && job_reaped) {
        SendRecord(c, Record{kRecClean, 0, 0, seq, 0, 0});
        return;  // nothing of the job is left
      }
      break;
    }
    // Once the main process is gone, whatever it left behind is killed.
    if (job_reaped) kill_now = true;
    if (kill_at >= 0 && MonoMillis() >= kill_at) kill_now = true;
    if (kill_now) KillAll(c, s.bwrap, job, job_reaped, SIGKILL, -1);

    pollfd pfd[2];
    int n = 0;
    if (c.sfd >= 0) pfd[n++] = {c.sfd, POLLIN, 0};
    int sock_idx = -1;
    if (c.sock_open) {
      sock_idx = n;
      pfd[n++] = {c.sock, POLLIN, 0};
    }
    int timeout = 200;  // also covers a missing signalfd
    if (kill_now) {
      timeout = 10;
    } else if (kill_at >= 0) {
      int64_t left = kill_at - MonoMillis();
      timeout = static_cast<int>(left < 0 ? 0 : (left < 200 ? left : 200));
    }
    int r = poll(pfd, static_cast<nfds_t>(n), timeout);
    if (r < 0) continue;  // EINTR
    if (c.sfd >= 0 && (pfd[0].revents & POLLIN)) {
      signalfd_siginfo si;
      while (::read(c.sfd, &si, sizeof(si)) > 0) {
      }
    }
    if (sock_idx < 0 || !pfd[sock_idx].revents) continue;
    if (!FillInput(c)) {
      // The worker is gone (or closed its end): nobody will read the
      // result, so end the job now rather than leave it running unowned.
      c.sock_open = false;
      kill_now = true;
      continue;
    }
    CloseReceivedFds(c);  // descriptors only come with a job request
    while (c.in_len >= kFrameHeader) {
      const FrameHeader h = DecodeFrameHeader(c.in);
      if ((h.type != kFrameTerm && h.type != kFrameKill) || h.length != 4) {
        // Only control frames may arrive while a job runs.
        c.sock_open = false;
        kill_now = true;
        break;
      }
      if (c.in_len < kControlFrame) break;
      const uint32_t target = DecodeControlSeq(c.in + kFrameHeader);
      Consume(c, kControlFrame);
      if (target != seq) continue;  // meant for an earlier job
      if (h.type == kFrameKill) kill_now = true;
      if (h.type == kFrameTerm && !term_sent) {
        term_sent = true;
        KillAll(c, s.bwrap, job, job_reaped, SIGTERM, spare);
        kill_at = MonoMillis() + grace_ms;
      }
    }
  }
}

// Moves the kept descriptors above 2 (close-on-exec), closes every other one,
// points 0-2 at /dev/null and sets up signals. Async-signal-safe.
bool PrepareProcess(int* keep, int nkeep, SupCtx* c) {
  for (int i = 0; i < nkeep; ++i) {
    keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, 3);
    if (keep[i] < 0) return false;
  }
  auto is_kept = [&](long fd) {
    for (int i = 0; i < nkeep; ++i) {
      if (keep[i] == fd) return true;
    }
    return false;
  };
  int fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_dir >= 0) {
    ForEachNumericEntry(fd_dir, [&](long fd) {
      if (fd > 2 && fd != fd_dir && !is_kept(fd)) ::close(static_cast<int>(fd));
    });
    ::close(fd_dir);
  } else {
    for (int fd = 3; fd < 65536; ++fd) {
      if (!is_kept(fd)) ::close(fd);
    }
  }
  c->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (c->devnull < 0) return false;
  // The supervisor must not write to the worker's terminal or logs.
  dup2(c->devnull, 0);
  dup2(c->devnull, 1);
  dup2(c->devnull, 2);
  // Signals: the worker's handlers must never run here. Interactive signals
  // (Ctrl-C reaches the worker's whole process group) are ignored: the
  // supervisor follows the worker through the control socket instead.
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  for (int sig = 1; sig < NSIG; ++sig) {
    bool fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
                 sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
    sa.sa_handler = fault || sig == SIGCHLD ? SIG_DFL : SIG_IGN;
    sigaction(sig, &sa, nullptr);
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_SETMASK, &chld, nullptr);
  c->sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (chdir("/") != 0) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Slots.

// The sandbox layout, as mount operations: the template's, run once per slot
// by its init (again if a host file bound into it was replaced), and the
// job's, run by each job child.
class SandboxLayout {
 public:
  void Build() {
    Bind("/usr", "/usr", MountOp::kReadOnly | MountOp::kDir);
    // Merged-/usr hosts have /bin -> usr/bin etc.: recreate the links, bind real dirs.
    for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
      struct stat st;
      if (lstat(d, &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlink(d, target, sizeof(target) - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        Job(MountOp::kSymlink, 0, Keep(target), Keep(std::string("/newroot") + d));
      } else if (S_ISDIR(st.st_mode)) {
        Bind(d, d, MountOp::kReadOnly | MountOp::kDir);
      }
    }
    // A minimal /etc: enough for users, the dynamic linker, TLS roots and
    // Debian's alternatives links; no shadow, no ssh keys, no worker config.
    // Two of them: the second adds what name resolution needs, for jobs with
    // network.
    for (const char* etc : {"/etc", "/etc-net"}) {
      Tpl(MountOp::kMkdir, 0, nullptr, Keep(std::string("/tpl") + etc));
      for (const char* e : {"passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf",
                            "ld.so.conf.d", "alternatives", "localtime", "ssl", "ca-certificates",
                            "mime.types"}) {
        EtcEntry(etc, e);
      }
    }
    for (const char* e : {"resolv.conf", "gai.conf", "services", "protocols"}) EtcEntry("/etc-net", e);
    // /proc of the slot's PID namespace; the parts that a uid-0 job could
    // write to without any capability (sysctls, sysrq) are read-only.
    Tpl(MountOp::kProc, 0, nullptr, Keep("/tpl/proc"));
    for (const char* p : {"sys", "sysrq-trigger", "irq", "bus"}) {
      Tpl(MountOp::kCover, MountOp::kOptional, nullptr, Keep(std::string("/tpl/proc/") + p));
    }
    // Pid 1 is the slot's supervisor. Its fds, root, memory and environment
    // are out of the job's reach (it has no capability in the slot's user
    // namespace), but a job of the same uid would still pass the owner check
    // on files such as oom_score_adj. The job sees an empty directory instead.
    Tpl(MountOp::kHide, 0, nullptr, Keep("/tpl/proc/1"));
    // A minimal read-only /dev on a tmpfs of its own; /dev/shm and devpts per job.
    Tpl(MountOp::kTmpfs, 0, "mode=0755", Keep("/tpl/dev"));
    for (const char* d : {"null", "zero", "full", "random", "urandom", "tty"}) {
      std::string p = std::string("/dev/") + d;
      // Read-only binds: the nodes stay usable, but their mode and owner
      // (the host's own nodes) cannot be changed from inside.
      Tpl(MountOp::kBind, MountOp::kDevices | MountOp::kOptional | MountOp::kReadOnly, Keep("/oldroot" + p),
          Keep("/tpl" + p));
    }
    const char* links[][2] = {{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
                              {"/proc/self/fd/2", "stderr"}, {"/proc/self/fd", "fd"},
                              {"pts/ptmx", "ptmx"}};
    for (auto& l : links) {
      Tpl(MountOp::kSymlink, 0, l[0], Keep(std::string("/tpl/dev/") + l[1]));
    }
    Tpl(MountOp::kMkdir, 0, nullptr, Keep("/tpl/dev/shm"));
    Tpl(MountOp::kMkdir, 0, nullptr, Keep("/tpl/dev/pts"));
    Tpl(MountOp::kRemountReadOnly, 0, nullptr, Keep("/tpl/dev"));
    // The job's root: the template's parts, then what is the job's alone.
    // /etc is one read-only bind, or, for a job that binds something under
    // /etc, a directory of its own root (writable until the root is made
    // read-only) holding each entry's bind.
    const auto etc_at = static_cast<std::ptrdiff_t>(ops_.size());
    Job(MountOp::kRbind, MountOp::kNoNetOnly, "/tpl/etc", "/newroot/etc");
    Job(MountOp::kRbind, MountOp::kNetOnly, "/tpl/etc-net", "/newroot/etc");
    std::vector<MountOp> etc_entries = {{MountOp::kMkdir, 0, nullptr, "/newroot/etc"}};
    for (const auto& [variant, name, dir] : etc_names_) {
      uint8_t f = MountOp::kOptional | (dir ? 0 : MountOp::kFile) |
                  (variant == "/etc" ? MountOp::kNoNetOnly : MountOp::kNetOnly);
      etc_entries.push_back({MountOp::kRbind, f, Keep("/tpl" + variant + "/" + name), Keep("/newroot/etc/" + name)});
    }
    Job(MountOp::kRbind, 0, "/tpl/proc", "/newroot/proc");
    // Read-only for the job: /proc's entries (meminfo, cpuinfo ...) are the
    // kernel's, shared by every instance, and a job of the same uid as their
    // owner (a root worker's) could chmod or chown them for the whole host.
    // The job's own id maps are written through the template's /proc.
    Job(MountOp::kRemountReadOnly, MountOp::kNoExec, nullptr, "/newroot/proc");
    Job(MountOp::kRbind, 0, "/tpl/dev", "/newroot/dev");
    const size_t own_at = ops_.size();  // what each job has of its own
    Job(MountOp::kTmpfs, 0, "mode=1777", "/newroot/dev/shm");
    Job(MountOp::kDevpts, 0, nullptr, "/newroot/dev/pts");
    Job(MountOp::kTmpfs, 0, "mode=0755", "/newroot/tmp");
    plain_ = ops_;
    with_etc_ = ops_;
    with_etc_.erase(with_etc_.begin() + etc_at, with_etc_.begin() + etc_at + 2);  // the two binds of /etc
    with_etc_.insert(with_etc_.begin() + etc_at, etc_entries.begin(), etc_entries.end());
    system_ops_ = ops_.size();
    // A prepared root holds the rest; a job entering one adds its own parts
    // at their place in that root.
    root_ops_.assign(plain_.begin(), plain_.begin() + static_cast<std::ptrdiff_t>(own_at));
    for (size_t i = own_at; i < plain_.size(); ++i) {
      root_ops_.push_back({MountOp::kMkdir, 0, nullptr, plain_[i].b});  // the mount point
      MountOp op = plain_[i];
      op.b += strlen("/newroot");
      own_ops_.push_back(op);
    }
  }

  // In the slot's init, once: its own mount namespace, whose root becomes a
  // tmpfs with the host at /oldroot, then the template. 0, or an errno with
  // *step set.
  int Prepare(int* step) {
    *step = 0;
    if (unshare(CLONE_NEWNS) != 0) return errno;
    *step = 1;
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
    *step = 2;
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
    *step = 3;
    for (const char* d :
         {"/tmp/oldroot", "/tmp/tpl", "/tmp/newroot", "/tmp/skel", "/tmp/skel-net"}) {
      if (mkdir(d, 0755) != 0) return errno;
    }
    *step = 4;
    if (syscall(SYS_pivot_root, "/tmp", "/tmp/oldroot") != 0 || chdir("/") != 0) return errno;
    if (int e = MakeTemplate(step)) return e;
    return PrepareRoots(step);
  }

  // Before each job: if a host file or directory bound into the template was
  // replaced (a package update renames a new ld.so.cache, resolv.conf or CA
  // bundle into place), the template is built again, so that a long-lived
  // slot runs its jobs with what the host has now. Changes inside a bound
  // file or directory are seen as they are made.
  int Refresh(int* step) {
    if (!Changed()) return 0;
    bool stale = false;
    for (const Watched& w : watched_) stale |= !w.Same(Look(w.path));
    if (!stale) return 0;
    *step = 20;
    if (umount2("/tpl", MNT_DETACH) != 0) return errno;
    if (int e = MakeTemplate(step)) return e;
    return PrepareRoots(step);
  }

  // Drops the previous job's binds and adds this job's. A job enters the
  // slot's prepared root unless it binds something under /etc (its /etc is
  // then a directory of binds in a root of its own); the mount points of its
  // binds are made in the prepared root's skeleton. Those made for earlier
  // jobs that this one does not need are removed first: a job's root shows
  // its own mount points only, and a slot whose jobs bind the same paths
  // (a worker's slot directories) makes them once.
  bool SetJobBinds(const std::vector<BindPlan>& binds, bool network) {
    bool under_etc = false;
    for (const auto& b : binds) {
      under_etc |= b.destination == "/etc" || b.destination.compare(0, 5, "/etc/") == 0;
    }
    const PreparedRoot* root = nullptr;
    if (!under_etc && roots_[network ? 1 : 0].ns_fd >= 0) root = &roots_[network ? 1 : 0];
    root_ns_fd_ = root ? root->ns_fd : -1;
    std::set<std::string> needed;
    if (root) {
      for (const auto& b : binds) {
        for (const auto& [path, dir] : MountPointPaths(b.destination, b.is_dir)) {
          needed.insert(MadeKey(root->skel_fd, path, dir));
        }
      }
    }
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      if (needed.count(it->key) == 0) {
        unlinkat(it->skel_fd, it->path.c_str(), it->dir ? AT_REMOVEDIR : 0);
        it->key.clear();
      }
    }
    made_.erase(
        std::remove_if(made_.begin(), made_.end(), [](const MadePath& m) { return m.key.empty(); }),
        made_.end());
    ops_ = root ? own_ops_ : under_etc ? with_etc_ : plain_;
    system_ops_ = ops_.size();
    job_strings_.clear();
    if (system_ops_ + binds.size() > kMaxOps) return false;
    for (const auto& b : binds) {
      job_strings_.push_back("/oldroot" + b.source);
      const char* src = job_strings_.back().c_str();
      job_strings_.push_back((root ? "" : "/newroot") + b.destination);
      const char* dst = job_strings_.back().c_str();
      uint8_t f = (b.writable ? 0 : MountOp::kReadOnly) | (b.is_dir ? MountOp::kDir : 0);
      ops_.push_back({MountOp::kBind, f, src, dst});
      if (root) MakeSkeletonPath(root->skel_fd, b.destination, b.is_dir);
    }
    return true;
  }

  const MountOp* ops() const { return ops_.data(); }
  int system_ops() const { return static_cast<int>(system_ops_); }
  int size() const { return static_cast<int>(ops_.size()); }
  int root_ns_fd() const { return root_ns_fd_; }

 private:
  // A job root prepared once per slot (again when the template is built
  // again), for the jobs without network and for those with: a mount
  // namespace whose root is a read-only bind of a tmpfs of the slot's (the
  // skeleton, writable here at /skel or /skel-net) holding the template's
  // parts (root_ops_). A job enters a copy of it and adds its own parts
  // (EnterPreparedRoot), instead of building a root and switching to it.
  struct PreparedRoot {
    int ns_fd = -1;
    int skel_fd = -1;  // O_PATH
    void Close() {
      if (ns_fd >= 0) ::close(ns_fd);
      if (skel_fd >= 0) ::close(skel_fd);
      ns_fd = skel_fd = -1;
    }
  };
  struct RootHelper {
    const std::vector<MountOp>* ops;
    const char* skel;
    bool network;
    int ns_fd = -1;
    int err = 0;
    int step = 0;
  };
  // Runs in a helper sharing our memory and descriptor table.
  static int RootHelperMain(void* arg) {
    RootHelper& h = *static_cast<RootHelper*>(arg);
    auto fail = [&h](int step, int err) {
      h.step = step;
      h.err = err ? err : EIO;
      return 1;
    };
    if (unshare(CLONE_NEWNS) != 0) return fail(40, errno);
    if (mount(h.skel, "/newroot", nullptr, MS_BIND, nullptr) != 0) return fail(41, errno);
    for (size_t i = 0; i < h.ops->size(); ++i) {
      if (int e = RunMountOp((*h.ops)[i], h.network)) return fail(200 + static_cast<int>(i), e);
    }
    int step = 0;
    if (int e = SwitchToNewRoot(&step)) return fail(step == 8 ? 42 : 43, e);
    h.ns_fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
    return h.ns_fd < 0 ? fail(44, errno) : 0;
  }

  // (Re)makes both prepared roots. Without the new mount API (Linux < 5.12)
  // there are none and every job builds its root. 0, or an errno with *step.
  int PrepareRoots(int* step) {
    for (PreparedRoot& r : roots_) r.Close();
    made_.clear();
    if (syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, nullptr, 0) != 0 && errno == ENOSYS) {
      return 0;
    }
    for (int net = 0; net < 2; ++net) {
      PreparedRoot& r = roots_[net];
      const char* skel = net ? "/skel-net" : "/skel";
      *step = 30 + net;
      if (umount2(skel, MNT_DETACH) != 0 && errno != EINVAL) return errno;
      if (mount("tmpfs", skel, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
      r.skel_fd = open(skel, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (r.skel_fd < 0) return errno;
      static char stack[64 * 1024];
      RootHelper h{&root_ops_, skel, net == 1};
      pid_t p = clone(RootHelperMain, stack + sizeof(stack),
                      CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &h);
      if (p < 0) return errno;
      int st;
      while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
      }
      if (h.err) {
        *step = h.step;
        return h.err;
      }
      r.ns_fd = h.ns_fd;
    }
    return 0;
  }

  static std::string MadeKey(int skel_fd, const std::string& path, bool dir) {
    return std::to_string(skel_fd) + (dir ? "d/" : "f/") + path;
  }
  void AddMade(int skel_fd, const std::string& path, bool dir) {
    made_.push_back({skel_fd, path, dir, MadeKey(skel_fd, path, dir)});
  }

  // The paths, relative to a skeleton, that the mount point of a bind at
  // `dest` takes, parents first: each directory on the way, then `dest`
  // itself (a directory, or a file for a file's bind).
  static std::vector<std::pair<std::string, bool>> MountPointPaths(const std::string& dest,
                                                                   bool dir) {
    std::vector<std::pair<std::string, bool>> out;
    for (size_t slash = dest.find('/', 1); slash != std::string::npos;
         slash = dest.find('/', slash + 1)) {
      out.emplace_back(dest.substr(1, slash - 1), true);
    }
    out.emplace_back(dest.substr(1), dir);
    return out;
  }

  // The mount point of a job's bind in a skeleton: its missing directories
  // (and the file, for a file's bind), each recorded in made_. It stops at a
  // symlink or a file on the way; the job's own attempt then reports it.
  void MakeSkeletonPath(int skel_fd, const std::string& dest, bool dir) {
    const std::string key = MadeKey(skel_fd, dest.substr(1), dir);
    for (const auto& m : made_) {
      if (m.key == key) return;  // made for an earlier job, with its parents
    }
    const auto paths = MountPointPaths(dest, dir);
    int at = fcntl(skel_fd, F_DUPFD_CLOEXEC, 0);
    for (size_t i = 0; i < paths.size() && at >= 0; ++i) {
      const auto& [rel, is_dir] = paths[i];
      const std::string comp = rel.substr(rel.rfind('/') + 1);  // npos + 1: all of it
      if (is_dir) {
        if (mkdirat(at, comp.c_str(), 0755) == 0) AddMade(skel_fd, rel, true);
      } else {
        int fd =
            openat(at, comp.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
          ::close(fd);
          AddMade(skel_fd, rel, false);
        }
      }
      if (i + 1 == paths.size()) break;
      int next = openat(at, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ::close(at);
      at = next;
    }
    if (at >= 0) ::close(at);
  }

  // A source of the template as it was when the template was built.
  struct Watched {
    const char* path;      // as the layout names it, under /oldroot
    std::string resolved;  // its symlinks followed as the host would
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    bool Same(const Watched& now) const {
      return now.resolved == resolved && now.exists == exists && now.dev == dev && now.ino == ino;
    }
  };
  static Watched Look(const char* path) {
    Watched w;
    w.path = path;
    w.resolved = HostPath(path);
    struct stat st;
    w.exists = stat(w.resolved.c_str(), &st) == 0;
    if (w.exists) {
      w.dev = st.st_dev;
      w.ino = st.st_ino;
    }
    return w;
  }

  // `path` (under /oldroot) with its symlinks followed as the host would
  // follow them: an absolute target is the host's (here the root is the
  // slot's tmpfs, so /etc/localtime -> /usr/share/zoneinfo/... would
  // otherwise lead nowhere).
  static std::string HostPath(const std::string& path) {
    const std::string root = "/oldroot";
    if (path.compare(0, root.size() + 1, root + "/") != 0) return path;
    std::string rest = path.substr(root.size());
    std::string done;  // resolved so far, relative to the host's root ("" is the root)
    for (int links = 0; !rest.empty();) {
      size_t start = rest.find_first_not_of('/');
      if (start == std::string::npos) break;
      size_t end = rest.find('/', start);
      std::string comp = rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
      rest = end == std::string::npos ? "" : rest.substr(end);
      if (comp == ".") continue;
      if (comp == "..") {
        size_t s = done.rfind('/');
        done = s == std::string::npos ? "" : done.substr(0, s);
        continue;
      }
      std::string next = done + "/" + comp;
      struct stat st;
      if (lstat((root + next).c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
        done = next;
        continue;
      }
      char target[4096];
      ssize_t n = readlink((root + next).c_str(), target, sizeof(target) - 1);
      if (n <= 0 || ++links > 40) return root + next;  // left for the bind to fail on
      target[n] = '\0';
      if (target[0] == '/') done.clear();
      rest = std::string(target) + "/" + rest;
    }
    return root + (done.empty() ? "/" : done);
  }

  // Watches the directories that hold the template's sources (through any
  // symlink: /etc/resolv.conf may point into /run), so that the check before
  // a job is one read of an empty queue until something there is created,
  // deleted or renamed. Set before the sources are looked at.
  void Watch(const std::vector<Watched>& sources) {
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ < 0) return;
    std::vector<std::string> dirs;
    for (const Watched& w : sources) {
      for (const std::string& path : {std::string(w.path), w.resolved}) {
        size_t slash = path.rfind('/');
        if (slash == std::string::npos || slash == 0) continue;
        std::string dir = path.substr(0, slash);
        bool seen = false;
        for (const auto& d : dirs) seen |= d == dir;
        if (!seen) dirs.push_back(dir);
      }
    }
    for (const auto& d : dirs) {
      const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                            IN_ONLYDIR;
      if (inotify_add_watch(inotify_fd_, d.c_str(), mask) < 0 && errno != ENOENT) {
        ::close(inotify_fd_);  // out of watches: every job checks instead
        inotify_fd_ = -1;
        return;
      }
    }
  }
  // Whether anything may have changed since the last look.
  bool Changed() {
    if (inotify_fd_ < 0) return true;
    alignas(inotify_event) char buf[4096];
    bool any = false;
    for (;;) {
      ssize_t n = ::read(inotify_fd_, buf, sizeof(buf));
      if (n > 0) {
        any = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return any || (n < 0 && errno != EAGAIN);
    }
  }

  // The template: a tmpfs at /tpl, read-only once built.
  int MakeTemplate(int* step) {
    *step = 5;
    if (mount("tmpfs", "/tpl", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
    // Watched first, then looked at again: a change in between is either
    // seen now or queued for the next job's check.
    std::vector<Watched> first;
    for (const MountOp& op : tpl_ops_) {
      if (op.kind == MountOp::kBind) first.push_back(Look(op.a));
    }
    Watch(first);
    watched_.clear();
    watched_.reserve(first.size());
    for (size_t i = 0; i < tpl_ops_.size(); ++i) {
      MountOp op = tpl_ops_[i];
      if (op.kind == MountOp::kBind) {
        watched_.push_back(Look(op.a));
        op.a = watched_.back().resolved.c_str();
      }
      *step = 100 + static_cast<int>(i);
      if (int e = RunMountOp(op, true)) return e;
    }
    *step = 6;
    if (mount("none", "/tpl", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
      return errno;
    }
    return 0;
  }

  const char* Keep(std::string s) {
    strings_.push_back(std::move(s));
    return strings_.back().c_str();
  }
  void Tpl(MountOp::Kind k, uint8_t flags, const char* a, const char* b) { tpl_ops_.push_back({k, flags, a, b}); }
  void Job(MountOp::Kind k, uint8_t flags, const char* a, const char* b) { ops_.push_back({k, flags, a, b}); }
  // A host directory: bound read-only into the template, the template's
  // copy bound into each job at the same place.
  void Bind(const std::string& src, const std::string& dst, uint8_t flags) {
    Tpl(MountOp::kBind, flags, Keep("/oldroot" + src), Keep("/tpl" + dst));
    Job(MountOp::kRbind, 0, Keep("/tpl" + dst), Keep("/newroot" + dst));
  }
  void EtcEntry(const char* etc, const char* name) {
    std::string p = std::string("/etc/") + name;
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return;
    etc_names_.push_back({etc, name, S_ISDIR(st.st_mode)});
    Tpl(MountOp::kBind, MountOp::kReadOnly | MountOp::kOptional | (S_ISDIR(st.st_mode) ? MountOp::kDir : 0),
        Keep("/oldroot" + p), Keep(std::string("/tpl") + etc + "/" + name));
  }

  std::deque<std::string> strings_;      // stable addresses
  std::deque<std::string> job_strings_;  // this job's bind paths
  std::vector<MountOp> tpl_ops_;
  std::vector<MountOp> ops_;  // the job's: system_ops_ of them, then its binds
  std::vector<MountOp> plain_, with_etc_;  // the system ops: /etc as one bind, or entry by entry
  struct EtcName {
    std::string variant;  // "/etc" or "/etc-net"
    std::string name;
    bool dir;
  };
  std::vector<EtcName> etc_names_;
  std::vector<Watched> watched_;
  int inotify_fd_ = -1;  // or -1: every source is checked before each job
  size_t system_ops_ = 0;
  std::vector<MountOp> root_ops_;  // a prepared root's, on /newroot
  std::vector<MountOp> own_ops_;   // what a job adds to a prepared root
  PreparedRoot roots_[2];          // without network, with network
  int root_ns_fd_ = -1;            // this job's, or -1
  struct MadePath {
    int skel_fd;
    std::string path;  // relative to the skeleton
    bool dir;
    std::string key;  // MadeKey
  };
  std::vector<MadePath> made_;  // parents first
};

// Serves job requests until the worker closes the socket.
[[noreturn]] void ServeSlot(SupCtx& c, bool ns, SandboxLayout* layout, const std::string& uid_map,
                            const std::string& gid_map) {
  SendRecord(c, Record{kRecReady, 0, 0, 0, kProtocolVersion, 0});
  for (;;) {
    while (c.in_len < kFrameHeader) {
      pollfd p{c.sock, POLLIN, 0};
      if (poll(&p, 1, -1) < 0) continue;
      if (!FillInput(c)) _exit(0);  // the worker closed the slot (or died)
    }
    const FrameHeader h = DecodeFrameHeader(c.in);
    const uint32_t len = h.length;
    if (h.type == kFrameTerm || h.type == kFrameKill) {
      // A control for a job that already ended.
      if (len != 4) _exit(3);
      while (c.in_len < kControlFrame) {
        if (!FillInput(c)) _exit(0);
      }
      // No descriptors come with controls: any already received belong to
      // the job request that follows (it may have come in the same read).
      Consume(c, kControlFrame);
      continue;
    }
    if (h.type != kFrameJob || len > kMaxJobFrame) _exit(3);
    std::string payload;
    payload.resize(len);
    size_t have = c.in_len - kFrameHeader < len ? c.in_len - kFrameHeader : len;
    memcpy(payload.data(), c.in + kFrameHeader, have);
    Consume(c, kFrameHeader + have);
    while (have < len) {
      ssize_t n = ::read(c.sock, payload.data() + have, len - have);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        pollfd p{c.sock, POLLIN, 0};
        poll(&p, 1, -1);
        continue;
      }
      if (n <= 0) _exit(0);
      have += static_cast<size_t>(n);
    }
    JobRequest req;
    if (c.nfds != 2 || !DecodeJob(payload, &req)) _exit(3);  // not our worker's protocol
    int out_w = c.fds[0], err_w = c.fds[1];
    c.nfds = 0;
    std::vector<char*> argv, envp;
    for (auto& a : req.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : req.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    JobChildSpec s;
    s.seccomp = JobSeccompFilter();  // built once, when the slot's first job comes
    s.exec_path = req.exec_path.c_str();
    s.argv = argv.data();
    s.envp = envp.data();
    s.chdir_path = req.chdir.c_str();
    s.out_w = out_w;
    s.err_w = err_w;
    if (ns) {
      int step = 0;
      if (int e = layout->Refresh(&step)) {
        // The template is half gone: no job can run in this slot any more.
        ::close(out_w);
        ::close(err_w);
        SendRecord(c, Record{kRecStarted, kStageSlotRoot, static_cast<uint16_t>(step), req.seq, -1, e});
        SendRecord(c, Record{kRecClean, 0, 0, req.seq, 0, 0});
        _exit(1);
      }
      if (!layout->SetJobBinds(req.binds, req.network)) {
        ::close(out_w);
        ::close(err_w);
        SendRecord(c, Record{kRecStarted, kStageProtocol, 0, req.seq, -1, E2BIG});
        SendRecord(c, Record{kRecClean, 0, 0, req.seq, 0, 0});
        continue;
      }
      s.ns = true;
      s.network = req.network;
      s.netns_fd = c.netns_fd;
      s.ops = layout->ops();
      s.n_ops = layout->size();
      s.n_system_ops = layout->system_ops();
      s.root_ns_fd = layout->root_ns_fd();
      s.uid_map = uid_map.c_str();
      s.gid_map = gid_map.c_str();
    }
    RunJob(c, s, req.seq, req.grace_ms);
    if (!c.sock_open) _exit(0);
  }
}

int g_netns_fd = -1;
int g_netns_err = 0;

// The slot's empty network namespace, with its loopback up; the descriptor
// keeps it alive. The helper shares our descriptor table and memory.
int MakeEmptyNetns() {
  static char stack[64 * 1024];
  pid_t p = clone(
      [](void*) -> int {
        g_netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (g_netns_fd < 0) {
          g_netns_err = errno;
          return 1;
        }
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        strcpy(ifr.ifr_name, "lo");  // NOLINT
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
          g_netns_err = errno;
        } else {
          ifr.ifr_flags |= IFF_UP;
          if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) g_netns_err = errno;
        }
        if (s >= 0) ::close(s);
        return 0;
      },
      stack + sizeof(stack), CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_NEWNET | SIGCHLD, nullptr);
  if (p < 0) return errno;
  int st;
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
  }
  if (g_netns_fd < 0) return g_netns_err ? g_netns_err : EIO;
  return g_netns_err;
}

struct SlotInitArgs {
  SupCtx* ctx;
  int sync_r, sync_w;
};

// The init of a sandboxed slot's PID namespace, in its own user namespace.
[[noreturn]] void SlotInitMain(SlotInitArgs* a) {
  SupCtx& c = *a->ctx;
  ::close(a->sync_w);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // if the outer supervisor goes, so do we
  char go = 0;
  while (::read(a->sync_r, &go, 1) < 0 && errno == EINTR) {
  }
  if (go != 'g') _exit(1);  // the outer supervisor died or failed to map ids
  ::close(a->sync_r);
  if (c.sfd >= 0) ::close(c.sfd);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  c.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (int e = MakeEmptyNetns()) {
    SendRecord(c, Record{kRecSlotFailed, kStageSlotNet, 0, 0, 0, e});
    _exit(1);
  }
  c.netns_fd = g_netns_fd;
  // Jobs run in this PID namespace and see us as pid 1: no signal they send
  // reaches us (init ignores signals it has no handler for). They run in a
  // child user namespace without capabilities while we hold all of ours
  // here, so the kernel refuses them ptrace, /proc/1/mem, environ, fds and
  // root (cap_ptrace_access_check), and /proc/1 is hidden from them. We stay
  // dumpable: a job child shares our memory until it execs, and it must be
  // able to write its own /proc/self/uid_map as a non-root user.
  c.is_init = true;
  c.creds = true;
  static SandboxLayout layout;
  layout.Build();
  int step = 0;
  if (int e = layout.Prepare(&step)) {
    SendRecord(c, Record{kRecSlotFailed, kStageSlotRoot, static_cast<uint16_t>(step), 0, 0, e});
    _exit(1);
  }
  std::string uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1";
  std::string gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1";
  ServeSlot(c, true, &layout, uid_map, gid_map);
}

[[noreturn]] void SlotMain(bool ns) {
  static SupCtx c;
  static std::vector<pid_t> tracked(kMaxTracked, 0);
  c.tracked = tracked.data();
  int keep[1] = {3};
  if (!PrepareProcess(keep, 1, &c)) _exit(120);
  c.sock = keep[0];
  if (!ns) {
    // Every descendant of a job stays ours, even after setsid() or a double fork.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_DUMPABLE, 0);
    ServeSlot(c, false, nullptr, "", "");
  }
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) _exit(121);
  static SlotInitArgs args{&c, sync[0], sync[1]};
  static char stack[256 * 1024];
  pid_t init = clone([](void* p) -> int { SlotInitMain(static_cast<SlotInitArgs*>(p)); },
                     stack + sizeof(stack), CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, &args);
  if (init < 0) {
    SendRecord(c, Record{kRecSlotFailed, kStageSlotUserns, 0, 0, 0, errno});
    _exit(1);
  }
  ::close(sync[0]);
  // The slot sees the worker's uid and gid as themselves (like bubblewrap).
  auto write_proc = [&](const char* file, const std::string& data) {
    std::string path = "/proc/" + std::to_string(init) + "/" + file;
    return WriteFile(path.c_str(), data.c_str());
  };
  std::string uid = std::to_string(getuid()), gid = std::to_string(getgid());
  if (!write_proc("setgroups", "deny") || !write_proc("uid_map", uid + " " + uid + " 1") ||
      !write_proc("gid_map", gid + " " + gid + " 1")) {
    SendRecord(c, Record{kRecSlotFailed, kStageSlotIdMap, 0, 0, 0, errno});
    ::kill(init, SIGKILL);
    _exit(1);
  }
  char g = 'g';
  WriteAll(sync[1], &g, 1);
  ::close(sync[1]);
  ::close(c.sock);  // the init owns the worker's channel now
  if (c.netns_fd >= 0) ::close(c.netns_fd);
  for (;;) {
    int st = 0;
    pid_t p = waitpid(init, &st, 0);
    if (p == init) _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    if (p < 0 && errno != EINTR) _exit(1);
  }
}

}  // namespace

namespace exec_internal {

void ForkedSupervisorMain(const ForkedJob& job) {
  static SupCtx c;  // the forked child's own copy
  int keep[3] = {job.sock, job.out_w, job.err_w};
  if (!PrepareProcess(keep, 3, &c)) _exit(120);
  c.sock = keep[0];
  c.tracked = job.tracked;
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  JobChildSpec s;
  s.exec_path = job.exec_path;
  s.argv = job.argv;
  s.envp = job.envp;
  s.chdir_path = job.chdir_path;
  s.out_w = keep[1];
  s.err_w = keep[2];
  s.bwrap = job.bwrap;
  s.seccomp = job.seccomp;
  RunJob(c, s, 0, job.grace_ms);
  _exit(0);
}

}  // namespace exec_internal

// gatos-supervise --slot VERSION ns|plain      (fd 3: the worker's socket)
// gatos-supervise --run VERSION GRACE_MS BWRAP CHDIR EXEC_PATH ARGC ARGV... ENV...
//   (fds 3, 4, 5: socket, the job's stdout, stderr)
int SuperviseMain(int argc, char** argv) {
  long version = 0;
  if (argc < 3 || !ParseUint(argv[2], &version) || version != kProtocolVersion) {
    fprintf(stderr,
            "gatos-supervise: this program is started by gatos-worker (protocol %d); "
            "reinstall it together with the worker\n",
            kProtocolVersion);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "--slot" && argc == 4) SlotMain(std::string(argv[3]) == "ns");
  if (mode != "--run" || argc < 9) return 2;
  long grace = 0, argc_job = 0;
  if (!ParseUint(argv[3], &grace) || !ParseUint(argv[7], &argc_job) || 8 + argc_job > argc) return 2;
  static SupCtx c;
  static std::vector<pid_t> tracked(kMaxTracked, 0);
  static std::vector<char*> job_argv(argv + 8, argv + 8 + argc_job);
  job_argv.push_back(nullptr);
  static std::vector<char*> job_env(argv + 8 + argc_job, argv + argc);
  job_env.push_back(nullptr);
  int keep[3] = {3, 4, 5};
  if (!PrepareProcess(keep, 3, &c)) return 120;
  c.sock = keep[0];
  c.tracked = tracked.data();
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  JobChildSpec s;
  s.exec_path = argv[6];
  s.argv = job_argv.data();
  s.envp = job_env.data();
  s.chdir_path = argv[5];
  s.out_w = keep[1];
  s.err_w = keep[2];
  s.bwrap = std::string(argv[4]) == "1";
  s.seccomp = JobSeccompFilter();
  RunJob(c, s, 0, grace);
  return 0;
}

}  // namespace gatos
