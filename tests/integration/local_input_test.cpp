// Hostile local repositories as job inputs, with real git and bubblewrap:
// each way a repository can point git at another host file or another
// worker's mirror is refused with its class, a canary line from the target
// never appears in any answer or in the mirror, and a repository that swaps
// a file for a symlink while it is being fetched still leaks nothing (the
// sandboxed fetch sees only its git directory). Also the checks on network
// hosts (loopback and link-local addresses) and on gatos state.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gatos/exec/inputs.h"
#include "gatos/exec/local_input.h"
#include "gatos/sys/private_state.h"
#include "git_repo.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

// Lowercase: git lowercases what it quotes of a config key.
constexpr char kCanary[] = "canary-7f3d1c-root-only-token-line";

class LocalInputTest : public ::testing::Test {
 protected:
  LocalInputTest() : env_(TestGitEnv(dir_.path())) {
    fs::create_directories(dir_.Join("repos"));
    fs::create_directories(dir_.Join("host"));
    // A host file the worker may read and no job may: one line, like a token file.
    WriteFile(dir_.Join("host/secret"), std::string(kCanary) + "\n", 0600);
  }

  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }
  std::string MakeBare(const std::string& path) { return MakeBareRepo(env_, path); }

  std::unique_ptr<InputResolver> Resolver() {
    InputResolverOptions o;
    o.cache_dir = dir_.Join("state/inputs");
    o.local_roots = {dir_.Join("repos")};
    o.forbidden_roots = {dir_.Join("state")};
    o.log = [this](const std::string& m) { logged_.push_back(m); };
    auto r = InputResolver::Create(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  static GitInput Input(const std::string& url) {
    GitInput in;
    in.url = url;
    in.ref = "main";
    return in;
  }

  // Whether the canary is anywhere under `path` (a mirror, a cache).
  static bool TreeHasCanary(const std::string& path) {
    return testing::Run({"grep", "-rqaF", kCanary, path}).exit_code == 0;
  }

  void ExpectRefused(const Result<ResolvedInput>& r, StatusCode code, const std::string& says) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_HAS(r.status().message(), says);
    EXPECT_EQ(r.status().message().find(kCanary), std::string::npos) << r.status().message();
    for (const std::string& line : logged_) EXPECT_EQ(line.find(kCanary), std::string::npos) << line;
  }

  TempDir dir_;
  GitEnv env_;
  std::vector<std::string> logged_;
};

TEST_F(LocalInputTest, APackedRefsSymlinkToAHostFileIsRefusedAndQuotesNothing) {
  const std::string repo = MakeBare(dir_.Join("repos/planted.git"));
  fs::remove(repo + "/packed-refs");
  fs::create_symlink(dir_.Join("host/secret"), repo + "/packed-refs");
  auto resolver = Resolver();
  ExpectRefused(resolver->Resolve(Input(repo)), StatusCode::kPermissionDenied,
                "refused: redirects outside the input (a symlink: packed-refs)");
  EXPECT_FALSE(TreeHasCanary(dir_.Join("state")));
}

TEST_F(LocalInputTest, ASymlinkDeepInsideTheGitDirectoryIsRefused) {
  const std::string repo = MakeBare(dir_.Join("repos/deep.git"));
  fs::create_directories(repo + "/refs/heads/team");
  fs::create_symlink(dir_.Join("host/secret"), repo + "/refs/heads/team/x");
  auto resolver = Resolver();
  ExpectRefused(resolver->Resolve(Input(repo)), StatusCode::kPermissionDenied,
                "a symlink: refs/heads/team/x");
}

