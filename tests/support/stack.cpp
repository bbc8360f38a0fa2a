#include "stack.h"

#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace gatos::testing {

namespace {
NatsServer::Options NatsOptions(const StackOptions& o, const std::string& dir) {
  NatsServer::Options n;
  n.max_payload_bytes = o.nats_max_payload;
  if (o.nats_auth) n.extra_config = "pid_file: \"" + dir + "/nats.pid\"\ninclude gatos-auth.conf\n";
  return n;
}
}  // namespace

Stack::Stack(StackOptions options) : options_(options), nats_(NatsOptions(options, dir_.path())) {
  env_ = GitTestEnv(dir_.path());
  ledger_ = dir_.Join("ledger.git");
  work_ = dir_.Join("work");
}

Stack::~Stack() {
  for (auto& [i, w] : workers_) {
    if (w && w->running()) w->Stop(SIGKILL, 5000);
  }
  if (gatosd_.running()) gatosd_.Stop(SIGTERM, 5000);
}

::testing::AssertionResult Stack::Start() {
  if (!options_.nats_auth) {
    auto ok = nats_.Start();
    if (!ok) return ok;
  }
  std::vector<std::string> init = {BinaryPath("gatosd"), "init", ledger_, "--lease-ms",
                                   std::to_string(options_.lease_ms)};
  if (options_.dev) init.push_back("--dev");
  RunOptions ro;
  ro.env = env_;
  RunResult r = Run(init, ro);
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatosd init: " << r.err;
  submitter_key_ = dir_.Join("alice");
  r = Gatos({"keygen", "-f", submitter_key_});
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "keygen: " << r.err;
  r = Gatos({"policy", "allow-submitter", "--ledger", ledger_, submitter_key_ + ".pub"});
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "allow-submitter: " << r.err;
  for (int i = 0; i < options_.workers; ++i) {
    std::string k = dir_.Join("worker" + std::to_string(i));
    r = Gatos({"keygen", "-f", k});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "keygen: " << r.err;
    r = Gatos({"policy", "allow-worker", "--ledger", ledger_, k + ".pub"});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "allow-worker: " << r.err;
    worker_keys_.push_back(k);
  }
  r = Run({"git", "init", "-q", work_}, ro);
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "git init: " << r.err;
  ro.cwd = work_;
  Run({"git", "config", "gpg.format", "ssh"}, ro);
  Run({"git", "config", "user.signingkey", submitter_key_}, ro);
  if (options_.nats_auth) {
    // The server starts with the policy's keys, as `gatos up` starts it.
    r = Gatos({"nats-config", "--ledger", ledger_});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "nats-config: " << r.err;
    {
      std::ofstream auth(nats_auth_file());
      auth << r.out;
    }
    auto ok = nats_.Start();
    if (!ok) return ok;
    env_["GATOS_NATS_KEY"] = submitter_key_;
  }
  http_port_ = FreePort();
  return StartGatosd();
}

::testing::AssertionResult Stack::StartGatosd(const std::map<std::string, std::string>& env) {
  std::string error;
  std::map<std::string, std::string> e = env_;
  for (const auto& [k, v] : env) e[k] = v;
  std::vector<std::string> argv = {BinaryPath("gatosd"), "serve", "--ledger", ledger_, "--nats", nats_.url(),
                                   "--http", "127.0.0.1:" + std::to_string(http_port_), "--republish-s",
                                   std::to_string(options_.republish_s), "--sweep-ms", "50"};
  argv.insert(argv.end(), options_.gatosd_args.begin(), options_.gatosd_args.end());
  if (options_.nats_auth) {
    argv.insert(argv.end(), {"--nats-auth-file", nats_auth_file(), "--nats-pid-file", dir_.Join("nats.pid"),
                             "--require-nats-auth"});
  }
  if (!gatosd_.Start(argv, e, dir_.Join("gatosd.log"), &error)) {
    return ::testing::AssertionFailure() << error;
  }
  if (!gatosd_.WaitForLog("serving ledger", 20000)) {
    return ::testing::AssertionFailure() << "gatosd did not start:\n" << gatosd_.log();
  }
  return ::testing::AssertionSuccess();
}

