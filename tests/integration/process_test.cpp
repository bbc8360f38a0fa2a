// gatos::Process, RunAndCapture, SignalWatcher and Log with real processes:
// exit codes, signals, environments, redirections, timeouts, process groups,
// the parent-death signal, kill on destruction and no zombie left.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gatos/sys/process.h"
#include "test_util.h"

namespace gatos {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::ReadFile;
using testing::TempDir;

Captured MustRun(const std::vector<std::string>& argv, SpawnOptions o = {}, std::string_view input = {},
                 milliseconds timeout = milliseconds(30000)) {
  Result<Captured> r = RunAndCapture(argv, std::move(o), input, timeout);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Captured{};
}

Captured Sh(const std::string& script, SpawnOptions o = {}) { return MustRun({"sh", "-c", script}, std::move(o)); }

// True once `pid` no longer runs: gone, or a zombie of a process that is not
// ours (an orphan's new parent may be slow to reap it).
bool DeadWithin(pid_t pid, milliseconds ms) {
  auto deadline = Clock::now() + ms;
  do {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return true;
    std::this_thread::sleep_for(milliseconds(10));
  } while (Clock::now() < deadline);
  return false;
}

// The child of a helper mode, with stdout to a file (read it with ReadFile).
struct Helper {
  TempDir dir;
  std::string out = dir.Join("out"), err = dir.Join("err");
  Process proc;

