#include "nats_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace gatos::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool PortAccepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// Waits up to wait_ms for `pid` to exit. True when reaped.
bool WaitExit(pid_t pid, int wait_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

NatsServer::NatsServer(Options options)
    : options_(options),
      store_dir_(dir_.Join("jetstream")),
      log_path_(dir_.Join("nats-server.log")),
      port_(FreePort()) {
  if (options_.max_payload_bytes > 0) {
    config_path_ = dir_.Join("nats-server.conf");
    WriteFile(config_path_, "max_payload: " + std::to_string(options_.max_payload_bytes) + "\n");
  }
}

NatsServer::~NatsServer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::string NatsServer::url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

std::string NatsServer::log() const { return ReadFile(log_path_); }

::testing::AssertionResult NatsServer::Failure(const std::string& what) const {
  std::string log_text = log();
  if (log_text.size() > 4000) log_text = "..." + log_text.substr(log_text.size() - 4000);
  return ::testing::AssertionFailure() << "nats-server on port " << port_ << ": " << what
                                       << "\n--- server log (" << log_path_ << ") ---\n"
                                       << log_text;
}

::testing::AssertionResult NatsServer::Start() {
  if (pid_ > 0) return ::testing::AssertionFailure() << "nats-server already running";
  std::vector<std::string> argv = {"nats-server",         "-js", "-a",      "127.0.0.1", "-p",
                                   std::to_string(port_), "-sd", store_dir_};
  if (!config_path_.empty()) {
    argv.push_back("-c");
    argv.push_back(config_path_);
  }
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;

  // Everything the child needs is prepared before fork: the parent has
  // library threads, so the child may only make async-signal-safe calls.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Failure("cannot open log file: " + std::string(strerror(errno)));
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Failure("fork failed: " + std::string(strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);  // parent already gone
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  pid_ = pid;

  auto deadline = Clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
  while (!PortAccepts(port_)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::string how = WIFEXITED(status)
                            ? "exited with code " + std::to_string(WEXITSTATUS(status))
                            : "died from signal " + std::to_string(WTERMSIG(status));
      if (WIFEXITED(status) && WEXITSTATUS(status) == 127) how += " (nats-server not on PATH?)";
      return Failure("`" + command + "` " + how + " before accepting connections");
    }
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return Failure("`" + command + "` did not accept connections within " +
                     std::to_string(options_.start_timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Signal(int signo, int wait_ms) {
  if (pid_ <= 0) return ::testing::AssertionFailure() << "nats-server is not running";
  kill(pid_, signo);
  if (!WaitExit(pid_, wait_ms)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return Failure("did not exit within " + std::to_string(wait_ms) + " ms after signal " +
                   std::to_string(signo) + "; killed");
  }
  pid_ = -1;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Stop() { return Signal(SIGTERM, 10000); }

::testing::AssertionResult NatsServer::Kill() { return Signal(SIGKILL, 10000); }

::testing::AssertionResult NatsServer::Restart() {
  if (pid_ > 0) {
    auto stopped = Stop();
    if (!stopped) return stopped;
  }
  return Start();
}

}  // namespace gatos::testing
