// JobLauncher with real processes: the Execution contract (status, output,
// environment, timeouts, Stop, orphans) on long-lived slots, unsandboxed and
// in the namespace sandbox; slot reuse, concurrency, and what happens when
// the worker, the launcher or a supervisor dies.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>

#include <cstring>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gatos/exec/exec.h"
#include "launcher_test_util.h"
#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::ReadFile;
using ::gatos::testing::TempDir;
using ::gatos::testing::WriteFile;
using namespace ::gatos::launcher_test;  // NOLINT

// One launcher for the contract tests, as a worker would have.
JobLauncher& Shared() {
  static std::unique_ptr<JobLauncher> l = NewLauncher();
  return *l;
}

class LauncherModes : public ::testing::TestWithParam<Sandbox> {
 protected:
  bool sandboxed() const { return GetParam() != Sandbox::kOff; }
};
INSTANTIATE_TEST_SUITE_P(Both, LauncherModes, ::testing::Values(Sandbox::kOff, Sandbox::kRequire),
                         [](const auto& info) {
                           return info.param == Sandbox::kOff ? "Unsandboxed" : "Namespaces";
                         });

TEST(Launcher, UsesTheNamespaceSandboxHere) {
  // bubblewrap's prerequisites (user namespaces) hold on the test hosts, and
  // so do ours; these tests never skip.
  EXPECT_TRUE(Shared().SandboxStatus().ok()) << Shared().SandboxStatus().ToString();
  EXPECT_EQ(Shared().ActiveEngine(), SandboxEngine::kNamespaces);
}

TEST_P(LauncherModes, ExitCodeAndOutput) {
  TempDir d;
  auto r = RunOn(Shared(), MakeSpec(d, {"sh", "-c", "echo out; echo err >&2; exit 7"}, GetParam()));
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 7);
  EXPECT_FALSE(r.signal.has_value());
  EXPECT_EQ(r.stdout_data, "out\n");
  EXPECT_EQ(r.stderr_data, "err\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.sandboxed, sandboxed());
  EXPECT_TRUE(r.sandbox_note.empty());
  EXPECT_GT(r.started_ms, 1600000000000);
  EXPECT_GE(r.finished_ms, r.started_ms);
}

TEST_P(LauncherModes, SignalIsReportedAsASignal) {
  // Unlike bwrap (128+N), the namespace sandbox's supervisor is the job's
  // parent and sees the real status.
  TempDir d;
  auto r = RunOn(Shared(), MakeSpec(d, {"sh", "-c", "kill -KILL $$"}, GetParam()));
  ASSERT_TRUE(r.signal.has_value());
  EXPECT_EQ(*r.signal, SIGKILL);
  EXPECT_FALSE(r.exit_code.has_value());
}

TEST_P(LauncherModes, TimeoutSendsTermFirst) {
  TempDir d;
  auto spec = MakeSpec(d, {"sleep", "100"}, GetParam());
  spec.timeout_ms = 300;
  auto r = RunOn(Shared(), spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.stopped);
  ASSERT_TRUE(r.signal.has_value());
  EXPECT_EQ(*r.signal, SIGTERM);
}

TEST_P(LauncherModes, TimeoutEscalatesToKillWhenTermIsTrapped) {
  TempDir d;
  auto spec = MakeSpec(
      d, {"sh", "-c", "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done"},
      GetParam());
  spec.timeout_ms = 500;
  spec.kill_grace_ms = 700;
  int64_t t0 = NowMs();
  auto r = RunOn(Shared(), spec);
  int64_t elapsed = NowMs() - t0;
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.stdout_data.find("ready"), std::string::npos);
  EXPECT_NE(r.stdout_data.find("got-term"), std::string::npos) << r.stdout_data;
  ASSERT_TRUE(r.signal.has_value());
  EXPECT_EQ(*r.signal, SIGKILL);
  EXPECT_GE(elapsed, 500 + 700);  // KILL only after the grace
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
}

