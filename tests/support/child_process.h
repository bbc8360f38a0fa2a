// A long-running child process for end-to-end tests (gatosd, gatos-worker):
// output to a log file, killed with the test (PR_SET_PDEATHSIG) and in the
// destructor.
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_
#define GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace gatos::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv (PATH lookup) with `env` added to the environment, stdout and
  // stderr appended to log_path. False (with *error) if fork/exec fails.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& log_path, std::string* error);
  // Sends `signo` and waits up to wait_ms for the exit (then SIGKILL).
  // Returns the exit code, or -signal when killed by a signal.
  int Stop(int signo, int wait_ms = 10000);
  bool running();
  pid_t pid() const { return pid_; }
  std::string log() const;
  // Waits until the log contains `needle`; false after timeout_ms.
  bool WaitForLog(const std::string& needle, int timeout_ms) const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_CHILD_PROCESS_H_
