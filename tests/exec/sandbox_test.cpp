// The launcher's namespace sandbox, with real processes: what a job can see
// and do, binds at other destinations, and that nothing one job leaves
// behind (files, shared memory, IPC objects, keys, processes) reaches the
// next job on the same slot, nor can a job harm the slot's supervisor.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// This test binary doubles as a tiny helper run inside sandboxes (no keyctl
// program is installed): GATOS_TEST_HELPER=keys-add|keys-find|attack-init|private-devices.
int KeyHelper() {
  const char* mode = std::getenv("GATOS_TEST_HELPER");
  if (!mode) return -1;
  auto find = [] {
    long u = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", "gatos-test-u", 0);
    long s = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", "gatos-test-s", 0);
    std::printf("found user=%d session=%d\n", u > 0, s > 0);
  };
  if (std::string(mode) == "attack-init") {
    // Everything a process of the same uid could try on the slot's init.
    errno = 0;
    long traced = ptrace(PTRACE_ATTACH, 1, nullptr, nullptr);
    std::printf("ptrace=%s\n", traced == 0 ? "attached" : strerror(errno));
    char buf[8];
    iovec local{buf, sizeof(buf)}, remote{reinterpret_cast<void*>(0x400000), sizeof(buf)};
    long rd = syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0);
    std::printf("process_vm_readv=%s\n", rd >= 0 ? "read" : strerror(errno));
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, 1, 0));
    long fd = pidfd >= 0 ? syscall(SYS_pidfd_getfd, pidfd, 3, 0) : -1;
    std::printf("pidfd_getfd=%s\n", fd >= 0 ? "got" : strerror(errno));
    std::printf("kill=%d\n", kill(1, SIGKILL));
  } else if (std::string(mode) == "private-devices") {
    // A bubblewrap job whose workspace is in GATOS_TEST_DIR: the error that
    // kept it from starting, or whether its /dev/null is a node of its own
    // (bound from a .gatos-dev-* directory next to the workspace).
    const char* dir = std::getenv("GATOS_TEST_DIR");
    ExecSpec spec;
    spec.workspace = std::string(dir ? dir : "") + "/ws";
    std::filesystem::create_directories(spec.workspace);
    spec.sandbox = ExecSpec::Sandbox::kRequire;
    spec.argv = {"sh", "-c", "grep -c '/\\.gatos-dev-[^ /]*/null /dev/null ' /proc/self/mountinfo"};
    std::string outcome;
    {
      auto ex = Execution::Start(spec);
      auto r = ex.ok() ? (*ex)->Wait() : Result<ExecResult>(ex.status());
      outcome = !r.ok() ? r.status().message() : r->stdout_data == "1\n" ? "made" : "not needed";
    }  // the Execution is gone, and the job's nodes with it
    std::filesystem::remove_all(spec.workspace);
    std::printf("%s\n", outcome.c_str());
  } else if (std::string(mode) == "keys-add") {
    long u = syscall(SYS_add_key, "user", "gatos-test-u", "secret", 6, KEY_SPEC_USER_KEYRING);
    long s = syscall(SYS_add_key, "user", "gatos-test-s", "secret", 6, KEY_SPEC_SESSION_KEYRING);
    std::printf("added user=%d session=%d\n", u > 0, s > 0);
    find();
  } else {
    find();
  }
  std::fflush(stdout);
  return 0;
}
const int kKeyHelper = [] {
  int r = KeyHelper();
  if (r >= 0) _exit(r);
  return 0;
}();

std::string SelfExe() { return std::filesystem::canonical("/proc/self/exe").string(); }

JobLauncher& Shared() {
  static std::unique_ptr<JobLauncher> l = NewLauncher();
  return *l;
}

ExecResult RunNs(const ExecSpec& spec) { return RunOn(Shared(), spec); }

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

TEST(NamespaceSandbox, NoNetworkUnlessAllowed) {
  Listener l;
  std::string connect = "echo hi > /dev/tcp/127.0.0.1/" + std::to_string(l.port());
  for (int round = 0; round < 2; ++round) {  // the slot's network namespace is reused
    TempDir d;
    auto r = RunNs(MakeSpec(d, {"bash", "-c", connect + " && echo connected"}, Sandbox::kRequire));
    EXPECT_TRUE(r.sandboxed);
    EXPECT_NE(r.exit_code, 0) << "sandboxed job reached the host's loopback";
    EXPECT_EQ(r.stdout_data, "");
    // Its own loopback is up.
    auto lo = RunNs(MakeSpec(d, {"sh", "-c", "cat /proc/net/dev | grep -c 'lo:'; ls /proc/sys/net/ipv4/conf"},
                             Sandbox::kRequire, "lo"));
    EXPECT_EQ(lo.stdout_data, "1\nall\ndefault\nlo\n") << lo.stderr_data;

    auto spec = MakeSpec(d, {"bash", "-c", connect}, Sandbox::kRequire, "net");
    spec.allow_network = true;
    auto allowed = RunNs(spec);
    EXPECT_TRUE(allowed.sandboxed);
    EXPECT_EQ(allowed.exit_code, 0) << allowed.stderr_data;
  }
}

