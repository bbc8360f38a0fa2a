// The system-call filter every job runs under (lib/exec/src/job_seccomp.h),
// with real processes in each way a job can start: the launcher's namespace
// sandbox and its unsandboxed slots, bubblewrap, and a plain supervised
// process. A nested user namespace (the start of most container escapes),
// new namespaces of any kind, keyrings, BPF, userfaultfd and io_uring are
// refused; ordinary process creation still works.
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "gatos/exec/exec.h"
#include "launcher_test_util.h"
#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::TempDir;
using namespace ::gatos::launcher_test;  // NOLINT

const char* Outcome(long rc) {
  if (rc >= 0) return "OK";
  return errno == EPERM ? "EPERM" : errno == ENOSYS ? "ENOSYS" : strerrorname_np(errno);
}

// This binary doubles as the probe run inside each job: GATOS_SECCOMP_PROBE=1.
int Probe() {
  if (!std::getenv("GATOS_SECCOMP_PROBE")) return -1;
  std::printf("unshare-user=%s\n", Outcome(unshare(CLONE_NEWUSER)));
  std::printf("unshare-mount=%s\n", Outcome(unshare(CLONE_NEWNS)));
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, 0);
  std::printf("clone-user=%s\n", Outcome(pid));
  std::printf("clone3=%s\n", Outcome(syscall(SYS_clone3, nullptr, 0)));
  std::printf("add_key=%s\n",
              Outcome(syscall(SYS_add_key, "user", "gatos-probe", "x", 1, KEY_SPEC_SESSION_KEYRING)));
  std::printf("bpf=%s\n", Outcome(syscall(SYS_bpf, 0, nullptr, 0)));
  std::printf("userfaultfd=%s\n", Outcome(syscall(SYS_userfaultfd, 0)));
  std::printf("io_uring_setup=%s\n", Outcome(syscall(SYS_io_uring_setup, 1, nullptr)));
  pid_t child = fork();
  if (child == 0) _exit(7);
  int st = 0;
  waitpid(child, &st, 0);
  std::printf("fork=%s\n", child > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 7 ? "OK" : "failed");
  std::fflush(stdout);
  return 0;
}
const int kProbe = [] {
  int r = Probe();
  if (r >= 0) _exit(r);
  return 0;
}();

constexpr char kExpected[] =
    "unshare-user=EPERM\nunshare-mount=EPERM\nclone-user=EPERM\nclone3=ENOSYS\nadd_key=EPERM\n"
    "bpf=EPERM\nuserfaultfd=EPERM\nio_uring_setup=ENOSYS\nfork=OK\n";

ExecSpec ProbeSpec(const TempDir& d, Sandbox sandbox, const std::string& name) {
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  ExecSpec spec = MakeSpec(d, {self}, sandbox, name);
  spec.env["GATOS_SECCOMP_PROBE"] = "1";
  spec.binds.push_back({std::filesystem::path(self).parent_path().string(), "", false, ""});
  return spec;
}

TEST(JobSeccomp, NamespaceSandbox) {
  auto l = NewLauncher(Options([](LauncherOptions& o) { o.engine = SandboxEngine::kNamespaces; }));
  ASSERT_TRUE(l);
  TempDir d;
  for (int round = 0; round < 2; ++round) {  // a reused slot's next job too
    ExecResult r = RunOn(*l, ProbeSpec(d, Sandbox::kRequire, "ns" + std::to_string(round)));
    EXPECT_TRUE(r.sandboxed);
    EXPECT_EQ(r.stdout_data, kExpected) << r.stderr_data;
  }
}

TEST(JobSeccomp, UnsandboxedSlot) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  ExecResult r = RunOn(*l, ProbeSpec(d, Sandbox::kOff, "plain"));
  EXPECT_FALSE(r.sandboxed);
  EXPECT_EQ(r.stdout_data, kExpected) << r.stderr_data;
}

TEST(JobSeccomp, BubblewrapAndPlainSupervisedProcesses) {
  TempDir d;
  for (Sandbox sandbox : {Sandbox::kRequire, Sandbox::kOff}) {
    auto ex = Execution::Start(ProbeSpec(d, sandbox, sandbox == Sandbox::kOff ? "off" : "bwrap"));
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    auto r = (*ex)->Wait();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->sandboxed, sandbox == Sandbox::kRequire);
    EXPECT_EQ(r->stdout_data, kExpected) << r->stderr_data;
  }
}

}  // namespace
}  // namespace gatos
