// Schedules that fire, with real processes (docs/scheduling.md, "Firing"):
// nats-server, gatosd serve (SIGKILLed in the middle of one test), a
// gatos-worker running the fired jobs, the gatos CLI adding, pausing and
// removing schedules, and `gatos verify` replaying every fire.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <set>
#include <sstream>

#include "gatos/model/clock.h"
#include "gatos/model/time_format.h"
#include "log_reader.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

class ScheduleFireTest : public ::testing::Test {
 protected:
  void StartStack(int workers = 1) {
    stack_ = std::make_unique<Stack>(StackOptions{.workers = workers});
    ASSERT_TRUE(stack_->Start());
    WriteFile(stack_->dir().Join("job.yaml"), "command: [\"true\"]\ntimeout: 30\n");
  }
  RunResult Gatos(std::vector<std::string> args) { return stack_->Gatos(std::move(args)); }
  RunResult Add(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"schedule", "add", name, "--template", stack_->dir().Join("job.yaml"),
                                     "--sign-key", stack_->submitter_key(), "--ledger", stack_->ledger()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Gatos(args);
  }
  RunResult Change(const std::string& cmd, const std::string& name) {
    return Gatos({"schedule", cmd, name, "--sign-key", stack_->submitter_key(), "--ledger", stack_->ledger()});
  }
  std::string Git(const std::string& args) {
    return testing::Run({"/bin/sh", "-c", "git --git-dir '" + stack_->ledger() + "' " + args + " 2>/dev/null"}).out;
  }
  // The ticks schedule `name` fired, from its chain of fire commits
  // (refs/gatos/fires/<name>), oldest first. Each tick once: a tick fired
  // twice fails the test.
  std::vector<int64_t> Fires(const std::string& name) {
    return FiredTicks(Git("log --format='%(trailers:key=Fired-At,valueonly,separator=)' refs/gatos/fires/" + name),
                      name);
  }
  // The committer time of a schedule's current commit (unix ms).
  int64_t ScheduleTime(const std::string& name) {
    return std::stoll(Git("log -1 --format=%ct refs/gatos/schedules/" + name)) * 1000;
  }
  size_t Results() {
    std::istringstream in(Git("for-each-ref --format='%(refname)' refs/gatos/jobs/"));
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.size() > 7 && line.substr(line.size() - 7) == "/result";
    return n;
  }
  std::unique_ptr<Stack> stack_;
};

