// The bubblewrap engine's sandbox: bwrap's arguments for a job, and the
// probe whether bwrap can build a sandbox on this host (ProbeSandbox,
// gatos/exec/exec.h). docs/worker-execution.md, "Sandbox".
//
// Thread-safety: BwrapArgs is a plain function (it reads the host's /
// layout); ProbeSandbox caches its answer under a lock.
#ifndef GATOS_EXEC_SRC_BUBBLEWRAP_H_
#define GATOS_EXEC_SRC_BUBBLEWRAP_H_

#include <string>
#include <vector>

#include "gatos/exec/supervise_protocol.h"

namespace gatos::exec_internal {

class PrivateDevices;

// bubblewrap's arguments that build a job's sandbox, up to and excluding
// "--": /usr and the merged-/usr links, a minimal /etc, /proc, /dev (the
// nodes from `devices` when given), a /tmp of its own, then `binds`, and
// `chdir_to`. No network unless `network`; no capability. Also how the
// worker runs git on a local input (inputs.cpp).
// With `seccomp`, bwrap applies the job's system-call filter, read from
// kBwrapSeccompFd (job_seccomp.h): the job child writes it there just
// before it execs bwrap (job_child.cpp). `tmpfs_bytes` > 0: /tmp holds at
// most that much (the job's disk limit).
std::vector<std::string> BwrapArgs(const std::string& bwrap, bool network,
                                   const std::vector<exec_protocol::BindPlan>& binds,
                                   const std::string& chdir_to,
                                   const PrivateDevices* devices = nullptr, bool seccomp = false,
                                   int64_t tmpfs_bytes = 0);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_BUBBLEWRAP_H_
