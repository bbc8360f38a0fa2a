// A replicated ledger of real processes on loopback for tests: a
// three-node nats-server cluster (JetStream, R3) and three `gatosd serve
// --replicated` replicas (r0, r1, r2; each with --http on a port of its
// own), a worker and a submitting key. Used by the replicated end-to-end
// tests.
#ifndef GATOS_TESTS_SUPPORT_REPLICATED_LEDGER_H_
#define GATOS_TESTS_SUPPORT_REPLICATED_LEDGER_H_

#include <gtest/gtest.h>

#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "git_repo.h"
#include "log_reader.h"
#include "nats_server.h"
#include "test_util.h"

namespace gatos::testing {

constexpr int kReplicas = 3;

class ReplicatedLedger {
 public:
  ReplicatedLedger() {
    std::vector<int> route_ports;
    for (int i = 0; i < kReplicas; ++i) route_ports.push_back(FreePort());
    for (int i = 0; i < kReplicas; ++i) {
      std::string routes;
      for (int j = 0; j < kReplicas; ++j) {
        if (j != i) routes += (routes.empty() ? "" : ", ") + std::string("nats-route://127.0.0.1:") + std::to_string(route_ports[j]);
      }
      NatsServer::Options o;
      o.extra_config = "server_name: n" + std::to_string(i) + "\ncluster {\n  name: gatos\n  listen: 127.0.0.1:" +
                       std::to_string(route_ports[i]) + "\n  routes: [" + routes + "]\n}\n";
      nats_.push_back(std::make_unique<NatsServer>(o));
    }
    env_ = GitTestEnv(dir_.path());
    for (int i = 0; i < kReplicas; ++i) {
      http_ports_.push_back(FreePort());
      ledgers_.push_back(dir_.Join("r" + std::to_string(i) + ".git"));
      gatosd_.push_back(std::make_unique<ChildProcess>());
    }
  }
  ~ReplicatedLedger() {
    if (worker_.running()) worker_.Stop(SIGKILL, 5000);
    for (auto& g : gatosd_) {
      if (g->running()) g->Stop(SIGTERM, 5000);
    }
  }

  RunResult Cmd(std::vector<std::string> argv, int timeout_s = 120) {
    RunOptions ro;
    ro.env = env_;
    ro.timeout_seconds = timeout_s;
    return Run(argv, ro);
  }
  RunResult Gatos(std::vector<std::string> args, int timeout_s = 120) {
    args.insert(args.begin(), BinaryPath("gatos"));
    return Cmd(args, timeout_s);
  }

  // `lease_ms`: the policy's lease (short by default, so that a killed
  // worker's job is offered again soon).
  ::testing::AssertionResult Prepare(int lease_ms = 3000) {
    for (auto& n : nats_) {
      auto ok = n->Start();
      if (!ok) return ok;
      urls_ += (urls_.empty() ? "" : ",") + n->url();
    }
    RunResult r = Cmd({BinaryPath("gatosd"), "init", ledgers_[0], "--lease-ms", std::to_string(lease_ms)});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatosd init: " << r.err;
    alice_ = dir_.Join("alice");
    worker_key_ = dir_.Join("worker");
    for (const auto& [k, what] : {std::pair{alice_, "allow-submitter"}, std::pair{worker_key_, "allow-worker"}}) {
      r = Gatos({"keygen", "-f", k});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "keygen: " << r.err;
      r = Gatos({"policy", what, "--ledger", ledgers_[0], k + ".pub"});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << what << ": " << r.err;
    }
    for (int i = 1; i < kReplicas; ++i) {
      r = Cmd({BinaryPath("gatosd"), "init", ledgers_[i], "--replica-of", ledgers_[0], "--ledger-key",
               ledgers_[0] + "/gatos/ledger_key"});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatosd init --replica-of: " << r.err << r.out;
    }
    return ::testing::AssertionSuccess();
  }

