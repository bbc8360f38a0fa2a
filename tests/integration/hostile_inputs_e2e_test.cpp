// A hostile but authorized submitter against a real stack (nats-server,
// gatosd, two sandboxed workers whose --local-inputs root holds the whole
// stack, ledger and workers' state included):
//  - local repositories that point git at a host file or at another worker's
//    state (a symlinked packed-refs, a gitfile, a .git symlink, alternates,
//    the state itself) each end `failed` with a classified reason, and a
//    canary line from the target is in no ledger object, no log line and no
//    dashboard page;
//  - a scan job cannot write into the scan state (--write-baseline onto the
//    fingerprint key, --state-dir, --repo into it), later scans still work,
//    and a manifest that sets GATOS_INPUT_7 is refused at push;
//  - a job cannot make a nested user namespace;
//  - ten idle HTTP connections do not hold up gatosd's /healthz.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>
#include <nlohmann/json.hpp>

#include "git_repo.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

// Lowercase: git lowercases what it quotes of a config key.
constexpr char kCanary[] = "canary-e2e-4c1d9b-only-root-may-read-this";

class HostileInputsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(stack_.Start());
    env_ = stack_.env();
    for (const auto& [k, v] : TestGitEnv(stack_.dir().path())) {
      if (k != "HOME") env_[k] = v;
    }
    fs::create_directories(Dir("host"));
    fs::create_directories(Dir("repos"));
    WriteFile(Dir("host/secret"), std::string(kCanary) + "\n", 0600);
  }

  std::string Dir(const std::string& rel) { return stack_.dir().Join(rel); }

  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }
  std::string MakeBare(const std::string& path, const std::string& content = "hello\n") {
    return MakeBareRepo(env_, path, content);
  }

  std::string InputJob(const std::string& url, const std::string& nonce) {
    return stack_.PushJob("command: [\"/bin/true\"]\ninputs:\n  - {kind: git, url: \"" + url +
                          "\", ref: main, nonce: \"" + nonce + "\"}\ntimeout: 60\n");
  }

  std::string WaitState(const std::string& job) {
    stack_.Gatos({"wait", job, "--ledger", stack_.nats_url(), "--timeout", "120"}, 150);
    json j = json::parse(stack_.Gatos({"status", job, "--ledger", stack_.ledger(), "--json"}).out, nullptr, false);
    return j.is_object() ? j.value("state", "") : "";
  }

  std::string Show(const std::string& job, const std::string& what) {
    return testing::Run({"git", "--git-dir", stack_.ledger(), "show",
                         "refs/gatos/jobs/" + job.substr(7) + "/result:" + what})
        .out;
  }

  std::string Reason(const std::string& job) {
    json poe = json::parse(Show(job, "poe.json"), nullptr, false);
    return poe.is_object() ? poe.value("reason", "") : "";
  }

  // A push git itself makes (no `gatos job id`): the ledger's answer.
  RunResult PushRaw(const std::string& yaml) {
    RunOptions ro;
    ro.env = env_;
    const std::string dir = Dir("raw-" + std::to_string(raw_++));
    Git({"init", "-q", "-b", "main", dir});
    Git({"config", "gpg.format", "ssh"}, dir);
    Git({"config", "user.signingkey", stack_.submitter_key()}, dir);
    WriteFile(dir + "/job.yaml", yaml);
    Git({"add", "job.yaml"}, dir);
    Git({"commit", "-q", "-S", "-m", "a job", "-m", "Job-Id: blake3:" + std::string(64, '0')}, dir);
    ro.cwd = dir;
    return testing::Run({"git", "push", stack_.push_url(), "main:refs/gatos/submit/raw"}, ro);
  }

  Stack stack_;
  std::map<std::string, std::string> env_;
  int raw_ = 0;
};