TEST(NamespaceSandbox, FilesystemIsConfined) {
  TempDir d;
  TempDir other;
  WriteFile(other.Join("secret.txt"), "not for jobs");
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "test -e '" + other.Join("secret.txt") +
                            "' && echo saw-tmp-secret; "
                            "test -e '" GATOS_SOURCE_DIR "/CMakeLists.txt' && echo saw-source; "
                            "test -e /etc/shadow && echo saw-shadow; "
                            "test -e /root && echo saw-root; "
                            "test -e /sys/kernel && echo saw-sys; "
                            "touch /usr/gatos-sandbox-write 2>/dev/null && echo wrote-usr; "
                            "touch /gatos-root-write 2>/dev/null && echo wrote-root; "
                            "touch /tmp/private && echo tmp-ok; "
                            "touch /dev/shm/private && echo shm-ok; "
                            "touch \"$HOME/ws-ok\" && echo ws-ok; "
                            "echo o > \"$GATOS_OUTPUT_DIR/o\" && echo out-ok"},
                       Sandbox::kRequire);
  auto r = RunNs(spec);
  EXPECT_TRUE(r.sandboxed);
  EXPECT_EQ(r.stdout_data, "tmp-ok\nshm-ok\nws-ok\nout-ok\n") << r.stderr_data;
  EXPECT_FALSE(std::filesystem::exists("/usr/gatos-sandbox-write"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/private"));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/private"));
  EXPECT_TRUE(std::filesystem::exists(spec.workspace + "/ws-ok"));
  EXPECT_EQ(ReadFile(spec.output_dir + "/o"), "o\n");
}

TEST(NamespaceSandbox, SystemIsReadOnly) {
  TempDir d;
  auto r = RunNs(MakeSpec(d,
                          {"sh", "-c",
                           "touch /usr/x || echo 1; (echo >> /etc/passwd) || echo 2; "
                           "(cat /proc/sys/kernel/printk_ratelimit > /proc/sys/kernel/printk_ratelimit) || echo 3; "
                           "mkdir /etc/x || echo 4; touch /x || echo 5; touch /dev/x || echo 6"},
                          Sandbox::kRequire));
  EXPECT_EQ(r.stdout_data, "1\n2\n3\n4\n5\n6\n") << r.stderr_data;
  if (getuid() == 0) {
    // A root worker's job is uid 0: only the mounts stop it, not permissions.
    size_t ro = 0;
    for (size_t p = 0; (p = r.stderr_data.find("Read-only file system", p)) != std::string::npos; ++p) ++ro;
    EXPECT_EQ(ro, 6u) << r.stderr_data;
  }
}

// bubblewrap alone left /proc/sys writable for a uid-0 job (a root worker):
// Execution::Start now binds it read-only.
TEST(BubblewrapSandbox, ProcSysIsReadOnly) {
  TempDir d;
  auto ex = Execution::Start(MakeSpec(
      d, {"sh", "-c", "cat /proc/sys/kernel/printk_ratelimit > /proc/sys/kernel/printk_ratelimit"},
      Sandbox::kRequire));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  auto r = (*ex)->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->stderr_data.find("Read-only file system"), std::string::npos) << r->stderr_data;
}

// So is /proc itself: a root worker's job owns its entries, which every proc
// mount on the host shares.
TEST(BubblewrapSandbox, ProcIsReadOnly) {
  TempDir d;
  auto ex = Execution::Start(MakeSpec(d, {"sh", "-c", "chmod 0 /proc/meminfo || echo refused; stat -c %a /proc/meminfo"},
                                      Sandbox::kRequire));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  auto r = (*ex)->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "refused\n444\n") << r->stderr_data;
}

