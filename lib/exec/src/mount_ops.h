// The mount operations that build a sandboxed job's root in the launcher's
// namespace sandbox (docs/worker-execution.md, "The launcher's namespace
// sandbox"). SandboxLayout (sandbox_layout.h) lists them; the slot's init
// runs them to build its template and prepared roots, and a job child runs
// its own share before it execs.
//
// Async-signal-safe (system calls only): RunMountOp and SwitchToNewRoot run
// in job children that share the supervisor's memory until execve.
#ifndef GATOS_EXEC_SRC_MOUNT_OPS_H_
#define GATOS_EXEC_SRC_MOUNT_OPS_H_

#include <cstdint>

namespace gatos::exec_internal {

// One step: "a" is a source (/oldroot/... on the host, /tpl/... in the
// template), an fs option string or a link target; "b" is a destination
// under /tpl or /newroot, or in the job's root once it is entered.
struct MountOp {
  enum Kind : uint8_t {
    kMkdir,
    kSymlink,
    kBind,
    kRbind,
    kTmpfs,
    kProc,
    kDevpts,
    kCover,
    kHide,
    kRemountReadOnly
  };
  enum Flags : uint8_t {
    kReadOnly = 1,
    kDevices = 2,     // keep device nodes usable (no nodev)
    kOptional = 4,    // skip if the source is missing
    kDir = 8,         // the source is a directory (else a file)
    kNetOnly = 16,    // only for jobs with network
    kNoNetOnly = 32,  // only for jobs without network
    kNoExec = 64,     // kRemountReadOnly: noexec too
    kFile = 128,      // kRbind: the source is a file (else a directory)
  };
  Kind kind;
  uint8_t flags;
  const char* a;
  const char* b;
};

// Operations of one job, at most (its layout's and its binds').
constexpr int kMaxOps = 512;

// Runs `op` (skipped when its kNetOnly / kNoNetOnly flag says so). 0 or an errno.
int RunMountOp(const MountOp& op, bool network);

// mkdir -p for an absolute path; with !last_too, only its parents. 0 or an errno.
int MkdirP(const char* path, bool last_too);

// A directory, or an empty file, to mount on (with its parents). A file that
// is there already is opened read-only, so that one in a read-only mount
// (/etc/hosts) can be mounted over. 0 or an errno.
int MakeMountPoint(const char* path, bool dir);

// Makes the root built at /newroot (a mount) read-only, with every mount
// point in it, and switches to it: the new root goes over the old one, which
// is then detached with the host and the template under it. 0, or an errno
// with *step: 8 for the remount, 7 for the switch.
int SwitchToNewRoot(int* step);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_MOUNT_OPS_H_
