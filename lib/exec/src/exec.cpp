// Job execution, worker side: spec checks, the sandbox decision, bubblewrap
// arguments, starting a per-job supervisor (Execution::Start) and the
// Execution object that follows a job on any supervisor. The supervisor
// side is supervise_main.cpp and slot_main.cpp; the long-lived slots are
// launcher.cpp. Process model: gatos/exec.h and docs/worker-execution.md.
#include "gatos/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

#include "exec_internal.h"
#include "gatos/encoding.h"
#include "gatos/process.h"
#include "job_seccomp.h"
#include "proc_scan.h"
#include "supervise_main.h"

namespace gatos {
namespace {

namespace fs = std::filesystem;
using namespace exec_internal;  // NOLINT: this file implements them

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

// Resolves argv[0] like execvp, but against the job's PATH. Candidates are
// paths as the job sees them; `to_host` maps one to where it is on the host
// for the check (binds may show a host directory at another path).
template <typename ToHost>
Result<std::string> ResolveProgram(const std::string& prog,
                                   const std::map<std::string, std::string>& env,
                                   const std::string& cwd_abs, ToHost to_host) {
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
    if (IsExecutableFile(to_host(cand))) return cand;
  }
  return NotFoundError("exec: command '" + prog + "' not found in the job's PATH (" + path +
                       "); use an absolute path or set PATH in the manifest's env");
}

// Lexically normal absolute path without a trailing '/'.
std::string CleanPath(const std::string& p) {
  std::string out = fs::path(p).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// The spec's binds (ro_binds, rw_binds, then binds), checked and normalized.
Result<std::vector<BindPlan>> CheckBinds(const ExecSpec& spec, const std::string& workspace,
                                         const std::string& output_dir) {
  struct Entry {
    std::string source, destination;
    bool writable;
    const char* what;
  };
  std::vector<Entry> all;
  for (const auto& b : spec.ro_binds) all.push_back({b, b, false, "read-only bind"});
  for (const auto& b : spec.rw_binds) all.push_back({b, b, true, "writable bind"});
  for (const auto& b : spec.binds) {
    all.push_back({b.source, b.destination.empty() ? b.source : b.destination, b.writable, "bind"});
  }
  std::vector<BindPlan> out;
  for (const auto& e : all) {
    const std::string what = std::string("exec: ") + e.what + " '" + e.source + "'";
    if (e.source.empty() || e.source[0] != '/' || e.source.find('\0') != std::string::npos) {
      return InvalidArgumentError(what + " must be an absolute path");
    }
    struct stat st;
    if (::stat(e.source.c_str(), &st) != 0) {
      return InvalidArgumentError(what + " does not exist (" + Errno(errno) +
                                  "); binds show existing host paths");
    }
    if (e.writable && !S_ISDIR(st.st_mode) && std::string(e.what) == "writable bind") {
      return InvalidArgumentError(what + " must be an existing absolute directory");
    }
    BindPlan p;
    p.source = CleanPath(e.source);
    p.writable = e.writable;
    p.is_dir = S_ISDIR(st.st_mode);
    if (e.destination.empty() || e.destination[0] != '/' ||
        e.destination.find('\0') != std::string::npos) {
      return InvalidArgumentError(what + ": destination '" + e.destination +
                                  "' must be an absolute path");
    }
    p.destination = CleanPath(e.destination);
    const std::string& d = p.destination;
    if (d == "/" || IsUnder(d, "/proc") || IsUnder(d, "/dev")) {
      return InvalidArgumentError(what + ": destination " + d +
                                  " would replace the sandbox's /, /proc or /dev; pick another path");
    }
    for (const std::string& job_dir : {workspace, output_dir}) {
      if (!job_dir.empty() && IsUnder(job_dir, d)) {
        return InvalidArgumentError(what + ": destination " + d + " would hide the job's " +
                                    (job_dir == workspace ? "workspace " : "output dir ") + job_dir);
      }
    }
    for (const auto& q : out) {
      if (q.destination == d) {
        return InvalidArgumentError(what + ": destination " + d + " is already bound from " +
                                    q.source);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

// The nodes bubblewrap's --dev binds from the host's /dev.
constexpr const char* kDevNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------

namespace exec_internal {

std::vector<std::string> BwrapArgs(const std::string& bwrap, bool network,
                                   const std::vector<BindPlan>& binds, const std::string& chdir_to,
                                   const PrivateDevices* devices, bool seccomp) {
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
  // bwrap leaves /proc/sys writable: a job that is uid 0 (a root worker)
  // could set global sysctls without any capability. Sysctl files show the
  // reader's network namespace, so a read-only bind of the host's is exact.
  // And /proc itself read-only: its entries (meminfo, cpuinfo ...) are the
  // kernel's, shared by every proc mount, and their owner (such a job) could
  // chmod or chown them for the whole host.
  a.insert(a.end(), {"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--remount-ro",
                     "/proc", "--dev", "/dev"});
  if (devices) {
    for (const std::string& n : devices->names()) {
      a.insert(a.end(), {"--dev-bind", devices->dir() + "/" + n, "/dev/" + n});
    }
  }
  a.insert(a.end(), {"--tmpfs", "/tmp"});
  for (const auto& b : binds) {
    a.insert(a.end(), {b.writable ? "--bind" : "--ro-bind", b.source, b.destination});
  }
  a.insert(a.end(), {"--chdir", chdir_to});
  if (seccomp) a.insert(a.end(), {"--seccomp", std::to_string(kBwrapSeccompFd)});
  return a;
}


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
  if (!p.ok()) return InternalError("exec: cannot start the job supervisor: " + p.status().message());
  return p->Detach();  // SupervisorConn reaps it
}

SupervisorConn::~SupervisorConn() {
  sock_.Reset();
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

bool SupervisorConn::SendJob(const std::string& payload, int out_w, int err_w) {
  std::string frame = EncodeFrame(kFrameJob, payload);
  int fds[2] = {out_w, err_w};
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
      mh.msg_controllen = sizeof(cbuf);
      cmsghdr* cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(fds));
      std::memcpy(CMSG_DATA(cm), fds, sizeof(fds));
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

}  // namespace exec_internal

// ---------------------------------------------------------------------------

Result<std::map<std::string, std::string>> BuildJobEnv(const ExecSpec& spec, bool sandboxed) {
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", spec.workspace},
                                            {"LANG", "C.UTF-8"},
                                            {"TMPDIR", "/tmp"}};
  std::map<std::string, std::string> bind_env;
  for (const auto& b : spec.binds) {
    if (b.env.empty()) continue;
    bind_env[b.env] = sandboxed && !b.destination.empty() ? CleanPath(b.destination) : CleanPath(b.source);
  }
  using Layer = const std::map<std::string, std::string>*;
  for (Layer layer : std::initializer_list<Layer>{&spec.env, &spec.extra_env, &bind_env}) {
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

namespace exec_internal {

Result<PreparedJob> PrepareJob(const ExecSpec& spec, const Status& sandbox_ok) {
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
    eff.output_dir = CleanPath(fs::absolute(spec.output_dir, ec).string());
    fs::create_directories(eff.output_dir, ec);
    if (ec) {
      return InternalError("exec: cannot create output dir " + eff.output_dir + ": " +
                           ec.message() + "; check the worker's state-dir permissions");
    }
  }
  const std::string workspace = CleanPath(spec.workspace);
  GATOS_ASSIGN_OR_RETURN(std::vector<BindPlan> spec_binds,
                         CheckBinds(spec, workspace, eff.output_dir));
  GATOS_RETURN_IF_ERROR(BuildJobEnv(eff, false).status());  // names and values are valid

  PreparedJob job;
  if (spec.sandbox != ExecSpec::Sandbox::kOff) {
    if (sandbox_ok.ok()) {
      job.sandboxed = true;
    } else if (spec.sandbox == ExecSpec::Sandbox::kRequire) {
      return FailedPreconditionError(sandbox_ok.message() +
                                     "; the policy requires a sandbox, so the job was not started");
    } else {
      job.sandbox_note = "running unsandboxed: " + sandbox_ok.message();
    }
  }
  GATOS_ASSIGN_OR_RETURN(auto env, BuildJobEnv(eff, job.sandboxed));
  if (job.sandboxed) {
    job.binds.push_back({workspace, workspace, true, true});
    if (!eff.output_dir.empty()) job.binds.push_back({eff.output_dir, eff.output_dir, true, true});
    job.binds.insert(job.binds.end(), spec_binds.begin(), spec_binds.end());
  }
  // Where a path the job sees is on the host (the last bind that covers it wins).
  auto to_host = [&](const std::string& p) {
    if (!job.sandboxed) return p;
    for (auto it = job.binds.rbegin(); it != job.binds.rend(); ++it) {
      if (IsUnder(p, it->destination)) return it->source + p.substr(it->destination.size());
    }
    return p;
  };
  GATOS_ASSIGN_OR_RETURN(job.program, ResolveProgram(spec.argv[0], env, cwd_abs, to_host));
  job.argv = spec.argv;
  job.argv[0] = job.program;
  for (const auto& [k, v] : env) job.env.push_back(k + "=" + v);
  job.cwd = cwd_abs;
  return job;
}

Result<std::unique_ptr<PrivateDevices>> PrivateDevices::Make(const std::string& parent) {
  // The host's nodes bwrap binds (it skips a missing one too), and whether
  // this process's user owns one (as this user namespace sees the owners: a
  // node whose owner is not mapped here shows the overflow id).
  std::vector<std::pair<const char*, struct stat>> host;
  bool owned = false;
  for (const char* n : kDevNodes) {
    struct stat st;
    if (::stat((std::string("/dev/") + n).c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    host.emplace_back(n, st);
    owned |= st.st_uid == ::geteuid();
  }
  if (!owned) return std::unique_ptr<PrivateDevices>();
  std::string tmpl = parent + "/.gatos-dev-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    return FailedPreconditionError(
        "sandbox: cannot make a directory for the job's device nodes in " + parent + ": " +
        Errno(errno));
  }
  std::unique_ptr<PrivateDevices> d(new PrivateDevices(tmpl));
  struct statvfs vfs;
  if (::statvfs(d->dir_.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NODEV)) {
    return FailedPreconditionError(
        "sandbox: " + parent +
        " is on a file system mounted nodev, where the job's own device nodes "
        "would not open");
  }
  for (const auto& [n, st] : host) {
    const std::string path = d->dir_ + "/" + n;
    if (::mknod(path.c_str(), S_IFCHR | 0600, st.st_rdev) != 0) {
      return FailedPreconditionError(
          "sandbox: cannot make the job's /dev/" + std::string(n) + " in " + parent + ": " +
          Errno(errno) +
          "; the job would otherwise own the host's device nodes (run the worker as "
          "root of the host's user namespace, or as another user)");
    }
    d->names_.push_back(n);
    // The host's owner and mode (mknod's mode is filtered by the umask).
    if (::chown(path.c_str(), st.st_uid, st.st_gid) != 0 ||
        ::chmod(path.c_str(), st.st_mode & 07777) != 0) {
      return FailedPreconditionError("sandbox: cannot set up the job's /dev/" + std::string(n) +
                                     ": " + Errno(errno));
    }
  }
  // A node the kernel refuses to open (a security module, a nodev mount the
  // check above missed) is no use to the job.
  if (!d->names_.empty()) {
    const std::string first = d->dir_ + "/" + d->names_[0];
    int fd = ::open(first.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      return FailedPreconditionError("sandbox: the job's own device nodes in " + parent +
                                     " cannot be opened (" + Errno(errno) + ")");
    }
    ::close(fd);
  }
  return d;
}

PrivateDevices::~PrivateDevices() {
  for (const std::string& n : names_) ::unlink((dir_ + "/" + n).c_str());
  ::rmdir(dir_.c_str());
}

}  // namespace exec_internal

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
    // Run directly, not as a job: a job's system-call filter refuses the
    // namespaces bwrap makes (job_seccomp.h).
    std::vector<std::string> argv = BwrapArgs(bwrap_path, false, {}, "/");
    argv.insert(argv.end(), {"--", "/bin/true"});
    SpawnOptions so;
    so.err = Stdio::Pipe();
    so.out = Stdio::Null();
    so.new_process_group = true;
    Result<Captured> res = RunAndCapture(argv, so, {}, std::chrono::seconds(10));
    if (!res.ok()) {
      st = FailedPreconditionError("sandbox: could not run " + bwrap_path + ": " +
                                   res.status().message());
    } else if (!res->status.ok()) {
      // bwrap's own first line (it says which kernel setting is missing).
      std::string why = TruncateUtf8(res->err.substr(0, res->err.find('\n')), 300);
      st = FailedPreconditionError(
          "sandbox: " + bwrap_path + " cannot build a sandbox on this host (" +
          (res->timed_out ? std::string("timed out") : res->status.ToString()) +
          (why.empty() ? "" : ": " + why) +
          "); user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone / "
          "user.max_user_namespaces) or a container profile blocks mounts");
    }
  }
  cache.emplace(bwrap_path, st);
  return st;
}

// ---------------------------------------------------------------------------
// Execution

struct Execution::Impl {
  std::unique_ptr<SupervisorConn> conn;  // guarded by ctrl_mu once started
  ReleaseFn release;                     // null: drop (reap) the supervisor
  uint32_t seq = 0;
  pid_t job = -1;
  Fd out_r, err_r;
  int64_t timeout_ms = 0;
  size_t cap = 0;
  int64_t started_mono = 0;
  ExecResult result;
  std::atomic<bool> stop_requested{false};
  std::shared_ptr<PrivateDevices> devices;  // removed after the job
  std::mutex ctrl_mu;  // serializes control frames from Stop() and Wait()
  bool finished = false;  // guarded by ctrl_mu
  bool waited = false;

  void Send(char c) {
    std::lock_guard<std::mutex> lock(ctrl_mu);
    if (finished || !conn) return;
    conn->SendControl(c, seq);
  }

  // Hands the supervisor back (or reaps it). After this, Stop() is a no-op.
  void Finish(bool healthy) {
    std::unique_ptr<SupervisorConn> c;
    {
      std::lock_guard<std::mutex> lock(ctrl_mu);
      finished = true;
      c = std::move(conn);
    }
    if (!c) return;
    if (release) {
      release(std::move(c), healthy);
    } else {
      c.reset();
    }
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
  if (!impl_->waited) {
    impl_->Send(kFrameKill);
    Wait().status().IgnoreError();
  }
  impl_->Finish(false);
}

pid_t Execution::pid() const { return impl_->job; }

void Execution::Stop() {
  if (impl_->stop_requested.exchange(true)) return;
  impl_->Send(kFrameTerm);
}

Result<ExecResult> Execution::Wait() {
  Impl& m = *impl_;
  if (m.waited) return FailedPreconditionError("exec: Wait() was already called for this job");
  m.waited = true;
  fcntl(m.out_r.get(), F_SETFL, O_NONBLOCK);
  fcntl(m.err_r.get(), F_SETFL, O_NONBLOCK);
  bool have_status = false, clean = false, broken = false;
  int32_t raw = 0;
  bool timeout_fired = false;
  const int sock = m.conn ? m.conn->fd() : -1;
  while (sock >= 0 && !clean && !broken) {
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
    pfd[n++] = {sock, POLLIN, 0};
    int timeout = -1;
    if (m.timeout_ms > 0 && !timeout_fired && !have_status) {
      int64_t left = m.started_mono + m.timeout_ms - MonoMillis();
      if (left <= 0) {
        timeout_fired = true;
        m.result.timed_out = true;
        m.Send(kFrameTerm);
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
    if (!pfd[st_i].revents) continue;
    for (;;) {
      Record rec;
      int k = m.conn->Read(&rec, nullptr, 0);
      if (k == 0) break;
      if (k < 0) {
        broken = true;  // the supervisor is gone
        break;
      }
      if (rec.seq != m.seq) {
        broken = true;
      } else if (rec.kind == kRecExited && !have_status) {
        have_status = true;
        raw = rec.value;
        // Stop() after the job ended by itself does not mark it stopped.
        m.result.stopped = m.stop_requested.load();
        m.result.finished_ms = UnixMillis();
      } else if (rec.kind == kRecClean) {
        clean = true;
      } else {
        broken = true;
      }
      if (clean || broken) break;
    }
  }
  // Every writer is dead (after 'C'); collect what is still buffered.
  if (m.out_r.get() >= 0) m.Drain(m.out_r, &m.result.stdout_data, &m.result.stdout_truncated);
  if (m.err_r.get() >= 0) m.Drain(m.err_r, &m.result.stderr_data, &m.result.stderr_truncated);
  m.out_r.Reset();
  m.err_r.Reset();
  m.Finish(clean && have_status && !broken);
  if (!have_status) {
    return InternalError(
        "exec: the job supervisor exited without reporting the job's status; "
        "it may have been killed from outside the worker (or by the job itself)");
  }
  if (WIFEXITED(raw)) {
    m.result.exit_code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    m.result.signal = WTERMSIG(raw);
  }
  return m.result;
}

namespace exec_internal {

namespace {

// The error for a job that the supervisor could not start.
Status StartError(const Record& rec, const PreparedJob& job) {
  const int err = rec.value2;
  if (rec.stage == kStageExec) {
    std::string what = "exec: cannot run '" + job.program + "': " + Errno(err);
    if (err == ENOENT) return NotFoundError(what + "; check the manifest's command");
    if (err == EACCES) return PermissionDeniedError(what + "; the file must be executable by the worker");
    return InvalidArgumentError(what + "; check the manifest's command and cwd");
  }
  if (rec.stage == kStageChdir) {
    return InvalidArgumentError("exec: cannot change to the job's cwd " + job.cwd + ": " + Errno(err));
  }
  if (rec.stage == kStageMount && (rec.index & kJobBindIndex)) {
    size_t i = rec.index & ~(kJobBindIndex | kPidInCredentials);
    std::string what = i < job.binds.size()
                           ? job.binds[i].source + " at " + job.binds[i].destination
                           : "#" + std::to_string(i);
    return InvalidArgumentError("sandbox: cannot bind " + what + ": " + Errno(err) +
                                "; a destination must be creatable in the sandbox (not under "
                                "/usr or another read-only bind)");
  }
  if (rec.stage == kStageFork) {
    return InternalError("exec: the supervisor could not start the job (" + Errno(err) +
                         "); the host may be out of processes");
  }
  return InternalError(std::string("sandbox: setup failed while ") + StageName(rec.stage) +
                       (rec.stage == kStageMount || rec.stage == kStageRoot || rec.stage == kStageSlotRoot
                            ? " (step " + std::to_string(rec.index & ~kPidInCredentials) + ")"
                            : "") +
                       ": " + Errno(err));
}

}  // namespace

Result<std::unique_ptr<Execution>> FinishStart(std::unique_ptr<SupervisorConn> conn, uint32_t seq,
                                               Fd out_r, Fd err_r, const ExecSpec& spec,
                                               const PreparedJob& job, ReleaseFn release) {
  auto impl = std::make_unique<Execution::Impl>();
  impl->release = std::move(release);
  impl->seq = seq;
  impl->out_r = std::move(out_r);
  impl->err_r = std::move(err_r);
  impl->timeout_ms = spec.timeout_ms;
  impl->cap = spec.output_cap_bytes;
  impl->result.sandboxed = job.sandboxed;
  impl->result.sandbox_note = job.sandbox_note;
  impl->devices = job.devices;
  impl->result.started_ms = UnixMillis();
  impl->started_mono = MonoMillis();
  Record rec;
  pid_t cred_pid = 0;
  int k = conn->Read(&rec, &cred_pid, -1);
  impl->conn = std::move(conn);
  Execution::Impl& m = *impl;
  auto ex = std::make_unique<Execution>(std::move(impl));  // from here on, the destructor cleans up
  if (k != 1 || rec.kind != kRecStarted || rec.seq != seq) {
    m.waited = true;
    m.Finish(false);
    return InternalError(
        "exec: the job supervisor exited before starting the job; check that gatos-supervise "
        "belongs to this worker's version and that the host has processes to spare");
  }
  m.job = (rec.index & kPidInCredentials) && cred_pid > 0 ? cred_pid : rec.value;
  if (rec.stage != kStageNone) {
    ex->Wait().status().IgnoreError();
    return StartError(rec, job);
  }
  return ex;
}

}  // namespace exec_internal

// One gatos-supervise (or forked supervisor) per job; bubblewrap per job
// when sandboxed.
Result<std::unique_ptr<Execution>> Execution::Start(const ExecSpec& spec) {
  Status sandbox_ok = spec.sandbox == ExecSpec::Sandbox::kOff ? OkStatus() : ProbeSandbox(spec.bwrap_path);
  GATOS_ASSIGN_OR_RETURN(PreparedJob job, PrepareJob(spec, sandbox_ok));

  std::vector<std::string> exec_argv;
  std::string exec_path;
  if (job.sandboxed) {
    // A job runs as this process's user (bwrap maps it so): when that is the
    // owner of the host's device nodes bwrap would bind writable (root), the
    // job gets nodes of its own, made next to its workspace. Without them
    // the job does not start.
    GATOS_ASSIGN_OR_RETURN(
        std::unique_ptr<PrivateDevices> devices,
        PrivateDevices::Make(fs::path(CleanPath(spec.workspace)).parent_path().string()));
    job.devices = std::move(devices);
    exec_argv = BwrapArgs(spec.bwrap_path, spec.allow_network, job.binds, job.cwd,
                          job.devices.get(), JobSeccompFilter() != nullptr);
    exec_argv.push_back("--");
    exec_argv.insert(exec_argv.end(), job.argv.begin(), job.argv.end());
    exec_path = spec.bwrap_path;
  } else {
    exec_argv = job.argv;
    exec_path = job.program;
  }

  Fd out_r, out_w, err_r, err_w;
  GATOS_RETURN_IF_ERROR(MakePipe(&out_r, &out_w, "stdout"));
  GATOS_RETURN_IF_ERROR(MakePipe(&err_r, &err_w, "stderr"));
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    return InternalError("exec: socketpair failed: " + Errno(errno) +
                         "; check the worker's open-file limit (ulimit -n)");
  }
  Fd sock(sp[0]), sock_child(sp[1]);

  pid_t pid;
  const std::string& supervise = DefaultSuperviseBinary();
  if (!supervise.empty()) {
    std::vector<std::string> sargs = {supervise,
                                      "--run",
                                      std::to_string(kProtocolVersion),
                                      std::to_string(spec.kill_grace_ms),
                                      job.sandboxed ? "1" : "0",
                                      job.cwd,
                                      exec_path,
                                      std::to_string(exec_argv.size())};
    sargs.insert(sargs.end(), exec_argv.begin(), exec_argv.end());
    sargs.insert(sargs.end(), job.env.begin(), job.env.end());
    GATOS_ASSIGN_OR_RETURN(pid, StartSupervisor(sargs, {sock_child.get(), out_w.get(), err_w.get()}));
  } else {
    // No gatos-supervise: fork a supervisor from the worker. Everything it
    // uses is prepared here; the child only makes system calls.
    std::vector<char*> argv_c = CStrings(exec_argv);
    std::vector<std::string> env = job.env;
    std::vector<char*> env_c = CStrings(env);
    std::vector<pid_t> tracked(kMaxTracked, 0);
    ForkedJob fj{exec_path.c_str(), argv_c.data(), env_c.data(), job.cwd.c_str(),
                 spec.kill_grace_ms, job.sandboxed, sock_child.get(), out_w.get(), err_w.get(),
                 tracked.data(), JobSeccompFilter()};
    pid = fork();
    if (pid < 0) {
      return InternalError("exec: fork failed: " + Errno(errno) +
                           "; the host may be out of processes or memory");
    }
    if (pid == 0) ForkedSupervisorMain(fj);
  }
  out_w.Reset();
  err_w.Reset();
  sock_child.Reset();
  auto conn = std::make_unique<SupervisorConn>(std::move(sock), pid, false);
  return FinishStart(std::move(conn), 0, std::move(out_r), std::move(err_r), spec, job, nullptr);
}

}  // namespace gatos
