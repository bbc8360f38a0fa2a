// Git inputs of a manifest: the rules of git_input.h, their error lines in
// ParseManifest, the job id, and the textual repository key.
#include "gatos/model/git_input.h"

#include <gtest/gtest.h>

#include <string>

#include "gatos/model/manifest.h"

namespace gatos {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

constexpr char kSha1[] = "3f2a9c0d5b8e7f6a1c2d3e4f5a6b7c8d9e0f1a2b";

std::string Job(const std::string& inputs) {
  return "command: [gatos-scan]\ntimeout: 60\ninputs:\n" + inputs;
}

std::string ErrorOf(const std::string& text, const std::string& name = "job.yaml") {
  Result<Manifest> m = ParseManifest(text, name);
  EXPECT_FALSE(m.ok()) << "accepted: " << text;
  if (m.ok()) return "";
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  return m.status().message();
}

TEST(GitInputTest, ParsesEveryFormAndKeepsOrderAndIndex) {
  Result<Manifest> m = ParseManifest(
      Job("  - {kind: blobptr, hash: abc}\n"
          "  - {kind: git, url: https://git.example.com/team/app, ref: main}\n"
          "  - kind: git\n"
          "    url: /srv/repos/lib\n"
          "    commit: " + std::string(kSha1) + "\n"
          "  - {kind: \"git\", url: \"git@host.example:team/tool.git\", ref: HEAD, commit: \"" +
          kSha1 + "\", nonce: \"2025-11-08\"}\n"),
      "job.yaml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Result<std::vector<GitInput>> git = GitInputs(*m);
  ASSERT_TRUE(git.ok()) << git.status().ToString();
  ASSERT_EQ(git->size(), 3u);
  EXPECT_EQ((*git)[0].index, 1u);
  EXPECT_EQ((*git)[0].url, "https://git.example.com/team/app");
  EXPECT_EQ((*git)[0].ref, "main");
  EXPECT_FALSE((*git)[0].commit);
  EXPECT_EQ((*git)[1].index, 2u);
  EXPECT_EQ((*git)[1].commit, kSha1);
  EXPECT_FALSE((*git)[1].ref);
  EXPECT_EQ((*git)[2].index, 3u);
  EXPECT_EQ((*git)[2].nonce, "2025-11-08");
  EXPECT_TRUE(ValidateManifest(*m).ok());
}

TEST(GitInputTest, EveryFieldIsAStringEvenWhenItLooksLikeANumber) {
  // All-digit commit ids and nonces must not turn into numbers.
  const std::string digits(40, '1');
  Result<Manifest> m =
      ParseManifest(Job("  - {kind: git, url: /r, commit: " + digits + ", nonce: 2025}\n"),
                    "job.yaml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m->inputs)[0]["commit"], digits);
  EXPECT_EQ((*m->inputs)[0]["nonce"], "2025");
  // JSON keeps its own typing: a number is not a string there.
  EXPECT_HAS(ErrorOf(R"({"command":["x"],"timeout":1,"inputs":[{"kind":"git","url":"/r","ref":"a","nonce":5}]})",
                     "job.json"),
             "inputs[0].nonce: is a number (5); expected a string");
}

TEST(GitInputTest, TheJobIdNamesTheCommit) {
  const std::string a = Job("  - {kind: git, url: /srv/r, commit: " + std::string(kSha1) + "}\n");
  const std::string b = Job("  - {url: /srv/r, kind: git, commit: \"" + std::string(kSha1) + "\"}\n");
  const std::string c = Job("  - {kind: git, url: /srv/r, commit: " + std::string(40, 'a') + "}\n");
  const std::string d =
      Job("  - {kind: git, url: /srv/r, commit: " + std::string(kSha1) + ", nonce: x}\n");
  Result<Manifest> ma = ParseManifest(a, "a.yaml"), mb = ParseManifest(b, "b.yaml"),
                   mc = ParseManifest(c, "c.yaml"), md = ParseManifest(d, "d.yaml");
  ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok() && md.ok());
  EXPECT_EQ(JobId(*ma), JobId(*mb));  // same commit, other spelling: one job
  EXPECT_NE(JobId(*ma), JobId(*mc));  // a new commit is a new job
  EXPECT_NE(JobId(*ma), JobId(*md));  // a nonce makes a deliberate re-run
  EXPECT_HAS(CanonicalManifest(*ma), R"("inputs":[{"commit":")" + std::string(kSha1) +
                                         R"(","kind":"git","url":"/srv/r"}])");
}

TEST(GitInputTest, ErrorsNameTheFieldAndPosition) {
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r}\n")),
             "job.yaml:4:5: inputs[0]: has neither ref nor commit");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, ref: main}\n")), "inputs[0].url: missing");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, ref: main, branch: x}\n")),
             "job.yaml:4:37: inputs[0].branch: unknown field of a git input; expected one of "
             "kind, url, ref, commit, nonce");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, commit: ABC}\n")),
             "job.yaml:4:34: inputs[0].commit: \"ABC\" is not a commit id");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, commit: " + std::string(40, 'A') + "}\n")),
             "has uppercase hex; write it in lowercase");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, ref: [a]}\n")),
             "inputs[0].ref: is a list; expected a string");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, ref: \"refs/heads/*\"}\n")), "is a pattern");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, ref: \"\"}\n")), "inputs[0].ref: is empty");
  EXPECT_HAS(ErrorOf(Job("  - {kind: git, url: /r, ref: main, nonce: \"\"}\n")),
             "inputs[0].nonce: must be 1 to 256 bytes");
  // Problems in several fields are all reported.
  std::string both = ErrorOf(Job("  - {kind: git, url: rel/path, ref: \"a..b\"}\n"));
  EXPECT_HAS(both, "inputs[0].url: \"rel/path\" is a relative path");
  EXPECT_HAS(both, "inputs[0].ref: \"a..b\" is not a valid ref name");
}

