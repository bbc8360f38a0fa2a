// Job execution with real processes: exit status, signals, timeouts, output
// caps, environment scrubbing, cwd rules, Stop(), orphans, and the bubblewrap
// sandbox (bubblewrap is installed by the setup; these tests never skip).
#include "gatos/exec/exec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::ReadFile;
using ::gatos::testing::TempDir;
using ::gatos::testing::WriteFile;
using Sandbox = ExecSpec::Sandbox;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A spec with a fresh workspace and output dir under `dir`, and a marker in
// the job's environment so leftover processes can be found in /proc.
ExecSpec MakeSpec(const TempDir& dir, std::vector<std::string> argv, Sandbox sb = Sandbox::kOff) {
  ExecSpec s;
  s.argv = std::move(argv);
  s.workspace = dir.Join("ws");
  s.output_dir = dir.Join("out");
  std::filesystem::create_directories(s.workspace);
  s.sandbox = sb;
  s.env["GATOS_TEST_MARKER"] = "m" + std::to_string(getpid()) + "-" + std::to_string(NowMs());
  s.timeout_ms = 60000;  // a safety net: no test should get near it
  return s;
}

ExecResult RunSpec(const ExecSpec& spec) {
  auto ex = Execution::Start(spec);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (!ex.ok()) return {};
  auto r = (*ex)->Wait();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ExecResult{};
}

// Pids of live processes whose environment holds GATOS_TEST_MARKER=<marker>.
std::vector<int> ProcessesWithMarker(const std::string& marker) {
  std::vector<int> out;
  std::string needle = "GATOS_TEST_MARKER=" + marker;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "environ", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string env = ss.str();
    size_t pos = 0;
    while ((pos = env.find(needle, pos)) != std::string::npos) {
      size_t end = pos + needle.size();
      if ((pos == 0 || env[pos - 1] == '\0') && (end == env.size() || env[end] == '\0')) {
        out.push_back(std::stoi(name));
        break;
      }
      pos = end;
    }
  }
  return out;
}

// How many of `pids` run the program `comm` (/proc/<pid>/comm).
size_t CountRunning(const std::vector<int>& pids, const std::string& comm) {
  size_t n = 0;
  for (int pid : pids) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (std::getline(f, name) && name == comm) ++n;
  }
  return n;
}

// Polls `done` every 10 ms for at most 20 s (a safety net: the conditions
// waited for take milliseconds); returns its last value, which the caller
// asserts.
template <typename Fn>
bool WaitFor(Fn done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

class ExecModes : public ::testing::TestWithParam<Sandbox> {};
INSTANTIATE_TEST_SUITE_P(Both, ExecModes, ::testing::Values(Sandbox::kOff, Sandbox::kRequire),
                         [](const auto& info) {
                           return info.param == Sandbox::kOff ? "Unsandboxed" : "Sandboxed";
                         });

TEST_P(ExecModes, ExitCodeAndOutput) {
  TempDir d;
  auto r = RunSpec(MakeSpec(d, {"sh", "-c", "echo out; echo err >&2; exit 7"}, GetParam()));
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 7);
  EXPECT_FALSE(r.signal.has_value());
  EXPECT_EQ(r.stdout_data, "out\n");
  EXPECT_EQ(r.stderr_data, "err\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.sandboxed, GetParam() == Sandbox::kRequire);
  EXPECT_TRUE(r.sandbox_note.empty());
  EXPECT_GT(r.started_ms, 1600000000000);
  EXPECT_GE(r.finished_ms, r.started_ms);
}

TEST(Exec, SignalUnsandboxed) {
  TempDir d;
  auto r = RunSpec(MakeSpec(d, {"sh", "-c", "kill -KILL $$"}));
  ASSERT_TRUE(r.signal.has_value());
  EXPECT_EQ(*r.signal, SIGKILL);
  EXPECT_FALSE(r.exit_code.has_value());
}

TEST(Exec, SignalSandboxedIsReportedAs128PlusN) {
  // bwrap turns a signal death into exit 128+N (documented in exec.h).
  TempDir d;
  auto r = RunSpec(MakeSpec(d, {"sh", "-c", "kill -KILL $$"}, Sandbox::kRequire));
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 128 + SIGKILL);
}