TEST_P(LauncherModes, OutputIsCappedAndTheChildNeverBlocks) {
  TempDir d;
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "head -c 4194304 /dev/zero | tr '\\0' a; "
                        "head -c 4194304 /dev/zero | tr '\\0' b >&2; echo done >&2; exit 3"},
                       GetParam());
  spec.output_cap_bytes = 1000;
  auto r = RunOn(Shared(), spec);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, std::string(1000, 'a'));
  EXPECT_EQ(r.stderr_data, std::string(1000, 'b'));
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_TRUE(r.stderr_truncated);
}

TEST_P(LauncherModes, EnvironmentIsScrubbedAndLayered) {
  TempDir d;
  ASSERT_EQ(setenv("GATOS_TEST_WORKER_SECRET", "hunter2", 1), 0);
  auto spec = MakeSpec(d, {"env"}, GetParam());
  spec.env["FOO"] = "from-manifest";
  spec.env["GATOS_JOB_ID"] = "manifest-tries-to-override";
  spec.extra_env["GATOS_JOB_ID"] = "abc123";
  auto r = RunOn(Shared(), spec);
  unsetenv("GATOS_TEST_WORKER_SECRET");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  const std::string& e = r.stdout_data;
  EXPECT_EQ(e.find("hunter2"), std::string::npos);
  EXPECT_NE(e.find("\nPATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos) << e;
  EXPECT_NE(e.find("HOME=" + spec.workspace + "\n"), std::string::npos) << e;
  EXPECT_NE(e.find("FOO=from-manifest\n"), std::string::npos);
  EXPECT_NE(e.find("GATOS_JOB_ID=abc123\n"), std::string::npos);
  EXPECT_EQ(e.find("manifest-tries-to-override"), std::string::npos);
  EXPECT_NE(e.find("GATOS_OUTPUT_DIR=" + spec.output_dir + "\n"), std::string::npos) << e;
}

TEST_P(LauncherModes, CwdOutputsAndErrors) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "pwd; touch here; echo r > \"$GATOS_OUTPUT_DIR/r\""}, GetParam());
  spec.cwd = "sub/./dir/";
  auto r = RunOn(Shared(), spec);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, spec.workspace + "/sub/dir\n");
  EXPECT_TRUE(std::filesystem::exists(spec.workspace + "/sub/dir/here"));
  EXPECT_EQ(ReadFile(spec.output_dir + "/r"), "r\n");

  spec.cwd = "../x";
  auto ex = Shared().Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);

  spec = MakeSpec(d, {"no-such-command-gatos"}, GetParam());
  ex = Shared().Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kNotFound);

  WriteFile(spec.workspace + "/noexec.sh", "#!/bin/sh\n", 0644);
  spec = MakeSpec(d, {"./noexec.sh"}, GetParam());
  ex = Shared().Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kPermissionDenied);

  // A file that passes the worker's checks but cannot be exec'd: the
  // supervisor reports exec's error, and the slot takes the next job.
  WriteFile(spec.workspace + "/bad-interp.sh", "#!/nonexistent/interpreter\n", 0755);
  spec = MakeSpec(d, {"./bad-interp.sh"}, GetParam());
  ex = Shared().Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kNotFound) << ex.status().ToString();
  EXPECT_EQ(RunOn(Shared(), MakeSpec(d, {"true"}, GetParam())).exit_code, 0);
}

TEST_P(LauncherModes, StopFromAnotherThread) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "echo started; touch \"$HOME/ready\"; sleep 100"}, GetParam());
  auto ex = Shared().Start(spec);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  Execution* e = ex->get();
  const std::string ready = spec.workspace + "/ready";
  std::atomic<bool> was_running{false};
  std::thread stopper([e, ready, &was_running] {
    was_running = Eventually([&] { return std::filesystem::exists(ready); });
    e->Stop();
    e->Stop();  // idempotent
  });
  auto r = e->Wait();
  stopper.join();
  ASSERT_TRUE(was_running) << "the job never made " << ready;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stopped);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "started\n");
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
  e->Stop();  // after the job ended: a no-op
}

