#include "gatos/sys/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace gatos {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(int err) { return std::strerror(err); }

// A descriptor at 3 or above, close-on-exec, so that dup2 onto 0..2 in the
// child always makes a fresh descriptor without FD_CLOEXEC.
UniqueFd High(int fd) {
  if (fd < 0 || fd >= 3) return UniqueFd(fd);
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int err = errno;
  ::close(fd);
  errno = err;
  return UniqueFd(high);
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// What the child tells the parent through the memory they share until execve.
enum class Step : int { kNone, kSignals, kParentGone, kProcessGroup, kRedirect, kExtraFds, kChdir, kExec };

const char* StepName(Step s) {
  switch (s) {
    case Step::kSignals: return "resetting signals";
    case Step::kParentGone: return "the parent ended while it started";
    case Step::kProcessGroup: return "setpgid";
    case Step::kRedirect: return "redirecting stdin/stdout/stderr";
    case Step::kExtraFds: return "passing descriptors 3 and up";
    case Step::kChdir: return "chdir";
    case Step::kExec: return "execve";
    case Step::kNone: break;
  }
  return "start";
}

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;        // nullptr: stay
  int source[3];          // dup2'd onto 0, 1, 2; -1: leave as is
  bool err_to_out;        // dup2(1, 2) after the others
  const int* extra;       // dup2'd onto 3, 4, ...; each at or above 3 + n_extra
  int n_extra;
  bool new_group;
  int death_signal;
  pid_t parent;
  // Written by the child, read by the parent once the child has exec'd or exited.
  volatile int failed_step;
  volatile int failed_errno;
};

[[noreturn]] void ChildFail(ChildPlan* plan, Step step) {
  plan->failed_errno = errno;
  plan->failed_step = static_cast<int>(step);
  _exit(127);
}

// Runs in the child, on its own stack, sharing the parent's memory: system
// calls only.
int ChildMain(void* arg) {
  auto* plan = static_cast<ChildPlan*>(arg);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
  if (plan->death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, plan->death_signal) != 0) ChildFail(plan, Step::kSignals);
    if (getppid() != plan->parent) ChildFail(plan, Step::kParentGone);
  }
  if (plan->new_group && setpgid(0, 0) != 0) ChildFail(plan, Step::kProcessGroup);
  for (int target = 0; target < 3; ++target) {
    if (plan->source[target] >= 0 && dup2(plan->source[target], target) < 0) {
      ChildFail(plan, Step::kRedirect);
    }
  }
  if (plan->err_to_out && dup2(1, 2) < 0) ChildFail(plan, Step::kRedirect);
  // The sources sit above every target, so no dup2 here overwrites a source
  // still to be used; dup2 clears close-on-exec on the copy.
  for (int i = 0; i < plan->n_extra; ++i) {
    if (dup2(plan->extra[i], 3 + i) < 0) ChildFail(plan, Step::kExtraFds);
  }
#ifdef SYS_close_range
  // Only 0, 1, 2 and the extra fds survive execve (best effort on kernels
  // before 5.11; every other descriptor of ours is close-on-exec anyway).
  syscall(SYS_close_range, 3u + static_cast<unsigned>(plan->n_extra), ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
#endif
  if (plan->cwd && chdir(plan->cwd) != 0) ChildFail(plan, Step::kChdir);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(plan->path, plan->argv, plan->envp);
  ChildFail(plan, Step::kExec);
}