TEST_P(ExecModes, TimeoutSendsTermFirst) {
  TempDir d;
  auto spec = MakeSpec(d, {"sleep", "100"}, GetParam());
  spec.timeout_ms = 300;
  int64_t t0 = NowMs();
  auto r = RunSpec(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.stopped);
  if (GetParam() == Sandbox::kOff) {
    ASSERT_TRUE(r.signal.has_value());
    EXPECT_EQ(*r.signal, SIGTERM);
  } else {
    ASSERT_TRUE(r.exit_code.has_value());
    EXPECT_EQ(*r.exit_code, 128 + SIGTERM);
  }
  EXPECT_LT(NowMs() - t0, 20000);
}

TEST_P(ExecModes, TimeoutEscalatesToKillWhenTermIsTrapped) {
  TempDir d;
  // The job handles TERM (prints and carries on), so only KILL ends it.
  auto spec = MakeSpec(
      d, {"sh", "-c", "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done"},
      GetParam());
  spec.timeout_ms = 500;
  spec.kill_grace_ms = 700;
  int64_t t0 = NowMs();
  auto r = RunSpec(spec);
  int64_t elapsed = NowMs() - t0;
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.stdout_data.find("ready"), std::string::npos);
  EXPECT_NE(r.stdout_data.find("got-term"), std::string::npos) << r.stdout_data;
  if (GetParam() == Sandbox::kOff) {
    ASSERT_TRUE(r.signal.has_value());
    EXPECT_EQ(*r.signal, SIGKILL);
  } else {
    // The KILL phase hits bwrap and the job at once: whichever dies first
    // decides between "bwrap killed" and "bwrap saw its child killed".
    EXPECT_TRUE(r.signal == SIGKILL || r.exit_code == 128 + SIGKILL);
  }
  EXPECT_GE(elapsed, 500 + 700);  // KILL only after the grace
  EXPECT_LT(elapsed, 30000);
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
}

TEST_P(ExecModes, OutputIsCappedAndTheChildNeverBlocks) {
  TempDir d;
  // 4 MiB on each stream, far beyond pipe buffers and the 1000-byte cap.
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "head -c 4194304 /dev/zero | tr '\\0' a; "
                        "head -c 4194304 /dev/zero | tr '\\0' b >&2; echo done >&2; exit 3"},
                       GetParam());
  spec.output_cap_bytes = 1000;
  auto r = RunSpec(spec);
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, std::string(1000, 'a'));
  EXPECT_EQ(r.stderr_data, std::string(1000, 'b'));
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_TRUE(r.stderr_truncated);
}

TEST(Exec, OutputUnderTheCapIsNotTruncated) {
  TempDir d;
  auto spec = MakeSpec(d, {"printf", "12345"});
  spec.output_cap_bytes = 5;
  auto r = RunSpec(spec);
  EXPECT_EQ(r.stdout_data, "12345");
  EXPECT_FALSE(r.stdout_truncated);
  EXPECT_FALSE(r.stderr_truncated);
}