TEST_F(LocalInputTest, AGitfileAndADotGitSymlinkAreRefused) {
  const std::string mirror = MakeBare(dir_.Join("state/inputs/mirrors/private"));
  // A work tree whose .git is a file naming the worker's private mirror.
  fs::create_directories(dir_.Join("repos/gitfile"));
  WriteFile(dir_.Join("repos/gitfile/.git"), "gitdir: " + mirror + "\n");
  auto resolver = Resolver();
  ExpectRefused(resolver->Resolve(Input(dir_.Join("repos/gitfile"))), StatusCode::kPermissionDenied,
                "refused: redirects outside the input (a .git file (gitdir: elsewhere))");
  // And one whose .git is a symlink to it.
  fs::create_directories(dir_.Join("repos/gitlink"));
  fs::create_directory_symlink(mirror, dir_.Join("repos/gitlink/.git"));
  ExpectRefused(resolver->Resolve(Input(dir_.Join("repos/gitlink"))), StatusCode::kPermissionDenied,
                "refused: redirects outside the input (a .git symlink)");
}

TEST_F(LocalInputTest, AlternatesCommondirAndGraftsAreRefused) {
  const std::string mirror = MakeBare(dir_.Join("state/inputs/mirrors/private"));
  auto resolver = Resolver();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"objects/info/alternates", mirror + "/objects\n"},
      {"objects/info/http-alternates", "http://127.0.0.1:1/objects\n"},
      {"commondir", mirror + "\n"},
      {"info/grafts", std::string(40, 'a') + "\n"}};
  for (const auto& [file, text] : cases) {
    SCOPED_TRACE(file);
    const std::string repo = MakeBare(dir_.Join("repos/r-" + std::to_string(logged_.size()) + "-" +
                                                fs::path(file).filename().string()));
    fs::create_directories(fs::path(repo + "/" + file).parent_path());
    WriteFile(repo + "/" + file, text);
    ExpectRefused(resolver->Resolve(Input(repo)), StatusCode::kPermissionDenied,
                  "refused: redirects outside the input (" + file + ")");
  }
  // The same names as directories (found by local_input_fuzz): refused too,
  // not walked into.
  for (const std::string dir : {"commondir", "objects/info/alternates"}) {
    SCOPED_TRACE(dir);
    const std::string repo = MakeBare(dir_.Join("repos/d-" + fs::path(dir).filename().string()));
    fs::create_directories(repo + "/" + dir + "/x");
    ExpectRefused(resolver->Resolve(Input(repo)), StatusCode::kPermissionDenied,
                  "refused: redirects outside the input (" + dir + ")");
  }
}

TEST_F(LocalInputTest, AHardLinkOrAFifoOutsideObjectsIsRefused) {
  const std::string repo = MakeBare(dir_.Join("repos/hard.git"));
  fs::remove(repo + "/packed-refs");
  fs::create_hard_link(dir_.Join("host/secret"), repo + "/packed-refs");
  auto resolver = Resolver();
  ExpectRefused(resolver->Resolve(Input(repo)), StatusCode::kPermissionDenied,
                "a file with another name elsewhere: packed-refs");
  const std::string fifo = MakeBare(dir_.Join("repos/fifo.git"));
  fs::remove(fifo + "/packed-refs");
  ASSERT_EQ(::mkfifo((fifo + "/packed-refs").c_str(), 0644), 0);
  ExpectRefused(resolver->Resolve(Input(fifo)), StatusCode::kPermissionDenied,
                "not a regular file: packed-refs");
  // Objects shared with the repository a clone was made from are fine.
  const std::string origin = MakeBare(dir_.Join("repos/origin.git"));
  Git({"clone", "-q", "--bare", "--local", origin, dir_.Join("repos/linked.git")});
  auto linked = resolver->Resolve(Input(dir_.Join("repos/linked.git")));
  EXPECT_TRUE(linked.ok()) << linked.status().ToString();
}

