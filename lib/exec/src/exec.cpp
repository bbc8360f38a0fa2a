// Job execution: supervisor process, output capture, bubblewrap sandbox.
// The process model is described in gatos/exec.h and docs/worker-execution.md.
#include "gatos/exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace gatos {
namespace {

namespace fs = std::filesystem;

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MonoMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Errno(int err) { return std::string(std::strerror(err)); }

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

Status MakePipe(Fd* r, Fd* w, const char* what) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return InternalError(std::string("exec: pipe for ") + what + " failed: " + Errno(errno) +
                         "; check the worker's open-file limit (ulimit -n)");
  }
  *r = Fd(p[0]);
  *w = Fd(p[1]);
  return OkStatus();
}

// ---------------------------------------------------------------------------
// Supervisor. Everything below runs in a forked child of a possibly
// multithreaded worker, so it may only use async-signal-safe calls: no
// allocation, no locks, no stdio. All memory it needs is prepared by Start()
// before the fork (the child's copy is private to it).

constexpr int kMaxTracked = 8192;  // descendants tracked per scan
constexpr char kCtrlTerm = 'T';    // TERM now, KILL after the grace
constexpr char kCtrlKill = 'K';    // KILL now

struct SupervisorPlan {
  const char* exec_path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* chdir_path = nullptr;
  bool sandboxed = false;
  int64_t grace_ms = 0;
  // Descriptors of the supervisor's end of each channel.
  int out_w = -1, err_w = -1, exec_err_w = -1, status_w = -1, ctrl = -1;
  pid_t* tracked = nullptr;  // kMaxTracked entries
};

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
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

// Fills plan.tracked with the descendants of this process; returns how many.
// Repeats full /proc passes until no new descendant appears, so the order in
// which /proc lists processes does not matter.
int ScanDescendants(const SupervisorPlan& plan) {
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
        if (plan.tracked[i] == pid) return;
      }
      pid_t ppid = ReadPpid(proc_fd, pid);
      if (ppid <= 0) return;
      bool ours = ppid == self;
      for (int i = 0; !ours && i < count; ++i) ours = plan.tracked[i] == ppid;
      if (ours) {
        plan.tracked[count++] = static_cast<pid_t>(pid);
        grew = true;
      }
    });
  }
  ::close(proc_fd);
  return count;
}

// Signals every descendant. `spare` (if > 0) is not sent SIGTERM: under
// bubblewrap it is the bwrap monitor, whose death would SIGKILL the sandbox
// before the job could handle its TERM.
void SignalTree(const SupervisorPlan& plan, pid_t job, bool job_reaped, int sig, pid_t spare) {
  if (!plan.sandboxed && !job_reaped) ::kill(-job, sig);  // the job's own group, incl. fresh forks
  int n = ScanDescendants(plan);
  for (int i = 0; i < n; ++i) {
    if (plan.tracked[i] == spare && sig != SIGKILL) continue;
    ::kill(plan.tracked[i], sig);
  }
}

[[noreturn]] void JobChildMain(const SupervisorPlan& plan, pid_t supervisor, int devnull) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor) _exit(127);
  int32_t err = 0;
  if (dup2(devnull, 0) < 0 || dup2(plan.out_w, 1) < 0 || dup2(plan.err_w, 2) < 0) {
    err = errno;
  } else if (plan.chdir_path && chdir(plan.chdir_path) != 0) {
    err = errno;
  } else {
    execve(plan.exec_path, plan.argv, plan.envp);
    err = errno;
  }
  WriteAll(plan.exec_err_w, &err, sizeof(err));
  _exit(127);
}

