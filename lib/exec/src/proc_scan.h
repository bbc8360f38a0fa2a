// The descendants of the calling process, found by walking /proc/*/stat
// parent links: how an unsandboxed supervisor (a child subreaper) reaches
// every process of its job, even after setsid() or a double fork
// (docs/worker-execution.md, "Process model").
//
// Async-signal-safe (system calls only; the caller provides the array): it
// runs in a forked copy of a multithreaded worker, too.
#ifndef GATOS_EXEC_SRC_PROC_SCAN_H_
#define GATOS_EXEC_SRC_PROC_SCAN_H_

#include <sys/types.h>

namespace gatos::exec_internal {

// Descendants found per scan, at most (docs/worker-execution.md).
constexpr int kMaxTracked = 8192;

// Parent pid of `pid` from /proc/<pid>/stat (`proc_fd`: /proc), or -1.
pid_t ReadPpid(int proc_fd, long pid);

// Fills `tracked` (kMaxTracked entries) with the descendants of this
// process; returns how many. Repeats full /proc passes until no new
// descendant appears, so the order in which /proc lists processes does not
// matter.
int ScanDescendants(pid_t* tracked);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_PROC_SCAN_H_
