// The supervision of one job (supervision.h). Async-signal-safe.
#include "supervision.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proc_scan.h"
#include "signal_safe.h"

namespace gatos::exec_internal {
namespace {

using namespace ::gatos::exec_protocol;  // NOLINT: the records this file sends

void CloseReceivedFds(SupCtx& c) {
  for (int i = 0; i < c.nfds; ++i) ::close(c.fds[i]);
  c.nfds = 0;
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

}  // namespace

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

void SendRecord(SupCtx& c, Record rec, pid_t cred_pid) {
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

void ConsumeInput(SupCtx& c, size_t n) {
  memmove(c.in, c.in + n, c.in_len - n);
  c.in_len -= n;
}

namespace {

// CPU time of every reaped descendant so far (ms): each process of the job
// is reaped by us or by an ancestor we reap, so the difference across a job
// is the job's CPU time.
int64_t ChildrenCpuMs() {
  rusage r;
  if (getrusage(RUSAGE_CHILDREN, &r) != 0) return 0;
  return (static_cast<int64_t>(r.ru_utime.tv_sec) + r.ru_stime.tv_sec) * 1000 +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000;
}

}  // namespace

void RunJob(SupCtx& c, JobChildSpec s, uint32_t seq, int64_t grace_ms) {
  const int64_t cpu_before = ChildrenCpuMs();
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
    job = clone([](void* p) -> int { JobChildMain(*static_cast<const JobChildSpec*>(p)); },
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
        int64_t cpu = ChildrenCpuMs() - cpu_before;
        if (cpu > INT32_MAX) cpu = INT32_MAX;
        SendRecord(c, Record{kRecClean, 0, 0, seq, static_cast<int32_t>(cpu), 0});
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
      ConsumeInput(c, kControlFrame);
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

}  // namespace gatos::exec_internal
