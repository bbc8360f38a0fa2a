#include "nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
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

}  // namespace

NatsServer::NatsServer(Options options)
    : options_(options),
      store_dir_(dir_.Join("jetstream")),
      log_path_(dir_.Join("nats-server.log")),
      port_(FreePort()) {
  std::string config;
  if (options_.max_payload_bytes > 0) config += "max_payload: " + std::to_string(options_.max_payload_bytes) + "\n";
  config += options_.extra_config;
  if (!config.empty()) {
    config_path_ = dir_.Join("nats-server.conf");
    WriteFile(config_path_, config);
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
  if (running()) return ::testing::AssertionFailure() << "nats-server already running";
  std::vector<std::string> argv = {"nats-server",         "-js", "-a",      "127.0.0.1", "-p",
                                   std::to_string(port_), "-sd", store_dir_};
  if (!config_path_.empty()) {
    argv.push_back("-c");
    argv.push_back(config_path_);
  }
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;

  Result<Process> p = Process::Spawn(argv, SpawnOptions::WithLog(log_path_, SIGKILL));
  if (!p.ok()) return Failure(p.status().message());
  proc_ = std::move(*p);

  auto deadline = Clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
  while (!PortAccepts(port_)) {
    if (!proc_.running()) {
      return Failure("`" + command + "` " + proc_.exit_status()->ToString() + " before accepting connections");
    }
    if (Clock::now() >= deadline) {
      proc_.Kill();
      return Failure("`" + command + "` did not accept connections within " +
                     std::to_string(options_.start_timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Signal(int signo, int wait_ms) {
  if (!running()) return ::testing::AssertionFailure() << "nats-server is not running";
  proc_.Signal(signo);
  if (!proc_.WaitFor(std::chrono::milliseconds(wait_ms))) {
    proc_.Kill();
    return Failure("did not exit within " + std::to_string(wait_ms) + " ms after signal " +
                   std::to_string(signo) + "; killed");
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Stop() { return Signal(SIGTERM, 10000); }

::testing::AssertionResult NatsServer::Kill() { return Signal(SIGKILL, 10000); }

::testing::AssertionResult NatsServer::Reload() {
  if (!running()) return ::testing::AssertionFailure() << "nats-server is not running";
  if (!proc_.running()) return Failure("nats-server died");
  proc_.Signal(SIGHUP);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Pause() {
  if (!running()) return ::testing::AssertionFailure() << "nats-server is not running";
  if (!proc_.running()) return Failure("nats-server died");
  proc_.Signal(SIGSTOP);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Resume() {
  if (!running()) return ::testing::AssertionFailure() << "nats-server is not running";
  proc_.Signal(SIGCONT);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NatsServer::Restart() {
  if (running()) {
    auto stopped = Stop();
    if (!stopped) return stopped;
  }
  return Start();
}

}  // namespace gatos::testing