TEST_P(ExecModes, EnvironmentIsScrubbedAndLayered) {
  TempDir d;
  ASSERT_EQ(setenv("GATOS_TEST_WORKER_SECRET", "hunter2", 1), 0);
  auto spec = MakeSpec(d, {"env"}, GetParam());
  spec.env["FOO"] = "from-manifest";
  spec.env["GATOS_JOB_ID"] = "manifest-tries-to-override";
  spec.extra_env["GATOS_JOB_ID"] = "abc123";
  auto r = RunSpec(spec);
  unsetenv("GATOS_TEST_WORKER_SECRET");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  const std::string& e = r.stdout_data;
  EXPECT_EQ(e.find("GATOS_TEST_WORKER_SECRET"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos);
  EXPECT_NE(e.find("\nPATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos) << e;
  EXPECT_NE(e.find("HOME=" + spec.workspace + "\n"), std::string::npos) << e;
  EXPECT_NE(e.find("LANG=C.UTF-8\n"), std::string::npos);
  EXPECT_NE(e.find("TMPDIR=/tmp\n"), std::string::npos);
  EXPECT_NE(e.find("FOO=from-manifest\n"), std::string::npos);
  EXPECT_NE(e.find("GATOS_JOB_ID=abc123\n"), std::string::npos);
  EXPECT_EQ(e.find("manifest-tries-to-override"), std::string::npos);
  EXPECT_NE(e.find("GATOS_OUTPUT_DIR=" + d.Join("out") + "\n"), std::string::npos) << e;
}

TEST(Exec, ManifestPathIsUsedForLookup) {
  TempDir d;
  auto spec = MakeSpec(d, {"my-tool"});
  std::filesystem::create_directories(d.Join("bin"));
  WriteFile(d.Join("bin/my-tool"), "#!/bin/sh\necho tool-ran\n", 0755);
  spec.env["PATH"] = d.Join("bin") + ":/usr/bin:/bin";
  auto r = RunSpec(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "tool-ran\n");
}

TEST(Exec, BadEnvNameIsInvalidArgument) {
  TempDir d;
  auto spec = MakeSpec(d, {"true"});
  spec.env["A=B"] = "x";
  auto ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);
}

TEST_P(ExecModes, OutputDirIsCreatedAndWritable) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "echo result > \"$GATOS_OUTPUT_DIR/r.txt\""}, GetParam());
  spec.output_dir = d.Join("out/nested");
  auto r = RunSpec(spec);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(ReadFile(d.Join("out/nested/r.txt")), "result\n");
}

TEST_P(ExecModes, CwdIsCreatedInsideTheWorkspace) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "pwd; touch here"}, GetParam());
  spec.cwd = "sub/./dir/";
  auto r = RunSpec(spec);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, spec.workspace + "/sub/dir\n");
  EXPECT_TRUE(std::filesystem::exists(spec.workspace + "/sub/dir/here"));
}

TEST(Exec, CwdEscapesAreRejected) {
  TempDir d;
  for (std::string cwd : {"..", "../x", "a/../../b", "/etc", "./../ws2"}) {
    auto spec = MakeSpec(d, {"true"});
    spec.cwd = cwd;
    auto ex = Execution::Start(spec);
    ASSERT_FALSE(ex.ok()) << cwd;
    EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument) << cwd;
    EXPECT_NE(ex.status().message().find("cwd"), std::string::npos);
  }
  // A symlink inside the workspace that points out of it.
  auto spec = MakeSpec(d, {"true"});
  std::filesystem::create_directory_symlink(d.path(), spec.workspace + "/link");
  spec.cwd = "link";
  auto ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);
  // A harmless ".." that stays inside is fine.
  spec.cwd = "a/../b";
  auto ok = Execution::Start(spec);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->Wait()->exit_code, 0);
}

TEST(Exec, BadSpecsAreRejected) {
  TempDir d;
  auto spec = MakeSpec(d, {});
  auto ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);

  spec = MakeSpec(d, {"true"});
  spec.workspace = d.Join("missing");
  ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);

  spec = MakeSpec(d, {"no-such-command-gatos"});
  ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ex.status().message().find("no-such-command-gatos"), std::string::npos);

  spec = MakeSpec(d, {"./missing.sh"});
  ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kNotFound);

  WriteFile(spec.workspace + "/noexec.sh", "#!/bin/sh\n", 0644);
  spec = MakeSpec(d, {"./noexec.sh"});
  ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kPermissionDenied);
}

