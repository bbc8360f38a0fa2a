// Triggers with real processes (docs/scheduling.md, "Triggers"): a real
// bare repository as the watched remote (a path URL), git pushes to it,
// nats-server, gatosd serve reading it with git ls-remote (SIGKILLed in one
// test), a gatos-worker running the fired jobs with the watched repository
// as a local input, and `gatos verify` replaying every fire.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gatos/model/clock.h"
#include "git_http_server.h"
#include "git_repo.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

class TriggerFireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(stack_.Start());
    env_ = WithTestGitIdentity(stack_.env());
    remote_ = repos_.Join("app.git");
    Git({"init", "-q", "--bare", "-b", "main", remote_});
    Git({"init", "-q", "-b", "main", Dir("work")});
    Git({"remote", "add", "origin", remote_}, Dir("work"));
    first_ = Push("main", "one");
    // The job reads the watched repository (its input of that url is pinned
    // to the commit each fire is for) and prints the commit it got.
    WriteFile(Dir("job.yaml"),
              "command: [sh, -c, 'echo \"$GATOS_INPUT_0_COMMIT\"']\ntimeout: 60\ninputs:\n"
              "  - {kind: git, url: " +
                  remote_ + ", ref: main}\n");
  }
  std::string Dir(const std::string& rel) { return stack_.dir().Join(rel); }
  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }
  // A new commit on `branch` of the work tree, pushed to the watched
  // repository; returns it.
  std::string Push(const std::string& branch, const std::string& text) {
    Git({"checkout", "-q", "-B", branch}, Dir("work"));
    WriteFile(Dir("work/file"), text + "\n");
    Git({"add", "file"}, Dir("work"));
    Git({"commit", "-q", "-m", text}, Dir("work"));
    Git({"push", "-q", "origin", branch}, Dir("work"));
    return Git({"rev-parse", "HEAD"}, Dir("work"));  // trimmed
  }
  RunResult Gatos(std::vector<std::string> args) { return stack_.Gatos(std::move(args)); }
  RunResult Add(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"schedule",
                                     "add",
                                     name,
                                     "--template",
                                     Dir("job.yaml"),
                                     "--sign-key",
                                     stack_.submitter_key(),
                                     "--ledger",
                                     stack_.ledger()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Gatos(args);
  }
  std::string LedgerGit(const std::string& args) {
    return testing::Run({"/bin/sh", "-c",
                         "git --git-dir '" + stack_.ledger() + "' " + args + " 2>/dev/null"})
        .out;
  }
  // The Trigger-Ref and Trigger-Commit of each fire of `name`, oldest first.
  std::vector<std::pair<std::string, std::string>> Fires(const std::string& name) {
    std::istringstream in(
        LedgerGit("log --reverse --topo-order --format='%(trailers:key=Trigger-Ref,valueonly,"
                  "separator=) %(trailers:key=Trigger-Commit,valueonly,separator=)' "
                  "refs/gatos/fires/" +
                  name + " --not refs/gatos/schedules/" + name));
    std::vector<std::pair<std::string, std::string>> out;
    for (std::string line; std::getline(in, line);) {
      std::istringstream w(line);
      std::string ref, commit;
      if (w >> ref >> commit) out.push_back({ref, commit});
    }
    return out;
  }
  std::string Positions(const std::string& name) {
    return LedgerGit("show refs/gatos/watch/" + name + ":positions.json");
  }
  // The job.yaml of a fire commit, parsed.
  nlohmann::json FiredJob(const std::string& fire) {
    return nlohmann::json::parse(LedgerGit("show " + fire + ":job.yaml"), nullptr, false);
  }
  // The fire commits of `name` by the commit they are for.
  std::map<std::string, std::string> FireCommits(const std::string& name) {
    std::istringstream in(
        LedgerGit("log --format='%H %(trailers:key=Trigger-Commit,valueonly,separator=)' "
                  "refs/gatos/fires/" +
                  name + " --not refs/gatos/schedules/" + name));
    std::map<std::string, std::string> out;
    for (std::string line; std::getline(in, line);) {
      std::istringstream w(line);
      std::string fire, commit;
      if (w >> fire >> commit) out[commit] = fire;
    }
    return out;
  }

  TempDir repos_;  // the watched repositories: gatosd's --watch-local root
  Stack stack_{StackOptions{.workers = 1, .gatosd_args = {"--watch-local", repos_.path()}}};
  std::map<std::string, std::string> env_;
  std::string remote_, first_;
};

