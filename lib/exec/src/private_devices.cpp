// A job's own device nodes under bubblewrap (private_devices.h).
#include "private_devices.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace gatos::exec_internal {
namespace {

std::string Errno(int err) { return std::string(std::strerror(err)); }

// The nodes bubblewrap's --dev binds from the host's /dev.
constexpr const char* kDevNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

}  // namespace

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

}  // namespace gatos::exec_internal
