// bubblewrap's arguments and its probe (bubblewrap.h).
#include "bubblewrap.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

#include "gatos/exec/exec.h"
#include "gatos/model/encoding.h"
#include "gatos/sys/process.h"
#include "job_seccomp.h"
#include "private_devices.h"

namespace gatos {
namespace exec_internal {

namespace fs = std::filesystem;
using exec_protocol::BindPlan;

std::vector<std::string> BwrapArgs(const std::string& bwrap, bool network,
                                   const std::vector<BindPlan>& binds, const std::string& chdir_to,
                                   const PrivateDevices* devices, bool seccomp,
                                   int64_t tmpfs_bytes) {
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
  if (tmpfs_bytes > 0) a.insert(a.end(), {"--size", std::to_string(tmpfs_bytes)});
  a.insert(a.end(), {"--tmpfs", "/tmp"});
  for (const auto& b : binds) {
    a.insert(a.end(), {b.writable ? "--bind" : "--ro-bind", b.source, b.destination});
  }
  a.insert(a.end(), {"--chdir", chdir_to});
  if (seccomp) a.insert(a.end(), {"--seccomp", std::to_string(kBwrapSeccompFd)});
  return a;
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
                                 std::string(std::strerror(errno)) +
                                 "); install the bubblewrap package");
  } else {
    // Run directly, not as a job: a job's system-call filter refuses the
    // namespaces bwrap makes (job_seccomp.h).
    std::vector<std::string> argv = exec_internal::BwrapArgs(bwrap_path, false, {}, "/");
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

}  // namespace gatos