TEST(GitInputTest, AtMostKMaxGitInputs) {
  std::string list;
  for (size_t i = 0; i <= kMaxGitInputs; ++i) list += "  - {kind: git, url: /r, ref: main}\n";
  EXPECT_HAS(ErrorOf(Job(list)), "inputs[64]: is git input number 65; a job may declare at most 64");
}

TEST(GitInputTest, UrlsWithCredentialsOrTricksAreRefused) {
  struct Case {
    const char* url;
    const char* problem;
  } cases[] = {
      {"https://user:pw@host/r", "carries credentials"},
      {"https://ghp_token@github.com/o/r", "carries credentials"},
      {"http://host/r?access_token=x", "query string"},
      {"https://host/r#frag", "query string"},
      {"ssh://git:pw@host/r", "carries a password"},
      {"git:pw@host:r", "carries a password"},
      {"ext::sh -c touch% /tmp/pwned", "remote-helper syntax"},
      {"fd::17", "remote-helper syntax"},
      {"-uhelp", "starts with '-'"},
      {"ftp://host/r", "is not a supported scheme"},
      {"file://host/r", "is not file:///absolute/path"},
      {"https:///r", "has no valid host"},
      {"ssh://-oProxyCommand=x/r", "has no valid host"},
      {"-oProxyCommand=x:r", "starts with '-'"},
      {"https://host/", "names no repository path"},
      {"host:", "names no repository path"},
      {"repos/app", "is a relative path"},
      {"./app", "is a relative path"},
      {"", "is empty"},
      {"/r\n", "control character"},
  };
  for (const Case& c : cases) {
    EXPECT_HAS(GitUrlProblem(c.url), c.problem) << c.url;
  }
  for (const char* ok : {"https://host/r", "HTTP://Host/r.git", "git://host/r", "ssh://git@host:2222/r",
                         "git@github.com:org/repo.git", "host:r", "/srv/repos/a b", "file:///srv/r",
                         "ssh://[::1]/r", "https://host:8443/a/b/c"}) {
    EXPECT_EQ(GitUrlProblem(ok), "") << ok;
  }
}

TEST(GitInputTest, RefRules) {
  for (const char* ok : {"HEAD", "main", "refs/heads/main", "v1.0", "refs/pull/1/head", "a-b_c"}) {
    EXPECT_EQ(GitRefProblem(ok), "") << ok;
  }
  for (const char* bad : {"-x", "a b", "a..b", "a~1", "a^", "a:b", "a/", "/a", "a//b", ".a",
                          "a/.b", "a.lock", "a@{1}", "@", "a.", "a\\b"}) {
    EXPECT_NE(GitRefProblem(bad), "") << bad;
  }
}

TEST(GitInputTest, KeysAreCredentialFreeAndSpellingFree) {
  EXPECT_EQ(GitUrlKey("/srv/r/"), "file:///srv/r");
  EXPECT_EQ(GitUrlKey("/srv/r/.git"), "file:///srv/r");
  EXPECT_EQ(GitUrlKey("/srv/x/../r"), "file:///srv/r");
  EXPECT_EQ(GitUrlKey("file:///srv/r"), "file:///srv/r");
  EXPECT_EQ(GitUrlKey("FILE:///srv/r"), "file:///srv/r");
  EXPECT_EQ(GitUrlKey("HTTPS://Host.Example/team/app.git/"), "https://host.example/team/app");
  EXPECT_EQ(GitUrlKey("ssh://git@Host/team/app"), "ssh://host/team/app");
  EXPECT_EQ(GitUrlKey("git@Host:team/app.git"), "ssh://host/team/app");
  std::string path;
  EXPECT_TRUE(IsLocalGitUrl("file:///a/b", &path));
  EXPECT_EQ(path, "/a/b");
  EXPECT_TRUE(IsLocalGitUrl("/a", &path));
  EXPECT_FALSE(IsLocalGitUrl("https://h/a"));
  EXPECT_FALSE(IsLocalGitUrl("h:/a"));
}

TEST(GitInputTest, ValidateManifestAppliesTheSameRules) {
  Manifest m;
  m.command = {"x"};
  m.timeout_seconds = 1;
  m.inputs = nlohmann::json::array({{{"kind", "git"}, {"url", "https://u:p@h/r"}, {"ref", "main"}}});
  Status s = ValidateManifest(m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(s.message(), "inputs[0].url: carries credentials");
  m.inputs = nlohmann::json::array({{{"kind", "git"}, {"url", "/r"}, {"ref", 5}}});
  EXPECT_HAS(ValidateManifest(m).message(), "inputs[0].ref: expected a string");
  m.inputs = nlohmann::json::array({{{"kind", "git"}, {"url", "/r"}, {"ref", "main"}}});
  EXPECT_TRUE(ValidateManifest(m).ok());
  // Other kinds stay opaque.
  m.inputs = nlohmann::json::array({{{"kind", "blobptr"}, {"url", "anything"}}});
  EXPECT_TRUE(ValidateManifest(m).ok());
  EXPECT_TRUE(GitInputs(m)->empty());
}

}  // namespace
}  // namespace gatos
