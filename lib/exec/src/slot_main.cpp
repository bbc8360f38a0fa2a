// A slot's supervisor (slot_main.h): the outer process, the sandboxed
// slot's init, and the loop that takes job after job. Single-threaded (the
// exec'd gatos-supervise); it allocates between jobs, while no job child
// shares its memory.
#include "slot_main.h"

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "gatos/exec/supervise_protocol.h"
#include "job_seccomp.h"
#include "proc_scan.h"
#include "sandbox_layout.h"
#include "signal_safe.h"
#include "supervision.h"

namespace gatos::exec_internal {
namespace {

using namespace ::gatos::exec_protocol;  // NOLINT: the frames and records this file speaks

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
      ConsumeInput(c, kControlFrame);
      continue;
    }
    if (h.type != kFrameJob || len > kMaxJobFrame) _exit(3);
    std::string payload;
    payload.resize(len);
    size_t have = c.in_len - kFrameHeader < len ? c.in_len - kFrameHeader : len;
    memcpy(payload.data(), c.in + kFrameHeader, have);
    ConsumeInput(c, kFrameHeader + have);
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
    if (c.nfds < 2 || c.nfds > 2 + kMaxCgroupFds || !DecodeJob(payload, &req)) {
      _exit(3);  // not our worker's protocol
    }
    int out_w = c.fds[0], err_w = c.fds[1];
    int cgroup_fds[kMaxCgroupFds];
    const int n_cgroup_fds = c.nfds - 2;
    for (int i = 0; i < n_cgroup_fds; ++i) cgroup_fds[i] = c.fds[2 + i];
    c.nfds = 0;
    auto close_cgroup_fds = [&] {
      for (int i = 0; i < n_cgroup_fds; ++i) ::close(cgroup_fds[i]);
    };
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
    s.cgroup_fds = cgroup_fds;
    s.n_cgroup_fds = n_cgroup_fds;
    s.fsize_bytes = req.fsize_bytes;
    if (ns) {
      int step = 0;
      if (int e = layout->Refresh(&step)) {
        // The template is half gone: no job can run in this slot any more.
        ::close(out_w);
        ::close(err_w);
        close_cgroup_fds();
        SendRecord(
            c, Record{kRecStarted, kStageSlotRoot, static_cast<uint16_t>(step), req.seq, -1, e});
        SendRecord(c, Record{kRecClean, 0, 0, req.seq, 0, 0});
        _exit(1);
      }
      if (!layout->SetJobBinds(req.binds, req.network, req.tmpfs_bytes)) {
        ::close(out_w);
        ::close(err_w);
        close_cgroup_fds();
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
      s.nproc = req.nproc;
    }
    RunJob(c, s, req.seq, req.grace_ms);
    close_cgroup_fds();
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
      stack + sizeof(stack), CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_NEWNET | SIGCHLD,
      nullptr);
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

}  // namespace

void SlotMain(bool ns) {
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

}  // namespace gatos::exec_internal
