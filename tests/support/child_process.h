// A long-running child process for end-to-end tests (gatosd, gatos-worker):
// output to a log file, killed with the test (PR_SET_PDEATHSIG) and in the
// destructor. A thin layer over gatos::Process (gatos/sys/process.h).
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_
#define GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "gatos/sys/process.h"

namespace gatos::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() = default;  // the Process SIGKILLs and reaps
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv (PATH lookup) with `env` added to the environment, stdout and
  // stderr appended to log_path. A child still held is killed first. False
  // (with *error) if it cannot start.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& log_path, std::string* error);
  // Sends `signo` and waits up to wait_ms for the exit (then SIGKILL).
  // Returns the exit code, or -signal when killed by a signal; -1 when no
  // child runs (none started, or running() already saw it exit).
  int Stop(int signo, int wait_ms = 10000);
  bool running() { return proc_.running(); }
  pid_t pid() const { return proc_.pid(); }
  std::string log() const;
  // Waits until the log contains `needle`; false after timeout_ms.
  bool WaitForLog(const std::string& needle, int timeout_ms) const;

 private:
  Process proc_;
  std::string log_path_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_
