// The worker's input resolver with real git: local repositories, a private
// repository behind `git http-backend` with basic auth on loopback, each
// failure class, retries, and what a sandboxed job sees. Also the strict
// credentials file parser.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "gatos/exec/exec.h"
#include "gatos/exec/input_credentials.h"
#include "gatos/exec/inputs.h"
#include "git_http_server.h"
#include "git_repo.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

constexpr char kToken[] = "tok-9f8e7d6c5b4a39281706f5e4d3c2b1a0";

class InputsResolverTest : public ::testing::Test {
 protected:
  InputsResolverTest() : env_(TestGitEnv(dir_.path())) { std::filesystem::create_directories(dir_.Join("repos")); }

  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }

  // A work-tree repository with one commit on main; returns the commit.
  std::string MakeRepo(const std::string& path, const std::string& content = "hello\n") {
    return MakeWorkRepo(env_, path, content);
  }

  std::unique_ptr<InputResolver> Resolver(InputCredentials creds = {},
                                          std::vector<std::string> local_roots = {}) {
    InputResolverOptions o;
    o.cache_dir = dir_.Join("cache");
    o.credentials = std::move(creds);
    o.local_roots = local_roots.empty() ? std::vector<std::string>{dir_.Join("repos")} : local_roots;
    o.forbidden_roots = {dir_.Join("state")};
    // The test's git servers listen on loopback.
    o.local_network_url_prefixes = {"http://127.0.0.1:"};
    o.fetch_timeout_ms = 60000;
    auto r = InputResolver::Create(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  GitInput Input(const std::string& url, std::optional<std::string> ref,
                 std::optional<std::string> commit = std::nullopt, size_t index = 0) {
    GitInput in;
    in.index = index;
    in.url = url;
    in.ref = std::move(ref);
    in.commit = std::move(commit);
    return in;
  }

  // A bare copy of `work` under <dir>/served/<name>.git, served over HTTP.
  std::string Serve(const std::string& work, const std::string& name) {
    std::filesystem::create_directories(dir_.Join("served"));
    Git({"clone", "-q", "--bare", work, dir_.Join("served/" + name + ".git")});
    return dir_.Join("served/" + name + ".git");
  }

  InputCredentials TokenCredentials(const std::string& prefix, const std::string& token) {
    WriteFile(dir_.Join("token"), token + "\n", 0600);
    WriteFile(dir_.Join("creds.yaml"), "credentials:\n  - prefix: " + prefix +
                                           "\n    token_file: " + dir_.Join("token") +
                                           "\n    username: ci\n");
    auto c = LoadInputCredentialsFile(dir_.Join("creds.yaml"));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : InputCredentials{};
  }

  // Every byte under `path`, to look for a secret.
  bool TreeContains(const std::string& path, const std::string& needle) {
    RunResult r = testing::Run({"grep", "-rqaF", needle, path});
    return r.exit_code == 0;
  }

  TempDir dir_;
  GitEnv env_;
};

TEST_F(InputsResolverTest, LocalRepositoryByPathAndFileUrl) {
  const std::string repo = dir_.Join("repos/app");
  const std::string c1 = MakeRepo(repo);
  auto resolver = Resolver();
  ASSERT_TRUE(resolver);
  auto by_path = resolver->Resolve(Input(repo, "main"));
  ASSERT_TRUE(by_path.ok()) << by_path.status().ToString();
  EXPECT_EQ(by_path->commit, c1);
  auto by_url = resolver->Resolve(Input("file://" + repo + "/", "HEAD"));
  ASSERT_TRUE(by_url.ok()) << by_url.status().ToString();
  EXPECT_EQ(by_url->commit, c1);
  EXPECT_EQ(by_url->repository, by_path->repository);  // one mirror per repository
  EXPECT_EQ(Git({"--git-dir=" + by_path->repository, "cat-file", "-t", c1}), "commit");

  // A new commit: a ref input follows it, a pinned one stays.
  WriteFile(repo + "/file.txt", "two\n");
  Git({"commit", "-q", "-am", "two"}, repo);
  const std::string c2 = Git({"rev-parse", "HEAD"}, repo);
  EXPECT_EQ(resolver->Resolve(Input(repo, "main"))->commit, c2);
  EXPECT_EQ(resolver->Resolve(Input(repo, std::nullopt, c1))->commit, c1);
  EXPECT_EQ(resolver->Resolve(Input(repo, "refs/heads/main", c1))->commit, c1);
  // Tags and short names resolve like git does.
  Git({"tag", "v1", c1}, repo);
  EXPECT_EQ(resolver->Resolve(Input(repo, "v1"))->commit, c1);
  EXPECT_EQ(resolver->Resolve(Input(repo, "refs/tags/v1"))->commit, c1);
}

TEST_F(InputsResolverTest, PermanentFailuresSayWhat) {
  const std::string repo = dir_.Join("repos/app");
  const std::string c1 = MakeRepo(repo);
  auto resolver = Resolver();
  ASSERT_TRUE(resolver);
  auto missing_ref = resolver->Resolve(Input(repo, "nope", std::nullopt, 3));
  EXPECT_EQ(missing_ref.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing_ref.status().message(),
            "input 3 (" + repo + "): ref nope not found in the repository");
  auto missing_head_of_pr = resolver->Resolve(Input(repo, "refs/pull/1/head"));
  EXPECT_EQ(missing_head_of_pr.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(missing_head_of_pr.status().message(), "ref refs/pull/1/head not found");
  const std::string ghost(40, 'e');
  auto missing_commit = resolver->Resolve(Input(repo, std::nullopt, ghost));
  EXPECT_EQ(missing_commit.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(missing_commit.status().message(), "commit " + ghost + " not found in the repository");
  auto no_repo = resolver->Resolve(Input(dir_.Join("repos/none"), "main"));
  EXPECT_EQ(no_repo.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(no_repo.status().message(), "repository not found");
  std::filesystem::create_directories(dir_.Join("repos/empty-dir"));
  auto not_git = resolver->Resolve(Input(dir_.Join("repos/empty-dir"), "main"));
  EXPECT_EQ(not_git.status().code(), StatusCode::kNotFound) << not_git.status().ToString();
  EXPECT_HAS(not_git.status().message(), "not a git repository");
  // Outside the local roots, or inside the worker's own state: refused.
  const std::string elsewhere = dir_.Join("elsewhere");
  MakeRepo(elsewhere);
  auto outside = resolver->Resolve(Input(elsewhere, "main"));
  EXPECT_EQ(outside.status().code(), StatusCode::kPermissionDenied);
  EXPECT_HAS(outside.status().message(), "only under its --local-inputs directories");
  // Outside the roots, a path that does not exist gets the same answer as
  // one that does: the refusal tells nothing about the host's directories.
  auto outside_missing = resolver->Resolve(Input(dir_.Join("elsewhere-missing"), "main"));
  EXPECT_EQ(outside_missing.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(outside_missing.status().message(),
            "input 0 (" + dir_.Join("elsewhere-missing") + "): " +
                outside.status().message().substr(outside.status().message().find("): ") + 3));
  auto wide = Resolver({}, {"/"});
  MakeRepo(dir_.Join("state/secret-mirror"));
  auto state = wide->Resolve(Input(dir_.Join("state/secret-mirror"), "main"));
  EXPECT_EQ(state.status().code(), StatusCode::kPermissionDenied);
  EXPECT_HAS(state.status().message(), "this path holds gatos state and is never an input");
  // The cache of mirrors is never an input either, even through a symlink.
  auto ok = wide->Resolve(Input(repo, "main"));
  ASSERT_TRUE(ok.ok());
  std::filesystem::create_directory_symlink(ok->repository, dir_.Join("repos/link"));
  auto via_link = wide->Resolve(Input(dir_.Join("repos/link"), std::nullopt, c1));
  EXPECT_EQ(via_link.status().code(), StatusCode::kPermissionDenied);
  // Invalid urls never reach git.
  auto bad = resolver->Resolve(Input("ext::sh -c touch% /tmp/x", "main"));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsTransientInputError(missing_ref.status()));
  EXPECT_FALSE(IsTransientInputError(outside.status()));
}

TEST_F(InputsResolverTest, PrivateRepositoryOverHttpWithBasicAuth) {
  const std::string work = dir_.Join("work/app");
  const std::string c1 = MakeRepo(work, "AKIA in history\n");
  Serve(work, "app");
  WriteFile(dir_.Join("server-token"), std::string(kToken) + "\n", 0600);
  GitHttpServer server(dir_.Join("served"), "ci", dir_.Join("server-token"));
  ASSERT_TRUE(server.Start());
  const std::string url = server.url() + "/app.git";

  auto resolver = Resolver(TokenCredentials(server.url(), kToken));
  ASSERT_TRUE(resolver);
  auto r = resolver->Resolve(Input(url, "HEAD"));
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << server.log();
  EXPECT_EQ(r->commit, c1);
  const std::string first_log = server.log();
  const size_t requests = std::count(first_log.begin(), first_log.end(), '\n');
  EXPECT_GT(requests, 1u);
  // A pinned commit already in the cache needs no request at all.
  auto again = resolver->Resolve(Input(url, "main", c1));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const std::string log = server.log();
  EXPECT_EQ(static_cast<size_t>(std::count(log.begin(), log.end(), '\n')), requests) << log;
  // The token is nowhere in the cache (mirror config, FETCH_HEAD, logs...).
  EXPECT_FALSE(TreeContains(dir_.Join("cache"), kToken));
  EXPECT_EQ(Git({"--git-dir=" + r->repository, "config", "--list", "--local"}).find("http"),
            std::string::npos);
}

TEST_F(InputsResolverTest, WrongOrMissingCredentialsAreAuthenticationRefused) {
  const std::string work = dir_.Join("work/app");
  MakeRepo(work);
  Serve(work, "app");
  WriteFile(dir_.Join("server-token"), std::string(kToken) + "\n", 0600);
  GitHttpServer server(dir_.Join("served"), "ci", dir_.Join("server-token"));
  ASSERT_TRUE(server.Start());
  const std::string url = server.url() + "/app.git";

  auto wrong = Resolver(TokenCredentials(server.url(), "not-the-token"));
  auto r = wrong->Resolve(Input(url, "main"));
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_HAS(r.status().message(), "input 0 (" + url + "): authentication refused by the server");
  EXPECT_EQ(r.status().message().find("not-the-token"), std::string::npos);

  auto none = Resolver();
  auto n = none->Resolve(Input(url, "main"));
  EXPECT_EQ(n.status().code(), StatusCode::kPermissionDenied);
  EXPECT_HAS(n.status().message(), "authentication refused: the server requires credentials and "
                                   "this worker has none for this URL");
  // Permanent: ResolveAll does not retry it.
  std::atomic<bool> cancel{false};
  InputResolution all = wrong->ResolveAll({Input(url, "main")}, {.max_attempts = 5, .first_backoff_ms = 1},
                                          &cancel);
  EXPECT_EQ(all.status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(all.retries, 0);
  // A credential never goes to a prefix it was not configured for.
  auto other = Resolver(TokenCredentials("https://git.example.com/team", kToken));
  auto o = other->Resolve(Input(url, "main"));
  EXPECT_HAS(o.status().message(), "this worker has none for this URL");
}

TEST_F(InputsResolverTest, RepositoryNotFoundOverHttp) {
  std::filesystem::create_directories(dir_.Join("served"));
  GitHttpServer server(dir_.Join("served"));
  ASSERT_TRUE(server.Start());
  auto resolver = Resolver();
  auto r = resolver->Resolve(Input(server.url() + "/missing.git", "main"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_HAS(r.status().message(), "repository not found");
}

TEST_F(InputsResolverTest, TransientErrorsAreRetriedWithBackoffThenGiveUp) {
  const int port = FreePort();  // nothing listens there
  auto resolver = Resolver();
  std::vector<std::string> logged;
  InputResolution all = resolver->ResolveAll(
      {Input("http://127.0.0.1:" + std::to_string(port) + "/r.git", "main")},
      {.max_attempts = 3, .first_backoff_ms = 20, .max_backoff_ms = 40}, nullptr,
      [&](const std::string& m) { logged.push_back(m); });
  EXPECT_EQ(all.status.code(), StatusCode::kUnavailable) << all.status.ToString();
  EXPECT_TRUE(IsTransientInputError(all.status));
  EXPECT_HAS(all.status.message(), "(gave up after 3 attempts)");
  EXPECT_EQ(all.retries, 2);
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_HAS(logged[0], "retrying in");
  EXPECT_TRUE(all.inputs.empty());
}

TEST_F(InputsResolverTest, ResolveAllKeepsWhatItResolvedAndStopsOnCancel) {
  const std::string repo = dir_.Join("repos/app");
  const std::string c1 = MakeRepo(repo);
  auto resolver = Resolver();
  InputResolution part = resolver->ResolveAll(
      {Input(repo, "main", std::nullopt, 0), Input(repo, "nope", std::nullopt, 2)}, {});
  EXPECT_EQ(part.status.code(), StatusCode::kNotFound);
  ASSERT_EQ(part.inputs.size(), 1u);
  EXPECT_EQ(PoeInputsOf(part.inputs),
            (std::vector<PoeInput>{{0, repo, "main", c1}}));
  std::atomic<bool> cancel{true};
  auto r = resolver->Resolve(Input(repo, "main"), &cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status().ToString();
}

TEST_F(InputsResolverTest, ASandboxedJobSeesItsInputsReadOnlyAndNoCredential) {
  const std::string work = dir_.Join("work/app");
  const std::string c1 = MakeRepo(work);
  Serve(work, "app");
  WriteFile(dir_.Join("server-token"), std::string(kToken) + "\n", 0600);
  GitHttpServer server(dir_.Join("served"), "ci", dir_.Join("server-token"));
  ASSERT_TRUE(server.Start());
  auto resolver = Resolver(TokenCredentials(server.url(), kToken));
  InputResolution all =
      resolver->ResolveAll({Input(server.url() + "/app.git", "main", std::nullopt, 1)}, {});
  ASSERT_TRUE(all.status.ok()) << all.status.ToString();

  ExecSpec spec;
  spec.workspace = dir_.Join("ws");
  std::filesystem::create_directories(spec.workspace);
  spec.sandbox = ExecSpec::Sandbox::kRequire;
  ExposeInputs(all.inputs, &spec);
  spec.argv = {"/bin/sh", "-c",
               "echo dir=$GATOS_INPUT_1; echo list=$GATOS_INPUTS; echo ref=$GATOS_INPUT_1_REF; "
               "git --git-dir=\"$GATOS_INPUT_1\" cat-file -t \"$GATOS_INPUT_1_COMMIT\"; "
               "git --git-dir=\"$GATOS_INPUT_1\" show \"$GATOS_INPUT_1_COMMIT:file.txt\"; "
               "if touch \"$GATOS_INPUT_1/x\" 2>/dev/null; then echo WRITABLE; fi; env"};
  auto exec = Execution::Start(spec);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  auto res = (*exec)->Wait();
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->exit_code, 0) << res->stderr_data;
  EXPECT_HAS(res->stdout_data, "dir=/gatos/inputs/1\n");
  EXPECT_HAS(res->stdout_data, "list=1\n");
  EXPECT_HAS(res->stdout_data, "ref=main\n");
  EXPECT_HAS(res->stdout_data, "\ncommit\nhello\n");
  EXPECT_HAS(res->stdout_data, "GATOS_INPUT_1_COMMIT=" + c1);
  EXPECT_EQ(res->stdout_data.find("WRITABLE"), std::string::npos);
  EXPECT_EQ(res->stdout_data.find(kToken), std::string::npos);
  EXPECT_EQ(res->stdout_data.find(dir_.Join("token")), std::string::npos);
}

// ---- the credentials file ----

TEST(InputCredentialsTest, ParsesAndMatchesTheLongestPrefixOnAPathBoundary) {
  auto c = ParseInputCredentials(
      "credentials:\n"
      "  - prefix: https://Git.Example.com/team/\n"
      "    token_file: /etc/gatos/team\n"
      "  - prefix: https://git.example.com/team/secret.git\n"
      "    token_file: /etc/gatos/secret\n"
      "    username: x-access-token\n"
      "  - prefix: ssh://git.example.com\n"
      "    ssh_key: /etc/gatos/id_ed25519\n"
      "    known_hosts: /etc/gatos/known_hosts\n"
      "  - prefix: http://127.0.0.1:8080\n"
      "    token_file: /etc/gatos/local\n",
      "creds.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->entries().size(), 4u);
  EXPECT_EQ(c->entries()[0].prefix, "https://git.example.com/team");
  EXPECT_EQ(c->entries()[0].username, "git");
  EXPECT_EQ(c->Match("https://git.example.com/team/app")->token_file, "/etc/gatos/team");
  EXPECT_EQ(c->Match("https://GIT.example.com/team/secret")->token_file, "/etc/gatos/secret");
  EXPECT_EQ(c->Match("https://git.example.com/team/secret/sub.git")->username, "x-access-token");
  EXPECT_EQ(c->Match("https://git.example.com/team-other/app"), nullptr);
  EXPECT_EQ(c->Match("https://git.example.com.evil.net/team/app"), nullptr);
  EXPECT_EQ(c->Match("git@git.example.com:team/app.git")->ssh_key, "/etc/gatos/id_ed25519");
  EXPECT_EQ(c->Match("ssh://git@git.example.com/x")->known_hosts, "/etc/gatos/known_hosts");
  EXPECT_EQ(c->Match("/srv/git.example.com/team/app"), nullptr);
  // "/.git" is the host's root: the prefix reduces as the URL key does, once
  // and for all (found by input_credentials_fuzz: a second reduction differed).
  auto root = ParseInputCredentials("credentials:\n  - prefix: https://Git.Example.coM/.git/\n"
                                    "    token_file: /etc/gatos/root\n",
                                    "root.yaml");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->entries()[0].prefix, "https://git.example.com");
  std::string problem;
  EXPECT_EQ(ReduceCredentialPrefix(root->entries()[0].prefix, &problem), "https://git.example.com");
  EXPECT_EQ(root->Match("https://git.example.com/any/repo")->token_file, "/etc/gatos/root");
  auto twice = ParseInputCredentials("credentials:\n  - prefix: https://h/.git\n    token_file: /t\n"
                                     "  - prefix: https://h\n    token_file: /u\n",
                                     "twice.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_HAS(twice.status().message(), "\"https://h\" is already configured on line 2");
  // A second ".git" at the end is refused, not reduced again (found by
  // input_credentials_fuzz: "//.git//.git" reduced to a prefix that
  // reduced further).
  for (const char* p : {"https://h//////.git//.git", "https://h/app.git.git", "https://h/x.git/.git/"}) {
    auto dup = ParseInputCredentials("credentials:\n  - prefix: " + std::string(p) + "\n    token_file: /t\n",
                                     "dup.yaml");
    ASSERT_FALSE(dup.ok()) << p;
    EXPECT_HAS(dup.status().message(), "ends in \".git\" twice");
  }
  auto empty = ParseInputCredentials("", "empty.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->entries().empty());
  auto none = ParseInputCredentials("credentials: []\n", "c.yaml");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->entries().empty());
}

TEST(InputCredentialsTest, StrictErrorsNameLineAndField) {
  auto error = [](const std::string& text) {
    auto c = ParseInputCredentials(text, "c.yaml");
    EXPECT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    return c.status().message();
  };
  EXPECT_HAS(error("credential: []\n"), "c.yaml:1:1: credential: unknown key; expected credentials");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    token: x\n"),
             "c.yaml:3:5: credentials[0].token: unknown key");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n"), "has neither token_file nor ssh_key");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    token_file: /t\n    ssh_key: /k\n"),
             "has both token_file and ssh_key");
  EXPECT_HAS(error("credentials:\n  - prefix: https://u:p@h\n    token_file: /t\n"),
             "credentials[0].prefix: must not name a user or password");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h?x=1\n    token_file: /t\n"),
             "must not contain a query");
  EXPECT_HAS(error("credentials:\n  - prefix: h.example.com\n    token_file: /t\n"),
             "expected a URL prefix");
  EXPECT_HAS(error("credentials:\n  - prefix: file:///srv\n    token_file: /t\n"),
             "takes no credentials");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    token_file: rel/t\n"),
             "credentials[0].token_file: must be an absolute path");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    token_file: \"/t'x\"\n"),
             "single quote");
  EXPECT_HAS(error("credentials:\n  - prefix: http://h.example.com\n    token_file: /t\n"),
             "would travel unencrypted");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    ssh_key: /k\n"),
             "an ssh_key is for ssh URLs");
  EXPECT_HAS(error("credentials:\n  - prefix: ssh://h\n    token_file: /t\n"),
             "a token_file is for https URLs");
  EXPECT_HAS(error("credentials:\n  - prefix: ssh://h\n    ssh_key: /k\n    username: u\n"),
             "applies to token_file entries only");
  EXPECT_HAS(error("credentials:\n  - prefix: https://h\n    token_file: /t\n    username: \"a b\"\n"),
             "credentials[0].username: expected");
  std::string both = error(
      "credentials:\n  - prefix: https://h/a\n    token_file: /t\n  - prefix: HTTPS://H/a/\n"
      "    token_file: /u\n  - prefix: 5\n");
  EXPECT_HAS(both, "c.yaml:4:13: credentials[1].prefix: \"https://h/a\" is already configured on line 2");
  EXPECT_HAS(both, "credentials[2].prefix: expected a URL prefix");
  EXPECT_HAS(error("credentials: {a: 1}\n"), "credentials: expected a list");
  EXPECT_HAS(error("[1, 2]\n"), "file: expected a mapping");
}