// Puts back the modes of host device nodes a broken sandbox let a job
// change, so that one failing test does not break the machine for the rest.
class HostNodeModes {
 public:
  explicit HostNodeModes(std::vector<std::string> paths) {
    for (auto& p : paths) {
      struct stat st;
      if (stat(p.c_str(), &st) == 0) modes_.emplace_back(std::move(p), st.st_mode & 07777);
    }
  }
  ~HostNodeModes() {
    for (const auto& [p, mode] : modes_) {
      struct stat st;
      if (stat(p.c_str(), &st) == 0 && (st.st_mode & 07777) != mode) chmod(p.c_str(), mode);
    }
  }
  // The host's modes now, one "path mode" line each.
  std::string Now() const {
    std::string out;
    for (const auto& [p, mode] : modes_) {
      struct stat st;
      char line[300];
      std::snprintf(line, sizeof line, "%s %o\n", p.c_str(),
                    stat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 07777);
      out += line;
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, mode_t>> modes_;
};

// bubblewrap binds the host's device nodes writable, and a root worker's job
// (uid 0) is their owner: its job gets nodes of its own bound over them.
// What it changes is its own, gone with the job; the host's and the next
// job's stay as they were. (A job of another user cannot change them at all.)
TEST(BubblewrapSandbox, AJobCannotChangeTheHostsDeviceNodes) {
  HostNodeModes host({"/dev/null", "/dev/zero"});
  const std::string before = host.Now();
  ASSERT_EQ(before, "/dev/null 666\n/dev/zero 666\n");
  TempDir d;
  auto run = [&](const std::string& script) {
    auto ex = Execution::Start(MakeSpec(d, {"sh", "-c", script}, Sandbox::kRequire));
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    if (!ex.ok()) return ExecResult{};
    auto r = (*ex)->Wait();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ExecResult{};
  };
  auto a =
      run("echo x > /dev/null && head -c 3 /dev/zero | wc -c && head -c 5 /dev/urandom | wc -c; "
          "chmod 0 /dev/null /dev/zero 2>/dev/null; stat -c %a /dev/null /dev/zero");
  EXPECT_EQ(a.exit_code, 0) << a.stderr_data;
  EXPECT_EQ(a.stdout_data, std::string("3\n5\n") + (geteuid() == 0 ? "0\n0\n" : "666\n666\n"))
      << a.stderr_data;
  EXPECT_EQ(host.Now(), before);
  auto b = run("stat -c %a /dev/null /dev/zero && echo y > /dev/null && echo usable");
  EXPECT_EQ(b.stdout_data, "666\n666\nusable\n") << b.stderr_data;
  EXPECT_EQ(host.Now(), before);
  // Nothing is left next to the workspace once the jobs are over.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(d.path())) {
    if (e.path().filename().string().rfind(".gatos-dev-", 0) == 0)
      left.push_back(e.path().string());
  }
  EXPECT_TRUE(left.empty()) << left[0];
}

// Where the job's own nodes would not open (a file system mounted nodev),
// they are not made and a root worker's bubblewrap job does not start:
// never the host's nodes instead.
TEST(BubblewrapSandbox, NoDeviceNodesOfItsOwnOnANodevFileSystem) {
  ASSERT_EQ(geteuid(), 0u) << "this test mounts a file system: run it as root, as CI does";
  TempDir d;
  const std::string mnt = d.Join("nodev");
  std::filesystem::create_directories(mnt);
  const std::string cmd =
      "unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs -o nodev none " + mnt +
      " && GATOS_TEST_HELPER=private-devices GATOS_TEST_DIR=" + mnt + " " + SelfExe() +
      " && ls -A " + mnt + " | wc -l' 2>&1";
  auto nodev = ::gatos::testing::Run({"sh", "-c", cmd});
  EXPECT_EQ(nodev.exit_code, 0) << nodev.out << nodev.err;
  EXPECT_EQ(nodev.out, "sandbox: " + mnt +
                     " is on a file system mounted nodev, where the job's own device nodes would "
                     "not open\n0\n");
  // And on this test's own file system they are made (and removed).
  const std::string here = "GATOS_TEST_HELPER=private-devices GATOS_TEST_DIR=" + d.path() + " " +
                           SelfExe() + " && ls -A " + d.path() + " | grep -c gatos-dev";
  EXPECT_EQ(::gatos::testing::Run({"sh", "-c", here}).out, "made\n0\n");
}

TEST(NamespaceSandbox, NoCapabilitiesNoNewPrivilegesNoMounts) {
  TempDir d;
  auto r = RunNs(MakeSpec(d,
                          {"sh", "-c",
                           "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status; "
                           "mount -t tmpfs none /tmp 2>/dev/null && echo mounted; "
                           "umount /proc 2>/dev/null && echo unmounted; "
                           "hostname gatos-x 2>/dev/null && echo renamed; true"},
                          Sandbox::kRequire));
  EXPECT_EQ(r.stdout_data,
            "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
            "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n")
      << r.stderr_data;
}

TEST(NamespaceSandbox, OwnPidNamespaceWithAHiddenInit) {
  TempDir d;
  // The glob is expanded by sh itself: only init and sh exist then. Init
  // (the slot's supervisor) is an empty directory in the job's /proc.
  auto r = RunNs(MakeSpec(d, {"sh", "-c", "set -- /proc/[0-9]*; echo $# $1; ls -A /proc/1 | wc -l"},
                          Sandbox::kRequire));
  EXPECT_EQ(r.stdout_data, "2 /proc/1\n0\n") << r.stderr_data;
}

TEST(NamespaceSandbox, BindsAtOtherDestinations) {
  TempDir d, mirror, cache;
  WriteFile(mirror.Join("HEAD"), "ref: refs/heads/main\n");
  for (Sandbox sb : {Sandbox::kRequire, Sandbox::kOff}) {
    auto spec = MakeSpec(d,
                         {"sh", "-c",
                          "cat \"$GATOS_INPUT_0/HEAD\"; "
                          "touch \"$GATOS_INPUT_0/new\" 2>/dev/null && echo input-writable; "
                          "echo c > \"$SCAN_STATE/c\" && echo cache-ok; echo $GATOS_INPUT_0"},
                         sb, sb == Sandbox::kOff ? "off" : "ns");
    spec.binds.push_back({mirror.path(), "/gatos/inputs/0", false, "GATOS_INPUT_0"});
    spec.binds.push_back({cache.path(), "/gatos/scan", true, "SCAN_STATE"});
    auto r = RunNs(spec);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
    if (sb == Sandbox::kRequire) {
      EXPECT_EQ(r.stdout_data, "ref: refs/heads/main\ncache-ok\n/gatos/inputs/0\n") << r.stderr_data;
    } else {
      // Unsandboxed: the same variables name the host paths.
      EXPECT_EQ(r.stdout_data, "ref: refs/heads/main\ninput-writable\ncache-ok\n" + mirror.path() + "\n");
      std::filesystem::remove(mirror.Join("new"));
    }
    EXPECT_EQ(ReadFile(cache.Join("c")), "c\n");
    std::filesystem::remove(cache.Join("c"));
  }
  // A file bind, and a command found through PATH in a remapped directory.
  WriteFile(cache.Join("tool"), "#!/bin/sh\necho tool-ran\n", 0755);
  auto spec = MakeSpec(d, {"tool"}, Sandbox::kRequire, "tool");
  spec.binds.push_back({cache.path(), "/opt/tools", false, ""});
  spec.binds.push_back({mirror.Join("HEAD"), "/gatos/HEAD", false, "HEAD_FILE"});
  spec.env["PATH"] = "/opt/tools:/usr/bin:/bin";
  auto r = RunNs(spec);
  EXPECT_EQ(r.stdout_data, "tool-ran\n") << r.stderr_data;
  spec.argv = {"sh", "-c", "cat $HEAD_FILE"};
  EXPECT_EQ(RunNs(spec).stdout_data, "ref: refs/heads/main\n");
}

// Binds under /etc (a directory of config, a file over one of the host's)
// work; the next job on the slot has the plain /etc again.
TEST(NamespaceSandbox, BindsUnderEtc) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d, conf;
  WriteFile(conf.Join("app.conf"), "setting=1\n");
  WriteFile(conf.Join("hosts"), "127.0.0.1 gatos-test-host\n");
  const std::string probe = "cat /etc/app/app.conf /etc/hosts 2>&1; test -s /etc/passwd && echo passwd; "
                            "touch /etc/app/x 2>/dev/null || echo app-read-only";
  auto spec = MakeSpec(d, {"sh", "-c", probe}, Sandbox::kRequire, "etc");
  spec.binds.push_back({conf.path(), "/etc/app", false, ""});
  spec.binds.push_back({conf.Join("hosts"), "/etc/hosts", false, ""});
  auto r = RunOn(*l, spec);
  EXPECT_EQ(r.stdout_data, "setting=1\n127.0.0.1 gatos-test-host\npasswd\napp-read-only\n") << r.stderr_data;
  auto plain = RunOn(*l, MakeSpec(d, {"sh", "-c", "test -e /etc/app || echo no-app; cat /etc/hosts"},
                                  Sandbox::kRequire, "plain"));
  EXPECT_EQ(plain.stdout_data, "no-app\n" + ReadFile("/etc/hosts")) << plain.stderr_data;
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 1);
}