TEST_P(ExecModes, StopFromAnotherThread) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "echo started; touch \"$HOME/ready\"; sleep 100"}, GetParam());
  auto ex = Execution::Start(spec);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_GT((*ex)->pid(), 0);
  Execution* e = ex->get();
  // Stop only once the job runs (it made its marker file after printing),
  // so the test shows Stop ending a running job, not one that never began.
  const std::string ready = spec.workspace + "/ready";
  std::atomic<bool> was_running{false};
  std::thread stopper([e, &ready, &was_running] {
    was_running = WaitFor([&] { return std::filesystem::exists(ready); });
    e->Stop();
    e->Stop();  // idempotent
  });
  int64_t t0 = NowMs();
  auto r = e->Wait();
  stopper.join();
  ASSERT_TRUE(was_running) << "the job never made " << ready;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stopped);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "started\n");
  EXPECT_TRUE(r->signal.has_value() || r->exit_code.value_or(0) == 128 + SIGTERM);
  EXPECT_LT(NowMs() - t0, 20000);
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
  e->Stop();  // after the job ended: a no-op
}

TEST(Exec, StopAfterNaturalExitDoesNotMarkStopped) {
  TempDir d;
  auto ex = Execution::Start(MakeSpec(d, {"true"}));
  ASSERT_TRUE(ex.ok());
  auto r = (*ex)->Wait();
  ASSERT_TRUE(r.ok());
  (*ex)->Stop();
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(r->exit_code, 0);
  auto again = (*ex)->Wait();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
}

// The orphan cases of the worker issue: background grandchildren, in the
// job's group and in a new session, must not survive a timeout.
TEST_P(ExecModes, NoOrphansAfterTimeout) {
  for (std::string script : {"sleep 100 & sleep 100", "setsid sleep 100 & sleep 100",
                             "(setsid sh -c 'sleep 100 & sleep 100' &) ; sleep 100"}) {
    TempDir d;
    auto spec = MakeSpec(d, {"sh", "-c", script}, GetParam());
    spec.timeout_ms = 2000;
    spec.kill_grace_ms = 300;
    auto ex = Execution::Start(spec);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    // The background processes must exist before the timeout fires, or the
    // test would prove nothing.
    const std::string marker = spec.env["GATOS_TEST_MARKER"];
    size_t seen = 0;
    for (int i = 0; i < 150 && seen < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      seen = ProcessesWithMarker(marker).size();
    }
    EXPECT_GE(seen, 3u) << script;  // sh + two sleeps at least
    auto r = (*ex)->Wait();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->timed_out) << script;
    EXPECT_TRUE(ProcessesWithMarker(marker).empty()) << script;
  }
}

TEST_P(ExecModes, BackgroundLeftoversAreKilledWhenTheMainProcessExits) {
  TempDir d;
  // The background sleep keeps stdout open; Wait must still return promptly.
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & setsid sleep 100 & echo bye"}, GetParam());
  int64_t t0 = NowMs();
  auto r = RunSpec(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "bye\n");
  EXPECT_LT(NowMs() - t0, 20000);
  EXPECT_TRUE(ProcessesWithMarker(spec.env["GATOS_TEST_MARKER"]).empty());
}

TEST(Exec, DestructorWithoutWaitKillsTheTree) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & sleep 100"});
  const std::string marker = spec.env["GATOS_TEST_MARKER"];
  {
    auto ex = Execution::Start(spec);
    ASSERT_TRUE(ex.ok());
    // Both sleeps run before the destructor does, or an empty process list
    // afterwards would prove nothing.
    ASSERT_TRUE(WaitFor([&] { return CountRunning(ProcessesWithMarker(marker), "sleep") == 2; }))
        << ProcessesWithMarker(marker).size() << " processes with the marker";
  }
  EXPECT_TRUE(ProcessesWithMarker(marker).empty());
}

TEST(Exec, ConcurrentJobsFromSeveralThreads) {
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
        auto ex = Execution::Start(spec);
        if (!ex.ok()) continue;
        auto r = (*ex)->Wait();
        if (r.ok() && r->exit_code == 0 && r->stdout_data == tag + "\n") ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 20);
}