TEST_P(LauncherModes, NoOrphansAfterTimeout) {
  for (std::string script : {"sleep 100 & sleep 100", "setsid sleep 100 & sleep 100",
                             "(setsid sh -c 'sleep 100 & sleep 100' &) ; sleep 100"}) {
    TempDir d;
    auto spec = MakeSpec(d, {"sh", "-c", script}, GetParam());
    spec.timeout_ms = 2000;
    spec.kill_grace_ms = 300;
    auto ex = Shared().Start(spec);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    const std::string marker = spec.env["GATOS_TEST_MARKER"];
    // The background processes must exist before the timeout fires.
    EXPECT_TRUE(Eventually([&] { return ProcessesWithMarker(marker).size() >= 3; })) << script;
    auto r = (*ex)->Wait();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->timed_out) << script;
    EXPECT_TRUE(ProcessesWithMarker(marker).empty()) << script;
  }
}

TEST_P(LauncherModes, BackgroundLeftoversAreKilledWhenTheMainProcessExits) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & setsid sleep 100 & echo bye"}, GetParam());
  auto r = RunOn(Shared(), spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "bye\n");
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
}

TEST_P(LauncherModes, DestructorWithoutWaitKillsTheTree) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & sleep 100"}, GetParam());
  const std::string marker = spec.env["GATOS_TEST_MARKER"];
  {
    auto ex = Shared().Start(spec);
    ASSERT_TRUE(ex.ok());
    EXPECT_TRUE(Eventually([&] { return ProcessesWithMarker(marker).size() >= 3; }));
  }
  EXPECT_TRUE(ProcessesWithMarker(marker).empty());
}

TEST_P(LauncherModes, PidIsTheJobUnderGatosSupervise) {
  TempDir d;
  auto spec = MakeSpec(d, {"sleep", "100"}, GetParam());
  auto ex = Shared().Start(spec);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  pid_t job = (*ex)->pid();
  // pid() is the job in our PID namespace, even when it runs in the slot's.
  EXPECT_EQ(ExeName(job), "sleep");
  int parent = std::stoi(ProcStatus(job, "PPid"));
  EXPECT_EQ(ExeName(parent), "gatos-supervise");
  (*ex)->Stop();
  auto r = (*ex)->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
}

TEST_P(LauncherModes, OneSlotServesJobAfterJob) {
  auto l = NewLauncher(Options([](LauncherOptions& o) { o.probe_in_create = false; }));
  ASSERT_TRUE(l);
  TempDir d;
  for (int i = 0; i < 10; ++i) {
    auto r = RunOn(*l, MakeSpec(d, {"sh", "-c", "echo " + std::to_string(i)}, GetParam(),
                                "ws" + std::to_string(i)));
    EXPECT_EQ(r.stdout_data, std::to_string(i) + "\n");
  }
  auto st = l->stats();
  EXPECT_EQ(st.jobs, sandboxed() ? 11 : 10);  // + the namespace probe
  EXPECT_EQ(st.slots_started, 1);
  EXPECT_EQ(st.slots_discarded, 0);
  EXPECT_EQ(st.idle_slots, 1);
}

// A sandboxed slot keeps the mount points of its last job's binds, so a
// job goes back to the idle slot that last ran a job in its workspace.
TEST(Launcher, AJobGoesBackToTheSlotThatRanItsWorkspace) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  auto start = [&](const std::string& ws) {
    auto ex = l->Start(MakeSpec(d, {"sleep", "100"}, Sandbox::kRequire, ws));
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    return ex.ok() ? std::move(*ex) : nullptr;
  };
  auto slot_of = [](Execution& ex) { return std::stoi(ProcStatus(ex.pid(), "PPid")); };
  auto end = [](std::unique_ptr<Execution> ex) {
    ex->Stop();
    EXPECT_TRUE(ex->Wait().ok());
  };
  // Two slots, one per workspace.
  auto a = start("a"), b = start("b");
  ASSERT_TRUE(a && b);
  const int slot_a = slot_of(*a), slot_b = slot_of(*b);
  ASSERT_NE(slot_a, slot_b);
  end(std::move(a));
  end(std::move(b));
  for (int round = 0; round < 3; ++round) {
    for (const auto& [ws, slot] : {std::pair<std::string, int>{"a", slot_a}, {"b", slot_b}}) {
      auto ex = start(ws);
      ASSERT_TRUE(ex);
      EXPECT_EQ(slot_of(*ex), slot) << "workspace " << ws << ", round " << round;
      end(std::move(ex));
    }
  }
}