// The first reading records main without firing; two pushes to main in
// sequence fire two jobs, each pinned to its commit and run by the worker;
// a branch the pattern does not match fires nothing; every fire verifies.
TEST_F(TriggerFireTest, WatchedRepositoryFiresOncePerMovedRef) {
  ASSERT_NE(stack_.StartWorker(0, {"--local-inputs", repos_.path()}), nullptr);
  RunResult r = Add("app", {"--watch", remote_, "--refs", "refs/heads/main", "--poll", "1s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The baseline: main at its first commit, recorded, nothing fired.
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(first_) != std::string::npos; }))
      << Positions("app");
  EXPECT_TRUE(Fires("app").empty());
  const std::string c1 = Push("main", "two");
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("app").size() >= 1; }));
  // A branch outside the pattern, then main again: when main's second move
  // has fired, the reading that saw it saw the branch too.
  const std::string other = Push("feature", "three");
  Git({"checkout", "-q", "main"}, Dir("work"));
  const std::string c2 = Push("main", "four");
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("app").size() >= 2; }));
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(c2) != std::string::npos; }))
      << Positions("app");
  const auto fires = Fires("app");
  ASSERT_EQ(fires.size(), 2u);
  EXPECT_EQ(fires[0], std::make_pair(std::string("refs/heads/main"), c1));
  EXPECT_EQ(fires[1], std::make_pair(std::string("refs/heads/main"), c2));
  EXPECT_EQ(Positions("app").find(other), std::string::npos) << Positions("app");
  // Each job pins the watched input to its commit, signed by the ledger
  // with the trailers that say what moved.
  auto commits = FireCommits("app");
  for (const std::string& c : {c1, c2}) {
    ASSERT_TRUE(commits.count(c)) << c;
    nlohmann::json job = FiredJob(commits[c]);
    ASSERT_TRUE(job.is_object());
    EXPECT_EQ(job["inputs"][0]["url"], remote_);
    EXPECT_EQ(job["inputs"][0]["commit"], c);
    EXPECT_EQ(job["inputs"][0]["ref"], "refs/heads/main");
    EXPECT_EQ(job["inputs"][1]["nonce"], "refs/heads/main@" + c);
    const std::string msg = LedgerGit("log -1 --format=%B " + commits[c]);
    EXPECT_HAS(msg, "Schedule: app");
    EXPECT_HAS(msg, "Fired-At: ");
    EXPECT_HAS(msg, "Trigger-Url: " + remote_);
    EXPECT_HAS(msg, "Trigger-Commit: " + c);
  }
  // The worker ran both, each on its own commit.
  for (const std::string& c : {c1, c2}) {
    nlohmann::json job = FiredJob(commits[c]);
    const std::string id =
        LedgerGit("log -1 --format='%(trailers:key=Job-Id,valueonly,separator=)' " + commits[c]);
    std::string job_id = id.substr(0, id.find('\n'));
    RunResult w = stack_.Gatos({"wait", job_id, "--ledger", stack_.nats_url(), "--timeout", "60"});
    EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
    RunResult out = Gatos({"logs", job_id, "--ledger", stack_.ledger()});
    EXPECT_HAS(out.out, c);
  }
  r = Gatos({"verify", "--repo", stack_.ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_HAS(r.out, "schedules: 2 fires checked");
  r = Gatos({"schedule", "ls", "--ledger", stack_.ledger(), "--json"});
  EXPECT_HAS(r.out, "\"watch\":[{\"refs\":[\"refs/heads/main\"],\"url\":\"" + remote_ + "\"}]");
}

// gatosd SIGKILLed after a fire and restarted: the move it fired is not
// fired again (the positions come from refs/gatos/watch/<name>); a move
// made while it was down fires once after the restart.
TEST_F(TriggerFireTest, SigkillAndRestartDoesNotFireAMoveAgain) {
  ASSERT_EQ(Add("app", {"--watch", remote_, "--refs", "refs/heads/*", "--poll", "1s"}).exit_code,
            0);
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(first_) != std::string::npos; }));
  const std::string c1 = Push("main", "two");
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(c1) != std::string::npos; }));
  ASSERT_EQ(Fires("app").size(), 1u);
  stack_.StopGatosd(SIGKILL);
  const std::string c2 = Push("release", "three");  // a new branch matching refs/heads/*
  ASSERT_TRUE(stack_.StartGatosd());
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(c2) != std::string::npos; }))
      << Positions("app");
  const auto fires = Fires("app");
  ASSERT_EQ(fires.size(), 2u);
  EXPECT_EQ(fires[0], std::make_pair(std::string("refs/heads/main"), c1));
  EXPECT_EQ(fires[1], std::make_pair(std::string("refs/heads/release"), c2));
  // A later move still fires once: the restarted gatosd keeps reading.
  Git({"checkout", "-q", "main"}, Dir("work"));
  const std::string c3 = Push("main", "four");
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(c3) != std::string::npos; }));
  EXPECT_EQ(Fires("app").size(), 3u);
  RunResult r = Gatos({"verify", "--repo", stack_.ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_HAS(r.out, "schedules: 3 fires checked");
}

// A fire is a job of the schedule's signer: with max_pending 1 and no
// worker yet, a second move waits (said in the log, no position recorded
// for it) and fires once a worker ran the first job; both verify.
TEST_F(TriggerFireTest, FiresCountAgainstTheSignersPendingLimitAndWaitForRoom) {
  RunResult r = Gatos({"policy", "limits", "--ledger", stack_.ledger(), "--default", "--max-pending", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(Add("app", {"--watch", remote_, "--refs", "refs/heads/*", "--poll", "1s"}).exit_code, 0);
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(first_) != std::string::npos; }));
  const std::string c1 = Push("main", "two");
  ASSERT_TRUE(PollFor(20'000, [&] { return Positions("app").find(c1) != std::string::npos; }));
  ASSERT_EQ(Fires("app").size(), 1u);
  const std::string c2 = Push("release", "three");
  ASSERT_TRUE(PollFor(20'000, [&] {
    return stack_.gatosd().log().find("refs/heads/release at " + c2.substr(0, 12) + " not fired yet") !=
           std::string::npos;
  })) << stack_.gatosd().log();
  EXPECT_HAS(stack_.gatosd().log(), "has 1 pending jobs (max_pending 1)");
  EXPECT_EQ(Fires("app").size(), 1u);
  EXPECT_EQ(Positions("app").find(c2), std::string::npos) << Positions("app");
  // Said once, not at every reading.
  const std::string log = stack_.gatosd().log();
  const size_t said = log.find("not fired yet");
  EXPECT_EQ(log.find("not fired yet", said + 1), std::string::npos) << log;
  // A worker runs the first job: room for the second fire.
  ASSERT_NE(stack_.StartWorker(0, {"--local-inputs", repos_.path()}), nullptr);
  ASSERT_TRUE(PollFor(30'000, [&] { return Positions("app").find(c2) != std::string::npos; }))
      << stack_.gatosd().log();
  const auto fires = Fires("app");
  ASSERT_EQ(fires.size(), 2u);
  EXPECT_EQ(fires[1], std::make_pair(std::string("refs/heads/release"), c2));
  // The worker is still running the second job: the auditor reads once the
  // ledger is still (verify exits 3, "fetch again", while refs move past
  // the log head it read; never a tamper finding).
  ASSERT_TRUE(PollFor(30'000, [&] {
    r = Gatos({"verify", "--repo", stack_.ledger(), "--all"});
    return r.exit_code != 3;
  })) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Bad input is refused with the reason, and nothing is written.
TEST_F(TriggerFireTest, BadTriggersAreRefusedAndNothingIsWritten) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"--watch", "relative/path", "--refs", "refs/heads/main"}, "relative"},
      {{"--watch", "https://user:secret@git.example.com/app", "--refs", "refs/heads/main"},
       "credentials"},
      {{"--watch", "ssh://git:secret@git.example.com/app", "--refs", "refs/heads/main"},
       "password"},
      {{"--watch", remote_, "--refs", "main"}, "not a full ref name"},
      {{"--watch", remote_, "--refs", "refs/heads/*/*"}, "more than one '*'"},
      {{"--watch", remote_, "--refs", "refs/heads/a..b"}, "not a valid ref name"},
      {{"--watch", remote_}, "no ref pattern"},
      {{"--refs", "refs/heads/main", "--watch", remote_}, "before any --watch"},
      {{"--watch", remote_, "--refs", "refs/heads/main", "--every", "1s"}, "give one kind"},
      {{"--watch", remote_, "--refs", "refs/heads/main", "--poll", "0s"}, "--poll"},
  };
  for (const auto& c : cases) {
    RunResult r = Add("bad", c.args);
    EXPECT_EQ(r.exit_code, 2) << c.says << ": " << r.out << r.err;
    EXPECT_HAS(r.err, c.says);
    EXPECT_EQ(r.err.find("secret"), std::string::npos) << r.err;
  }
  EXPECT_EQ(LedgerGit("for-each-ref refs/gatos/schedules refs/gatos/watch refs/gatos/fires"), "");
}