  // `extra_env`: added to this replica's environment (a failpoint);
  // `extra_args`: to its gatosd serve, after serve_args_.
  ::testing::AssertionResult StartReplica(int i, const std::map<std::string, std::string>& extra_env = {},
                                          const std::vector<std::string>& extra_args = {}) {
    std::string error;
    std::vector<std::string> argv = {BinaryPath("gatosd"), "serve",   "--replicated",    "--replica-name",
                                     "r" + std::to_string(i), "--ledger", ledgers_[i],  "--nats",
                                     urls_,                  "--stream-replicas", "3", "--sweep-ms",
                                     "50",                   "--republish-s", "2",     "--nats-wait-s",
                                     "60",                   "--http", "127.0.0.1:" + std::to_string(http_ports_[i])};
    argv.insert(argv.end(), serve_args_.begin(), serve_args_.end());
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    // The log file is appended across restarts: what this run wrote starts here.
    start_at_[i] = gatosd_[i]->log().size();
    std::map<std::string, std::string> env = env_;
    for (const auto& [k, v] : extra_env) env[k] = v;
    if (!gatosd_[i]->Start(argv, env, dir_.Join("r" + std::to_string(i) + ".log"), &error)) {
      return ::testing::AssertionFailure() << error;
    }
    return ::testing::AssertionSuccess();
  }

  // The replica serving as leader now (its last role line says so), or -1.
  int Leader() {
    for (int i = 0; i < kReplicas; ++i) {
      if (!gatosd_[i]->running()) continue;
      std::string log = gatosd_[i]->log().substr(start_at_[i]);
      size_t leads = log.rfind(" leads with term ");
      size_t follows = log.rfind(" following");
      size_t serving = log.rfind("serving ledger");
      if (leads != std::string::npos && serving != std::string::npos && serving > leads &&
          (follows == std::string::npos || follows < leads)) {
        return i;
      }
    }
    return -1;
  }
  // Prepare, every replica started, one elected (its index in *leader) and
  // the worker started: how most tests begin.
  ::testing::AssertionResult StartAll(int* leader = nullptr) {
    if (auto r = Prepare(); !r) return r;
    for (int i = 0; i < kReplicas; ++i) {
      if (auto r = StartReplica(i); !r) return r;
    }
    const int l = WaitForLeader();
    if (l < 0) return ::testing::AssertionFailure() << "no replica was elected";
    if (leader) *leader = l;
    return StartWorker();
  }

  int WaitForLeader(int not_this = -1) {
    int leader = -1;
    PollFor(30000, [&] {
      leader = Leader();
      return leader >= 0 && leader != not_this;
    });
    return leader != not_this ? leader : -1;
  }

  ::testing::AssertionResult StartWorker() {
    std::string error;
    std::vector<std::string> argv = {BinaryPath("gatos-worker"), "run", "--nats", urls_, "--key", worker_key_,
                                     "--ledger-key", ledgers_[0] + "/gatos/ledger_key.pub", "--state-dir",
                                     dir_.Join("worker.state"), "--name", "w0"};
    if (!worker_.Start(argv, env_, dir_.Join("worker.log"), &error)) return ::testing::AssertionFailure() << error;
    return ::testing::AssertionSuccess();
  }

  // Submits job `n` through whichever replica leads; its id when the ledger
  // acknowledged it, "" otherwise (no leader at that moment).
  // `urls`: the NATS members the client tries, in order (default: all).
  std::string Submit(int n, const std::string& urls = "") {
    const std::string file = dir_.Join("job" + std::to_string(n) + ".yaml");
    WriteFile(file, "command: [\"/bin/echo\", \"job-" + std::to_string(n) + "\"]\ntimeout: 30\n");
    RunResult r = Gatos(
        {"submit", file, "--ledger", urls.empty() ? urls_ : urls, "--sign-key", alice_, "--timeout", "5"}, 45);
    if (r.exit_code != 0) return "";
    return TrimEnd(r.out);
  }