TEST_F(HostileInputsE2ETest, RedirectingLocalRepositoriesFailAndLeakNothing) {
  // Both workers may read local repositories anywhere in the stack's
  // directory: the ledger and their own state are in it.
  stack_.StartWorker(0, {"--local-inputs", stack_.dir().path()});
  stack_.StartWorker(1, {"--local-inputs", stack_.dir().path()});
  ASSERT_TRUE(stack_.worker(0)->running()) << stack_.worker(0)->log();
  ASSERT_TRUE(stack_.worker(1)->running()) << stack_.worker(1)->log();
  const std::string other_state = stack_.worker_state(1);
  // A repository in worker 1's state, as its mirrors are.
  const std::string mirror = MakeBare(other_state + "/inputs/mirrors/private-mirror", "private\n");

  const std::string planted = MakeBare(Dir("repos/planted.git"));
  fs::remove(planted + "/packed-refs");
  fs::create_symlink(Dir("host/secret"), planted + "/packed-refs");
  fs::create_directories(Dir("repos/gitfile"));
  WriteFile(Dir("repos/gitfile/.git"), "gitdir: " + mirror + "\n");
  fs::create_directories(Dir("repos/gitlink"));
  fs::create_directory_symlink(mirror, Dir("repos/gitlink/.git"));
  const std::string alternates = MakeBare(Dir("repos/alternates.git"));
  WriteFile(alternates + "/objects/info/alternates", mirror + "/objects\n");
  const std::string include = MakeBare(Dir("repos/include.git"));
  Git({"--git-dir=" + include, "config", "include.path", Dir("host/secret")});

  struct Case {
    std::string url, reason;
  };
  const std::vector<Case> cases = {
      {planted, "refused: redirects outside the input (a symlink: packed-refs)"},
      {Dir("repos/gitfile"), "refused: redirects outside the input (a .git file (gitdir: elsewhere))"},
      {Dir("repos/gitlink"), "refused: redirects outside the input (a .git symlink)"},
      {alternates, "refused: redirects outside the input (objects/info/alternates)"},
      {mirror, "this path holds gatos state and is never an input"},
      {stack_.ledger(), "this path holds gatos state and is never an input"},
  };
  std::vector<std::string> jobs;
  for (size_t i = 0; i < cases.size(); ++i) jobs.push_back(InputJob(cases[i].url, std::to_string(i)));
  // The config include is not refused: the sandboxed git never sees the file.
  const std::string included = InputJob(include, "include");
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].url);
    EXPECT_EQ(WaitState(jobs[i]), "failed");
    EXPECT_HAS(Reason(jobs[i]), cases[i].reason);
    EXPECT_HAS(Reason(jobs[i]), "[permanent");
  }
  EXPECT_EQ(WaitState(included), "succeeded") << Reason(included);

  // The canary is nowhere: ledger objects, logs, dashboard pages.
  RunResult objects = testing::Run({"git", "--git-dir", stack_.ledger(), "cat-file", "--batch-all-objects", "--batch"});
  EXPECT_EQ(objects.exit_code, 0);
  EXPECT_EQ(objects.out.find(kCanary), std::string::npos) << "the canary reached the ledger";
  for (const auto& e : fs::directory_iterator(stack_.dir().path())) {
    if (e.path().extension() != ".log") continue;
    EXPECT_EQ(ReadFile(e.path().string()).find(kCanary), std::string::npos) << e.path();
  }
  std::vector<std::string> pages = {"/", "/jobs", "/jobs?state=failed", "/metrics"};
  for (const std::string& j : jobs) pages.push_back("/jobs/" + j.substr(7));
  for (const std::string& page : pages) {
    const std::string body = stack_.HttpGet(page);
    EXPECT_EQ(body.substr(0, 3), "200") << page;
    EXPECT_EQ(body.find(kCanary), std::string::npos) << page;
  }
}

