// The worker's end of a supervisor (supervisor_conn.h).
#include "supervisor_conn.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gatos::exec_internal {

namespace fs = std::filesystem;
using namespace ::gatos::exec_protocol;  // NOLINT: the frames and records this file speaks

const std::string& DefaultSuperviseBinary() {
  static const std::string path = [] {
    if (const char* env = std::getenv("GATOS_SUPERVISE")) {
      std::string v = env;
      return v == "fork" ? std::string() : v;
    }
    std::error_code ec;
    fs::path self = fs::canonical("/proc/self/exe", ec);
    if (ec) return std::string();
    std::string candidate = (self.parent_path() / "gatos-supervise").string();
    return access(candidate.c_str(), X_OK) == 0 ? candidate : std::string();
  }();
  return path;
}

Result<pid_t> StartSupervisor(const std::vector<std::string>& argv, const std::vector<int>& fds) {
  // Like every child of ours, the supervisor is started vfork-style
  // (Process): no copy of the worker's page tables, no copy-on-write faults
  // while it runs. Its stdio is left as is: it points 0-2 at /dev/null
  // itself, once it has closed what it must not hold.
  SpawnOptions o;
  o.in = Stdio::Inherit();
  o.extra_fds = fds;
  Result<Process> p = Process::Spawn(argv, o);
  if (!p.ok())
    return InternalError("exec: cannot start the job supervisor: " + p.status().message());
  return p->Detach();  // SupervisorConn reaps it
}

SupervisorConn::~SupervisorConn() {
  sock_.reset();
  if (pid_ > 0) {
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

int SupervisorConn::Read(Record* rec, pid_t* cred_pid, int timeout_ms) {
  for (;;) {
    if (timeout_ms != 0) {
      pollfd p{sock_.get(), POLLIN, 0};
      int r = poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return 0;
    }
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(4 * sizeof(int))];
    iovec iov{buf_ + have_, sizeof(buf_) - have_};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    ssize_t n = recvmsg(sock_.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (timeout_ms == 0) return 0;
      continue;
    }
    if (n <= 0) return -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
      if (cm->cmsg_level != SOL_SOCKET) continue;
      if (cm->cmsg_type == SCM_CREDENTIALS) {
        ucred cr;
        std::memcpy(&cr, CMSG_DATA(cm), sizeof(cr));
        cred_pid_ = cr.pid;
      } else if (cm->cmsg_type == SCM_RIGHTS) {  // never sent; never kept
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
          ::close(fd);
        }
      }
    }
    have_ += static_cast<size_t>(n);
    if (have_ < sizeof(buf_)) continue;
    std::memcpy(rec, buf_, sizeof(*rec));
    have_ = 0;
    if (cred_pid) *cred_pid = cred_pid_;
    cred_pid_ = 0;
    return 1;
  }
}

bool SupervisorConn::SendJob(const std::string& payload, int out_w, int err_w,
                             const std::vector<int>& cgroup_fds) {
  std::string frame = EncodeFrame(kFrameJob, payload);
  int fds[2 + kMaxCgroupFds] = {out_w, err_w};
  size_t nfds = 2;
  for (int fd : cgroup_fds) {
    if (nfds < 2 + kMaxCgroupFds) fds[nfds++] = fd;
  }
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(fds))];
  std::memset(cbuf, 0, sizeof(cbuf));
  size_t off = 0;
  bool first = true;
  while (off < frame.size()) {
    iovec iov{frame.data() + off, frame.size() - off};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (first) {
      mh.msg_control = cbuf;
      mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
      cmsghdr* cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
      std::memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
    }
    ssize_t n = sendmsg(sock_.get(), &mh, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    first = false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool SupervisorConn::SendControl(char type, uint32_t seq) {
  char f[kControlFrame];
  EncodeControl(type, seq, f);
  for (;;) {
    ssize_t n = ::send(sock_.get(), f, sizeof(f), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof(f));  // small: never split
  }
}

bool SupervisorConn::IdleButReadable() const {
  pollfd p{sock_.get(), POLLIN, 0};
  return poll(&p, 1, 0) != 0 || have_ != 0;
}

}  // namespace gatos::exec_internal