// The path of `name` as execvp would find it, in the child's PATH (or ours).
Result<std::string> FindProgram(const std::string& name, const Environment& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path;
  if (auto p = env.Get("PATH")) {
    path = *p;
  } else if (const char* own = std::getenv("PATH")) {
    path = own;
  } else {
    path = "/usr/local/bin:/usr/bin:/bin";
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return NotFoundError("cannot start '" + name +
                       "': no such program in any directory of PATH; install it or give its full path");
}

// Opens the parent's side of one redirection. `target` is 0, 1 or 2.
Status OpenSource(const Stdio& s, int target, UniqueFd* child_end, UniqueFd* parent_end) {
  const bool input = target == 0;
  switch (s.kind) {
    case Stdio::Kind::kInherit:
    case Stdio::Kind::kStdout:
      return OkStatus();
    case Stdio::Kind::kNull:
      *child_end = High(::open("/dev/null", (input ? O_RDONLY : O_WRONLY) | O_CLOEXEC));
      if (!*child_end) return UnavailableError("cannot open /dev/null: " + Errno(errno));
      return OkStatus();
    case Stdio::Kind::kFile: {
      if (HasNul(s.path)) return InvalidArgumentError("a redirection path contains a NUL byte");
      int flags = input ? O_RDONLY : O_WRONLY | O_CREAT | (s.append ? O_APPEND : O_TRUNC);
      *child_end = High(::open(s.path.c_str(), flags | O_CLOEXEC, 0644));
      if (!*child_end) {
        return UnavailableError("cannot open " + s.path + " for the child's " +
                                (input ? "stdin" : target == 1 ? "stdout" : "stderr") + ": " +
                                Errno(errno));
      }
      return OkStatus();
    }
    case Stdio::Kind::kPipe: {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) return UnavailableError("pipe: " + Errno(errno));
      UniqueFd read_end = High(fds[0]), write_end = High(fds[1]);
      if (!read_end || !write_end) return UnavailableError("pipe: " + Errno(errno));
      *child_end = std::move(input ? read_end : write_end);
      *parent_end = std::move(input ? write_end : read_end);
      return OkStatus();
    }
    case Stdio::Kind::kFd:
      *child_end = UniqueFd(s.fd < 0 ? -1 : ::fcntl(s.fd, F_DUPFD_CLOEXEC, 3));
      if (!*child_end) return InvalidArgumentError("cannot use fd " + std::to_string(s.fd) + ": " + Errno(errno));
      return OkStatus();
  }
  return InternalError("unknown Stdio kind");
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return static_cast<int>(fd);
#else
  return -1;
#endif
}

}  // namespace

// ---- UniqueFd ----

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ---- Environment ----

Environment Environment::Current() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.vars_.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

Environment Environment::CurrentWith(const std::map<std::string, std::string>& overrides) {
  Environment env = Current();
  for (const auto& [k, v] : overrides) env.Set(k, v);
  return env;
}

Environment& Environment::Set(std::string name, std::string value) {
  vars_[std::move(name)] = std::move(value);
  return *this;
}

Environment& Environment::Unset(std::string_view name) {
  auto it = vars_.find(name);
  if (it != vars_.end()) vars_.erase(it);
  return *this;
}

std::optional<std::string> Environment::Get(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Environment::ToStrings() const {
  std::vector<std::string> out;
  out.reserve(vars_.size());
  for (const auto& [k, v] : vars_) out.push_back(k + "=" + v);
  return out;
}

// ---- SpawnOptions ----

SpawnOptions SpawnOptions::WithLog(const std::string& log_path, int parent_death_signal) {
  SpawnOptions o;
  o.env = Environment::Current();
  o.out = Stdio::File(log_path);
  o.err = Stdio::Stdout();
  o.parent_death_signal = parent_death_signal;
  return o;
}

// ---- ExitStatus ----

std::string ExitStatus::ToString() const {
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (abbrev ? " (SIG" + std::string(abbrev) + ")" : std::string());
  }
  if (code >= 0) return "exited with code " + std::to_string(code);
  return "status unknown";
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus s;
  if (WIFEXITED(wait_status)) s.code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) s.signal = WTERMSIG(wait_status);
  return s;
}

// ---- Process ----