TEST_F(HostileInputsE2ETest, ScanJobsCannotWriteTheScanStateAndManifestsCannotSetItsVariables) {
  stack_.StartWorker(0, {"--local-inputs", Dir("repos")});
  ASSERT_TRUE(stack_.worker(0)->running()) << stack_.worker(0)->log();
  const std::string repo = MakeBare(Dir("repos/app.git"));
  auto scan_job = [&](const std::string& args, const std::string& nonce) {
    return stack_.PushJob("command: [\"gatos-scan\"]\nargs: [" + args + "]\ninputs:\n  - {kind: git, url: \"" +
                          repo + "\", ref: main, nonce: \"" + nonce + "\"}\ntimeout: 60\n");
  };
  // A first honest scan makes the state (fingerprint key, database).
  const std::string first = scan_job("\"--input\", \"0\"", "0");
  ASSERT_EQ(WaitState(first), "succeeded") << Show(first, "stderr");
  const std::string state = stack_.worker_state(0) + "/scan";
  const std::string key_before = ReadFile(state + "/fingerprint.key");
  ASSERT_FALSE(key_before.empty());

  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"\"--input\", \"0\", \"--write-baseline\", \"" + state + "/fingerprint.key\"",
       "--write-baseline: " + state + "/fingerprint.key is inside the worker's scan state"},
      {"\"--input\", \"0\", \"--write-baseline\", \"" + state + "/../scan/scan.sqlite\"",
       "is inside the worker's scan state"},
      {"\"--input\", \"0\", \"--state-dir\", \"/tmp/mine\"", "--state-dir is not for scan jobs"},
      {"\"--repo\", \"file://" + state + "/mirrors\"", "--repo: file://" + state + "/mirrors is inside"},
  };
  for (size_t i = 0; i < attacks.size(); ++i) {
    SCOPED_TRACE(attacks[i].first);
    const std::string job = scan_job(attacks[i].first, "attack" + std::to_string(i));
    EXPECT_EQ(WaitState(job), "failed");
    EXPECT_HAS(Show(job, "stderr"), attacks[i].second);
  }
  EXPECT_EQ(ReadFile(state + "/fingerprint.key"), key_before);
  // Later scans on that worker still succeed.
  const std::string later = scan_job("\"--input\", \"0\"", "later");
  EXPECT_EQ(WaitState(later), "succeeded") << Show(later, "stderr");

  // The worker's variables cannot come from a manifest.
  RunResult refused = PushRaw(
      "command: [\"gatos-scan\"]\nargs: [\"--input\", \"7\"]\n"
      "env: {GATOS_INPUT_7: \"/gatos/inputs/0\", GATOS_INPUT_7_URL: \"https://github.com/x/y\"}\n"
      "inputs:\n  - {kind: git, url: \"" + repo + "\", ref: main}\ntimeout: 60\n");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_HAS(refused.err, "env.GATOS_INPUT_7");
  EXPECT_HAS(refused.err, "is reserved for the worker");
}

TEST_F(HostileInputsE2ETest, AJobCannotMakeANestedUserNamespace) {
  stack_.StartWorker(0);
  ASSERT_TRUE(stack_.worker(0)->running()) << stack_.worker(0)->log();
  const std::string job = stack_.PushJob("command: [\"unshare\", \"--user\", \"--map-root-user\", \"true\"]\ntimeout: 30\n");
  EXPECT_EQ(WaitState(job), "failed");
  EXPECT_HAS(Show(job, "stderr"), "Operation not permitted");
}

TEST_F(HostileInputsE2ETest, IdleHttpConnectionsDoNotHoldUpHealthz) {
  // Healthy first (the ledger thread's first heartbeat).
  std::string health;
  for (int i = 0; i < 100 && health.substr(0, 3) != "200"; ++i) {
    health = stack_.HttpGet("/healthz");
    if (health.substr(0, 3) != "200") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(health.substr(0, 3), "200") << health;
  std::vector<int> idle;
  for (int i = 0; i < 10; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(stack_.http_port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  health = stack_.HttpGet("/healthz");
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  EXPECT_EQ(health.substr(0, 3), "200") << health;
  // Answered while every idle client still holds its connection.
  for (int fd : idle) {
    char c;
    EXPECT_NE(::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT), 0) << "closed before /healthz was answered";
    ::close(fd);
  }
  std::cout << "gatosd /healthz with 10 idle connections: " << took.count() << " us\n";
}

}  // namespace
}  // namespace gatos::testing