// A repository gatosd cannot read is logged once, as a summary (never
// git's own output), and nothing is recorded or fired for it.
TEST_F(TriggerFireTest, UnreadableRepositoryIsLoggedAsASummaryAndFiresNothing) {
  const std::string missing = repos_.Join("missing.git");
  ASSERT_EQ(Add("gone", {"--watch", missing, "--refs", "refs/heads/*", "--poll", "1s"}).exit_code,
            0);
  ASSERT_TRUE(stack_.gatosd().WaitForLog("schedule gone: cannot read", 20'000))
      << stack_.gatosd().log();
  const std::string log = stack_.gatosd().log();
  EXPECT_HAS(log, "repository not found");
  EXPECT_EQ(log.find("fatal:"), std::string::npos) << log;
  EXPECT_EQ(log.find("does not appear to be a git repository"), std::string::npos) << log;
  EXPECT_EQ(LedgerGit("for-each-ref refs/gatos/watch refs/gatos/fires"), "");
  // Readings that keep failing the same way (one a second) are logged once;
  // once the repository exists, its first reading is the baseline.
  const int64_t first = SystemNowMs();
  ASSERT_TRUE(PollFor(20'000, [&] { return SystemNowMs() >= first + 3'000; }));
  Git({"init", "-q", "--bare", "-b", "main", missing});
  ASSERT_TRUE(stack_.gatosd().WaitForLog("schedule gone: reads ", 20'000)) << stack_.gatosd().log();
  ASSERT_TRUE(PollFor(20'000, [&] { return !Positions("gone").empty(); }));
  const std::string after = stack_.gatosd().log();
  size_t errors = 0;
  for (size_t at = after.find("schedule gone: cannot read"); at != std::string::npos;
       at = after.find("schedule gone: cannot read", at + 1)) {
    ++errors;
  }
  EXPECT_EQ(errors, 1u) << after;
  EXPECT_EQ(LedgerGit("for-each-ref refs/gatos/fires"), "");
}

// A submitter names the watched URL: gatosd reads no local repository
// outside its --watch-local roots (its own ledger included) and no URL on
// its host's loopback, and records or fires nothing for them.
TEST_F(TriggerFireTest, RepositoriesTheOperatorDidNotAllowAreNotRead) {
  const std::string elsewhere = Dir("elsewhere.git");
  Git({"init", "-q", "--bare", "-b", "main", elsewhere});
  ASSERT_EQ(Add("far", {"--watch", elsewhere, "--refs", "refs/heads/*", "--poll", "1s"}).exit_code, 0);
  ASSERT_EQ(Add("self", {"--watch", stack_.ledger(), "--refs", "refs/gatos/*", "--poll", "1s"}).exit_code, 0);
  ASSERT_EQ(Add("loop", {"--watch", "http://127.0.0.1:9/r.git", "--refs", "refs/heads/*", "--poll", "1s"}).exit_code,
            0);
  ASSERT_TRUE(stack_.gatosd().WaitForLog("schedule far: cannot read", 20'000)) << stack_.gatosd().log();
  ASSERT_TRUE(stack_.gatosd().WaitForLog("schedule self: cannot read", 20'000)) << stack_.gatosd().log();
  ASSERT_TRUE(stack_.gatosd().WaitForLog("schedule loop: cannot read", 20'000)) << stack_.gatosd().log();
  const std::string log = stack_.gatosd().log();
  auto line = [&](const std::string& name) {
    const size_t at = log.find("schedule " + name + ": cannot read");
    return log.substr(at, log.find('\n', at) - at);
  };
  EXPECT_HAS(line("far"), "refused: local repositories are watched only under gatosd serve --watch-local");
  EXPECT_HAS(line("self"), "refused");
  EXPECT_HAS(line("loop"), "loopback or link-local address of gatosd's host");
  EXPECT_EQ(LedgerGit("for-each-ref refs/gatos/watch refs/gatos/fires"), "");
}

}  // namespace
}  // namespace gatos::testing

namespace gatos::testing {
namespace {

// A private repository behind `git http-backend` with basic auth on
// loopback, read by gatosd with a token from --input-credentials (the
// workers' file format): its moves fire, the token is nowhere in gatosd's
// log or the ledger, and a wrong token is logged as a summary.
class PrivateTriggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = TestGitEnv(dir_.path());
    std::filesystem::create_directories(dir_.Join("served"));
    Git({"init", "-q", "--bare", "-b", "main", dir_.Join("served/private.git")});
    Git({"init", "-q", "-b", "main", dir_.Join("work")});
    Git({"remote", "add", "origin", dir_.Join("served/private.git")}, dir_.Join("work"));
    Commit("one");
    WriteFile(dir_.Join("server-token"), kToken + "\n", 0600);
    server_ = std::make_unique<GitHttpServer>(dir_.Join("served"), "ci", dir_.Join("server-token"));
    ASSERT_TRUE(server_->Start());
    url_ = server_->url() + "/private.git";
    WriteFile(dir_.Join("token"), kToken + "\n", 0600);
    WriteFile(dir_.Join("creds.yaml"), "credentials:\n  - prefix: " + server_->url() +
                                           "\n    token_file: " + dir_.Join("token") +
                                           "\n    username: ci\n");
    stack_ = std::make_unique<Stack>(StackOptions{
        .workers = 0,
        .gatosd_args = {"--input-credentials", dir_.Join("creds.yaml"), "--watch-allow-url", server_->url()}});
    ASSERT_TRUE(stack_->Start());
    WriteFile(stack_->dir().Join("job.yaml"), "command: [\"true\"]\ntimeout: 30\n");
  }
  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }
  std::string Commit(const std::string& text) {
    WriteFile(dir_.Join("work/file"), text + "\n");
    Git({"add", "file"}, dir_.Join("work"));
    Git({"commit", "-q", "-m", text}, dir_.Join("work"));
    Git({"push", "-q", "origin", "main"}, dir_.Join("work"));
    return Git({"rev-parse", "HEAD"}, dir_.Join("work"));  // trimmed
  }
  std::string LedgerGit(const std::string& args) {
    return testing::Run({"/bin/sh", "-c",
                         "git --git-dir '" + stack_->ledger() + "' " + args + " 2>/dev/null"})
        .out;
  }

  const std::string kToken = "tok-" + std::string(32, 'z') + "-trigger-secret-91c2";
  TempDir dir_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<GitHttpServer> server_;
  std::unique_ptr<Stack> stack_;
  std::string url_;
};

TEST_F(PrivateTriggerTest, PrivateRepositoryIsReadWithGatosdsCredentialsOnly) {
  RunResult r =
      stack_->Gatos({"schedule", "add", "priv", "--watch", url_, "--refs", "refs/heads/main",
                     "--poll", "1s", "--template", stack_->dir().Join("job.yaml"), "--sign-key",
                     stack_->submitter_key(), "--ledger", stack_->ledger()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(PollFor(20'000, [&] {
    return !LedgerGit("show refs/gatos/watch/priv:positions.json").empty();
  })) << stack_->gatosd().log();
  const std::string moved = Commit("two");
  ASSERT_TRUE(PollFor(20'000, [&] {
    return LedgerGit("log -1 --format=%B refs/gatos/fires/priv").find("Trigger-Commit: " + moved) !=
           std::string::npos;
  })) << stack_->gatosd().log();
  // A wrong token: the readings fail, logged as a summary.
  WriteFile(dir_.Join("token"), "wrong-" + kToken + "\n", 0600);
  ASSERT_TRUE(stack_->gatosd().WaitForLog("schedule priv: cannot read", 20'000))
      << stack_->gatosd().log();
  EXPECT_HAS(stack_->gatosd().log(),
             "authentication refused by the server with gatosd's --input-credentials entry");
  // The token is in no log line, no ledger object, no ref.
  for (const std::string& where :
       {stack_->gatosd().log(), LedgerGit("log --all -p --format=%B"), LedgerGit("for-each-ref")}) {
    EXPECT_EQ(where.find("trigger-secret"), std::string::npos) << where;
  }
  r = stack_->Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace gatos::testing