  // Pushes a job commit (job.yaml = `yaml`, signed by alice, with no
  // parent unless `with_parent`) to replica i's front door with stock git;
  // *id is the job's id.
  RunResult PushJob(int i, const std::string& yaml, std::string* id, bool with_parent = false) {
    RunOptions ro;
    ro.env = env_;
    const std::string work = dir_.Join("work");
    if (!pushes_++) {
      Run({"git", "init", "-q", work}, ro);
      ro.cwd = work;
      Run({"git", "config", "gpg.format", "ssh"}, ro);
      Run({"git", "config", "user.signingkey", alice_}, ro);
    }
    ro.cwd = work;
    WriteFile(work + "/job.yaml", yaml);
    *id = TrimEnd(Gatos({"job", "id", work + "/job.yaml"}).out);
    const std::string branch = "b" + std::to_string(pushes_);
    if (!with_parent) Run({"git", "checkout", "-q", "--orphan", branch}, ro);
    Run({"git", "add", "job.yaml"}, ro);
    RunResult c = Run({"git", "commit", "-q", "-S", "-m", "a job", "-m", "Job-Id: " + *id}, ro);
    EXPECT_EQ(c.exit_code, 0) << c.err;
    ro.timeout_seconds = 120;
    return Run({"git", "push", ledgers_[i] + "/push", "HEAD:refs/gatos/submit/" + branch}, ro);
  }

  // Stops every replica (SIGTERM); then in each replica's repository
  // `gatos verify --all` passes and the signed log holds each of `acked`
  // once with exactly one result.
  void StopAndCheckEachReplica(const std::vector<std::string>& acked) {
    for (int i = 0; i < kReplicas; ++i) gatosd_[i]->Stop(SIGTERM);
    for (int i = 0; i < kReplicas; ++i) {
      RunResult v = Gatos({"verify", "--all", "--repo", ledgers_[i], "--ledger-key", ledgers_[0] + "/gatos/ledger_key.pub"},
                          300);
      EXPECT_EQ(v.exit_code, 0) << "r" << i << ": " << v.out.substr(0, 4000) << v.err;
      ExpectOneSubmitAndOneResultEach(ledgers_[i], acked);
    }
  }

  // The end of every replica's log, for failure messages.
  std::string Logs() {
    std::string out;
    for (int i = 0; i < kReplicas; ++i) {
      std::string l = gatosd_[i]->log();
      if (l.size() > 3000) l = "..." + l.substr(l.size() - 3000);
      out += "--- r" + std::to_string(i) + " ---\n" + l;
    }
    return out;
  }

  std::string LogHead(int i) {
    return TrimEnd(Cmd({"git", "-C", ledgers_[i], "rev-parse", "refs/gatos/log"}).out);
  }
  std::string LogHeads() {
    std::string out;
    for (int i = 0; i < kReplicas; ++i) out += "r" + std::to_string(i) + " " + LogHead(i) + "\n";
    return out;
  }
  // Polls until every replica's log head is `leader`'s (-1: whichever
  // replica leads at the time); false on timeout. The common head in *head.
  bool WaitForOneLogHead(int leader, int64_t timeout_ms, std::string* head = nullptr) {
    return PollFor(timeout_ms, [&] {
      const int l = leader >= 0 ? leader : Leader();
      if (l < 0) return false;
      const std::string h = LogHead(l);
      for (int i = 0; i < kReplicas; ++i) {
        if (LogHead(i) != h) return false;
      }
      if (head) *head = h;
      return true;
    });
  }

  TempDir dir_;
  std::vector<std::string> serve_args_;  // more flags for every replica's gatosd serve
  std::vector<std::unique_ptr<NatsServer>> nats_;
  std::string urls_;
  std::map<std::string, std::string> env_;
  std::vector<std::string> ledgers_;
  std::vector<std::unique_ptr<ChildProcess>> gatosd_;
  std::map<int, size_t> start_at_;
  std::vector<int> http_ports_;  // the dashboard and /metrics, served by the leader
  ChildProcess worker_;
  std::string alice_, worker_key_;
  int pushes_ = 0;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_REPLICATED_LEDGER_H_