Result<Process> Process::Spawn(const std::vector<std::string>& argv_in, const SpawnOptions& options) {
  if (argv_in.empty() || argv_in[0].empty()) {
    return InvalidArgumentError("cannot start a process without a program name (empty argv)");
  }
  const std::string& name = argv_in[0];
  for (const auto& a : argv_in) {
    if (HasNul(a)) return InvalidArgumentError("cannot start '" + name + "': an argument contains a NUL byte");
  }
  std::vector<std::string> env_strings = options.env.ToStrings();
  for (const auto& e : env_strings) {
    if (HasNul(e)) {
      // Only the variable's name: its value may be a secret.
      return InvalidArgumentError("cannot start '" + name + "': environment variable " +
                                  e.substr(0, e.find('=')) + " contains a NUL byte");
    }
  }
  if (HasNul(options.cwd)) return InvalidArgumentError("cannot start '" + name + "': the cwd contains a NUL byte");
  if (options.in.kind == Stdio::Kind::kStdout || options.out.kind == Stdio::Kind::kStdout) {
    return InvalidArgumentError("Stdio::Stdout() is for stderr only");
  }
  if (options.extra_fds.size() > SpawnOptions::kMaxExtraFds) {
    return InvalidArgumentError("cannot start '" + name + "': " + std::to_string(options.extra_fds.size()) +
                                " extra descriptors; at most " + std::to_string(SpawnOptions::kMaxExtraFds));
  }
  Result<std::string> path = FindProgram(name, options.env);
  if (!path.ok()) return path.status();

  // Copies of the extra fds above the numbers they go to (close-on-exec
  // here, so that a child started meanwhile by another thread gets none).
  const int n_extra = static_cast<int>(options.extra_fds.size());
  std::vector<UniqueFd> extra_copies;
  std::vector<int> extra;
  extra_copies.reserve(options.extra_fds.size());
  for (int fd : options.extra_fds) {
    const int copy = fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 3 + n_extra);
    if (copy < 0) {
      return InvalidArgumentError("cannot start '" + name + "': cannot pass fd " + std::to_string(fd) +
                                  ": " + Errno(fd < 0 ? EBADF : errno));
    }
    extra_copies.emplace_back(copy);
    extra.push_back(copy);
  }

  Process p;
  UniqueFd child_end[3];
  UniqueFd* parent_end[3] = {&p.stdin_pipe_, &p.stdout_pipe_, &p.stderr_pipe_};
  const Stdio* stdio[3] = {&options.in, &options.out, &options.err};
  for (int t = 0; t < 3; ++t) {
    Status s = OpenSource(*stdio[t], t, &child_end[t], parent_end[t]);
    if (!s.ok()) return s.WithContext("cannot start '" + name + "'");
  }

  std::vector<std::string> argv_strings = argv_in;
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env_strings);
  ChildPlan plan{};
  plan.path = path->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  for (int t = 0; t < 3; ++t) plan.source[t] = child_end[t].get();
  plan.err_to_out = options.err.kind == Stdio::Kind::kStdout;
  plan.extra = extra.data();
  plan.n_extra = n_extra;
  plan.new_group = options.new_process_group;
  plan.death_signal = options.parent_death_signal;
  plan.parent = getpid();
  plan.failed_step = static_cast<int>(Step::kNone);
  plan.failed_errno = 0;

  // The child starts with every signal blocked, so none of our handlers can
  // run in it before it has reset them to the defaults.
  std::vector<char> stack(64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(ChildMain, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    return UnavailableError("cannot start '" + name + "': clone: " + Errno(clone_errno) +
                            "; the host may be out of processes or memory");
  }
  if (plan.failed_step != static_cast<int>(Step::kNone)) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    const Step step = static_cast<Step>(plan.failed_step);
    const int err = plan.failed_errno;
    std::string what = "cannot start '" + name + "': " + StepName(step);
    if (step == Step::kChdir) what += " to " + options.cwd;
    what += ": " + Errno(err);
    if (step == Step::kExec && (err == ENOENT || err == EACCES || err == ENOEXEC)) {
      what += "; check that " + *path + " exists and is an executable program";
    }
    return err == ENOENT && step == Step::kExec ? NotFoundError(what) : UnavailableError(what);
  }
  p.pid_ = pid;
  p.reaped_ = false;
  p.own_group_ = options.new_process_group;
  p.name_ = name;
  p.pidfd_.reset(OpenPidfd(pid));
  return p;
}

Process::~Process() { KillAndReap(); }

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  KillAndReap();
  pid_ = other.pid_;
  reaped_ = other.reaped_;
  own_group_ = other.own_group_;
  name_ = std::move(other.name_);
  pidfd_ = std::move(other.pidfd_);
  stdin_pipe_ = std::move(other.stdin_pipe_);
  stdout_pipe_ = std::move(other.stdout_pipe_);
  stderr_pipe_ = std::move(other.stderr_pipe_);
  status_ = std::move(other.status_);
  other.pid_ = -1;
  other.reaped_ = true;
  other.status_.reset();
  return *this;
}

bool Process::Reaped(int wait_status) {
  reaped_ = true;
  status_ = ExitStatus::FromWaitStatus(wait_status);
  pidfd_.reset();
  return true;
}

std::optional<ExitStatus> Process::TryWait() {
  if (reaped_) return status_;
  int st = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    Reaped(st);
  } else if (r < 0) {  // ECHILD: someone else reaped it
    reaped_ = true;
    status_ = ExitStatus{};
    pidfd_.reset();
  }
  return reaped_ ? status_ : std::nullopt;
}

bool Process::running() { return !reaped_ && !TryWait(); }