// `--every 1s` for about 10 s fires one job per tick (10 +- 1), each job
// runs, and the auditor checks every fire. (The figure is `--every
// 2s` for 30 s, 15 +- 1: the same precision in a third of the time.)
TEST_F(ScheduleFireTest, EverySecondFiresEachTickOnceAndEachFireVerifies) {
  StartStack();
  ASSERT_NE(stack_->StartWorker(0), nullptr);
  RunResult r = Add("tick", {"--every", "1s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("not fired yet"), std::string::npos) << r.err;
  const int64_t added = ScheduleTime("tick");
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("tick").size() >= 10; })) << Fires("tick").size();
  r = Change("pause", "tick");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t paused = ScheduleTime("tick");
  const std::vector<int64_t> fired = Fires("tick");
  // Every tick in (added, paused] fired, give or take the one at either end
  // (the commit times are whole seconds).
  const int64_t due = (paused - added) / 1000;
  EXPECT_LE(std::llabs(static_cast<long long>(fired.size()) - due), 1) << fired.size() << " fires, " << due << " ticks";
  EXPECT_GE(fired.size(), 10u);
  for (size_t i = 1; i < fired.size(); ++i) EXPECT_EQ(fired[i] - fired[i - 1], 1000) << "tick " << i;
  EXPECT_GT(fired.front(), added);
  // Each fire is a job the worker ran.
  ASSERT_TRUE(PollFor(30'000, [&] { return Results() >= fired.size(); })) << Results() << " of " << fired.size();
  // One fire per tick in the log, each job commit signed by the ledger with
  // its trailers, and the replay checks them all.
  const std::string log = Git("log --format=%s refs/gatos/log");
  size_t logged = 0;
  for (size_t at = log.find(" fire"); at != std::string::npos; at = log.find(" fire", at + 1)) ++logged;
  EXPECT_GE(logged, 1u);
  const std::string last = Git("log -1 --format=%B refs/gatos/fires/tick");
  EXPECT_HAS(last, "Schedule: tick");
  EXPECT_HAS(last, "Fired-At: " + FormatRfc3339Millis(fired.back()));
  r = Gatos({"verify", "--repo", stack_->ledger(), "--all", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_HAS(r.out, "schedules: " + std::to_string(fired.size()) + " fires checked");
  EXPECT_EQ(r.out.find("warning: schedule tick"), std::string::npos) << r.out;
  // The dashboard's schedules page and `gatos schedule ls` show the last fire.
  const std::string page = stack_->HttpGet("/schedules.json");
  EXPECT_EQ(page.substr(0, 4), "200\n") << page;
  EXPECT_HAS(page, "\"last_fire\":\"" + FormatRfc3339Millis(fired.back()) + "\"");
  EXPECT_HAS(page, "\"overdue\":0");
  EXPECT_HAS(stack_->HttpGet("/schedules"), "<table id=\"schedules\">");
  r = Gatos({"schedule", "ls", "--ledger", stack_->ledger()});
  EXPECT_HAS(r.out, FormatRfc3339Millis(fired.back()));
  // A fired job's result has its proof bundle, which checks offline like
  // any job's (its job commit is the ledger-signed fire commit).
  const std::string ids = Git("log --format='%(trailers:key=Job-Id,valueonly,separator=)' refs/gatos/fires/tick");
  const size_t at = ids.find("blake3:");
  ASSERT_NE(at, std::string::npos) << ids;
  const std::string job = ids.substr(at, ids.find('\n', at) - at);
  const std::string bundle = stack_->dir().Join("fire.bundle");
  r = Gatos({"proof", job, "--repo", stack_->ledger(), "-o", bundle});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Gatos({"verify", "--bundle", bundle, "--ledger-key", stack_->ledger() + "/gatos/ledger_key.pub"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_HAS(r.out + r.err, job.substr(7, 12));
}

// gatosd SIGKILLed while three schedules fire every second: after the
// restart no tick fires twice, `all` fires every tick of the outage,
// `none` skips those older than the grace (5 s), and the auditor reports
// the skipped ones as missed, not as problems.
TEST_F(ScheduleFireTest, SigkillMidRunFiresNoTickTwiceAndCatchesUpByTheRule) {
  StartStack(0);
  ASSERT_EQ(Add("all", {"--every", "1s", "--catch-up", "all"}).exit_code, 0);
  ASSERT_EQ(Add("none", {"--every", "1s", "--catch-up", "none"}).exit_code, 0);
  ASSERT_EQ(Add("one", {"--every", "1s", "--catch-up", "one"}).exit_code, 0);
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("all").size() >= 3 && Fires("none").size() >= 3; }));
  stack_->StopGatosd(SIGKILL);
  const std::vector<int64_t> before_all = Fires("all"), before_none = Fires("none"), before_one = Fires("one");
  // An outage longer than the grace: ticks of it become missed ticks.
  const int64_t killed = SystemNowMs();
  ASSERT_TRUE(PollFor(20'000, [&] { return SystemNowMs() >= killed + 8'000; }));
  ASSERT_TRUE(stack_->StartGatosd());
  const int64_t restarted = SystemNowMs();
  ASSERT_TRUE(PollFor(20'000, [&] {
    auto a = Fires("all"), n = Fires("none"), o = Fires("one");
    return !a.empty() && a.back() > restarted + 2'000 && !n.empty() && n.back() > restarted + 2'000 && !o.empty() &&
           o.back() > restarted + 2'000;
  }));
  for (const char* name : {"all", "none", "one"}) ASSERT_EQ(Change("pause", name).exit_code, 0) << name;
  const std::vector<int64_t> all = Fires("all"), none = Fires("none"), one = Fires("one");
  // What fired before the crash is still there, once.
  EXPECT_TRUE(std::includes(all.begin(), all.end(), before_all.begin(), before_all.end()));
  EXPECT_TRUE(std::includes(none.begin(), none.end(), before_none.begin(), before_none.end()));
  EXPECT_TRUE(std::includes(one.begin(), one.end(), before_one.begin(), before_one.end()));
  // all: every tick from the first fire to the last, the outage included.
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i] - all[i - 1], 1000) << "all, fire " << i;
  // none: one gap, over the outage, of the ticks older than the grace.
  auto gaps = [](const std::vector<int64_t>& v) {
    std::vector<int64_t> out;
    for (size_t i = 1; i < v.size(); ++i) {
      if (v[i] - v[i - 1] != 1000) out.push_back((v[i] - v[i - 1]) / 1000 - 1);
    }
    return out;
  };
  std::vector<int64_t> g = gaps(none);
  ASSERT_EQ(g.size(), 1u) << "none";
  EXPECT_GE(g[0], 2);
  // one: the newest missed tick fires, so its gap is one tick shorter and
  // sits just before that fire.
  std::vector<int64_t> go = gaps(one);
  ASSERT_EQ(go.size(), 1u) << "one";
  EXPECT_EQ(go[0], g[0] - 1) << "one skips the missed ticks but the newest";
  RunResult r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_HAS(r.out, "warning: schedule none: " + std::to_string(g[0]) + " tick(s)");
  EXPECT_EQ(r.out.find("warning: schedule all"), std::string::npos) << r.out;
}