TEST_F(InputsResolverTest, LoadChecksTheNamedFilesWithoutQuotingThem) {
  WriteFile(dir_.Join("two-lines"), "secret-one\nsecret-two\n", 0600);
  WriteFile(dir_.Join("creds.yaml"), "credentials:\n  - prefix: https://h\n    token_file: " +
                                         dir_.Join("two-lines") + "\n");
  auto c = LoadInputCredentialsFile(dir_.Join("creds.yaml"));
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(c.status().message(), "expected exactly one line");
  EXPECT_EQ(c.status().message().find("secret-"), std::string::npos);
  WriteFile(dir_.Join("creds.yaml"), "credentials:\n  - prefix: https://h\n    token_file: " +
                                         dir_.Join("absent") + "\n");
  EXPECT_HAS(LoadInputCredentialsFile(dir_.Join("creds.yaml")).status().message(), "cannot open");
  WriteFile(dir_.Join("open-token"), "abc\n", 0644);
  WriteFile(dir_.Join("creds.yaml"), "credentials:\n  - prefix: https://h\n    token_file: " +
                                         dir_.Join("open-token") + "\n");
  auto warned = LoadInputCredentialsFile(dir_.Join("creds.yaml"));
  ASSERT_TRUE(warned.ok()) << warned.status().ToString();
  ASSERT_EQ(warned->warnings().size(), 1u);
  EXPECT_HAS(warned->warnings()[0], "can be read by other users (mode 644); chmod 600 it");
  EXPECT_EQ(LoadInputCredentialsFile(dir_.Join("nope.yaml")).status().code(), StatusCode::kNotFound);
}

TEST(ClassifyGitFetchErrorTest, KnownMessages) {
  EXPECT_EQ(ClassifyGitFetchError("fatal: Authentication failed for 'https://h/r/'", true).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(ClassifyGitFetchError("git@h: Permission denied (publickey).\r\nfatal: Could not read "
                                  "from remote repository.", true).code(),
            StatusCode::kPermissionDenied);
  EXPECT_HAS(ClassifyGitFetchError("Host key verification failed.", true).message(), "host key");
  EXPECT_EQ(ClassifyGitFetchError("fatal: repository 'https://h/r/' not found", false).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ClassifyGitFetchError("ERROR: Repository not found.", false).code(), StatusCode::kNotFound);
  EXPECT_EQ(ClassifyGitFetchError("fatal: couldn't find remote ref refs/heads/x", false).message(),
            "ref not found in the repository");
  EXPECT_EQ(ClassifyGitFetchError("fatal: unable to access 'https://h/r/': Could not resolve host: h",
                                  false).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(ClassifyGitFetchError("fatal: unable to access 'x': The requested URL returned error: 502",
                                  false).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(ClassifyGitFetchError("fatal: the remote end hung up unexpectedly", false).code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gatos::testing
