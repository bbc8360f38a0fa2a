#include "gatos/dir_layout.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gatos {

bool SpreadSubdirectories(const std::string& dir, std::string* why) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *why = dir + ": " + std::strerror(errno);
    return false;
  }
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok && !(flags & FS_TOPDIR_FL)) {
    flags |= FS_TOPDIR_FL;
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  if (!ok) *why = dir + ": " + std::strerror(errno);
  ::close(fd);
  return ok;
}

}  // namespace gatos