TEST_P(LauncherModes, LateStopDoesNotReachTheNextJob) {
  auto l = NewLauncher(Options([](LauncherOptions& o) { o.probe_in_create = false; }));
  ASSERT_TRUE(l);
  TempDir d;
  auto first = l->Start(MakeSpec(d, {"true"}, GetParam(), "a"));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Wait().ok());
  auto second = l->Start(MakeSpec(d, {"sh", "-c", "sleep 0.3; echo second"}, GetParam(), "b"));
  ASSERT_TRUE(second.ok());
  (*first)->Stop();  // the first job's slot now runs the second job
  auto r = (*second)->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "second\n");
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(l->stats().slots_started, 1);
}

TEST(Launcher, ConcurrentJobsFromSeveralThreads) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::string tag = std::to_string(t) + "-" + std::to_string(i);
        ExecSpec spec;
        spec.argv = {"sh", "-c", "echo $TAG"};
        spec.workspace = d.Join("ws" + tag);
        std::filesystem::create_directories(spec.workspace);
        spec.env["TAG"] = tag;
        spec.sandbox = t % 2 ? Sandbox::kRequire : Sandbox::kOff;
        auto ex = l->Start(spec);
        if (!ex.ok()) continue;
        auto r = (*ex)->Wait();
        if (r.ok() && r->exit_code == 0 && r->stdout_data == tag + "\n" &&
            r->sandboxed == (t % 2 == 1)) {
          ++ok;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 20);
  // Never more slots than jobs running at once (2 threads per kind).
  auto st = l->stats();
  EXPECT_LE(st.slots_started, 4);
  EXPECT_EQ(st.slots_discarded, 0);
}

// If the worker dies, its jobs and its slots die with it: each supervisor
// sees its socket close and kills the tree.
TEST_P(LauncherModes, JobsAndSlotsDieWithTheirWorker) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & setsid sleep 100 & sleep 100"}, GetParam());
  const std::string marker = spec.env["GATOS_TEST_MARKER"];
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    close(p[0]);
    auto l = JobLauncher::Create();
    int32_t pids[2] = {-1, -1};
    if (l.ok()) {
      // An idle slot of the other kind too.
      ExecSpec other = spec;
      other.argv = {"true"};
      other.sandbox = spec.sandbox == Sandbox::kOff ? Sandbox::kRequire : Sandbox::kOff;
      other.env["GATOS_TEST_MARKER"] = marker + "-other";
      auto o = (*l)->Start(other);
      if (o.ok()) (void)(*o)->Wait();
      auto ex = (*l)->Start(spec);
      if (ex.ok()) {
        pids[0] = (*ex)->pid();
        pids[1] = std::stoi(ProcStatus(pids[0], "PPid"));
        if (write(p[1], pids, sizeof(pids)) != sizeof(pids)) _exit(2);
        pause();
      }
    }
    if (write(p[1], pids, sizeof(pids)) != sizeof(pids)) _exit(2);
    _exit(1);
  }
  close(p[1]);
  int32_t pids[2] = {-1, -1};
  ASSERT_EQ(read(p[0], pids, sizeof(pids)), static_cast<ssize_t>(sizeof(pids)));
  close(p[0]);
  ASSERT_GT(pids[0], 0);
  EXPECT_TRUE(Eventually([&] { return ProcessesWithMarker(marker).size() >= 4; }));
  // Every gatos-supervise the worker started (its direct children).
  std::vector<int> slots;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ProcStatus(std::stoi(name), "PPid") == std::to_string(worker)) slots.push_back(std::stoi(name));
  }
  EXPECT_EQ(slots.size(), 2u);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  int st;
  ASSERT_EQ(waitpid(worker, &st, 0), worker);
  EXPECT_TRUE(Eventually([&] { return ProcessesWithMarker(marker).empty(); }))
      << "job processes outlived their worker";
  for (int s : slots) {
    EXPECT_TRUE(Eventually([&] { return !Alive(s); })) << "slot " << s << " outlived its worker";
  }
  EXPECT_FALSE(Alive(pids[1]));
}

