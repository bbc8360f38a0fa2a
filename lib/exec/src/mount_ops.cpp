// Mount operations of the namespace sandbox (mount_ops.h). Async-signal-safe.
#include "mount_ops.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gatos::exec_internal {
namespace {

// Read-only / nosuid / nodev on a bind mount and everything under it.
int SetBindFlags(const char* src, const char* dst, uint8_t flags) {
#ifdef SYS_mount_setattr
  struct mount_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.attr_set = MOUNT_ATTR_NOSUID | ((flags & MountOp::kDevices) ? 0 : MOUNT_ATTR_NODEV) |
                  ((flags & MountOp::kReadOnly) ? MOUNT_ATTR_RDONLY : 0);
  if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) == 0) return 0;
  if (errno != ENOSYS) return errno;
#endif
  // Before Linux 5.12 only the top mount can be changed: bind without the
  // mounts below it, so that none of them stays writable.
  if (umount2(dst, MNT_DETACH) != 0 || mount(src, dst, nullptr, MS_BIND, nullptr) != 0)
    return errno;
  unsigned long f = MS_REMOUNT | MS_BIND | MS_NOSUID |
                    ((flags & MountOp::kDevices) ? 0 : MS_NODEV) |
                    ((flags & MountOp::kReadOnly) ? MS_RDONLY : 0);
  return mount("none", dst, nullptr, f, nullptr) == 0 ? 0 : errno;
}

}  // namespace

int MkdirP(const char* path, bool last_too) {
  char buf[4096];
  size_t n = strlen(path);
  if (n >= sizeof(buf)) return ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; ++i) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    if (buf[i] == '\0' && !last_too) break;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
    buf[i] = c;
  }
  return 0;
}

int MakeMountPoint(const char* path, bool dir) {
  if (dir) return MkdirP(path, true);
  if (int e = MkdirP(path, false)) return e;
  int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

int RunMountOp(const MountOp& op, bool network) {
  if ((op.flags & MountOp::kNetOnly) && !network) return 0;
  if ((op.flags & MountOp::kNoNetOnly) && network) return 0;
  switch (op.kind) {
    case MountOp::kMkdir:
      return MkdirP(op.b, true);
    case MountOp::kRbind:
      // A part of the slot's template, with every mount below it as it is.
      if ((op.flags & MountOp::kOptional) && access(op.a, F_OK) != 0 && errno == ENOENT) return 0;
      if (int e = MakeMountPoint(op.b, !(op.flags & MountOp::kFile))) return e;
      return mount(op.a, op.b, nullptr, MS_BIND | MS_REC, nullptr) == 0 ? 0 : errno;
    case MountOp::kSymlink:
      return symlink(op.a, op.b) == 0 ? 0 : errno;
    case MountOp::kTmpfs:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("tmpfs", op.b, "tmpfs", MS_NOSUID | MS_NODEV, op.a) == 0 ? 0 : errno;
    case MountOp::kProc:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("proc", op.b, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0
                                                                                         : errno;
    case MountOp::kDevpts:
      if (int e = MkdirP(op.b, true)) return e;
      return mount("devpts", op.b, "devpts", MS_NOSUID | MS_NOEXEC,
                   "newinstance,ptmxmode=0666,mode=620") == 0
                 ? 0
                 : errno;
    case MountOp::kHide:
      // An empty read-only directory over it.
      return mount("tmpfs", op.b, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "size=4k,mode=0555") == 0
                 ? 0
                 : errno;
    case MountOp::kRemountReadOnly: {
      unsigned long f = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                        ((op.flags & MountOp::kNoExec) ? MS_NOEXEC : 0);
      return mount("none", op.b, nullptr, f, nullptr) == 0 ? 0 : errno;
    }
    case MountOp::kCover:
      // Hide a writable part of the job's /proc behind a read-only view of itself.
      if (access(op.b, F_OK) != 0) return (op.flags & MountOp::kOptional) ? 0 : errno;
      if (mount(op.b, op.b, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      return SetBindFlags(op.b, op.b, MountOp::kReadOnly);
    case MountOp::kBind: {
      struct stat st;
      if (stat(op.a, &st) != 0)
        return (op.flags & MountOp::kOptional) && errno == ENOENT ? 0 : errno;
      if (int e = MakeMountPoint(op.b, op.flags & MountOp::kDir)) return e;
      if (mount(op.a, op.b, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      return SetBindFlags(op.a, op.b, op.flags);
    }
  }
  return EINVAL;
}

int SwitchToNewRoot(int* step) {
  *step = 8;
  if (mount("none", "/newroot", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    return errno;
  }
  *step = 7;
  if (chdir("/newroot") != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
      umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    return errno;
  }
  return 0;
}

}  // namespace gatos::exec_internal