  explicit Helper(const std::string& mode) {
    SpawnOptions o;
    o.out = Stdio::File(out);
    o.err = Stdio::File(err);
    o.parent_death_signal = SIGKILL;
    auto p = Process::Spawn({testing::BinaryPath("gatos_process_test_child"), mode}, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) proc = std::move(*p);
  }
  bool WaitForOut(const std::string& needle, milliseconds ms = milliseconds(10000)) {
    auto deadline = Clock::now() + ms;
    while (Clock::now() < deadline) {
      if (ReadFile(out).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }
};

TEST(ProcessTest, ExitCodes) {
  EXPECT_TRUE(Sh("exit 0").status.ok());
  Captured c = Sh("exit 3");
  EXPECT_EQ(c.status.code, 3);
  EXPECT_EQ(c.status.signal, 0);
  EXPECT_TRUE(c.status.exited());
  EXPECT_FALSE(c.status.ok());
  EXPECT_EQ(c.status.ToString(), "exited with code 3");
}

TEST(ProcessTest, KilledBySignal) {
  Captured c = Sh("kill -KILL $$");
  EXPECT_EQ(c.status.code, -1);
  EXPECT_EQ(c.status.signal, SIGKILL);
  EXPECT_FALSE(c.status.exited());
  EXPECT_EQ(c.status.ToString(), "killed by signal 9 (SIGKILL)");
}

TEST(ProcessTest, OutputStdinAndMergedStderr) {
  Captured c = Sh("echo out; echo err >&2");
  EXPECT_EQ(c.out, "out\n");
  EXPECT_EQ(c.err, "err\n");
  SpawnOptions merged;
  merged.err = Stdio::Stdout();
  Captured m = Sh("echo out; echo err >&2", merged);
  EXPECT_EQ(m.out, "out\nerr\n");
  EXPECT_EQ(m.err, "");
  // More input and output than a pipe buffer holds, both ways at once.
  std::string big(1 << 20, 'x');
  Captured cat = MustRun({"cat"}, {}, big);
  EXPECT_EQ(cat.out.size(), big.size());
  EXPECT_TRUE(cat.status.ok());
  // No input: stdin is at its end at once.
  EXPECT_EQ(MustRun({"cat"}).out, "");
}

TEST(ProcessTest, ChildThatStopsReadingDoesNotKillUsWithSigpipe) {
  Captured c = MustRun({"head", "-c", "1"}, {}, std::string(4 << 20, 'y'));
  EXPECT_EQ(c.out, "y");
  EXPECT_TRUE(c.status.ok());
}

TEST(ProcessTest, EnvironmentIsNotInheritedUnlessGiven) {
  ASSERT_EQ(setenv("GATOS_PROCESS_TEST_TOKEN", "s3cret", 1), 0);
  EXPECT_EQ(MustRun({"env"}).out, "");
  SpawnOptions own;
  own.env.Set("ONLY", "this");
  EXPECT_EQ(MustRun({"env"}, own).out, "ONLY=this\n");
  SpawnOptions inherit;
  inherit.env = Environment::CurrentWith({{"EXTRA", "1"}});
  std::string all = MustRun({"env"}, inherit).out;
  EXPECT_NE(all.find("GATOS_PROCESS_TEST_TOKEN=s3cret\n"), std::string::npos);
  EXPECT_NE(all.find("EXTRA=1\n"), std::string::npos);
  inherit.env.Unset("GATOS_PROCESS_TEST_TOKEN");
  EXPECT_EQ(MustRun({"env"}, inherit).out.find("GATOS_PROCESS_TEST_TOKEN"), std::string::npos);
  unsetenv("GATOS_PROCESS_TEST_TOKEN");
}

TEST(ProcessTest, ProgramIsLookedUpInTheChildsPath) {
  TempDir dir;
  testing::WriteFile(dir.Join("only-here"), "#!/bin/sh\necho found\n", 0755);
  SpawnOptions o;
  o.env.Set("PATH", dir.path());
  EXPECT_EQ(MustRun({"only-here"}, o).out, "found\n");
  // Not in the child's PATH: not found, and the message shows no variable's value.
  o.env.Set("PATH", "/nonexistent-secret-dir");
  Result<Process> p = Process::Spawn({"sh", "-c", "true"}, o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("'sh'"), std::string::npos);
  EXPECT_NE(p.status().message().find("give its full path"), std::string::npos);
  EXPECT_EQ(p.status().message().find("nonexistent-secret-dir"), std::string::npos);
}

TEST(ProcessTest, StartFailuresSayWhatFailed) {
  auto missing = Process::Spawn({"gatos-no-such-program-anywhere"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("gatos-no-such-program-anywhere"), std::string::npos);

  auto abs = Process::Spawn({"/nonexistent/prog"});
  ASSERT_FALSE(abs.ok());
  EXPECT_NE(abs.status().message().find("execve"), std::string::npos) << abs.status().message();

  SpawnOptions cwd;
  cwd.cwd = "/nonexistent-dir";
  auto bad_cwd = Process::Spawn({"true"}, cwd);
  ASSERT_FALSE(bad_cwd.ok());
  EXPECT_NE(bad_cwd.status().message().find("chdir to /nonexistent-dir"), std::string::npos);

  SpawnOptions out;
  out.out = Stdio::File("/nonexistent-dir/log");
  auto bad_out = Process::Spawn({"true"}, out);
  ASSERT_FALSE(bad_out.ok());
  EXPECT_NE(bad_out.status().message().find("/nonexistent-dir/log"), std::string::npos);

  SpawnOptions nul;
  nul.env.Set("K", std::string("a\0b", 3));
  auto bad_env = Process::Spawn({"true"}, nul);
  ASSERT_FALSE(bad_env.ok());
  EXPECT_EQ(bad_env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Process::Spawn({}).ok());
}

TEST(ProcessTest, WorkingDirectory) {
  TempDir dir;
  SpawnOptions o;
  o.cwd = dir.path();
  EXPECT_EQ(MustRun({"pwd", "-P"}, o).out, std::string(realpath(dir.path().c_str(), nullptr)) + "\n");
}

TEST(ProcessTest, FileRedirectionsAppendOrTruncate) {
  TempDir dir;
  std::string log = dir.Join("log");
  SpawnOptions o;
  o.out = Stdio::File(log);
  o.err = Stdio::Stdout();
  for (const char* word : {"one", "two"}) {
    auto p = Process::Spawn({"sh", "-c", std::string("echo ") + word + "; echo e >&2"}, o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_TRUE(p->Wait().ok());
  }
  EXPECT_EQ(ReadFile(log), "one\ne\ntwo\ne\n");
  o.out = Stdio::File(log, /*append=*/false);
  ASSERT_TRUE(Process::Spawn({"echo", "three"}, o)->Wait().ok());
  EXPECT_EQ(ReadFile(log), "three\n");
  SpawnOptions in;
  in.in = Stdio::File(log);
  EXPECT_EQ(MustRun({"cat"}, in).out, "");  // RunAndCapture: stdin is its input
  in.out = Stdio::Pipe();
  auto p = Process::Spawn({"cat"}, in);
  ASSERT_TRUE(p.ok());
  char buf[64];
  ssize_t n = ::read(p->stdout_pipe().get(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "three\n");
  EXPECT_TRUE(p->Wait().ok());
}

TEST(ProcessTest, OnlyStdioIsInherited) {
  int leak = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leak, 0);
  ASSERT_EQ(::dup2(leak, 77), 77);
  std::string fds = MustRun({"ls", "/proc/self/fd"}).out;
  ::close(77);
  ::close(leak);
  std::istringstream in(fds);
  std::string fd;
  while (in >> fd) EXPECT_TRUE(fd == "0" || fd == "1" || fd == "2" || fd == "3") << fd;  // 3: ls's own
}

TEST(ProcessTest, ExtraFdsArriveAtThreeAndUpInTheirOrder) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
  ASSERT_EQ(::write(to_child[1], "hello\n", 6), 6);
  ::close(to_child[1]);
  int leak = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: still not inherited
  ASSERT_GE(leak, 0);
  SpawnOptions o;
  o.extra_fds = {from_child[1], to_child[0]};  // the child's 3 and 4
  std::string out = MustRun({"sh", "-c", "echo back >&3; cat <&4; ls /proc/self/fd"}, o).out;
  ::close(leak);
  ::close(to_child[0]);
  ::close(from_child[1]);  // ours: the child's copy is gone with it
  char buf[16];
  ssize_t n = ::read(from_child[0], buf, sizeof buf);
  ::close(from_child[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "back\n");
  // sh's 0-2, the two given fds, and ls's own directory fd: nothing else.
  EXPECT_EQ(out, "hello\n0\n1\n2\n3\n4\n5\n");
}

TEST(ProcessTest, ExtraFdsAreBoundedAndChecked) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  SpawnOptions many;
  many.extra_fds.assign(SpawnOptions::kMaxExtraFds + 1, p[0]);
  auto too_many = Process::Spawn({"true"}, many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("at most 16"), std::string::npos) << too_many.status().message();
  many.extra_fds.pop_back();  // exactly the bound: fine
  auto at_bound = Process::Spawn({"true"}, many);
  ASSERT_TRUE(at_bound.ok()) << at_bound.status().ToString();
  EXPECT_TRUE(at_bound->Wait().ok());

  ::close(p[0]);
  ::close(p[1]);
  for (int bad : {p[0], -1}) {
    SpawnOptions closed;
    closed.extra_fds = {bad};
    auto r = Process::Spawn({"true"}, closed);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("cannot pass fd " + std::to_string(bad)), std::string::npos)
        << r.status().message();
  }
}

TEST(ProcessTest, SignalsAreResetInTheChild) {
  // Our thread blocks SIGUSR2 and the process ignores SIGPIPE (test_util does);
  // a child starts with neither.
  signal(SIGPIPE, SIG_IGN);
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &old);
  std::string status = MustRun({"cat", "/proc/self/status"}).out;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_NE(status.find("SigBlk:\t0000000000000000\n"), std::string::npos) << status;
  EXPECT_NE(status.find("SigIgn:\t0000000000000000\n"), std::string::npos) << status;
}

TEST(ProcessTest, WaitForTimesOutThenStopEscalates) {
  auto p = Process::Spawn({"sleep", "30"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->running());
  auto t0 = Clock::now();
  EXPECT_FALSE(p->WaitFor(milliseconds(100)).has_value());
  EXPECT_GE(Clock::now() - t0, milliseconds(90));
  EXPECT_FALSE(p->TryWait().has_value());
  ExitStatus st = p->Stop(SIGTERM, milliseconds(5000));
  EXPECT_EQ(st.signal, SIGTERM);
  EXPECT_FALSE(p->running());
  EXPECT_EQ(p->pid(), -1);
  EXPECT_EQ(p->exit_status()->signal, SIGTERM);
  EXPECT_EQ(p->Wait().signal, SIGTERM);  // again: the same answer

  // A child that ignores SIGTERM is SIGKILLed after the grace period.
  auto stubborn = Process::Spawn({"sh", "-c", "trap '' TERM; echo ready; exec sleep 30"},
                                 [] {
                                   SpawnOptions o;
                                   o.out = Stdio::Pipe();
                                   return o;
                                 }());
  ASSERT_TRUE(stubborn.ok());
  char buf[6];
  ASSERT_EQ(::read(stubborn->stdout_pipe().get(), buf, sizeof buf), 6);  // the trap is set
  t0 = Clock::now();
  EXPECT_EQ(stubborn->Stop(SIGTERM, milliseconds(300)).signal, SIGKILL);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

TEST(ProcessTest, RunAndCaptureTimeout) {
  auto t0 = Clock::now();
  Captured c = MustRun({"sh", "-c", "echo started; exec sleep 30"}, {}, {}, milliseconds(300));
  EXPECT_TRUE(c.timed_out);
  EXPECT_EQ(c.status.signal, SIGKILL);
  EXPECT_EQ(c.out, "started\n");
  EXPECT_LT(Clock::now() - t0, milliseconds(10000));
  // A child that closes its outputs and goes on running is timed out too.
  t0 = Clock::now();
  Captured closed = MustRun({"sh", "-c", "exec >&- 2>&-; exec sleep 30"}, {}, {}, milliseconds(300));
  EXPECT_TRUE(closed.timed_out);
  EXPECT_LT(Clock::now() - t0, milliseconds(10000));
}

TEST(ProcessTest, DestructorKillsAndReapsNoZombieLeft) {
  pid_t pid;
  {
    auto p = Process::Spawn({"sleep", "30"});
    ASSERT_TRUE(p.ok());
    pid = p->pid();
    ASSERT_GT(pid, 0);
  }
  // Reaped, not a zombie: the pid is gone and is no longer our child.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);

  // Moving hands the child over; assigning over a Process kills the old one.
  auto a = Process::Spawn({"sleep", "30"});
  auto b = Process::Spawn({"sleep", "30"});
  ASSERT_TRUE(a.ok() && b.ok());
  pid_t pa = a->pid(), pb = b->pid();
  Process held = std::move(*a);
  EXPECT_EQ(held.pid(), pa);
  EXPECT_EQ(a->pid(), -1);
  held = std::move(*b);
  EXPECT_TRUE(DeadWithin(pa, milliseconds(100)));
  EXPECT_EQ(held.pid(), pb);
  held.Kill();
  EXPECT_TRUE(DeadWithin(pb, milliseconds(100)));
}

TEST(ProcessTest, DetachedChildIsLeftAlone) {
  pid_t pid;
  {
    auto p = Process::Spawn({"sleep", "30"});
    ASSERT_TRUE(p.ok());
    pid = p->Detach();
    EXPECT_EQ(p->pid(), -1);
  }
  EXPECT_EQ(::kill(pid, 0), 0);  // still running
  ::kill(pid, SIGKILL);
  int st = 0;
  EXPECT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st));
}

TEST(ProcessTest, NewProcessGroupIsKilledWhole) {
  SpawnOptions o;
  o.new_process_group = true;
  o.out = Stdio::Pipe();
  auto p = Process::Spawn({"sh", "-c", "sleep 30 & echo $!; wait"}, o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(::getpgid(p->pid()), p->pid());
  char buf[32] = {};
  ASSERT_GT(::read(p->stdout_pipe().get(), buf, sizeof buf - 1), 0);
  pid_t grandchild = std::atoi(buf);
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(::getpgid(grandchild), p->pid());
  EXPECT_TRUE(p->SignalGroup(0));
  EXPECT_EQ(p->Kill().signal, SIGKILL);
  EXPECT_TRUE(DeadWithin(grandchild, milliseconds(5000)));  // re-parented, killed, reaped by init
}

TEST(ProcessTest, ParentDeathSignalKillsTheOrphan) {
  testing::RunResult r = testing::Run({testing::BinaryPath("gatos_process_test_child"), "orphan"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  pid_t orphan = std::atoi(r.out.c_str());
  ASSERT_GT(orphan, 0);
  EXPECT_TRUE(DeadWithin(orphan, milliseconds(5000)));
}

TEST(ProcessTest, SpawnFromManyThreadsAtOnce) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&ok, t] {
      for (int i = 0; i < 20; ++i) {
        SpawnOptions o;
        o.env.Set("N", std::to_string(t * 100 + i));
        auto c = RunAndCapture({"sh", "-c", "echo $N"}, o);
        if (c.ok() && c->status.ok() && c->out == std::to_string(t * 100 + i) + "\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
}

TEST(SignalWatcherTest, SignalStopsTheProgramInsteadOfKillingIt) {
  for (int sig : {SIGTERM, SIGINT}) {
    Helper h("watch");
    ASSERT_TRUE(h.WaitForOut("ready"));
    ASSERT_TRUE(h.proc.Signal(sig));
    auto st = h.proc.WaitFor(milliseconds(10000));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->ok()) << st->ToString() << "\n" << ReadFile(h.err);
    const std::string name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    EXPECT_EQ(ReadFile(h.out), "ready\nstopped by " + name + "\n");
    // One Log() line in the one format.
    std::regex line("watch-child\\[w1\\]: \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z " + name +
                    ": stopping\n");
    EXPECT_TRUE(std::regex_match(ReadFile(h.err), line)) << ReadFile(h.err);
  }
}

TEST(SignalWatcherTest, CallbackSetAfterTheSignalRunsAtOnce) {
  Helper h("watch-late");
  ASSERT_TRUE(h.WaitForOut("ready"));
  h.proc.Signal(SIGINT);
  auto st = h.proc.WaitFor(milliseconds(10000));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->ok()) << st->ToString();
  EXPECT_EQ(ReadFile(h.out), "ready\nlate SIGINT\n");
}

TEST(SignalWatcherTest, DestroyedWithoutASignal) {
  Helper h("watch-none");
  auto st = h.proc.WaitFor(milliseconds(10000));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->ok()) << st->ToString();
  EXPECT_EQ(ReadFile(h.out), "done\n");
}

TEST(LogTest, LinesFromManyThreadsNeverInterleave) {
  TempDir dir;
  SpawnOptions o;
  o.err = Stdio::File(dir.Join("err"));
  auto p = Process::Spawn({testing::BinaryPath("gatos_process_test_child"), "log-threads"}, o);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Wait().ok());
  std::istringstream in(ReadFile(dir.Join("err")));
  std::regex head("log-child: \\S+Z thread (\\d) line \\d+ ");
  std::string l;
  int n = 0;
  while (std::getline(in, l)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(l, m, head) && m.position(0) == 0) << l.substr(0, 80);
    const std::string body = l.substr(static_cast<size_t>(m.length(0)));
    EXPECT_EQ(body, std::string(3000, static_cast<char>('a' + (m[1].str()[0] - '0')))) << l.substr(0, 80);
    ++n;
  }
  EXPECT_EQ(n, 8 * 200);
}

}  // namespace
}  // namespace gatos