TEST(Launcher, ExecutionsOutliveTheLauncherAndNoSlotSurvivesIt) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 0.5; echo done"}, Sandbox::kRequire);
  std::unique_ptr<Execution> running;
  int idle_slot = -1, busy_slot = -1;
  {
    auto l = NewLauncher();
    ASSERT_TRUE(l);
    // An unsandboxed job's parent is its slot's supervisor.
    auto r = RunOn(*l, MakeSpec(d, {"sh", "-c", "echo $PPID"}, Sandbox::kOff, "idle"));
    ASSERT_EQ(r.exit_code, 0);
    idle_slot = std::stoi(r.stdout_data);
    EXPECT_EQ(ExeName(idle_slot), "gatos-supervise");
    auto ex = l->Start(spec);
    ASSERT_TRUE(ex.ok());
    running = std::move(*ex);
    busy_slot = std::stoi(ProcStatus(running->pid(), "PPid"));
  }
  // The launcher is gone: its idle slot exited and was reaped. The running
  // job finishes normally, and then its slot goes too.
  EXPECT_FALSE(Alive(idle_slot));
  auto r = running->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "done\n");
  running.reset();
  EXPECT_FALSE(Alive(busy_slot));
}

TEST(Launcher, BubblewrapEngineRunsEachJobInBwrap) {
  auto l = NewLauncher(Options([](LauncherOptions& o) { o.engine = SandboxEngine::kBubblewrap; }));
  ASSERT_TRUE(l);
  EXPECT_EQ(l->ActiveEngine(), SandboxEngine::kBubblewrap);
  TempDir d;
  auto r = RunOn(*l, MakeSpec(d, {"sh", "-c", "kill -KILL $$"}, Sandbox::kRequire));
  EXPECT_TRUE(r.sandboxed);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);  // bwrap's convention
  EXPECT_EQ(l->stats().slots_started, 0);
}

TEST(Launcher, MissingSupervisorIsFailedPrecondition) {
  auto l = JobLauncher::Create(Options([](LauncherOptions& o) { o.supervise_path = "/nonexistent/gatos-supervise"; }));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(l.status().message().find("/nonexistent/gatos-supervise"), std::string::npos);
}

