// The bubblewrap engine's device nodes: a root worker's job gets nodes of
// its own, bound over bwrap's (docs/worker-execution.md, "Sandbox").
//
// Thread-safety: Make may be called from any thread; a PrivateDevices is
// owned by one job (PreparedJob, then its Execution) and removed with it.
#ifndef GATOS_EXEC_SRC_PRIVATE_DEVICES_H_
#define GATOS_EXEC_SRC_PRIVATE_DEVICES_H_

#include <memory>
#include <string>
#include <vector>

#include "gatos/model/status.h"

namespace gatos::exec_internal {

// A job's own copies of the device nodes bubblewrap's --dev binds from the
// host (/dev/null, /dev/zero, ...), in a new directory of the worker's,
// removed with this object. bwrap binds the host's nodes writable (it has no
// read-only device bind), and a job run as uid 0 (a root worker's) owns
// them: `chmod 0 /dev/null` in the job would change the host's. Bound over
// them, these are what such a job can change, for itself alone.
class PrivateDevices {
 public:
  // In a new directory in `parent` (which is not bound into the sandbox), when
  // this process's user owns one of the host's nodes (the job would run as
  // that user); nullptr when it owns none (the host's are safe to bind).
  // Needs root (mknod) and a file system that allows device nodes.
  static Result<std::unique_ptr<PrivateDevices>> Make(const std::string& parent);
  ~PrivateDevices();
  PrivateDevices(const PrivateDevices&) = delete;
  PrivateDevices& operator=(const PrivateDevices&) = delete;
  const std::string& dir() const { return dir_; }
  const std::vector<std::string>& names() const { return names_; }  // the nodes made

 private:
  explicit PrivateDevices(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::vector<std::string> names_;
};

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_PRIVATE_DEVICES_H_