// A job enters its slot's prepared root, unless it binds something under
// /etc: then it builds a root of its own from the slot's template. Both
// give the same mounts with the same flags outside /etc, job binds included.
TEST(NamespaceSandbox, APreparedRootAndABuiltOneAreAlike) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d, conf, input;
  WriteFile(conf.Join("setting"), "1\n");
  // Mount point and options (fields 5 and 6) of each mount, the job's own
  // workspace and output dir named by what they are.
  const std::string list =
      "awk -v ws=\"$PWD\" -v out=\"$GATOS_OUTPUT_DIR\" '$5 !~ /^\\/etc(\\/|$)/ {"
      "p = $5; if (p == ws) p = \"WS\"; else if (p == out) p = \"OUT\"; print p, $6 }' "
      "/proc/self/mountinfo | sort";
  auto prepared = MakeSpec(d, {"sh", "-c", list}, Sandbox::kRequire, "prepared");
  prepared.binds.push_back({input.path(), "/gatos/inputs/0", false, ""});
  auto built = MakeSpec(d, {"sh", "-c", list}, Sandbox::kRequire, "built");
  built.binds.push_back({input.path(), "/gatos/inputs/0", false, ""});
  built.binds.push_back({conf.path(), "/etc/app", false, ""});
  auto rp = RunOn(*l, prepared);
  auto rb = RunOn(*l, built);
  ASSERT_EQ(rp.exit_code, 0) << rp.stderr_data;
  ASSERT_EQ(rb.exit_code, 0) << rb.stderr_data;
  EXPECT_EQ(rp.stdout_data, rb.stdout_data);
  for (const char* m :
       {"/ ro,nosuid,nodev,", "/gatos/inputs/0 ro,nosuid,nodev,", "/tmp rw,nosuid,nodev,",
        "/proc ro,nosuid,nodev,noexec,", "/proc/1 ro,", "/dev ro,nosuid,nodev,",
        "/dev/shm rw,nosuid,nodev,", "/dev/pts rw,nosuid,noexec,", "WS rw,nosuid,nodev,",
        "/usr ro,nosuid,nodev,"}) {
    EXPECT_NE(("\n" + rp.stdout_data).find(std::string("\n") + m), std::string::npos)
        << m << " in\n"
        << rp.stdout_data;
  }
  // And each is what it says: the slot's jobs share the prepared root's file
  // system (read-only to them), while a built root is a file system of the
  // job's own (a fresh tmpfs, whose device number a later one may reuse).
  auto root_dev = [&](ExecSpec spec) {
    spec.argv = {"stat", "-c", "%d", "/"};
    auto r = RunOn(*l, spec);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    return r.stdout_data;
  };
  const std::string prepared_dev = root_dev(prepared);
  EXPECT_NE(root_dev(built), prepared_dev);
  EXPECT_EQ(root_dev(prepared), prepared_dev);
  EXPECT_EQ(l->stats().slots_started, 1);
}

