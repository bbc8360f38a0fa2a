#include "child_process.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include "test_util.h"

namespace gatos::testing {

bool ChildProcess::Start(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, const std::string& log_path,
                         std::string* error) {
  log_path_ = log_path;
  SpawnOptions o = SpawnOptions::WithLog(log_path, SIGKILL);
  o.env = Environment::CurrentWith(env);
  Result<Process> p = Process::Spawn(argv, o);
  if (!p.ok()) {
    *error = p.status().message();
    return false;
  }
  proc_ = std::move(*p);
  return true;
}

int ChildProcess::Stop(int signo, int wait_ms) {
  if (proc_.pid() <= 0) return -1;  // none started, or already reaped
  ExitStatus st = proc_.Stop(signo, std::chrono::milliseconds(wait_ms));
  return st.signal ? -st.signal : st.code;
}

std::string ChildProcess::log() const { return log_path_.empty() ? "" : ReadFile(log_path_); }

bool ChildProcess::WaitForLog(const std::string& needle, int timeout_ms) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace gatos::testing
