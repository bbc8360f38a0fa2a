// A real local stack for end-to-end tests: nats-server (JetStream) on a free
// loopback port, a ledger made by `gatosd init`, a submitter key and worker
// keys allowed by its policy, and `gatosd serve` as a child process.
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_STACK_H_
#define GATOS_TESTS_SUPPORT_STACK_H_

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "nats_server.h"
#include "test_util.h"

namespace gatos::testing {

struct StackOptions {
  int64_t lease_ms = 30000;
  bool dev = false;
  int workers = 2;              // worker keys generated and allowed
  int republish_s = 30;
  int64_t nats_max_payload = 8 << 20;
  // nats-server admits only the policy's keys (gatos nats-config), gatosd
  // keeps its authorization in step with the policy, and the CLI connects as
  // the submitter (GATOS_NATS_KEY).
  bool nats_auth = false;
  // More `gatosd serve` flags (e.g. {"--offer-window", "all"}).
  std::vector<std::string> gatosd_args;
};

class Stack {
 public:
  explicit Stack(StackOptions options = {});
  ~Stack();

  // nats-server, ledger, keys, policy; then gatosd serve.
  ::testing::AssertionResult Start();
  ::testing::AssertionResult StartGatosd(const std::map<std::string, std::string>& env = {});
  // Stops gatosd with `signo` (SIGKILL = a crash). Returns its exit status.
  int StopGatosd(int signo);

  // Starts gatos-worker `i` (key worker_keys()[i], state dir worker<i>.state),
  // waits until it is ready. Extra args go after the standard ones.
  ChildProcess* StartWorker(int i, const std::vector<std::string>& extra = {},
                            const std::map<std::string, std::string>& env = {});
  ChildProcess* worker(int i) { return workers_.at(i).get(); }
  std::string worker_state(int i) const { return dir_.path() + "/worker" + std::to_string(i) + ".state"; }

  // Runs the gatos CLI (PATH lookup of nothing: the built binary).
  RunResult Gatos(std::vector<std::string> args, int timeout_s = 120);
  // Commits `yaml` as job.yaml, signed by the submitter key with stock git,
  // pushes it to refs/gatos/submit/<name>; returns "blake3:<hex>".
  std::string PushJob(const std::string& yaml, RunResult* push = nullptr);
  // Several jobs, one commit each, in ONE git push; returns their ids in order.
  std::vector<std::string> PushJobs(const std::vector<std::string>& yamls, RunResult* push = nullptr);
  // GET http://127.0.0.1:<http_port><path>; returns "<code>\n<body>".
  std::string HttpGet(const std::string& path);

  const std::string& ledger() const { return ledger_; }
  // Where stock git pushes go: the ledger's front door (<ledger>/push).
  std::string push_url() const { return ledger_ + "/push"; }
  std::string nats_url() const { return nats_.url(); }
  int http_port() const { return http_port_; }
  const std::string& submitter_key() const { return submitter_key_; }
  const std::vector<std::string>& worker_keys() const { return worker_keys_; }
  const std::map<std::string, std::string>& env() const { return env_; }
  TempDir& dir() { return dir_; }
  NatsServer& nats() { return nats_; }
  ChildProcess& gatosd() { return gatosd_; }
  // With nats_auth: the authorization file gatosd rewrites.
  std::string nats_auth_file() const { return nats_.dir() + "/gatos-auth.conf"; }

 private:
  StackOptions options_;
  TempDir dir_;
  NatsServer nats_;
  ChildProcess gatosd_;
  std::map<int, std::unique_ptr<ChildProcess>> workers_;
  std::map<std::string, std::string> env_;
  std::string ledger_, work_, submitter_key_;
  std::vector<std::string> worker_keys_;
  int http_port_ = 0;
  int pushes_ = 0;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_STACK_H_