TEST_F(LocalInputTest, AnotherWorkersStateOrALedgerIsNeverAnInput) {
  // Another worker's state under the same root: its marker refuses it and
  // everything below it, a mirror of a private repository included.
  fs::create_directories(dir_.Join("repos/worker2"));
  ASSERT_TRUE(MarkPrivate(dir_.Join("repos/worker2")).ok());
  const std::string mirror = MakeBare(dir_.Join("repos/worker2/inputs/mirrors/abc"));
  auto resolver = Resolver();
  ExpectRefused(resolver->Resolve(Input(mirror)), StatusCode::kPermissionDenied,
                "this path holds gatos state and is never an input");
  // A ledger made before markers existed: its gatos/ledger_key says what it is.
  const std::string ledger = MakeBare(dir_.Join("repos/ledger.git"));
  fs::create_directories(ledger + "/gatos");
  WriteFile(ledger + "/gatos/ledger_key", "not a real key\n", 0600);
  ExpectRefused(resolver->Resolve(Input(ledger)), StatusCode::kPermissionDenied,
                "this path holds gatos state and is never an input");
  // A symlink under the root that leads into it changes nothing.
  fs::create_directory_symlink(mirror, dir_.Join("repos/innocent.git"));
  ExpectRefused(resolver->Resolve(Input(dir_.Join("repos/innocent.git"))),
                StatusCode::kPermissionDenied, "this path holds gatos state and is never an input");
  EXPECT_TRUE(IsPrivateStatePath(dir_.Join("repos/worker2/inputs")));
  EXPECT_FALSE(IsPrivateStatePath(dir_.Join("repos")));
}

// The check and the fetch are two steps; a job that can write the repository
// may swap packed-refs for a symlink between them. The fetch runs where the
// symlink's target does not exist, so git never reads the host file.
TEST_F(LocalInputTest, ASymlinkSwappedInDuringTheFetchReadsNothingOfTheHost) {
  const std::string repo = MakeBare(dir_.Join("repos/racy.git"));
  const std::string packed = repo + "/packed-refs";
  const std::string saved = ReadFile(packed);
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    const std::string tmp_link = repo + "/link.tmp", tmp_file = repo + "/file.tmp";
    while (!stop) {
      ::unlink(tmp_link.c_str());
      if (::symlink(dir_.Join("host/secret").c_str(), tmp_link.c_str()) == 0) {
        ::rename(tmp_link.c_str(), packed.c_str());
      }
      WriteFile(tmp_file, saved);
      ::rename(tmp_file.c_str(), packed.c_str());
    }
  });
  auto resolver = Resolver();
  int refused = 0, fetched = 0;
  for (int i = 0; i < 40; ++i) {
    fs::remove_all(dir_.Join("state/inputs/mirrors"));
    fs::create_directories(dir_.Join("state/inputs/mirrors"));
    auto r = resolver->Resolve(Input(repo));
    if (r.ok()) {
      ++fetched;
    } else {
      ++refused;
      EXPECT_EQ(r.status().message().find(kCanary), std::string::npos) << r.status().message();
    }
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(refused + fetched, 40);
  EXPECT_FALSE(TreeHasCanary(dir_.Join("state")));
  for (const std::string& line : logged_) EXPECT_EQ(line.find(kCanary), std::string::npos) << line;
}

// What the walk does not look into: the repository's config. An include of
// a host file makes git read it, and quote its first line as a bad config
// key; in the sandbox the file does not exist, and the fetch succeeds.
TEST_F(LocalInputTest, GitInTheSandboxSeesNoHostFile) {
  const std::string repo = MakeBare(dir_.Join("repos/include.git"));
  const std::string head = Git({"--git-dir=" + repo, "rev-parse", "main"});
  Git({"--git-dir=" + repo, "config", "include.path", dir_.Join("host/secret")});
  // Outside the sandbox git reads the host file and quotes it.
  RunOptions ro;
  ro.env = env_;
  RunResult direct = testing::Run({"git", "--git-dir=" + repo, "rev-parse", "main"}, ro);
  EXPECT_HAS(direct.err, kCanary);
  auto resolver = Resolver();
  auto r = resolver->Resolve(Input(repo));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->commit, head);
  EXPECT_FALSE(TreeHasCanary(dir_.Join("state")));
}

