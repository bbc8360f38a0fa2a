// A real nats-server (JetStream enabled) as a child process, for integration
// tests: loopback only, a free port, and a store directory that survives
// Restart() so JetStream state can be tested across server restarts.
//
// The server is a gatos::Process: always killed and reaped in the destructor,
// and it dies with the thread that started it (PR_SET_PDEATHSIG) if the test
// binary crashes.
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_NATS_SERVER_H_
#define GATOS_TESTS_SUPPORT_NATS_SERVER_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gatos/sys/process.h"
#include "test_util.h"

namespace gatos::testing {

class NatsServer {
 public:
  struct Options {
    // Written to a config file when > 0 (server default is 1 MB).
    int64_t max_payload_bytes = 0;
    // Bound on waiting for the port to accept connections.
    int start_timeout_ms = 10000;
    // Appended to the config file (e.g. an `include` of an authorization
    // block). Non-empty: a config file is written.
    std::string extra_config;
  };

  NatsServer() : NatsServer(Options()) {}
  explicit NatsServer(Options options);
  ~NatsServer() = default;
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // Starts the server and waits until its port accepts connections. On
  // failure the message carries the command and the tail of the server log.
  // Use as ASSERT_TRUE(server.Start()).
  ::testing::AssertionResult Start();
  // SIGTERM and wait (SIGKILL after 10 s). JetStream data is flushed.
  ::testing::AssertionResult Stop();
  // SIGKILL and wait: a crash. Unflushed JetStream writes may be lost.
  ::testing::AssertionResult Kill();
  // Stop() if running, then Start() on the same port and store directory.
  ::testing::AssertionResult Restart();
  // SIGHUP: the server reloads its config file (and what it includes).
  ::testing::AssertionResult Reload();
  // SIGSTOP / SIGCONT: the server goes silent without closing anything, as
  // a hung host or one cut off the network (its connections stay open,
  // nothing is answered), and comes back.
  ::testing::AssertionResult Pause();
  ::testing::AssertionResult Resume();

  // True from Start() until Stop()/Kill() (even if the server died meanwhile).
  bool running() const { return proc_.pid() > 0; }
  int port() const { return port_; }
  std::string url() const;
  const std::string& store_dir() const { return store_dir_; }
  const std::string& config_path() const { return config_path_; }
  // The directory the config file lives in (for included files).
  std::string dir() const { return dir_.path(); }
  std::string log() const;  // everything the server wrote so far

 private:
  ::testing::AssertionResult Signal(int signo, int wait_ms);
  ::testing::AssertionResult Failure(const std::string& what) const;

  Options options_;
  TempDir dir_;
  std::string store_dir_;
  std::string config_path_;
  std::string log_path_;
  int port_;
  Process proc_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_NATS_SERVER_H_