ExitStatus Process::Wait() {
  if (reaped_) return status_.value_or(ExitStatus{});
  int st = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &st, 0);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    Reaped(st);
  } else {
    reaped_ = true;
    status_ = ExitStatus{};
    pidfd_.reset();
  }
  return *status_;
}

std::optional<ExitStatus> Process::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (auto st = TryWait()) return st;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (pidfd_) {
      pollfd pfd{pidfd_.get(), POLLIN, 0};
      int ms = static_cast<int>(std::min<int64_t>(left.count() + 1, INT_MAX));
      if (poll(&pfd, 1, ms) < 0 && errno != EINTR) pidfd_.reset();  // fall back to sleeping
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
    }
  }
}

bool Process::Signal(int signo) { return !reaped_ && pid_ > 0 && ::kill(pid_, signo) == 0; }

bool Process::SignalGroup(int signo) {
  return !reaped_ && own_group_ && pid_ > 0 && ::kill(-pid_, signo) == 0;
}

ExitStatus Process::Stop(int signo, std::chrono::milliseconds grace) {
  if (reaped_) return status_.value_or(ExitStatus{});
  Signal(signo);
  if (auto st = WaitFor(grace)) return *st;
  KillAndReap();
  return *status_;
}

ExitStatus Process::Kill() {
  KillAndReap();
  return status_.value_or(ExitStatus{});
}

void Process::KillAndReap() {
  if (reaped_ || pid_ <= 0) return;
  if (!(own_group_ && ::kill(-pid_, SIGKILL) == 0)) ::kill(pid_, SIGKILL);
  Wait();
}

pid_t Process::Detach() {
  pid_t pid = reaped_ ? -1 : pid_;
  pid_ = -1;
  reaped_ = true;
  pidfd_.reset();
  return pid;
}

// ---- RunAndCapture ----

Result<Captured> RunAndCapture(const std::vector<std::string>& argv, SpawnOptions options,
                               std::string_view input, std::chrono::milliseconds timeout) {
  options.in = input.empty() ? Stdio::Null() : Stdio::Pipe();
  options.out = Stdio::Pipe();
  const bool merged = options.err.kind == Stdio::Kind::kStdout;
  if (!merged) options.err = Stdio::Pipe();
  Result<Process> started = Process::Spawn(argv, options);
  if (!started.ok()) return started.status();
  Process& p = *started;

  // A child that closes its stdin early must not kill us with SIGPIPE: block
  // it in this thread while we write, and take back a SIGPIPE we caused.
  sigset_t pipe_set, old_mask, pending_before;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending_before);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  if (p.stdin_pipe()) fcntl(p.stdin_pipe().get(), F_SETFL, O_NONBLOCK);

  Captured c;
  size_t in_off = 0;
  const auto deadline = Clock::now() + timeout;
  while (p.stdout_pipe() || p.stderr_pipe() || p.stdin_pipe()) {
    pollfd fds[3];
    UniqueFd* owner[3];
    nfds_t n = 0;
    auto add = [&](UniqueFd& fd, short events) {
      if (!fd) return;
      fds[n] = {fd.get(), events, 0};
      owner[n++] = &fd;
    };
    add(p.stdout_pipe(), POLLIN);
    add(p.stderr_pipe(), POLLIN);
    add(p.stdin_pipe(), POLLOUT);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      c.timed_out = true;
      break;
    }
    int rc = poll(fds, n, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (rc <= 0) continue;
    for (nfds_t i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (owner[i] == &p.stdin_pipe()) {
        ssize_t w = ::write(fds[i].fd, input.data() + in_off, input.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || in_off == input.size()) p.stdin_pipe().reset();
        continue;
      }
      char buf[65536];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (owner[i] == &p.stdout_pipe() ? c.out : c.err).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        owner[i]->reset();
      }
    }
  }
  p.stdin_pipe().reset();
  p.stdout_pipe().reset();
  p.stderr_pipe().reset();
  // A child may close its outputs and go on running: the timeout still holds.
  std::optional<ExitStatus> st;
  if (!c.timed_out) {
    st = p.WaitFor(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                            std::chrono::milliseconds(0)));
  }
  c.timed_out = !st;
  c.status = st ? *st : p.Kill();
  sigset_t pending_now;
  sigpending(&pending_now);
  if (sigismember(&pending_now, SIGPIPE) && !sigismember(&pending_before, SIGPIPE)) {
    timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return c;
}

}  // namespace gatos
