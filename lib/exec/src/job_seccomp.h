// The system-call filter every job runs under (docs/worker-execution.md,
// "System calls a job cannot make"), in every sandbox mode and unsandboxed.
//
// A job needs files, processes, pipes, sockets and time. It does not need
// new namespaces (a nested user namespace would give it every capability
// inside it, and with them the kernel's namespaced code paths: the usual
// start of a container escape), the kernel's keyrings, BPF, perf events,
// userfaultfd, io_uring, module loading, mounts, swap, reboot, handle-based
// file opening or the kernel log. Those calls fail with EPERM (io_uring and
// the obsolete ones with ENOSYS, so programs fall back); clone3 fails with
// ENOSYS so that libc uses clone, whose flags the filter can read. System
// calls of another architecture (i386 or x32 entry on x86_64) fail with
// ENOSYS.
//
// Thread-safety: JobSeccompFilter() builds the program once (call it before
// any fork or vfork-style clone); the install functions make only system
// calls and are safe in such children.
#ifndef GATOS_EXEC_SRC_JOB_SECCOMP_H_
#define GATOS_EXEC_SRC_JOB_SECCOMP_H_

#include <linux/filter.h>

namespace gatos::exec_internal {

// nullptr when this architecture has no filter (neither x86_64 nor aarch64).
const sock_fprog* JobSeccompFilter();

// PR_SET_NO_NEW_PRIVS, then the filter, in the calling process. 0 or errno.
int InstallJobSeccomp(const sock_fprog* filter);

// bubblewrap reads the filter from a descriptor (--seccomp FD) and applies
// it after building the sandbox: this is that descriptor's number in the
// bwrap process, made by WriteSeccompFd.
inline constexpr int kBwrapSeccompFd = 200;  // above every descriptor a supervisor holds
// A memfd holding `filter`, at kBwrapSeccompFd without close-on-exec, its
// offset at 0. 0 or errno.
int WriteSeccompFd(const sock_fprog* filter);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_JOB_SECCOMP_H_
