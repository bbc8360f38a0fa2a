#include "job_seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace gatos::exec_internal {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#endif

constexpr uint32_t kNamespaceFlags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                     CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET;
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

constexpr uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(e) & SECCOMP_RET_DATA); }

class Builder {
 public:
  void LoadNr() { Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)); }
  void Stmt(uint16_t code, uint32_t k) { prog_.push_back(BPF_STMT(code, k)); }
  void Jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { prog_.push_back(BPF_JUMP(code, k, jt, jf)); }
  // nr == `nr` -> return `ret`.
  void Deny(long nr, uint32_t ret) {
    Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    Stmt(BPF_RET | BPF_K, ret);
  }
  // nr == `nr` -> EPERM when the low word of its first argument has any of
  // `flags`, else allow.
  void DenyFlags(long nr, uint32_t flags) {
    Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4);
    Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));  // little-endian: the low word
    Jump(BPF_JMP | BPF_JSET | BPF_K, flags, 0, 1);
    Stmt(BPF_RET | BPF_K, Errno(EPERM));
    Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  std::vector<sock_filter>& prog() { return prog_; }

 private:
  std::vector<sock_filter> prog_;
};

#if defined(__x86_64__) || defined(__aarch64__)
std::vector<sock_filter> Build() {
  Builder b;
  b.Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  b.Jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0);
  b.Stmt(BPF_RET | BPF_K, Errno(ENOSYS));
  b.LoadNr();
#if defined(__x86_64__)
  // x32 system calls share the architecture value; their numbers have this bit.
  b.Jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
  b.Stmt(BPF_RET | BPF_K, Errno(ENOSYS));
#endif
  b.DenyFlags(__NR_clone, kNamespaceFlags);
  b.DenyFlags(__NR_unshare, kNamespaceFlags | CLONE_NEWTIME);
#ifdef __NR_clone3
  b.Deny(__NR_clone3, Errno(ENOSYS));  // its flags are in memory the filter cannot read
#endif
  const long eperm[] = {
      __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_keyctl, __NR_add_key,
      __NR_request_key, __NR_bpf, __NR_perf_event_open, __NR_userfaultfd, __NR_init_module,
      __NR_finit_module, __NR_delete_module, __NR_kexec_load, __NR_kexec_file_load, __NR_reboot,
      __NR_swapon, __NR_swapoff, __NR_acct, __NR_quotactl, __NR_open_by_handle_at,
      __NR_name_to_handle_at, __NR_syslog, __NR_lookup_dcookie, __NR_vhangup, __NR_fanotify_init,
#ifdef __NR_open_tree
      __NR_open_tree, __NR_move_mount, __NR_fsopen, __NR_fsconfig, __NR_fsmount, __NR_fspick,
#endif
#ifdef __NR_mount_setattr
      __NR_mount_setattr,
#endif
#ifdef __NR_iopl
      __NR_iopl, __NR_ioperm,
#endif
  };
  for (long nr : eperm) b.Deny(nr, Errno(EPERM));
  const std::vector<long> enosys = {
#ifdef __NR_io_uring_setup
      __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
#ifdef __NR_uselib
      __NR_uselib,
#endif
#ifdef __NR_ustat
      __NR_ustat,
#endif
#ifdef __NR_sysfs
      __NR_sysfs,
#endif
#ifdef __NR__sysctl
      __NR__sysctl,
#endif
  };
  for (long nr : enosys) b.Deny(nr, Errno(ENOSYS));
  b.Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return std::move(b.prog());
}
#endif

}  // namespace

const sock_fprog* JobSeccompFilter() {
#if defined(__x86_64__) || defined(__aarch64__)
  static std::vector<sock_filter> prog = Build();
  static sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  return &fprog;
#else
  return nullptr;
#endif
}

int InstallJobSeccomp(const sock_fprog* filter) {
  if (!filter) return 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) != 0) return errno;
  return 0;
}

int WriteSeccompFd(const sock_fprog* filter) {
  if (!filter) return 0;
  int fd = static_cast<int>(syscall(SYS_memfd_create, "gatos-seccomp", MFD_CLOEXEC));
  if (fd < 0) return errno;
  const char* p = reinterpret_cast<const char*>(filter->filter);
  size_t left = filter->len * sizeof(sock_filter);
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno ? errno : EIO;
      close(fd);
      return e;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, kBwrapSeccompFd) < 0) {
    int e = errno;
    close(fd);
    return e;
  }
  close(fd);
  return 0;
}

}  // namespace gatos::exec_internal