TEST_F(LocalInputTest, NetworkInputsOnLoopbackOrLinkLocalAddressesAreRefused) {
  auto resolver = Resolver();
  for (const std::string url :
       {"http://127.0.0.1:9/r.git", "https://localhost/r.git", "git://[::1]/r.git",
        "ssh://git@169.254.169.254/r.git", "http://[::ffff:127.0.0.1]:80/r.git",
        "http://0.0.0.0/r.git", "git@127.0.0.2:r.git", "https://[fe80::1]/r.git"}) {
    SCOPED_TRACE(url);
    ExpectRefused(resolver->Resolve(Input(url)), StatusCode::kPermissionDenied,
                  "refused: the repository's host is a loopback or link-local address");
  }
  // The decision itself, on addresses.
  auto public_host = CheckInputEndpoint({"https", "192.0.2.10", 443});
  ASSERT_TRUE(public_host.ok()) << public_host.status().ToString();
  EXPECT_EQ(*public_host, std::vector<std::string>{"192.0.2.10"});
  auto v6 = CheckInputEndpoint({"https", "2001:db8::1", 443});
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(*v6,
            std::vector<std::string>{"[2001:db8::1]"});
}

TEST_F(LocalInputTest, GitUrlEndpointsAndPrefixes) {
  auto e = GitUrlEndpointOf("https://Git.Example.com:8443/team/app.git");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->scheme, "https");
  EXPECT_EQ(e->host, "git.example.com");
  EXPECT_EQ(e->port, 8443);
  e = GitUrlEndpointOf("git@github.com:team/app.git");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->scheme, "ssh");
  EXPECT_EQ(e->host, "github.com");
  EXPECT_EQ(e->port, 22);
  e = GitUrlEndpointOf("git://[::1]:9419/x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 9419);
  EXPECT_FALSE(GitUrlEndpointOf("/srv/repos/app"));
  EXPECT_FALSE(GitUrlEndpointOf("file:///srv/repos/app"));
  EXPECT_FALSE(GitUrlEndpointOf("https://host:99999/x"));
  // Found by local_input_fuzz: an scp-like URL whose "host" is no host name.
  EXPECT_FALSE(GitUrlEndpointOf("h]tps://git.corp:8442/a.git"));
  EXPECT_FALSE(GitUrlEndpointOf("user@ho st:repo.git"));

  const std::vector<std::string> prefixes = {"https://git.corp", "http://127.0.0.1:", "https://h/team/"};
  EXPECT_TRUE(GitUrlHasPrefix("https://git.corp/app.git", prefixes));
  EXPECT_TRUE(GitUrlHasPrefix("https://git.corp:8443/app.git", prefixes));
  EXPECT_FALSE(GitUrlHasPrefix("https://git.corp.evil.example/app.git", prefixes));
  EXPECT_TRUE(GitUrlHasPrefix("http://127.0.0.1:8080/app.git", prefixes));
  EXPECT_TRUE(GitUrlHasPrefix("https://h/team/app.git", prefixes));
  EXPECT_FALSE(GitUrlHasPrefix("https://h/other/app.git", prefixes));
}

TEST_F(LocalInputTest, GitFailuresAreClassesNeverGitsOwnWords) {
  const std::string quoted = std::string("fatal: unexpected line in ./packed-refs: ") + kCanary + "\n";
  Status s = ClassifyGitFetchError(quoted, false);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message().find(kCanary), std::string::npos);
  EXPECT_EQ(GitFailureKind(quoted), "repository damaged or unreadable");
  EXPECT_EQ(GitFailureKind("fatal: unable to access 'http://x/': Failed to connect to x port 80: "
                           "Connection refused"),
            "connection refused");
  EXPECT_EQ(GitFailureKind(std::string("SSH-2.0-OpenSSH_9.2 ") + kCanary), "unclassified");
}

}  // namespace
}  // namespace gatos::testing