// A paused schedule fires nothing; resumed, it fires again (from the
// resume on, not the ticks of the pause); removed, it stops.
TEST_F(ScheduleFireTest, PausedAndRemovedSchedulesFireNothing) {
  StartStack(0);
  ASSERT_EQ(Add("quiet", {"--every", "1s", "--catch-up", "all"}).exit_code, 0);
  ASSERT_EQ(Change("pause", "quiet").exit_code, 0);
  ASSERT_EQ(Add("clock", {"--every", "1s"}).exit_code, 0);
  const size_t quiet_before = Fires("quiet").size();  // ticks before the pause may have fired
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("clock").size() >= 4; }));
  EXPECT_EQ(Fires("quiet").size(), quiet_before);
  ASSERT_EQ(Change("resume", "quiet").exit_code, 0);
  const int64_t resumed = ScheduleTime("quiet");
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("quiet").size() >= quiet_before + 2; }));
  std::vector<int64_t> q = Fires("quiet");
  // catch_up all, and still none of the paused ticks: they were not due.
  EXPECT_GT(q[quiet_before], resumed);
  ASSERT_EQ(Change("rm", "quiet").exit_code, 0);
  const size_t at_rm = Fires("quiet").size();
  const size_t clock_at_rm = Fires("clock").size();
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("clock").size() >= clock_at_rm + 3; }));
  EXPECT_LE(Fires("quiet").size(), at_rm + 1);  // a tick in the batch before the removal landed
  const size_t after_rm = Fires("quiet").size();
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("clock").size() >= clock_at_rm + 5; }));
  EXPECT_EQ(Fires("quiet").size(), after_rm);
  ASSERT_EQ(Change("pause", "clock").exit_code, 0);  // nothing writes while the auditor reads
  RunResult r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// The policy tightened after a schedule was added (a timeout ceiling below
