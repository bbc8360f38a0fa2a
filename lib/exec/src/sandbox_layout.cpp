// The namespace sandbox's layout, template and prepared roots
// (sandbox_layout.h). Runs in the slot's init, between jobs; it allocates.
// The helper it clones to make a prepared root (RootHelperMain) shares its
// memory and only makes system calls.
#include "sandbox_layout.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace gatos::exec_internal {
namespace {

using exec_protocol::BindPlan;

std::string MadeKey(int skel_fd, const std::string& path, bool dir) {
  return std::to_string(skel_fd) + (dir ? "d/" : "f/") + path;
}

// The paths, relative to a skeleton, that the mount point of a bind at
// `dest` takes, parents first: each directory on the way, then `dest`
// itself (a directory, or a file for a file's bind).
std::vector<std::pair<std::string, bool>> MountPointPaths(const std::string& dest, bool dir) {
  std::vector<std::pair<std::string, bool>> out;
  for (size_t slash = dest.find('/', 1); slash != std::string::npos;
       slash = dest.find('/', slash + 1)) {
    out.emplace_back(dest.substr(1, slash - 1), true);
  }
  out.emplace_back(dest.substr(1), dir);
  return out;
}

// `path` (under /oldroot) with its symlinks followed as the host would
// follow them: an absolute target is the host's (here the root is the
// slot's tmpfs, so /etc/localtime -> /usr/share/zoneinfo/... would
// otherwise lead nowhere).
std::string HostPath(const std::string& path) {
  const std::string root = "/oldroot";
  if (path.compare(0, root.size() + 1, root + "/") != 0) return path;
  std::string rest = path.substr(root.size());
  std::string done;  // resolved so far, relative to the host's root ("" is the root)
  for (int links = 0; !rest.empty();) {
    size_t start = rest.find_first_not_of('/');
    if (start == std::string::npos) break;
    size_t end = rest.find('/', start);
    std::string comp =
        rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    rest = end == std::string::npos ? "" : rest.substr(end);
    if (comp == ".") continue;
    if (comp == "..") {
      size_t s = done.rfind('/');
      done = s == std::string::npos ? "" : done.substr(0, s);
      continue;
    }
    std::string next = done + "/" + comp;
    struct stat st;
    if (lstat((root + next).c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      done = next;
      continue;
    }
    char target[4096];
    ssize_t n = readlink((root + next).c_str(), target, sizeof(target) - 1);
    if (n <= 0 || ++links > 40) return root + next;  // left for the bind to fail on
    target[n] = '\0';
    if (target[0] == '/') done.clear();
    rest = std::string(target) + "/" + rest;
  }
  return root + (done.empty() ? "/" : done);
}

struct RootHelper {
  const std::vector<MountOp>* ops;
  const char* skel;
  bool network;
  int ns_fd = -1;
  int err = 0;
  int step = 0;
};

// Makes a prepared root in a helper sharing our memory and descriptor table
// (clone(CLONE_VM|CLONE_VFORK|CLONE_FILES)): system calls only.
int RootHelperMain(void* arg) {
  RootHelper& h = *static_cast<RootHelper*>(arg);
  auto fail = [&h](int step, int err) {
    h.step = step;
    h.err = err ? err : EIO;
    return 1;
  };
  if (unshare(CLONE_NEWNS) != 0) return fail(40, errno);
  if (mount(h.skel, "/newroot", nullptr, MS_BIND, nullptr) != 0) return fail(41, errno);
  for (size_t i = 0; i < h.ops->size(); ++i) {
    if (int e = RunMountOp((*h.ops)[i], h.network)) return fail(200 + static_cast<int>(i), e);
  }
  int step = 0;
  if (int e = SwitchToNewRoot(&step)) return fail(step == 8 ? 42 : 43, e);
  h.ns_fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
  return h.ns_fd < 0 ? fail(44, errno) : 0;
}

}  // namespace

void SandboxLayout::Build() {
  Bind("/usr", "/usr", MountOp::kReadOnly | MountOp::kDir);
  // Merged-/usr hosts have /bin -> usr/bin etc.: recreate the links, bind real dirs.
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (lstat(d, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(d, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      Job(MountOp::kSymlink, 0, Keep(target), Keep(std::string("/newroot") + d));
    } else if (S_ISDIR(st.st_mode)) {
      Bind(d, d, MountOp::kReadOnly | MountOp::kDir);
    }
  }
  // A minimal /etc: enough for users, the dynamic linker, TLS roots and
  // Debian's alternatives links; no shadow, no ssh keys, no worker config.
  // Two of them: the second adds what name resolution needs, for jobs with
  // network.
  for (const char* etc : {"/etc", "/etc-net"}) {
    Tpl(MountOp::kMkdir, 0, nullptr, Keep(std::string("/tpl") + etc));
    for (const char* e :
         {"passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
          "alternatives", "localtime", "ssl", "ca-certificates", "mime.types"}) {
      EtcEntry(etc, e);
    }
  }
  for (const char* e : {"resolv.conf", "gai.conf", "services", "protocols"})
    EtcEntry("/etc-net", e);
  // /proc of the slot's PID namespace; the parts that a uid-0 job could
  // write to without any capability (sysctls, sysrq) are read-only.
  Tpl(MountOp::kProc, 0, nullptr, Keep("/tpl/proc"));
  for (const char* p : {"sys", "sysrq-trigger", "irq", "bus"}) {
    Tpl(MountOp::kCover, MountOp::kOptional, nullptr, Keep(std::string("/tpl/proc/") + p));
  }
  // Pid 1 is the slot's supervisor. Its fds, root, memory and environment
  // are out of the job's reach (it has no capability in the slot's user
  // namespace), but a job of the same uid would still pass the owner check
  // on files such as oom_score_adj. The job sees an empty directory instead.
  Tpl(MountOp::kHide, 0, nullptr, Keep("/tpl/proc/1"));
  // A minimal read-only /dev on a tmpfs of its own; /dev/shm and devpts per job.
  Tpl(MountOp::kTmpfs, 0, "mode=0755", Keep("/tpl/dev"));
  for (const char* d : {"null", "zero", "full", "random", "urandom", "tty"}) {
    std::string p = std::string("/dev/") + d;
    // Read-only binds: the nodes stay usable, but their mode and owner
    // (the host's own nodes) cannot be changed from inside.
    Tpl(MountOp::kBind, MountOp::kDevices | MountOp::kOptional | MountOp::kReadOnly,
        Keep("/oldroot" + p), Keep("/tpl" + p));
  }
  const char* links[][2] = {{"/proc/self/fd/0", "stdin"},
                            {"/proc/self/fd/1", "stdout"},
                            {"/proc/self/fd/2", "stderr"},
                            {"/proc/self/fd", "fd"},
                            {"pts/ptmx", "ptmx"}};
  for (auto& l : links) {
    Tpl(MountOp::kSymlink, 0, l[0], Keep(std::string("/tpl/dev/") + l[1]));
  }
  Tpl(MountOp::kMkdir, 0, nullptr, Keep("/tpl/dev/shm"));
  Tpl(MountOp::kMkdir, 0, nullptr, Keep("/tpl/dev/pts"));
  Tpl(MountOp::kRemountReadOnly, 0, nullptr, Keep("/tpl/dev"));
  // The job's root: the template's parts, then what is the job's alone.
  // /etc is one read-only bind, or, for a job that binds something under
  // /etc, a directory of its own root (writable until the root is made
  // read-only) holding each entry's bind.
  const auto etc_at = static_cast<std::ptrdiff_t>(ops_.size());
  Job(MountOp::kRbind, MountOp::kNoNetOnly, "/tpl/etc", "/newroot/etc");
  Job(MountOp::kRbind, MountOp::kNetOnly, "/tpl/etc-net", "/newroot/etc");
  std::vector<MountOp> etc_entries = {{MountOp::kMkdir, 0, nullptr, "/newroot/etc"}};
  for (const auto& [variant, name, dir] : etc_names_) {
    uint8_t f = MountOp::kOptional | (dir ? 0 : MountOp::kFile) |
                (variant == "/etc" ? MountOp::kNoNetOnly : MountOp::kNetOnly);
    etc_entries.push_back(
        {MountOp::kRbind, f, Keep("/tpl" + variant + "/" + name), Keep("/newroot/etc/" + name)});
  }
  Job(MountOp::kRbind, 0, "/tpl/proc", "/newroot/proc");
  // Read-only for the job: /proc's entries (meminfo, cpuinfo ...) are the
  // kernel's, shared by every instance, and a job of the same uid as their
  // owner (a root worker's) could chmod or chown them for the whole host.
  // The job's own id maps are written through the template's /proc.
  Job(MountOp::kRemountReadOnly, MountOp::kNoExec, nullptr, "/newroot/proc");
  Job(MountOp::kRbind, 0, "/tpl/dev", "/newroot/dev");
  const size_t own_at = ops_.size();  // what each job has of its own
  Job(MountOp::kTmpfs, 0, "mode=1777", "/newroot/dev/shm");
  Job(MountOp::kDevpts, 0, nullptr, "/newroot/dev/pts");
  Job(MountOp::kTmpfs, 0, "mode=0755", "/newroot/tmp");
  plain_ = ops_;
  with_etc_ = ops_;
  with_etc_.erase(with_etc_.begin() + etc_at,
                  with_etc_.begin() + etc_at + 2);  // the two binds of /etc
  with_etc_.insert(with_etc_.begin() + etc_at, etc_entries.begin(), etc_entries.end());
  system_ops_ = ops_.size();
  // A prepared root holds the rest; a job entering one adds its own parts
  // at their place in that root.
  root_ops_.assign(plain_.begin(), plain_.begin() + static_cast<std::ptrdiff_t>(own_at));
  for (size_t i = own_at; i < plain_.size(); ++i) {
    root_ops_.push_back({MountOp::kMkdir, 0, nullptr, plain_[i].b});  // the mount point
    MountOp op = plain_[i];
    op.b += strlen("/newroot");
    own_ops_.push_back(op);
  }
}

int SandboxLayout::Prepare(int* step) {
  *step = 0;
  if (unshare(CLONE_NEWNS) != 0) return errno;
  *step = 1;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  *step = 2;
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
  *step = 3;
  for (const char* d : {"/tmp/oldroot", "/tmp/tpl", "/tmp/newroot", "/tmp/skel", "/tmp/skel-net"}) {
    if (mkdir(d, 0755) != 0) return errno;
  }
  *step = 4;
  if (syscall(SYS_pivot_root, "/tmp", "/tmp/oldroot") != 0 || chdir("/") != 0) return errno;
  if (int e = MakeTemplate(step)) return e;
  return PrepareRoots(step);
}

int SandboxLayout::Refresh(int* step) {
  if (!Changed()) return 0;
  bool stale = false;
  for (const Watched& w : watched_) stale |= !w.Same(Look(w.path));
  if (!stale) return 0;
  *step = 20;
  if (umount2("/tpl", MNT_DETACH) != 0) return errno;
  if (int e = MakeTemplate(step)) return e;
  return PrepareRoots(step);
}

bool SandboxLayout::SetJobBinds(const std::vector<BindPlan>& binds, bool network,
                                int64_t tmpfs_bytes) {
  bool under_etc = false;
  for (const auto& b : binds) {
    under_etc |= b.destination == "/etc" || b.destination.compare(0, 5, "/etc/") == 0;
  }
  const PreparedRoot* root = nullptr;
  if (!under_etc && roots_[network ? 1 : 0].ns_fd >= 0) root = &roots_[network ? 1 : 0];
  root_ns_fd_ = root ? root->ns_fd : -1;
  std::set<std::string> needed;
  if (root) {
    for (const auto& b : binds) {
      for (const auto& [path, dir] : MountPointPaths(b.destination, b.is_dir)) {
        needed.insert(MadeKey(root->skel_fd, path, dir));
      }
    }
  }
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    if (needed.count(it->key) == 0) {
      unlinkat(it->skel_fd, it->path.c_str(), it->dir ? AT_REMOVEDIR : 0);
      it->key.clear();
    }
  }
  made_.erase(
      std::remove_if(made_.begin(), made_.end(), [](const MadePath& m) { return m.key.empty(); }),
      made_.end());
  ops_ = root ? own_ops_ : under_etc ? with_etc_ : plain_;
  system_ops_ = ops_.size();
  job_strings_.clear();
  if (tmpfs_bytes > 0) {
    // The job's own tmpfs mounts, sized: its writes there stop at its limit.
    for (MountOp& op : ops_) {
      if (op.kind != MountOp::kTmpfs || !op.a) continue;
      job_strings_.push_back(std::string(op.a) + ",size=" + std::to_string(tmpfs_bytes));
      op.a = job_strings_.back().c_str();
    }
  }
  if (system_ops_ + binds.size() > kMaxOps) return false;
  for (const auto& b : binds) {
    job_strings_.push_back("/oldroot" + b.source);
    const char* src = job_strings_.back().c_str();
    job_strings_.push_back((root ? "" : "/newroot") + b.destination);
    const char* dst = job_strings_.back().c_str();
    uint8_t f = (b.writable ? 0 : MountOp::kReadOnly) | (b.is_dir ? MountOp::kDir : 0);
    ops_.push_back({MountOp::kBind, f, src, dst});
    if (root) MakeSkeletonPath(root->skel_fd, b.destination, b.is_dir);
  }
  return true;
}

void SandboxLayout::PreparedRoot::Close() {
  if (ns_fd >= 0) ::close(ns_fd);
  if (skel_fd >= 0) ::close(skel_fd);
  ns_fd = skel_fd = -1;
}

int SandboxLayout::PrepareRoots(int* step) {
  for (PreparedRoot& r : roots_) r.Close();
  made_.clear();
  if (syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, nullptr, 0) != 0 && errno == ENOSYS) {
    return 0;
  }
  for (int net = 0; net < 2; ++net) {
    PreparedRoot& r = roots_[net];
    const char* skel = net ? "/skel-net" : "/skel";
    *step = 30 + net;
    if (umount2(skel, MNT_DETACH) != 0 && errno != EINVAL) return errno;
    if (mount("tmpfs", skel, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
    r.skel_fd = open(skel, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r.skel_fd < 0) return errno;
    static char stack[64 * 1024];
    RootHelper h{&root_ops_, skel, net == 1};
    pid_t p = clone(RootHelperMain, stack + sizeof(stack),
                    CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &h);
    if (p < 0) return errno;
    int st;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    if (h.err) {
      *step = h.step;
      return h.err;
    }
    r.ns_fd = h.ns_fd;
  }
  return 0;
}

void SandboxLayout::AddMade(int skel_fd, const std::string& path, bool dir) {
  made_.push_back({skel_fd, path, dir, MadeKey(skel_fd, path, dir)});
}

void SandboxLayout::MakeSkeletonPath(int skel_fd, const std::string& dest, bool dir) {
  const std::string key = MadeKey(skel_fd, dest.substr(1), dir);
  for (const auto& m : made_) {
    if (m.key == key) return;  // made for an earlier job, with its parents
  }
  const auto paths = MountPointPaths(dest, dir);
  int at = fcntl(skel_fd, F_DUPFD_CLOEXEC, 0);
  for (size_t i = 0; i < paths.size() && at >= 0; ++i) {
    const auto& [rel, is_dir] = paths[i];
    const std::string comp = rel.substr(rel.rfind('/') + 1);  // npos + 1: all of it
    if (is_dir) {
      if (mkdirat(at, comp.c_str(), 0755) == 0) AddMade(skel_fd, rel, true);
    } else {
      int fd = openat(at, comp.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        AddMade(skel_fd, rel, false);
      }
    }
    if (i + 1 == paths.size()) break;
    int next = openat(at, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(at);
    at = next;
  }
  if (at >= 0) ::close(at);
}

SandboxLayout::Watched SandboxLayout::Look(const char* path) {
  Watched w;
  w.path = path;
  w.resolved = HostPath(path);
  struct stat st;
  w.exists = stat(w.resolved.c_str(), &st) == 0;
  if (w.exists) {
    w.dev = st.st_dev;
    w.ino = st.st_ino;
  }
  return w;
}

void SandboxLayout::Watch(const std::vector<Watched>& sources) {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) return;
  std::vector<std::string> dirs;
  for (const Watched& w : sources) {
    for (const std::string& path : {std::string(w.path), w.resolved}) {
      size_t slash = path.rfind('/');
      if (slash == std::string::npos || slash == 0) continue;
      std::string dir = path.substr(0, slash);
      bool seen = false;
      for (const auto& d : dirs) seen |= d == dir;
      if (!seen) dirs.push_back(dir);
    }
  }
  for (const auto& d : dirs) {
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                          IN_MOVE_SELF | IN_ONLYDIR;
    if (inotify_add_watch(inotify_fd_, d.c_str(), mask) < 0 && errno != ENOENT) {
      ::close(inotify_fd_);  // out of watches: every job checks instead
      inotify_fd_ = -1;
      return;
    }
  }
}

bool SandboxLayout::Changed() {
  if (inotify_fd_ < 0) return true;
  alignas(inotify_event) char buf[4096];
  bool any = false;
  for (;;) {
    ssize_t n = ::read(inotify_fd_, buf, sizeof(buf));
    if (n > 0) {
      any = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return any || (n < 0 && errno != EAGAIN);
  }
}

int SandboxLayout::MakeTemplate(int* step) {
  *step = 5;
  if (mount("tmpfs", "/tpl", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return errno;
  // Watched first, then looked at again: a change in between is either
  // seen now or queued for the next job's check.
  std::vector<Watched> first;
  for (const MountOp& op : tpl_ops_) {
    if (op.kind == MountOp::kBind) first.push_back(Look(op.a));
  }
  Watch(first);
  watched_.clear();
  watched_.reserve(first.size());
  for (size_t i = 0; i < tpl_ops_.size(); ++i) {
    MountOp op = tpl_ops_[i];
    if (op.kind == MountOp::kBind) {
      watched_.push_back(Look(op.a));
      op.a = watched_.back().resolved.c_str();
    }
    *step = 100 + static_cast<int>(i);
    if (int e = RunMountOp(op, true)) return e;
  }
  *step = 6;
  if (mount("none", "/tpl", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    return errno;
  }
  return 0;
}

void SandboxLayout::Bind(const std::string& src, const std::string& dst, uint8_t flags) {
  Tpl(MountOp::kBind, flags, Keep("/oldroot" + src), Keep("/tpl" + dst));
  Job(MountOp::kRbind, 0, Keep("/tpl" + dst), Keep("/newroot" + dst));
}

void SandboxLayout::EtcEntry(const char* etc, const char* name) {
  std::string p = std::string("/etc/") + name;
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return;
  etc_names_.push_back({etc, name, S_ISDIR(st.st_mode)});
  Tpl(MountOp::kBind,
      MountOp::kReadOnly | MountOp::kOptional | (S_ISDIR(st.st_mode) ? MountOp::kDir : 0),
      Keep("/oldroot" + p), Keep(std::string("/tpl") + etc + "/" + name));
}

}  // namespace gatos::exec_internal