// If the worker dies, its jobs die with it: the supervisor sees the control
// socket close and kills the tree.
TEST(Exec, JobsDieWithTheirWorker) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "sleep 100 & setsid sleep 100 & sleep 100"});
  const std::string marker = spec.env["GATOS_TEST_MARKER"];
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    close(p[0]);
    auto ex = Execution::Start(spec);
    char c = ex.ok() ? 'y' : 'n';
    if (write(p[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  close(p[1]);
  char c = 0;
  ASSERT_EQ(read(p[0], &c, 1), 1);
  close(p[0]);
  ASSERT_EQ(c, 'y');
  size_t seen = 0;
  for (int i = 0; i < 300 && seen < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = ProcessesWithMarker(marker).size();
  }
  EXPECT_GE(seen, 4u);  // sh + three sleeps
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  int st;
  ASSERT_EQ(waitpid(worker, &st, 0), worker);
  // The supervisor is re-parented away from us, so poll (generously).
  std::vector<int> left = ProcessesWithMarker(marker);
  for (int i = 0; i < 1000 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = ProcessesWithMarker(marker);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " job processes outlived their worker";
}

// ---- sandbox ----

// A TCP listener on 127.0.0.1 in the test's network namespace.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(Sandbox, NoNetworkUnlessAllowed) {
  Listener l;
  std::string connect = "echo hi > /dev/tcp/127.0.0.1/" + std::to_string(l.port());
  {
    TempDir d;
    auto r = RunSpec(MakeSpec(d, {"bash", "-c", connect}, Sandbox::kRequire));
    EXPECT_TRUE(r.sandboxed);
    EXPECT_NE(r.exit_code, 0) << "sandboxed job reached the host's loopback";
  }
  {
    TempDir d;
    auto spec = MakeSpec(d, {"bash", "-c", connect}, Sandbox::kRequire);
    spec.allow_network = true;
    auto r = RunSpec(spec);
    EXPECT_TRUE(r.sandboxed);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  }
  {
    TempDir d;
    auto r = RunSpec(MakeSpec(d, {"bash", "-c", connect}, Sandbox::kOff));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  }
}

TEST(Sandbox, FilesystemIsConfined) {
  TempDir d;
  TempDir other;
  WriteFile(other.Join("secret.txt"), "not for jobs");
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "test -e '" + other.Join("secret.txt") +
                            "' && echo saw-tmp-secret; "
                            "test -e '" GATOS_SOURCE_DIR "/CMakeLists.txt' && echo saw-source; "
                            "test -e /etc/shadow && echo saw-shadow; "
                            "touch /usr/gatos-sandbox-write 2>/dev/null && echo wrote-usr; "
                            "touch /tmp/private && echo tmp-ok; "
                            "touch \"$HOME/ws-ok\" && echo ws-ok; "
                            "echo o > \"$GATOS_OUTPUT_DIR/o\" && echo out-ok"},
                       Sandbox::kRequire);
  auto r = RunSpec(spec);
  EXPECT_TRUE(r.sandboxed);
  EXPECT_EQ(r.stdout_data, "tmp-ok\nws-ok\nout-ok\n") << r.stderr_data;
  EXPECT_FALSE(std::filesystem::exists("/usr/gatos-sandbox-write"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/private"));  // the job's /tmp was private
  EXPECT_TRUE(std::filesystem::exists(spec.workspace + "/ws-ok"));
  EXPECT_EQ(ReadFile(d.Join("out/o")), "o\n");
}

TEST(Sandbox, WriteToUsrFailsWithReadOnly) {
  TempDir d;
  auto r = RunSpec(MakeSpec(d, {"touch", "/usr/gatos-sandbox-write"}, Sandbox::kRequire));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_data.find("Read-only file system"), std::string::npos) << r.stderr_data;
  EXPECT_FALSE(std::filesystem::exists("/usr/gatos-sandbox-write"));
}

TEST(Sandbox, ReadOnlyBindsAreVisibleButNotWritable) {
  TempDir d;
  TempDir shared;
  WriteFile(shared.Join("data.txt"), "shared-data");
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "cat '" + shared.Join("data.txt") + "'; echo; touch '" +
                            shared.Join("new") + "' 2>/dev/null || echo ro"},
                       Sandbox::kRequire);
  spec.ro_binds = {shared.path()};
  auto r = RunSpec(spec);
  EXPECT_EQ(r.stdout_data, "shared-data\nro\n") << r.stderr_data;
  EXPECT_FALSE(std::filesystem::exists(shared.Join("new")));
}