ChildProcess* Stack::StartWorker(int i, const std::vector<std::string>& extra,
                                 const std::map<std::string, std::string>& env) {
  auto& slot = workers_[i];
  if (slot && slot->running()) slot->Stop(SIGKILL);
  slot = std::make_unique<ChildProcess>();
  std::map<std::string, std::string> e = env_;
  for (const auto& [k, v] : env) e[k] = v;
  std::vector<std::string> argv = {BinaryPath("gatos-worker"), "run", "--nats", nats_.url(), "--key",
                                   worker_keys_.at(i), "--ledger-key", ledger_ + "/gatos/ledger_key.pub", "--state-dir", worker_state(i), "--name",
                                   "w" + std::to_string(i)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::string error;
  std::string log = dir_.path() + "/worker" + std::to_string(i) + ".log";
  size_t before = ReadFile(log).size();
  EXPECT_TRUE(slot->Start(argv, e, log, &error)) << error;
  // Ready once this run has logged "ready" (the log is appended across
  // restarts), or it exited (a test may start a worker that must refuse to
  // run; it checks that itself). One or the other within 10 s.
  auto ready = [&] {
    std::string text = ReadFile(log);
    return text.size() > before && text.find(" ready ", before) != std::string::npos;
  };
  bool settled = false;
  for (int k = 0; k < 400 && !(settled = ready() || !slot->running()); ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(settled || ready() || !slot->running())
      << "worker " << i << " neither ready nor exited after 10 s:\n" << ReadFile(log);
  return slot.get();
}

int Stack::StopGatosd(int signo) {
  // Only the lines of the next run matter to WaitForLog callers; keep the old log around.
  int rc = gatosd_.Stop(signo);
  std::string log = ReadFile(dir_.Join("gatosd.log"));
  WriteFile(dir_.Join("gatosd.prev.log"), ReadFile(dir_.Join("gatosd.prev.log")) + log);
  WriteFile(dir_.Join("gatosd.log"), "");
  return rc;
}

RunResult Stack::Gatos(std::vector<std::string> args, int timeout_s) {
  if (args.empty()) return RunResult{0, 0, "", ""};
  args.insert(args.begin(), BinaryPath("gatos"));
  RunOptions ro;
  ro.env = env_;
  ro.timeout_seconds = timeout_s;
  return Run(args, ro);
}

std::string Stack::PushJob(const std::string& yaml, RunResult* push) { return PushJobs({yaml}, push).at(0); }

std::vector<std::string> Stack::PushJobs(const std::vector<std::string>& yamls, RunResult* push) {
  RunOptions ro;
  ro.env = env_;
  ro.cwd = work_;
  std::vector<std::string> ids;
  std::vector<std::string> refspecs = {"git", "push", "-q", push_url()};
  for (const auto& yaml : yamls) {
    WriteFile(work_ + "/job.yaml", yaml);
    std::string id = Gatos({"job", "id", work_ + "/job.yaml"}).out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    std::string branch = "b" + std::to_string(pushes_++);
    Run({"git", "checkout", "-q", "--orphan", branch}, ro);
    Run({"git", "add", "job.yaml"}, ro);
    RunResult c = Run({"git", "commit", "-q", "-S", "-m", "a job", "-m", "Job-Id: " + id}, ro);
    EXPECT_EQ(c.exit_code, 0) << c.err;
    refspecs.push_back(branch + ":refs/gatos/submit/" + branch);
    ids.push_back(id);
  }
  RunResult p = Run(refspecs, ro);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  if (push) *push = p;
  return ids;
}

std::string Stack::HttpGet(const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(http_port_));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return "connect failed";
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t sp = resp.find(' ');
  size_t body = resp.find("\r\n\r\n");
  if (sp == std::string::npos || body == std::string::npos) return "bad response";
  return resp.substr(sp + 1, 3) + "\n" + resp.substr(body + 4);
}

}  // namespace gatos::testing
