// gatos schedule add | ls | pause | resume | rm on a real ledger directory:
// each change is a signed schedule commit the ledger records and logs, the
// auditor's replay checks each one, and bad input is refused with the
// reason and writes nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gatos::testing {
namespace {

RunResult Gatos(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinaryPath("gatos")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

std::string Git(const std::string& repo, const std::string& args) {
  RunResult r = testing::Run({"/bin/sh", "-c", "git --git-dir '" + repo + "' " + args});
  return r.out;
}

class ScheduleCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ledger_ = dir_.Join("ledger.git");
    ASSERT_EQ(testing::Run({BinaryPath("gatosd"), "init", ledger_}).exit_code, 0);
    for (const char* k : {"alice", "bob"}) ASSERT_EQ(Gatos({"keygen", "-f", dir_.Join(k)}).exit_code, 0);
    RunResult a = Gatos({"policy", "allow-submitter", "--ledger", ledger_, dir_.Join("alice.pub")});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    WriteFile(dir_.Join("job.yaml"), "command: [\"true\"]\ntimeout: 10\n");
  }
  RunResult Add(const std::string& name, std::vector<std::string> extra, const std::string& key = "alice") {
    std::vector<std::string> args = {"schedule", "add", name, "--template", dir_.Join("job.yaml"),
                                     "--sign-key", dir_.Join(key), "--ledger", ledger_};
    args.insert(args.end(), extra.begin(), extra.end());
    return Gatos(args);
  }
  std::string LogHead() { return Git(ledger_, "rev-parse refs/gatos/log"); }
  std::string ScheduleRefs() { return Git(ledger_, "for-each-ref refs/gatos/schedules/"); }
  TempDir dir_;
  std::string ledger_;
};

TEST_F(ScheduleCliTest, AddLsPauseResumeRmAreSignedLoggedAndVerified) {
  RunResult r = Add("tick", {"--every", "2s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Add("nightly", {"--cron", "0 2 * * MON-FRI", "--tz", "Europe/Paris", "--catch-up", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Gatos({"schedule", "ls", "--ledger", ledger_, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "nightly");
  EXPECT_EQ(list[0]["tz"], "Europe/Paris");
  EXPECT_EQ(list[0]["catch_up"], "all");
  EXPECT_EQ(list[1]["every"], "2s");
  EXPECT_EQ(list[1]["state"], "active");
  EXPECT_FALSE(list[1]["next_tick"].is_null());

  // A key that is not the signer, an operator or the ledger key may not pause it.
  r = Gatos({"schedule", "pause", "tick", "--sign-key", dir_.Join("bob"), "--ledger", ledger_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not an allowed submitter"), std::string::npos) << r.err;
  for (const char* cmd : {"pause", "resume", "pause"}) {
    r = Gatos({"schedule", cmd, "tick", "--sign-key", dir_.Join("alice"), "--ledger", ledger_});
    ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
  }
  r = Gatos({"schedule", "pause", "tick", "--sign-key", dir_.Join("alice"), "--ledger", ledger_});
  EXPECT_NE(r.out.find("already"), std::string::npos);
  r = Gatos({"schedule", "ls", "--ledger", ledger_, "--json"});
  list = nlohmann::json::parse(r.out);
  EXPECT_EQ(list[1]["state"], "paused");
  EXPECT_TRUE(list[1]["next_tick"].is_null());
  r = Gatos({"schedule", "rm", "nightly", "--sign-key", dir_.Join("alice"), "--ledger", ledger_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(Gatos({"schedule", "ls", "--ledger", ledger_, "--json"}).out).size(), 1u);
  // The name stays taken.
  r = Add("nightly", {"--every", "1h"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exists already (removed)"), std::string::npos) << r.err;

  // Six schedule commits, each its own logged transition; the pause chain
  // is a chain of parents.
  const std::string subjects = Git(ledger_, "log --format=%s refs/gatos/log");
  size_t n = 0;
  for (size_t at = subjects.find("1 schedule"); at != std::string::npos; at = subjects.find("1 schedule", at + 1)) ++n;
  EXPECT_EQ(n, 6u) << subjects;
  EXPECT_EQ(Git(ledger_, "rev-list --count refs/gatos/schedules/tick"), "4\n");
  r = Gatos({"verify", "--repo", ledger_, "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("log: ok"), std::string::npos) << r.out;
}

TEST_F(ScheduleCliTest, BadInputIsRefusedWithTheReasonAndNothingIsWritten) {
  WriteFile(dir_.Join("bad.yaml"), "timeout: 10\n");
  const std::string head = LogHead();
  struct Case {
    std::vector<std::string> args;
    const char* says;
    std::string key = "alice";
  } cases[] = {
      {{"--cron", "61 * * * *"}, "cron field 1 (minute): 61 is outside 0-59"},
      {{"--cron", "* * *"}, "has 3 fields"},
      {{"--cron", "0 2 * * *", "--tz", "Mars/Olympus"}, "unknown time zone Mars/Olympus"},
      {{"--cron", "0 2 * * *", "--tz", "../../etc/passwd"}, "unknown time zone"},
      {{"--every", "0s"}, "outside 1s..366d"},
      {{"--every", "2s", "--cron", "* * * * *"}, "exactly one of"},
      {{"--every", "2s", "--catch-up", "twice"}, "is not none, one or all"},
      {{"--every", "2s", "--tz", "Europe/Paris"}, "--tz applies to --cron only"},
      {{"--every", "2s"}, "not an allowed submitter", "bob"},
  };
  for (const auto& c : cases) {
    RunResult r = Add("t", c.args, c.key);
    EXPECT_EQ(r.exit_code, 2) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << " -> " << r.err;
  }
  RunResult r = Gatos({"schedule", "add", "t", "--every", "2s", "--template", dir_.Join("bad.yaml"), "--sign-key",
                       dir_.Join("alice"), "--ledger", ledger_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("command: missing"), std::string::npos) << r.err;
  r = Add("Bad.Name", {"--every", "2s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("name: \"Bad.Name\""), std::string::npos) << r.err;
  EXPECT_EQ(LogHead(), head);
  EXPECT_EQ(ScheduleRefs(), "");
}

TEST_F(ScheduleCliTest, VerifyCatchesAScheduleRefMovedOutsideTheLog) {
  ASSERT_EQ(Add("a", {"--every", "2s"}).exit_code, 0);
  ASSERT_EQ(Add("b", {"--every", "1m"}).exit_code, 0);
  ASSERT_EQ(Gatos({"verify", "--repo", ledger_, "--all"}).exit_code, 0);
  Git(ledger_, "update-ref refs/gatos/schedules/a refs/gatos/schedules/b");
  RunResult r = Gatos({"verify", "--repo", ledger_, "--all"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("refs/gatos/schedules/a"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace gatos::testing