TEST(Sandbox, RequireFailsWithoutUsableBwrap) {
  TempDir d;
  auto spec = MakeSpec(d, {"true"}, Sandbox::kRequire);
  spec.bwrap_path = "/nonexistent/bwrap";
  auto ex = Execution::Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ex.status().message().find("/nonexistent/bwrap"), std::string::npos);
}

TEST(Sandbox, AutoFallsBackWithANote) {
  TempDir d;
  auto spec = MakeSpec(d, {"sh", "-c", "echo ran"}, Sandbox::kAuto);
  spec.bwrap_path = "/nonexistent/bwrap";
  auto r = RunSpec(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "ran\n");
  EXPECT_FALSE(r.sandboxed);
  EXPECT_NE(r.sandbox_note.find("unsandboxed"), std::string::npos) << r.sandbox_note;
  EXPECT_NE(r.sandbox_note.find("/nonexistent/bwrap"), std::string::npos);
}

TEST(Sandbox, BwrapThatFailsItsProbeFallsBack) {
  // A "bwrap" that exits 1 like one that cannot create namespaces.
  TempDir d;
  WriteFile(d.Join("fake-bwrap"),
            "#!/bin/sh\necho 'No permissions to create new namespace' >&2\n"
            "exit 1\n",
            0755);
  auto spec = MakeSpec(d, {"true"}, Sandbox::kAuto);
  spec.bwrap_path = d.Join("fake-bwrap");
  auto r = RunSpec(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.sandboxed);
  EXPECT_NE(r.sandbox_note.find("No permissions to create new namespace"), std::string::npos)
      << r.sandbox_note;
  EXPECT_EQ(ProbeSandbox(spec.bwrap_path).code(), StatusCode::kFailedPrecondition);
}

TEST(Sandbox, AutoUsesBwrapWhenItWorks) {
  ASSERT_TRUE(ProbeSandbox().ok()) << ProbeSandbox().ToString();
  TempDir d;
  auto r = RunSpec(MakeSpec(d, {"sh", "-c", "echo $$"}, Sandbox::kAuto));
  EXPECT_TRUE(r.sandboxed);
  EXPECT_TRUE(r.sandbox_note.empty());
  // Own PID namespace: the job is a low pid (bwrap's init is 1).
  EXPECT_LE(std::stoi(r.stdout_data), 3) << r.stdout_data;
}

}  // namespace
}  // namespace gatos

namespace gatos {
namespace {

// The worker starts each supervisor as the small gatos-supervise program
// (vfork + exec), not as a fork of itself; the job is its child.
TEST(SupervisorProcess, JobRunsUnderTheGatosSuperviseProgram) {
  testing::TempDir d;
  ExecSpec spec;
  spec.argv = {"/bin/sleep", "5"};
  spec.workspace = d.path();
  spec.sandbox = ExecSpec::Sandbox::kOff;
  auto ex = Execution::Start(spec);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  std::ifstream stat("/proc/" + std::to_string((*ex)->pid()) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string state;
  pid_t ppid = 0;
  fields >> state >> ppid;
  std::error_code ec;
  std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(ppid) + "/exe", ec).string();
  EXPECT_EQ(std::filesystem::path(exe).filename(), "gatos-supervise") << exe;
  (*ex)->Stop();
  auto r = (*ex)->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
}

}  // namespace
}  // namespace gatos