// its template's): each tick is refused with the reason once and skipped,
// not retried every sweep; loosened again, the schedule fires; gatos verify
// passes (the refused ticks are missed ticks, not fires the policy forbade).
TEST_F(ScheduleFireTest, TicksThePolicyInForceRefusesAreSkippedWithTheReason) {
  StartStack(0);
  ASSERT_EQ(Add("strict", {"--every", "1s"}).exit_code, 0);  // the template's timeout: 30 s
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("strict").size() >= 1; }));
  RunResult set = Gatos({"policy", "set", "--ledger", stack_->ledger(), "max_timeout_seconds=10"});
  ASSERT_EQ(set.exit_code, 0) << set.out << set.err;
  const std::string refusal = "not fired: the policy in force refuses the job it would fire: job.yaml: timeout: 30 s";
  ASSERT_TRUE(stack_->gatosd().WaitForLog(refusal, 20'000)) << stack_->gatosd().log();
  const size_t before = Fires("strict").size();
  auto refused_ticks = [&] {
    std::vector<std::string> ticks;
    const std::string log = stack_->gatosd().log();
    for (size_t at = log.find(refusal); at != std::string::npos; at = log.find(refusal, at + 1)) {
      const size_t line = log.rfind('\n', at);
      const std::string head = log.substr(line + 1, at - line - 1);  // "... schedule strict: tick T "
      ticks.push_back(head.substr(head.find("tick ")));
    }
    return ticks;
  };
  ASSERT_TRUE(PollFor(20'000, [&] { return refused_ticks().size() >= 4; })) << stack_->gatosd().log();
  const auto ticks = refused_ticks();
  EXPECT_EQ(std::set<std::string>(ticks.begin(), ticks.end()).size(), ticks.size())
      << "a refused tick was tried again:\n" << stack_->gatosd().log();
  EXPECT_EQ(Fires("strict").size(), before);
  set = Gatos({"policy", "set", "--ledger", stack_->ledger(), "max_timeout_seconds=3600"});
  ASSERT_EQ(set.exit_code, 0) << set.out << set.err;
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("strict").size() >= before + 2; }));
  ASSERT_EQ(Change("pause", "strict").exit_code, 0);  // nothing writes while the auditor reads
  RunResult r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// A schedule's fires count against its signer's admission limits as
// submits do: with max_pending 3 and no worker, three ticks fire, then each
// tick is refused with the limit's name and skipped.
TEST_F(ScheduleFireTest, FiresCountAgainstTheSignersPendingLimit) {
  StartStack(0);
  RunResult r = Gatos({"policy", "limits", "--ledger", stack_->ledger(), "--default", "--max-pending", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(Add("busy", {"--every", "1s"}).exit_code, 0);
  const std::string refusal = "not fired: refused: submitter ";
  ASSERT_TRUE(PollFor(30'000, [&] {
    const std::string log = stack_->gatosd().log();
    const size_t first = log.find(refusal);
    return first != std::string::npos && log.find(refusal, first + 1) != std::string::npos;
  })) << stack_->gatosd().log();
  EXPECT_HAS(stack_->gatosd().log(), "has 3 pending jobs (max_pending 3)");
  EXPECT_EQ(Fires("busy").size(), 3u);
  ASSERT_EQ(Change("pause", "busy").exit_code, 0);  // nothing writes while the auditor reads
  r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Bad input to a running gatosd: refused with the reason, nothing written.
// A schedule.yaml committed and signed with stock git, pushed through the
// front door to refs/gatos/submit-schedule/<name>: recorded like gatos
// schedule add, it fires; a bad one is refused with the reason and nothing
// is written; pausing is a pushed commit too.
TEST_F(ScheduleFireTest, PushedScheduleYamlIsRecordedAndFires) {
  StartStack(0);
  const std::string repo = stack_->dir().Join("sched");
  RunOptions ro;
  ro.env = stack_->env();
  ro.cwd = repo;
  std::filesystem::create_directories(repo);
  for (const std::vector<std::string>& a :
       {std::vector<std::string>{"git", "init", "-q", "-b", "main"},
        {"git", "config", "gpg.format", "ssh"},
        {"git", "config", "user.signingkey", stack_->submitter_key()}}) {
    ASSERT_EQ(testing::Run(a, ro).exit_code, 0);
  }
  auto commit = [&](const std::string& yaml, const std::string& state, const std::string& parent) {
    WriteFile(repo + "/schedule.yaml", yaml);
    testing::Run({"git", "add", "schedule.yaml"}, ro);
    std::string tree = testing::Run({"git", "write-tree"}, ro).out;
    tree.pop_back();
    std::vector<std::string> args = {"git", "commit-tree", "-S", tree, "-m", "gatos: schedule pushed " + state,
                                     "-m", "Schedule-Name: pushed\nSchedule-State: " + state};
    if (!parent.empty()) args.insert(args.end(), {"-p", parent});
    RunResult c = testing::Run(args, ro);
    EXPECT_EQ(c.exit_code, 0) << c.err;
    std::string id = c.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  };
  auto push = [&](const std::string& id) {
    return testing::Run({"git", "push", stack_->push_url(), id + ":refs/gatos/submit-schedule/pushed"}, ro);
  };
  // Refused: a cron field out of range; nothing is written.
  const std::string bad = commit("name: pushed\ncron: \"61 * * * *\"\ntemplate: {command: [\"true\"], timeout: 5}\n",
                                 "active", "");
  RunResult r = push(bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_HAS(r.err, "61 is outside 0-59");
  EXPECT_EQ(Git("for-each-ref refs/gatos/schedules"), "");
  // Refused: pushed under another name.
  const std::string good = commit("name: pushed\nevery: 1s\ntemplate: {command: [\"true\"], timeout: 5}\n",
                                  "active", "");
  r = testing::Run({"git", "push", stack_->push_url(), good + ":refs/gatos/submit-schedule/other"}, ro);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_HAS(r.err, "push it to refs/gatos/submit-schedule/pushed");
  // Accepted: recorded at refs/gatos/schedules/pushed, and it fires.
  r = push(good);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_HAS(r.err, "schedule pushed recorded");
  EXPECT_EQ(Git("rev-parse refs/gatos/schedules/pushed"), good + "\n");
  ASSERT_TRUE(PollFor(20'000, [&] { return Fires("pushed").size() >= 2; }));
  // Paused by a pushed commit whose parent is the current one.
  r = push(commit("name: pushed\nevery: 1s\ntemplate: {command: [\"true\"], timeout: 5}\n", "paused", good));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Gatos({"schedule", "ls", "--ledger", stack_->ledger(), "--json"});
  EXPECT_HAS(r.out, "\"state\":\"paused\"");
  r = Gatos({"verify", "--repo", stack_->ledger(), "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(ScheduleFireTest, BadInputIsRefusedAndNothingIsWritten) {
  StartStack(0);
  WriteFile(stack_->dir().Join("bad.yaml"), "timeout: 10\n");
  const std::string head = Git("rev-parse refs/gatos/log");
  RunResult r = Add("t", {"--cron", "0 25 * * *"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_HAS(r.err, "cron field 2 (hour): 25 is outside 0-23");
  r = Add("t", {"--cron", "0 2 * * *", "--tz", "Mars/Olympus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_HAS(r.err, "unknown time zone Mars/Olympus");
  r = Gatos({"schedule", "add", "t", "--every", "2s", "--template", stack_->dir().Join("bad.yaml"), "--sign-key",
             stack_->submitter_key(), "--ledger", stack_->ledger()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_HAS(r.err, "command: missing");
  EXPECT_EQ(Git("rev-parse refs/gatos/log"), head);
  EXPECT_EQ(Git("for-each-ref refs/gatos/schedules/ refs/gatos/fires/"), "");
}

}  // namespace
}  // namespace gatos::testing
