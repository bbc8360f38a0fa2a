#include "gatos/sys/dir_layout.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gatos {
namespace {

// Sets or clears FS_TOPDIR_FL on `dir`.
bool SetTopDir(const std::string& dir, bool on, std::string* why) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *why = dir + ": " + std::strerror(errno);
    return false;
  }
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok && ((flags & FS_TOPDIR_FL) != 0) != on) {
    flags = on ? (flags | FS_TOPDIR_FL) : (flags & ~FS_TOPDIR_FL);
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  if (!ok) *why = dir + ": " + std::strerror(errno);
  ::close(fd);
  return ok;
}

}  // namespace

bool SpreadSubdirectories(const std::string& dir, std::string* why) { return SetTopDir(dir, true, why); }

DirFileSystem FileSystemOf(const std::string& path) {
  struct statfs fs;
  struct stat st;
  if (::statfs(path.c_str(), &fs) != 0 || fs.f_type != EXT4_SUPER_MAGIC || ::stat(path.c_str(), &st) != 0) {
    return DirFileSystem::kOther;
  }
  // The block device's kernel name (vda1, loop0, dm-0), then its journal:
  // jbd2 lists each journal it runs as /proc/fs/jbd2/<name>-<inode>.
  char link[4096];
  const std::string sys = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev));
  const ssize_t n = ::readlink(sys.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return DirFileSystem::kOther;
  link[n] = '\0';
  const char* slash = std::strrchr(link, '/');
  const std::string prefix = std::string(slash ? slash + 1 : link) + "-";
  DIR* d = ::opendir("/proc/fs/jbd2");
  if (!d) return DirFileSystem::kExt4NoJournal;  // no journal anywhere
  bool journaled = false;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) journaled = true;
  }
  ::closedir(d);
  return journaled ? DirFileSystem::kExt4Journaled : DirFileSystem::kExt4NoJournal;
}

bool LayOutPerJobDirectories(const std::string& dir, std::string* why) {
  return SetTopDir(dir, FileSystemOf(dir) != DirFileSystem::kExt4Journaled, why);
}

}  // namespace gatos