// Protocol on status_w: int32 job pid (negative errno if fork failed), then
// int32 raw wait status of the job once it is reaped. The supervisor exits
// (closing status_w) only when it has no child left.
[[noreturn]] void SupervisorMain(SupervisorPlan plan) {
  // Move the channels above 2, then close every other inherited descriptor
  // (the worker's sockets, databases, other jobs' pipes).
  int keep[5] = {plan.out_w, plan.err_w, plan.exec_err_w, plan.status_w, plan.ctrl};
  for (int& fd : keep) fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  plan.out_w = keep[0];
  plan.err_w = keep[1];
  plan.exec_err_w = keep[2];
  plan.status_w = keep[3];
  plan.ctrl = keep[4];
  for (int fd : keep) {
    if (fd < 0) _exit(120);
  }
  auto is_kept = [&](long fd) {
    for (int k : keep) {
      if (k == fd) return true;
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
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) _exit(121);
  // The supervisor must not write to the worker's terminal or logs.
  dup2(devnull, 0);
  dup2(devnull, 1);
  dup2(devnull, 2);

  // Signals: the worker's handlers must never run here. Interactive signals
  // (Ctrl-C reaches the worker's whole process group) are ignored: the
  // supervisor follows the worker through the control socket instead.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
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
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t self = getpid();
  // The job is started like vfork: CLONE_VM shares the supervisor's memory
  // until the child execs, so no page table is copied (the supervisor is a
  // copy of the whole worker; copying it again per job was half of the
  // worker's CPU in the end-to-end benchmark). CLONE_VFORK suspends us until
  // the exec or _exit. The child only makes system calls and writes to a
  // pipe, which is what a vfork child may do; without CLONE_SIGHAND its
  // signal dispositions are its own. glibc's clone(), unlike fork(), runs no
  // pthread_atfork handlers (which could take locks another worker thread
  // held when the supervisor was forked).
  struct JobArgs {
    const SupervisorPlan* plan;
    pid_t supervisor;
    int devnull;
  } job_args{&plan, self, devnull};
  alignas(16) static char job_stack[64 * 1024];
  pid_t job = clone(
      [](void* p) -> int {
        auto* a = static_cast<JobArgs*>(p);
        JobChildMain(*a->plan, a->supervisor, a->devnull);
      },
      job_stack + sizeof(job_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &job_args);
  int32_t msg = job > 0 ? job : -errno;
  WriteAll(plan.status_w, &msg, sizeof(msg));
  ::close(plan.out_w);
  ::close(plan.err_w);
  ::close(plan.exec_err_w);
  ::close(devnull);
  if (job < 0) _exit(122);

  bool job_reaped = false;
  bool term_sent = false;
  bool kill_now = false;
  int64_t kill_at = -1;
  int ctrl = plan.ctrl;
  const pid_t spare = plan.sandboxed ? job : -1;
  for (;;) {
    // Reap whatever exited: the job, or orphans re-parented to us.
    for (;;) {
      int st = 0;
      pid_t p = waitpid(-1, &st, WNOHANG);
      if (p > 0) {
        if (p == job && !job_reaped) {
          job_reaped = true;
          int32_t raw = st;
          WriteAll(plan.status_w, &raw, sizeof(raw));
        }
        continue;
      }
      if (p < 0 && errno == ECHILD && job_reaped) _exit(0);  // nothing of the job is left
      break;
    }
    // Once the main process is gone, whatever it left behind is killed.
    if (job_reaped) kill_now = true;
    if (kill_at >= 0 && MonoMillis() >= kill_at) kill_now = true;
    if (kill_now) SignalTree(plan, job, job_reaped, SIGKILL, -1);

    pollfd pfd[2];
    int n = 0;
    if (sfd >= 0) pfd[n++] = {sfd, POLLIN, 0};
    int ctrl_idx = -1;
    if (ctrl >= 0) {
      ctrl_idx = n;
      pfd[n++] = {ctrl, POLLIN, 0};
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
    if (sfd >= 0 && (pfd[0].revents & POLLIN)) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof(si)) > 0) {
      }
    }
    if (ctrl_idx >= 0 && pfd[ctrl_idx].revents) {
      char c[16];
      ssize_t k = ::read(ctrl, c, sizeof(c));
      if (k <= 0) {
        // The worker is gone (or closed its end): nobody will read the
        // result, so end the job now rather than leave it running unowned.
        if (k == 0 || errno != EINTR) {
          ::close(ctrl);
          ctrl = -1;
          kill_now = true;
        }
      } else {
        for (ssize_t i = 0; i < k; ++i) {
          if (c[i] == kCtrlKill) kill_now = true;
          if (c[i] == kCtrlTerm && !term_sent) {
            term_sent = true;
            SignalTree(plan, job, job_reaped, SIGTERM, spare);
            kill_at = MonoMillis() + plan.grace_ms;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Spec checks and sandbox arguments (normal code: runs before the fork).

// Lexically normalizes a manifest cwd; "" for the workspace itself.
Result<std::string> NormalizeCwd(const std::string& cwd) {
  if (cwd.find('\0') != std::string::npos) {
    return InvalidArgumentError("exec: cwd contains a NUL byte; fix the manifest's cwd");
  }
  if (!cwd.empty() && cwd[0] == '/') {
    return InvalidArgumentError("exec: cwd '" + cwd +
                                "' is absolute; a manifest cwd is relative to the job workspace");
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= cwd.size()) {
    size_t j = cwd.find('/', i);
    if (j == std::string::npos) j = cwd.size();
    std::string part = cwd.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) {
        return InvalidArgumentError("exec: cwd '" + cwd +
                                    "' leaves the job workspace; use a path inside it");
      }
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

bool IsUnder(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root == "/" || path[root.size()] == '/'));
}

bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// Resolves argv[0] like execvp, but against the job's PATH.
Result<std::string> ResolveProgram(const std::string& prog,
                                   const std::map<std::string, std::string>& env,
                                   const std::string& cwd_abs) {
  if (prog.find('/') != std::string::npos) {
    return prog[0] == '/' ? prog : cwd_abs + "/" + prog;
  }
  auto it = env.find("PATH");
  std::string path = it == env.end() ? "" : it->second;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find(':', i);
    if (j == std::string::npos) j = path.size();
    std::string dir = path.substr(i, j - i);
    i = j + 1;
    if (dir.empty()) dir = ".";
    if (dir[0] != '/') dir = cwd_abs + "/" + dir;
    std::string cand = dir + "/" + prog;
    if (IsExecutableFile(cand)) return cand;
  }
  return NotFoundError("exec: command '" + prog + "' not found in the job's PATH (" + path +
                       "); use an absolute path or set PATH in the manifest's env");
}

// Arguments that build the sandbox, up to and excluding "--".
std::vector<std::string> BwrapArgs(const std::string& bwrap, bool network,
                                   const std::vector<std::pair<std::string, bool>>& binds,
                                   const std::string& chdir_to) {
  std::vector<std::string> a = {bwrap, "--unshare-all"};
  if (network) a.push_back("--share-net");
  // --cap-drop ALL: a root worker must not hand the job CAP_SYS_ADMIN, which
  // could remount the read-only binds writable.
  for (const char* s : {"--die-with-parent", "--new-session", "--cap-drop", "ALL"}) a.push_back(s);
  a.insert(a.end(), {"--ro-bind", "/usr", "/usr"});
  // Merged-/usr hosts have /bin -> usr/bin etc.: recreate the links, bind real dirs.
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (::lstat(d, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      fs::path target = fs::read_symlink(d, ec);
      if (!ec) a.insert(a.end(), {"--symlink", target.string(), d});
    } else if (S_ISDIR(st.st_mode)) {
      a.insert(a.end(), {"--ro-bind", d, d});
    }
  }
  // A minimal /etc: enough for users, the dynamic linker, TLS roots and
  // Debian's alternatives links; no shadow, no ssh keys, no worker config.
  std::vector<std::string> etc = {"passwd",      "group",      "nsswitch.conf",   "hosts",
                                  "ld.so.cache", "ld.so.conf", "ld.so.conf.d",    "alternatives",
                                  "localtime",   "ssl",        "ca-certificates", "mime.types"};
  if (network) etc.insert(etc.end(), {"resolv.conf", "gai.conf", "services", "protocols"});
  for (const auto& e : etc) a.insert(a.end(), {"--ro-bind-try", "/etc/" + e, "/etc/" + e});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  for (const auto& [path, writable] : binds) {
    a.insert(a.end(), {writable ? "--bind" : "--ro-bind", path, path});
  }
  a.insert(a.end(), {"--chdir", chdir_to});
  return a;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The gatos-supervise program next to the running binary, or "" to fork the
// supervisor instead (tests and tools that run without it still work).
// GATOS_SUPERVISE overrides the path ("" or "fork" forces the fork path).
const std::string& SuperviseBinary() {
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

}  // namespace

// gatos-supervise GRACE_MS SANDBOXED CHDIR EXEC_PATH ARGC ARGV... ENV...
// with the channels on fds 3..7 (stdout, stderr, exec errors, status, control).
int SuperviseMain(int argc, char** argv) {
  if (argc < 6) return 2;
  long argc_job = 0, grace = 0;
  if (!ParseUint(argv[1], &grace) || !ParseUint(argv[5], &argc_job) || 6 + argc_job > argc) return 2;
  static std::vector<pid_t> tracked(kMaxTracked, 0);
  static std::vector<char*> job_argv(argv + 6, argv + 6 + argc_job);
  job_argv.push_back(nullptr);
  static std::vector<char*> job_env(argv + 6 + argc_job, argv + argc);
  job_env.push_back(nullptr);
  SupervisorPlan plan;
  plan.grace_ms = grace;
  plan.sandboxed = std::string(argv[2]) == "1";
  plan.chdir_path = argv[3][0] ? argv[3] : nullptr;
  plan.exec_path = argv[4];
  plan.argv = job_argv.data();
  plan.envp = job_env.data();
  plan.out_w = 3;
  plan.err_w = 4;
  plan.exec_err_w = 5;
  plan.status_w = 6;
  plan.ctrl = 7;
  plan.tracked = tracked.data();
  SupervisorMain(plan);
}

// ---------------------------------------------------------------------------

Result<std::map<std::string, std::string>> BuildJobEnv(const ExecSpec& spec) {
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", spec.workspace},
                                            {"LANG", "C.UTF-8"},
                                            {"TMPDIR", "/tmp"}};
  for (const auto* layer : {&spec.env, &spec.extra_env}) {
    for (const auto& [k, v] : *layer) {
      if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
        return InvalidArgumentError("exec: environment variable name '" + k +
                                    "' is empty or contains '=' or NUL; rename it in the manifest");
      }
      if (v.find('\0') != std::string::npos) {
        // The value itself is not echoed: it may be a credential.
        return InvalidArgumentError("exec: environment variable " + k +
                                    " has a NUL byte in its value; remove it from the manifest");
      }
      env[k] = v;
    }
  }
  if (!spec.output_dir.empty()) env["GATOS_OUTPUT_DIR"] = spec.output_dir;
  return env;
}

Status ProbeSandbox(const std::string& bwrap_path) {
  static std::mutex mu;
  static std::map<std::string, Status> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(bwrap_path);
  if (it != cache.end()) return it->second;

  Status st;
  if (::access(bwrap_path.c_str(), X_OK) != 0) {
    st = FailedPreconditionError("sandbox: bubblewrap not found at " + bwrap_path + " (" +
                                 Errno(errno) + "); install the bubblewrap package");
  } else {
    ExecSpec probe;
    probe.argv = BwrapArgs(bwrap_path, false, {}, "/");
    probe.argv.insert(probe.argv.end(), {"--", "/bin/true"});
    probe.workspace = "/";
    probe.sandbox = ExecSpec::Sandbox::kOff;
    probe.timeout_ms = 10000;
    probe.kill_grace_ms = 100;
    probe.output_cap_bytes = 4096;
    auto ex = Execution::Start(probe);
    Result<ExecResult> res = ex.ok() ? (*ex)->Wait() : Result<ExecResult>(ex.status());
    if (!res.ok()) {
      st = FailedPreconditionError("sandbox: could not run " + bwrap_path + ": " +
                                   res.status().message());
    } else if (res->exit_code != 0) {
      std::string why = res->stderr_data.substr(0, res->stderr_data.find('\n'));
      st = FailedPreconditionError(
          "sandbox: " + bwrap_path + " cannot build a sandbox on this host (" +
          (res->timed_out ? std::string("timed out")
                          : "exit " + std::to_string(res->exit_code.value_or(-1))) +
          (why.empty() ? "" : ": " + why) +
          "); user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone / "
          "user.max_user_namespaces) or a container profile blocks mounts");
    }
  }
  cache.emplace(bwrap_path, st);
  return st;
}

struct Execution::Impl {
  // Storage for the exec'd strings (must outlive the fork).
  std::vector<std::string> exec_argv, exec_env;
  std::string exec_path, chdir_path;
  std::vector<pid_t> tracked;

  pid_t supervisor = -1;
  pid_t job = -1;
  Fd out_r, err_r, status_r, ctrl;
  int64_t timeout_ms = 0;
  size_t cap = 0;
  int64_t started_mono = 0;
  ExecResult result;
  std::atomic<bool> stop_requested{false};
  std::mutex ctrl_mu;  // serializes writes to ctrl from Stop() and Wait()
  bool waited = false;
  bool supervisor_reaped = false;

  void Send(char c) {
    std::lock_guard<std::mutex> lock(ctrl_mu);
    if (ctrl.get() < 0) return;
    // MSG_NOSIGNAL: the supervisor may already be gone; no SIGPIPE for the worker.
    while (::send(ctrl.get(), &c, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }

  void ReapSupervisor() {
    if (supervisor_reaped || supervisor <= 0) return;
    int st;
    while (waitpid(supervisor, &st, 0) < 0 && errno == EINTR) {
    }
    supervisor_reaped = true;
  }

  // Reads what is available on one output pipe; false at EOF or error.
  bool Drain(Fd& fd, std::string* data, bool* truncated) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n > 0) {
        size_t room = cap > data->size() ? cap - data->size() : 0;
        size_t take = static_cast<size_t>(n) < room ? static_cast<size_t>(n) : room;
        data->append(buf, take);
        if (take < static_cast<size_t>(n)) *truncated = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      fd.Reset();
      return false;
    }
  }
};

Execution::Execution(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Execution::~Execution() {
  if (!impl_) return;
  if (!impl_->waited && impl_->supervisor > 0) {
    impl_->Send(kCtrlKill);
    Wait().status().IgnoreError();
  }
  impl_->ReapSupervisor();
}

pid_t Execution::pid() const { return impl_->job; }

void Execution::Stop() {
  if (impl_->stop_requested.exchange(true)) return;
  impl_->Send(kCtrlTerm);
}

Result<std::unique_ptr<Execution>> Execution::Start(const ExecSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgumentError("exec: empty command; the manifest must name a command");
  }
  for (const auto& a : spec.argv) {
    if (a.find('\0') != std::string::npos) {
      return InvalidArgumentError("exec: a command argument contains a NUL byte");
    }
  }
  if (spec.workspace.empty() || spec.workspace[0] != '/') {
    return InvalidArgumentError("exec: workspace '" + spec.workspace +
                                "' must be an absolute path to a directory the worker created");
  }
  std::error_code ec;
  if (!fs::is_directory(spec.workspace, ec)) {
    return InvalidArgumentError("exec: workspace " + spec.workspace +
                                " is not an existing directory; create it before Start");
  }
  if (spec.timeout_ms < 0 || spec.kill_grace_ms < 0) {
    return InvalidArgumentError("exec: timeout_ms and kill_grace_ms must be >= 0");
  }
  for (const auto& b : spec.ro_binds) {
    if (b.empty() || b[0] != '/') {
      return InvalidArgumentError("exec: read-only bind '" + b + "' must be an absolute path");
    }
  }
  for (const auto& b : spec.rw_binds) {
    if (b.empty() || b[0] != '/' || !fs::is_directory(b, ec)) {
      return InvalidArgumentError("exec: writable bind '" + b + "' must be an existing absolute directory");
    }
  }
  GATOS_ASSIGN_OR_RETURN(std::string rel_cwd, NormalizeCwd(spec.cwd));

  auto impl = std::make_unique<Impl>();
  std::string ws_real = fs::canonical(spec.workspace, ec).string();
  if (ec)
    return InternalError("exec: cannot resolve workspace " + spec.workspace + ": " + ec.message());
  std::string cwd_abs = rel_cwd.empty() ? spec.workspace : spec.workspace + "/" + rel_cwd;
  if (!rel_cwd.empty()) {
    fs::create_directories(cwd_abs, ec);
    if (ec) {
      return InvalidArgumentError("exec: cannot create cwd " + cwd_abs + ": " + ec.message() +
                                  "; check the manifest's cwd");
    }
    // A symlink inside the workspace could still point out of it.
    std::string real = fs::canonical(cwd_abs, ec).string();
    if (ec || !IsUnder(real, ws_real)) {
      return InvalidArgumentError("exec: cwd '" + spec.cwd +
                                  "' resolves outside the job workspace; use a path inside it");
    }
  }
  ExecSpec eff = spec;
  if (!spec.output_dir.empty()) {
    eff.output_dir = fs::absolute(spec.output_dir, ec).lexically_normal().string();
    if (!eff.output_dir.empty() && eff.output_dir.size() > 1 && eff.output_dir.back() == '/') {
      eff.output_dir.pop_back();
    }
    fs::create_directories(eff.output_dir, ec);
    if (ec) {
      return InternalError("exec: cannot create output dir " + eff.output_dir + ": " +
                           ec.message() + "; check the worker's state-dir permissions");
    }
  }
  GATOS_ASSIGN_OR_RETURN(auto env, BuildJobEnv(eff));
  GATOS_ASSIGN_OR_RETURN(std::string program, ResolveProgram(spec.argv[0], env, cwd_abs));

  // Sandbox decision.
  bool sandboxed = false;
  if (spec.sandbox != ExecSpec::Sandbox::kOff) {
    Status probe = ProbeSandbox(spec.bwrap_path);
    if (probe.ok()) {
      sandboxed = true;
    } else if (spec.sandbox == ExecSpec::Sandbox::kRequire) {
      return FailedPreconditionError(probe.message() +
                                     "; the policy requires a sandbox, so the job was not started");
    } else {
      impl->result.sandbox_note = "running unsandboxed: " + probe.message();
    }
  }
  impl->result.sandboxed = sandboxed;

  if (sandboxed) {
    std::vector<std::pair<std::string, bool>> binds = {{spec.workspace, true}};
    if (!eff.output_dir.empty()) binds.push_back({eff.output_dir, true});
    for (const auto& b : spec.ro_binds) binds.push_back({b, false});
    for (const auto& b : spec.rw_binds) binds.push_back({b, true});
    impl->exec_argv = BwrapArgs(spec.bwrap_path, spec.allow_network, binds, cwd_abs);
    impl->exec_argv.push_back("--");
    impl->exec_argv.push_back(program);
    impl->exec_path = spec.bwrap_path;
  } else {
    impl->exec_argv = {program};
    impl->exec_path = program;
  }
  impl->exec_argv.insert(impl->exec_argv.end(), spec.argv.begin() + 1, spec.argv.end());
  for (const auto& [k, v] : env) impl->exec_env.push_back(k + "=" + v);
  impl->chdir_path = cwd_abs;
  impl->tracked.assign(kMaxTracked, 0);
  std::vector<char*> argv_c = CStrings(impl->exec_argv);
  std::vector<char*> env_c = CStrings(impl->exec_env);

  Fd out_w, err_w, status_w, exec_err_r, exec_err_w;
  GATOS_RETURN_IF_ERROR(MakePipe(&impl->out_r, &out_w, "stdout"));
  GATOS_RETURN_IF_ERROR(MakePipe(&impl->err_r, &err_w, "stderr"));
  GATOS_RETURN_IF_ERROR(MakePipe(&impl->status_r, &status_w, "supervisor status"));
  GATOS_RETURN_IF_ERROR(MakePipe(&exec_err_r, &exec_err_w, "exec errors"));
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    return InternalError("exec: socketpair failed: " + Errno(errno) +
                         "; check the worker's open-file limit (ulimit -n)");
  }
  impl->ctrl = Fd(sp[0]);
  Fd ctrl_child(sp[1]);

  SupervisorPlan plan;
  plan.exec_path = impl->exec_path.c_str();
  plan.argv = argv_c.data();
  plan.envp = env_c.data();
  plan.chdir_path = impl->chdir_path.c_str();
  plan.sandboxed = sandboxed;
  plan.grace_ms = spec.kill_grace_ms;
  plan.out_w = out_w.get();
  plan.err_w = err_w.get();
  plan.exec_err_w = exec_err_w.get();
  plan.status_w = status_w.get();
  plan.ctrl = ctrl_child.get();
  plan.tracked = impl->tracked.data();

  impl->timeout_ms = spec.timeout_ms;
  impl->cap = spec.output_cap_bytes;
  impl->result.started_ms = UnixMillis();
  impl->started_mono = MonoMillis();
  pid_t pid;
  const std::string& supervise = SuperviseBinary();
  if (!supervise.empty()) {
    // vfork + exec of the small gatos-supervise program: no copy of the
    // worker's memory, and no copy-on-write faults in the worker for as long
    // as the job runs (both were half of the worker's CPU per job).
    std::vector<std::string> sargs = {supervise, std::to_string(plan.grace_ms),
                                      plan.sandboxed ? "1" : "0", impl->chdir_path,
                                      impl->exec_path, std::to_string(impl->exec_argv.size())};
    sargs.insert(sargs.end(), impl->exec_argv.begin(), impl->exec_argv.end());
    sargs.insert(sargs.end(), impl->exec_env.begin(), impl->exec_env.end());
    std::vector<char*> sargv = CStrings(sargs);
    struct SpawnArgs {
      int fds[5];
      const char* path;
      char* const* argv;
    } sa{{plan.out_w, plan.err_w, plan.exec_err_w, plan.status_w, plan.ctrl}, supervise.c_str(),
         sargv.data()};
    std::vector<char> stack(64 * 1024);
    // The child shares our memory until execve (CLONE_VM|CLONE_VFORK): it
    // only makes system calls. Channels land on fds 3..7 (kSuperviseFds).
    pid = clone(
        [](void* p) -> int {
          auto* a = static_cast<SpawnArgs*>(p);
          int hi[5];
          for (int i = 0; i < 5; ++i) hi[i] = fcntl(a->fds[i], F_DUPFD, 100);
          for (int i = 0; i < 5; ++i) {
            if (hi[i] < 0 || dup2(hi[i], 3 + i) < 0) _exit(126);
          }
          char* const empty_env[] = {nullptr};
          execve(a->path, a->argv, empty_env);
          _exit(127);
        },
        stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &sa);
    if (pid < 0) {
      return InternalError("exec: cannot start " + supervise + ": " + Errno(errno) +
                           "; the host may be out of processes or memory");
    }
  } else {
    pid = fork();
    if (pid < 0) {
      return InternalError("exec: fork failed: " + Errno(errno) +
                           "; the host may be out of processes or memory");
    }
    if (pid == 0) SupervisorMain(plan);
  }
  impl->supervisor = pid;
  out_w.Reset();
  err_w.Reset();
  status_w.Reset();
  exec_err_w.Reset();
  ctrl_child.Reset();

  auto read_i32 = [](int fd, int32_t* v) {
    size_t got = 0;
    char* p = reinterpret_cast<char*>(v);
    while (got < sizeof(*v)) {
      ssize_t n = ::read(fd, p + got, sizeof(*v) - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  };
  int32_t job_pid = 0;
  bool have_pid = read_i32(impl->status_r.get(), &job_pid);
  // Blocks until the job exec'd (CLOEXEC closes the pipe) or reported why not.
  int32_t exec_errno = 0;
  bool exec_failed = read_i32(exec_err_r.get(), &exec_errno);
  Execution ex(std::move(impl));  // from here on, the destructor reaps
  if (!have_pid || job_pid <= 0) {
    return InternalError("exec: the supervisor could not fork the job (" +
                         (have_pid ? Errno(-job_pid) : std::string("no report")) +
                         "); the host may be out of processes");
  }
  ex.impl_->job = job_pid;
  if (exec_failed) {
    ex.Wait().status().IgnoreError();
    std::string what = "exec: cannot run '" + program + "': " + Errno(exec_errno);
    if (exec_errno == ENOENT) return NotFoundError(what + "; check the manifest's command");
    if (exec_errno == EACCES) {
      return PermissionDeniedError(what + "; the file must be executable by the worker");
    }
    return InvalidArgumentError(what + "; check the manifest's command and cwd");
  }
  auto out = std::unique_ptr<Execution>(new Execution(std::move(ex.impl_)));
  return out;
}

Result<ExecResult> Execution::Wait() {
  Impl& m = *impl_;
  if (m.waited) return FailedPreconditionError("exec: Wait() was already called for this job");
  m.waited = true;
  fcntl(m.out_r.get(), F_SETFL, O_NONBLOCK);
  fcntl(m.err_r.get(), F_SETFL, O_NONBLOCK);
  bool have_status = false;
  int32_t raw = 0;
  size_t raw_got = 0;
  bool timeout_fired = false;
  while (m.status_r.get() >= 0) {
    pollfd pfd[3];
    int n = 0;
    int out_i = -1, err_i = -1;
    if (m.out_r.get() >= 0) {
      out_i = n;
      pfd[n++] = {m.out_r.get(), POLLIN, 0};
    }
    if (m.err_r.get() >= 0) {
      err_i = n;
      pfd[n++] = {m.err_r.get(), POLLIN, 0};
    }
    int st_i = n;
    pfd[n++] = {m.status_r.get(), POLLIN, 0};
    int timeout = -1;
    if (m.timeout_ms > 0 && !timeout_fired && !have_status) {
      int64_t left = m.started_mono + m.timeout_ms - MonoMillis();
      if (left <= 0) {
        timeout_fired = true;
        m.result.timed_out = true;
        m.Send(kCtrlTerm);
      } else {
        timeout = static_cast<int>(left > 1000000 ? 1000000 : left);
      }
    }
    int r = poll(pfd, static_cast<nfds_t>(n), timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      return InternalError("exec: poll failed: " + Errno(errno));
    }
    if (out_i >= 0 && pfd[out_i].revents)
      m.Drain(m.out_r, &m.result.stdout_data, &m.result.stdout_truncated);
    if (err_i >= 0 && pfd[err_i].revents)
      m.Drain(m.err_r, &m.result.stderr_data, &m.result.stderr_truncated);
    if (pfd[st_i].revents) {
      char* p = reinterpret_cast<char*>(&raw);
      ssize_t k = ::read(m.status_r.get(), p + raw_got, sizeof(raw) - raw_got);
      if (k > 0) {
        raw_got += static_cast<size_t>(k);
        if (raw_got == sizeof(raw)) {
          have_status = true;
          // Stop() after the job ended by itself does not mark it stopped.
          m.result.stopped = m.stop_requested.load();
          m.result.finished_ms = UnixMillis();
          raw_got = 0;
        }
      } else if (k == 0 || errno != EINTR) {
        m.status_r.Reset();  // the supervisor exited: the tree is gone
      }
    }
  }
  m.ReapSupervisor();
  // Every writer is dead; collect what is still buffered in the pipes.
  if (m.out_r.get() >= 0) m.Drain(m.out_r, &m.result.stdout_data, &m.result.stdout_truncated);
  if (m.err_r.get() >= 0) m.Drain(m.err_r, &m.result.stderr_data, &m.result.stderr_truncated);
  m.out_r.Reset();
  m.err_r.Reset();
  {
    std::lock_guard<std::mutex> lock(m.ctrl_mu);
    m.ctrl.Reset();
  }
  if (!have_status) {
    return InternalError(
        "exec: the job supervisor exited without reporting the job's status; "
        "it may have been killed from outside the worker");
  }
  if (WIFEXITED(raw)) {
    m.result.exit_code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    m.result.signal = WTERMSIG(raw);
  }
  return m.result;
}

}  // namespace gatos