TEST(NamespaceSandbox, BadBindsAreInvalidArgument) {
  TempDir d, src;
  struct Case {
    std::string source, destination;
  };
  auto base = MakeSpec(d, {"true"}, Sandbox::kRequire);
  for (const Case& c : std::vector<Case>{{src.path(), "/"},
                                         {src.path(), "/proc/x"},
                                         {src.path(), "/dev"},
                                         {src.path(), "relative"},
                                         {src.path(), d.path()},  // hides the workspace
                                         {"relative", "/x"},
                                         {src.Join("missing"), "/x"}}) {
    auto spec = base;
    spec.binds.push_back({c.source, c.destination, false, ""});
    auto ex = Shared().Start(spec);
    ASSERT_FALSE(ex.ok()) << c.source << " -> " << c.destination;
    EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument) << ex.status().ToString();
  }
  auto spec = base;
  spec.binds.push_back({src.path(), "/gatos/a", false, ""});
  spec.binds.push_back({d.path() + "/ws", "/gatos/a", false, ""});
  EXPECT_EQ(Shared().Start(spec).status().code(), StatusCode::kInvalidArgument);
  // Under a read-only system directory: refused when the sandbox is built.
  spec = base;
  spec.binds.push_back({src.path(), "/usr/gatos-input", false, ""});
  auto ex = Shared().Start(spec);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument) << ex.status().ToString();
  EXPECT_NE(ex.status().message().find("/usr/gatos-input"), std::string::npos);
  EXPECT_EQ(RunNs(MakeSpec(d, {"true"}, Sandbox::kRequire, "after")).exit_code, 0);
}