// Where user namespaces cannot be created (here: a limit of 0 in a user
// namespace of the test's own), the namespace engine is unusable: kAuto
// falls back to bubblewrap (which, privileged in that namespace, needs none
// of its own); without bubblewrap either, kAuto jobs run unsandboxed with a
// note and kRequire jobs are refused.
TEST(Launcher, WithoutUserNamespacesItFallsBack) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(p[0]);
    std::string report;
    auto say = [&](const std::string& s) { report += s + "\n"; };
    auto put = [](const char* path, const std::string& data) {
      int fd = open(path, O_WRONLY);
      bool ok = fd >= 0 && write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
      if (fd >= 0) close(fd);
      return ok;
    };
    std::string id = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1";
    std::string gid = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1";
    if (unshare(CLONE_NEWUSER) != 0 || !put("/proc/self/uid_map", id) ||
        !put("/proc/self/setgroups", "deny") || !put("/proc/self/gid_map", gid) ||
        !put("/proc/sys/user/max_user_namespaces", "0")) {
      say(std::string("setup failed: ") + strerror(errno));
    } else {
      say("limit=" + ReadFile("/proc/sys/user/max_user_namespaces"));
      TempDir d;
      auto strict = JobLauncher::Create(Options([](LauncherOptions& o) { o.engine = SandboxEngine::kNamespaces; }));
      say("strict_code=" + std::to_string(static_cast<int>(strict.status().code())));
      say("strict_why=" + strict.status().message());
      // A bwrap path of its own: ProbeSandbox caches per path and process,
      // and this process is a fork of one that probed /usr/bin/bwrap.
      auto l = JobLauncher::Create(Options([](LauncherOptions& o) { o.bwrap_path = "/usr/bin/../bin/bwrap"; }));
      if (l.ok()) {
        say("auto_engine=" + std::to_string(static_cast<int>((*l)->ActiveEngine())));
        auto ex = (*l)->Start(MakeSpec(d, {"sh", "-c", "kill -TERM $$"}, Sandbox::kRequire, "bw"));
        auto r = ex.ok() ? (*ex)->Wait() : Result<ExecResult>(ex.status());
        say(r.ok() ? "bwrap_exit=" + std::to_string(r->exit_code.value_or(-1))
                   : "bwrap_error=" + r.status().message());
      }
      auto none = JobLauncher::Create(Options([](LauncherOptions& o) { o.bwrap_path = "/nonexistent/bwrap"; }));
      if (none.ok()) {
        say(std::string("none_ok=") + ((*none)->SandboxStatus().ok() ? "1" : "0"));
        auto req = (*none)->Start(MakeSpec(d, {"true"}, Sandbox::kRequire, "req"));
        say("require_code=" + std::to_string(static_cast<int>(req.status().code())));
        auto ex = (*none)->Start(MakeSpec(d, {"sh", "-c", "echo ran"}, Sandbox::kAuto, "auto"));
        auto r = ex.ok() ? (*ex)->Wait() : Result<ExecResult>(ex.status());
        if (r.ok()) {
          say("auto_out=" + r->stdout_data.substr(0, r->stdout_data.size() - 1));
          say(std::string("auto_sandboxed=") + (r->sandboxed ? "1" : "0"));
          say("auto_note=" + r->sandbox_note);
        }
      }
    }
    if (write(p[1], report.data(), report.size()) < 0) _exit(2);
    _exit(0);
  }
  close(p[1]);
  std::string report;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof(buf))) > 0) report.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int st;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  const std::string fp = std::to_string(static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_NE(report.find("limit=0"), std::string::npos) << report;
  EXPECT_NE(report.find("strict_code=" + fp + "\nstrict_why=sandbox: gatos-supervise failed creating "
                        "the slot's user and PID namespaces: No space left on device"),
            std::string::npos)
      << report;
  if (getuid() == 0) {  // bwrap skips the user namespace only when it starts as root there
    EXPECT_NE(report.find("auto_engine=" + std::to_string(static_cast<int>(SandboxEngine::kBubblewrap))),
              std::string::npos)
        << report;
    // Root here is the host's root (mapped to itself), the owner of the
    // host's device nodes, and cannot make nodes of the job's own (no
    // CAP_MKNOD outside): the job is refused rather than given the host's.
    EXPECT_NE(report.find("bwrap_error=sandbox: cannot make the job's /dev/null in "),
              std::string::npos)
        << report;
    EXPECT_NE(report.find(
                  ": Operation not permitted; the job would otherwise own the host's device nodes"),
              std::string::npos)
        << report;
  }
  EXPECT_NE(report.find("none_ok=0\nrequire_code=" + fp + "\n"), std::string::npos) << report;
  EXPECT_NE(report.find("auto_out=ran\nauto_sandboxed=0\nauto_note=running unsandboxed: sandbox: "),
            std::string::npos)
      << report;
}

}  // namespace
}  // namespace gatos