// The heart of slot reuse: job B runs in the same slot right after job A and
// finds nothing of it.
TEST(NamespaceSandbox, NothingOneJobLeavesReachesTheNextOnTheSameSlot) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  const std::string helper_dir = std::filesystem::path(SelfExe()).parent_path().string();
  auto a = MakeSpec(
      d,
      {"sh", "-c",
       "test -x \"/gatos-only-a/bin/${HELPER##*/}\" && echo a-bound; "
       "echo a > /tmp/left; echo a > /dev/shm/left; echo a > \"$HOME/left\"; "
       "ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && ipcmk -S 1 >/dev/null && echo ipc-made; "
       "GATOS_TEST_HELPER=keys-add \"$HELPER\"; "
       "(setsid sleep 100 &); sleep 100 & echo started"},
      Sandbox::kRequire, "a");
  a.env["HELPER"] = SelfExe();
  a.binds.push_back({helper_dir, "", false, ""});
  // A mount point in the slot's prepared root, made for job A alone.
  a.binds.push_back({helper_dir, "/gatos-only-a/bin", false, ""});
  auto ra = RunOn(*l, a);
  ASSERT_EQ(ra.exit_code, 0) << ra.stderr_data;
  // Job A really left all of it (or the test would prove nothing); keys it
  // cannot make at all (job_seccomp.h: keyrings are out of a job's reach).
  EXPECT_EQ(ra.stdout_data,
            "a-bound\nipc-made\nadded user=0 session=0\nfound user=0 session=0\nstarted\n")
      << ra.stderr_data;
  EXPECT_TRUE(ProcessesWithMarker(a.env["GATOS_TEST_MARKER"]).empty());

  auto b = MakeSpec(d,
                    {"sh", "-c",
                     "ls -A /dev/shm; ls -A /tmp | grep -vx -e \"$OWN_TMP\" -e \"$HELPER_TMP\"; "
                     "ipcs | grep -c '^0x'; "
                     "GATOS_TEST_HELPER=keys-find \"$HELPER\"; "
                     "for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done; "
                     "test -e \"$A_WS/left\" && echo saw-a-workspace; "
                     "test -e /gatos-only-a && echo saw-a-mount-point; "
                     "test -e \"$A_OUT\" && echo saw-a-output; true"},
                    Sandbox::kRequire, "b");
  b.env["HELPER"] = SelfExe();
  b.env["A_WS"] = a.workspace;
  b.env["A_OUT"] = a.output_dir;
  // The job's own workspace is under the test's TempDir (in /tmp), so that
  // shows in the job's /tmp.
  b.env["OWN_TMP"] = TmpEntryOf(b.workspace);
  // So does the helper's bound directory when the build is under /tmp (a
  // checkout there).
  b.env["HELPER_TMP"] = TmpEntryOf(helper_dir);
  b.binds.push_back({helper_dir, "", false, ""});
  auto rb = RunOn(*l, b);
  ASSERT_EQ(rb.exit_code, 0) << rb.stderr_data;
  EXPECT_EQ(rb.stdout_data,
            "0\nfound user=0 session=0\nsh\n")
      << rb.stderr_data;
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 1);  // the probe's slot ran both jobs
  EXPECT_EQ(st.slots_discarded, 0);
}

// The system part of a job's root (/etc, /dev, /proc and their mounts) is
// built once per slot and bound into each job read-only: what one job tries
// on it does not reach the next job on the slot. devpts is each job's own.
TEST(NamespaceSandbox, AJobCannotChangeWhatTheSlotsJobsShare) {
  HostNodeModes host({"/dev/null"});  // put back if a broken sandbox let the job change it
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  const std::string modes = "stat -c '%n %a' /etc/passwd /dev/null /dev/pts/ptmx /proc/1 /proc/meminfo /etc";
  auto a = RunOn(
      *l,
      MakeSpec(d,
               {"sh", "-c",
                modes + "; chmod 0 /etc/passwd /dev/null /proc/1 /etc 2>/dev/null || echo refused; "
                        "chmod 0 /dev/pts/ptmx 2>/dev/null; "
                        "touch /etc/x /dev/x /proc/1/x 2>/dev/null || echo refused; "
                        "chmod 0 /proc/meminfo 2>/dev/null || echo refused; "
                        "rm -f /dev/null 2>/dev/null; test -c /dev/null && echo null-stays; "
                        // The root is the slot's, shared by its jobs.
                        "touch /x 2>/dev/null || mkdir /x 2>/dev/null || echo refused"},
               Sandbox::kRequire, "a"));
  ASSERT_EQ(a.exit_code, 0) << a.stderr_data;
  const std::string before =
      "/etc/passwd 644\n/dev/null 666\n/dev/pts/ptmx 666\n/proc/1 555\n/proc/meminfo 444\n/etc 755\n";
  EXPECT_EQ(a.stdout_data, before + "refused\nrefused\nrefused\nnull-stays\nrefused\n")
      << a.stderr_data;
  // Nor from a user and mount namespace of the job's own, where it would hold
  // every capability: the job's system-call filter refuses to make one
  // (job_seccomp.h), so every mount stays refused. (Were it made, the slot's
  // read-only mounts would stay read-only in its copy: the kernel locks their
  // flags.) /tmp/r is then a plain directory of the job's own /tmp.
  const std::string nested = R"(
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, MS_REMOUNT, MS_BIND, MS_REC = 0x10000000, 0x20000, 32, 4096, 16384
def call(what, r):
    print(what, "done" if r == 0 else "refused")
call("unshare", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
call("remount-rw", libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None))
os.mkdir("/tmp/r")
call("rbind", libc.mount(b"/", b"/tmp/r", None, MS_BIND | MS_REC, None))
call("rbind-rw", libc.mount(None, b"/tmp/r", None, MS_REMOUNT | MS_BIND, None))
for path in ("/tmp/r/x", "/tmp/r/etc/x", "/tmp/r/dev/x"):
    try:
        open(path, "w")
        print("wrote", path)
    except OSError:
        print("refused")
)";
  auto n = RunOn(*l, MakeSpec(d, {"python3", "-c", nested}, Sandbox::kRequire, "nested"));
  EXPECT_EQ(
      n.stdout_data,
      "unshare refused\nremount-rw refused\nrbind refused\nrbind-rw refused\nwrote /tmp/r/x\n"
      "refused\nrefused\n")
      << n.stderr_data;
  auto b = RunOn(
      *l, MakeSpec(d, {"sh", "-c", modes + "; ls -A / /etc /dev | grep -cx x; echo ok > /dev/null"},
                   Sandbox::kRequire, "b"));
  EXPECT_EQ(b.stdout_data, before + "0\n") << b.stderr_data;
  EXPECT_EQ(b.exit_code, 0);  // the last command: a write to the read-only bind of /dev/null works
  // The host's own nodes and /proc entries (a root worker's job is their owner).
  EXPECT_EQ(host.Now(), "/dev/null 666\n");
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 1);
  EXPECT_EQ(st.slots_discarded, 0);
}

// The minimal /etc holds the host's files, also those behind an absolute
// symlink (Debian's /etc/localtime -> /usr/share/zoneinfo/...), and nothing
// else; the network's files only for a job with network.
TEST(NamespaceSandbox, TheMinimalEtcHasTheHostsFiles) {
  const std::vector<std::string> always = {"passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf",
                                           "localtime", "mime.types"};
  const std::vector<std::string> network = {"resolv.conf", "gai.conf", "services", "protocols"};
  auto expected = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) {
      std::error_code ec;
      auto size = std::filesystem::file_size("/etc/" + n, ec);  // follows symlinks
      if (!ec) out += n + " " + std::to_string(size) + "\n";
    }
    return out;
  };
  std::string script;
  for (const auto& n : always) script += "test -f /etc/" + n + " && echo " + n + " $(wc -c < /etc/" + n + "); ";
  std::string net_script = script;
  for (const auto& n : network) net_script += "test -f /etc/" + n + " && echo " + n + " $(wc -c < /etc/" + n + "); ";
  TempDir d;
  auto r = RunNs(MakeSpec(d, {"sh", "-c", net_script + "true"}, Sandbox::kRequire, "nonet"));
  EXPECT_EQ(r.stdout_data, expected(always)) << r.stderr_data;
  EXPECT_NE(expected(always).find("localtime"), std::string::npos) << "the host has no /etc/localtime to check";
  auto spec = MakeSpec(d, {"sh", "-c", net_script + "true"}, Sandbox::kRequire, "net");
  spec.allow_network = true;
  auto n = RunNs(spec);
  std::vector<std::string> all = always;
  all.insert(all.end(), network.begin(), network.end());
  EXPECT_EQ(n.stdout_data, expected(all)) << n.stderr_data;
}

// A host file bound into the slot's template that is replaced (renamed over,
// as package updates do) is seen by the slot's next job.
TEST(NamespaceSandbox, AReplacedHostFileReachesTheSlotsNextJob) {
  ASSERT_EQ(geteuid(), 0u) << "this test replaces a host file in /etc: run it as root, as CI does";
  const std::string path = "/etc/ld.so.conf";  // in every job's /etc; read only by ldconfig
  const std::string original = ReadFile(path);
  ASSERT_FALSE(original.empty());
  struct Restore {
    std::string path, content;
    ~Restore() {
      WriteFile(path + ".gatos-test", content);
      std::rename((path + ".gatos-test").c_str(), path.c_str());
    }
  } restore{path, original};
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  auto cat = [&](const char* name) { return RunOn(*l, MakeSpec(d, {"cat", path}, Sandbox::kRequire, name)); };
  EXPECT_EQ(cat("before").stdout_data, original);
  const std::string changed = original + "# written by a gatos sandbox test; restored when it ends\n";
  WriteFile(path + ".gatos-test", changed);
  ASSERT_EQ(std::rename((path + ".gatos-test").c_str(), path.c_str()), 0);
  EXPECT_EQ(cat("replaced").stdout_data, changed);
  WriteFile(path + ".gatos-test", original);
  ASSERT_EQ(std::rename((path + ".gatos-test").c_str(), path.c_str()), 0);
  EXPECT_EQ(cat("restored").stdout_data, original);
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 1);
  EXPECT_EQ(st.slots_discarded, 0);
}

TEST(NamespaceSandbox, ConcurrentJobsDoNotSeeEachOther) {
  TempDir d;
  auto a = MakeSpec(d, {"sh", "-c", "echo a > /tmp/mine; echo a > $HOME/mine; sleep 100"},
                    Sandbox::kRequire, "a");
  auto ea = Shared().Start(a);
  ASSERT_TRUE(ea.ok());
  EXPECT_TRUE(Eventually([&] { return std::filesystem::exists(a.workspace + "/mine"); }));
  auto b = MakeSpec(d,
                    {"sh", "-c",
                     "ls -A /tmp | grep -vx \"$OWN_TMP\"; for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done; "
                     "test -e \"$A_WS/mine\" && echo saw-a; true"},
                    Sandbox::kRequire, "b");
  b.env["A_WS"] = a.workspace;
  b.env["OWN_TMP"] = TmpEntryOf(b.workspace);
  auto rb = RunNs(b);
  EXPECT_EQ(rb.stdout_data, "sh\n") << rb.stderr_data;
  (*ea)->Stop();
  ASSERT_TRUE((*ea)->Wait().ok());
}

TEST(NamespaceSandbox, AJobCannotHarmItsSupervisor) {
  auto l = NewLauncher();
  ASSERT_TRUE(l);
  TempDir d;
  auto spec = MakeSpec(d,
                       {"sh", "-c",
                        "kill -KILL 1; kill -STOP 1; kill -TERM $PPID; "
                        "cat /proc/1/environ 2>/dev/null && echo read-environ; "
                        "ls /proc/1/root/ 2>/dev/null && echo saw-root; "
                        "ls /proc/1/fd/ 2>/dev/null | grep -q . && echo saw-fds; "
                        "echo 1000 > /proc/1/oom_score_adj 2>/dev/null && echo raised-oom; "
                        "GATOS_TEST_HELPER=attack-init \"$HELPER\"; echo still-here"},
                       Sandbox::kRequire, "evil");
  spec.env["HELPER"] = SelfExe();
  spec.binds.push_back({std::filesystem::path(SelfExe()).parent_path().string(), "", false, ""});
  auto r = RunOn(*l, spec);
  EXPECT_EQ(r.stdout_data,
            "ptrace=Operation not permitted\nprocess_vm_readv=Operation not permitted\n"
            "pidfd_getfd=Operation not permitted\nkill=0\nstill-here\n")
      << r.stderr_data;
  EXPECT_FALSE(r.signal.has_value());
  // The same slot runs the next job as if nothing happened.
  auto next = RunOn(*l, MakeSpec(d, {"sh", "-c", "echo fine"}, Sandbox::kRequire, "next"));
  EXPECT_EQ(next.stdout_data, "fine\n");
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 1);
  EXPECT_EQ(st.slots_discarded, 0);
}

// Unsandboxed, a job can kill its supervisor (same uid). Its own run fails,
// it dies with the supervisor, and the next job gets a fresh slot.
TEST(UnsandboxedSlot, AJobThatKillsItsSupervisorDoesNotAffectTheNext) {
  auto l = NewLauncher(Options([](LauncherOptions& o) { o.probe_in_create = false; }));
  ASSERT_TRUE(l);
  TempDir d;
  // It waits for "go" so that the supervisor has reported the start.
  auto evil = MakeSpec(d, {"sh", "-c", "while [ ! -e go ]; do sleep 0.01; done; kill -KILL $PPID; exec sleep 100"},
                       Sandbox::kOff, "evil");
  auto ex = l->Start(evil);
  ASSERT_TRUE(ex.ok());
  WriteFile(evil.workspace + "/go", "");
  auto r = (*ex)->Wait();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("supervisor"), std::string::npos);
  // The job had the supervisor as parent-death signal source.
  EXPECT_TRUE(Eventually([&] { return ProcessesWithMarker(evil.env["GATOS_TEST_MARKER"]).empty(); }));
  auto next = RunOn(*l, MakeSpec(d, {"sh", "-c", "echo fine"}, Sandbox::kOff, "next"));
  EXPECT_EQ(next.stdout_data, "fine\n");
  auto st = l->stats();
  EXPECT_EQ(st.slots_started, 2);
  EXPECT_EQ(st.slots_discarded, 1);
}

}  // namespace
}  // namespace gatos
