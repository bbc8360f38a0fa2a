// Repositories as declared job inputs, end to end on a real stack (nats-server,
// gatosd, gatos-worker under its default sandbox): a batch of local
// repositories scanned through the scan template, a private repository behind
// `git http-backend` with basic auth on loopback fetched with the worker's own
// credentials, and a wrong credential ending `failed` with the reason. Every
// result names the scanned commits (poe.json, trailers, provenance), and the
// credential appears nowhere a job, the ledger or a log could show it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../scan/secrets_for_tests.h"
#include "git_http_server.h"
#include "git_repo.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

class InputsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(stack_.Start());
    env_ = WithTestGitIdentity(stack_.env());
    std::filesystem::create_directories(Dir("repos"));
  }

  std::string Dir(const std::string& rel) { return stack_.dir().Join(rel); }

  std::string Git(const std::vector<std::string>& args, const std::string& cwd = "") {
    return testing::Git(env_, args, cwd);
  }

  // A repository whose history (not its tip) holds `secret` in config.env;
  // returns its HEAD commit.
  std::string MakeRepo(const std::string& path, const std::string& secret) {
    Git({"init", "-q", "-b", "main", path});
    WriteFile(path + "/config.env", "TOKEN=" + secret + "\n");
    Git({"add", "."}, path);
    Git({"commit", "-q", "-m", "add config"}, path);
    Git({"rm", "-q", "config.env"}, path);
    WriteFile(path + "/README", "nothing here\n");
    Git({"add", "."}, path);
    Git({"commit", "-q", "-m", "remove config"}, path);
    return Git({"rev-parse", "HEAD"}, path);
  }

  std::string Show(const std::string& job, const std::string& what) {
    return testing::Run({"git", "--git-dir", stack_.ledger(), "show",
                         "refs/gatos/jobs/" + job.substr(7) + "/result" + what})
        .out;
  }

  std::string Message(const std::string& job) {
    return testing::Run({"git", "--git-dir", stack_.ledger(), "log", "-1", "--format=%B",
                         "refs/gatos/jobs/" + job.substr(7) + "/result"})
        .out;
  }

  json Poe(const std::string& job) { return json::parse(Show(job, ":poe.json"), nullptr, false); }

  // The state a job reaches (waits for it to finish).
  std::string WaitState(const std::string& job) {
    RunResult w = stack_.Gatos({"wait", job, "--ledger", stack_.nats_url(), "--timeout", "150"}, 180);
    RunResult st = stack_.Gatos({"status", job, "--ledger", stack_.ledger(), "--json"});
    json j = json::parse(st.out, nullptr, false);
    return j.is_object() ? j.value("state", "") : "";
  }

  // The commits named by the provenance statement's inputs[<n>] dependencies.
  std::vector<std::string> ProvenanceInputCommits(const std::string& job) {
    json env = json::parse(Show(job, ":attestation.intoto.json"), nullptr, false);
    std::vector<std::string> out;
    if (!env.is_object()) return out;
    json statement = json::parse(Base64Decode(env.value("payload", "")), nullptr, false);
    if (!statement.is_object()) return out;
    for (const auto& d : statement["predicate"]["buildDefinition"]["resolvedDependencies"]) {
      if (d.value("name", "").rfind("inputs[", 0) == 0) out.push_back(d["digest"].value("gitCommit", ""));
    }
    return out;
  }

  static std::string Base64Decode(const std::string& in) {
    static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    int val = 0, bits = -8;
    for (char c : in) {
      size_t p = chars.find(c);
      if (p == std::string::npos) break;
      val = (val << 6) + static_cast<int>(p);
      bits += 6;
      if (bits >= 0) {
        out.push_back(static_cast<char>((val >> bits) & 0xff));
        bits -= 8;
      }
    }
    return out;
  }

  Stack stack_;
  std::map<std::string, std::string> env_;
};

TEST_F(InputsE2ETest, BatchOfLocalRepositoriesIsScannedUnderTheDefaultSandbox) {
  scan::testing::SecretMaker maker(11);
  const std::vector<std::string> secrets = {maker.Aws(), maker.GithubPat(), maker.Aws()};
  const std::vector<std::string> rules = {"aws-access-token", "github-pat", "aws-access-token"};
  std::vector<std::string> paths, heads;
  for (int r = 0; r < 3; ++r) {
    paths.push_back(Dir("repos/repo" + std::to_string(r)));
    heads.push_back(MakeRepo(paths.back(), secrets[r]));
  }
  // A plain path, a file:// URL, and a path with a trailing slash.
  const std::vector<std::string> listed = {paths[0], "file://" + paths[1], paths[2] + "/"};
  WriteFile(Dir("repos.txt"), "# three local repositories\n" + listed[0] + "\n" + listed[1] + "\n" + listed[2] + "\n");
  // The stack's default sandbox; local repositories under repos/ may be inputs.
  stack_.StartWorker(0, {"--local-inputs", Dir("repos"), "--concurrency", "3"});
  ASSERT_TRUE(stack_.worker(0)->running()) << stack_.worker(0)->log();
  EXPECT_EQ(stack_.worker(0)->log().find("UNSANDBOXED"), std::string::npos) << stack_.worker(0)->log();

  const std::string tmpl = SourcePath("examples/templates/scan.yaml");
  auto submit = [&] {
    return stack_.Gatos({"batch", "submit", "--template", tmpl, "--repos", Dir("repos.txt"), "--ledger",
                         stack_.ledger(), "--sign-key", stack_.submitter_key(), "--json"});
  };
  RunResult b = submit();
  ASSERT_EQ(b.exit_code, 0) << b.err;
  for (int r = 0; r < 3; ++r) EXPECT_HAS(b.err, "pinned HEAD at " + heads[r]);
  json bj = json::parse(b.out);
  const std::string batch = bj["batch"];

  RunResult st = stack_.Gatos({"batch", "status", batch, "--ledger", stack_.ledger(), "--wait", "--json"}, 300);
  json sj = json::parse(st.out, nullptr, false);
  ASSERT_TRUE(sj.is_object()) << st.out << st.err;
  EXPECT_EQ(sj["succeeded"], 3) << st.out << stack_.worker(0)->log();
  EXPECT_EQ(st.exit_code, 0);

  std::map<std::string, std::string> job_of;
  for (const auto& row : sj["jobs"]) job_of[row["repo"]] = row["job"];
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("repository " + listed[r]);
    const std::string job = job_of[listed[r]];
    ASSERT_FALSE(job.empty()) << st.out;
    RunResult f = stack_.Gatos({"findings", job, "--repo", stack_.ledger(), "--json"});
    ASSERT_EQ(f.exit_code, 0) << f.err << "\njob stderr:\n" << Show(job, ":stderr");
    json fj = json::parse(f.out);
    ASSERT_EQ(fj["findings"].size(), 1u) << f.out;
    EXPECT_EQ(fj["findings"][0]["rule"], rules[r]);
    EXPECT_EQ(fj["findings"][0]["path"], "config.env");
    // The PoE names the scanned commit: poe.json, a trailer, the provenance.
    json poe = Poe(job);
    ASSERT_TRUE(poe.is_object());
    ASSERT_EQ(poe["inputs"].size(), 1u) << poe.dump();
    EXPECT_EQ(poe["inputs"][0]["commit"], heads[r]);
    EXPECT_EQ(poe["inputs"][0]["ref"], "HEAD");
    EXPECT_HAS(Message(job), "Input-Commit: 0 " + heads[r]);
    EXPECT_EQ(ProvenanceInputCommits(job), std::vector<std::string>{heads[r]});
    // What the scan says it walked: the input's commit.
    json summary = json::parse(Show(job, ":outputs/summary.json"), nullptr, false);
    if (summary.is_object() && summary.contains("refs")) EXPECT_HAS(summary["refs"].dump(), heads[r]);
  }
  // The auditor agrees (inputs checked against the manifests).
  RunResult v = stack_.Gatos({"verify", "--repo", stack_.ledger(), "--all"}, 120);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

  // Pinned commits make the job ids name what is scanned: the same batch is
  // the same jobs; a new commit in one repository is one new job.
  RunResult again = submit();
  EXPECT_EQ(json::parse(again.out)["batch"], batch) << again.err;
  WriteFile(paths[0] + "/more.txt", "more\n");
  Git({"add", "."}, paths[0]);
  Git({"commit", "-q", "-m", "more"}, paths[0]);
  RunResult changed = submit();
  json cj = json::parse(changed.out);
  EXPECT_NE(cj["batch"], batch);
  int same = 0;
  for (const auto& row : cj["jobs"]) same += job_of[row["repo"]] == row["job"] ? 1 : 0;
  EXPECT_EQ(same, 2) << changed.out;
}

TEST_F(InputsE2ETest, PrivateRepositoryOverHttpUsesOnlyTheWorkersCredential) {
  const std::string token = "tok-" + std::string(40, 'q') + "-e2e-secret-7d1f";
  scan::testing::SecretMaker maker(23);
  const std::string planted = maker.GithubPat();
  const std::string work = Dir("work/private");
  const std::string head = MakeRepo(work, planted);
  std::filesystem::create_directories(Dir("served"));
  Git({"clone", "-q", "--bare", work, Dir("served/private.git")});
  WriteFile(Dir("server-token"), token + "\n", 0600);
  GitHttpServer server(Dir("served"), "ci", Dir("server-token"));
  ASSERT_TRUE(server.Start());
  const std::string url = server.url() + "/private.git";

  // The worker's credentials: a token file per URL prefix, outside its state.
  std::filesystem::create_directories(Dir("secrets"));
  WriteFile(Dir("secrets/token"), token + "\n", 0600);
  WriteFile(Dir("secrets/creds.yaml"), "credentials:\n  - prefix: " + server.url() +
                                           "\n    token_file: " + Dir("secrets/token") + "\n    username: ci\n");
  stack_.StartWorker(0, {"--credentials", Dir("secrets/creds.yaml"), "--allow-input-url", server.url() + "/"});
  ASSERT_TRUE(stack_.worker(0)->running()) << stack_.worker(0)->log();

  // Submitted with the scan template: the submitter has no credential, so
  // the ref cannot be pinned here and the worker resolves it.
  WriteFile(Dir("private.txt"), url + "\n");
  RunResult b = stack_.Gatos({"batch", "submit", "--template", SourcePath("examples/templates/scan.yaml"), "--repos",
                              Dir("private.txt"), "--ledger", stack_.ledger(), "--sign-key", stack_.submitter_key(),
                              "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_HAS(b.err, "not pinned");
  EXPECT_HAS(b.err, "the worker resolves HEAD when the job runs");
  const std::string scan_job = json::parse(b.out)["jobs"][0]["job"];
  EXPECT_EQ(WaitState(scan_job), "succeeded") << Show(scan_job, ":stderr") << stack_.worker(0)->log();
  RunResult f = stack_.Gatos({"findings", scan_job, "--repo", stack_.ledger(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  json fj = json::parse(f.out);
  ASSERT_EQ(fj["findings"].size(), 1u) << f.out;
  EXPECT_EQ(fj["findings"][0]["rule"], "github-pat");
  json poe = Poe(scan_job);
  ASSERT_EQ(poe["inputs"].size(), 1u) << poe.dump();
  EXPECT_EQ(poe["inputs"][0]["commit"], head);
  EXPECT_EQ(poe["inputs"][0]["url"], url);
  EXPECT_HAS(Message(scan_job), "Input-Commit: 0 " + head);
  EXPECT_EQ(ProvenanceInputCommits(scan_job), std::vector<std::string>{head});

  // A job with the same input shows what it can see: its environment, the
  // input read-only at /gatos/inputs/0, and no credential (nor its file).
  const std::string probe_yaml =
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: [\"env; echo ---; git --git-dir=\\\"$GATOS_INPUT_0\\\" cat-file -t \\\"$GATOS_INPUT_0_COMMIT\\\"; "
      "touch \\\"$GATOS_INPUT_0\\\"/x 2>/dev/null && echo WRITABLE; cat " +
      Dir("secrets/token") + " 2>/dev/null && echo TOKEN-FILE-READABLE; "
      "cat \\\"$GATOS_INPUT_0\\\"/config 2>/dev/null; exit 0\"]\n"
      "inputs:\n  - {kind: git, url: \"" + url + "\", ref: main}\n"
      "timeout: 60\n";
  const std::string probe = stack_.PushJob(probe_yaml);
  EXPECT_EQ(WaitState(probe), "succeeded") << stack_.worker(0)->log();
  const std::string out = Show(probe, ":stdout");
  EXPECT_HAS(out, "GATOS_INPUT_0=/gatos/inputs/0");
  EXPECT_HAS(out, "GATOS_INPUT_0_COMMIT=" + head);
  EXPECT_HAS(out, "GATOS_INPUT_0_URL=" + url);
  EXPECT_HAS(out, "---\ncommit\n");
  EXPECT_EQ(out.find("WRITABLE"), std::string::npos) << out;
  EXPECT_EQ(out.find("TOKEN-FILE-READABLE"), std::string::npos) << out;
  EXPECT_EQ(out.find(Dir("secrets")), std::string::npos) << out;  // not even the path

  // A wrong credential: `failed`, "authentication refused", nothing retried.
  WriteFile(Dir("secrets/wrong"), "tok-wrong-" + std::string(30, 'z') + "\n", 0600);
  WriteFile(Dir("secrets/wrong.yaml"), "credentials:\n  - prefix: " + server.url() +
                                           "\n    token_file: " + Dir("secrets/wrong") + "\n    username: ci\n");
  stack_.worker(0)->Stop(SIGTERM);
  stack_.StartWorker(1, {"--credentials", Dir("secrets/wrong.yaml"), "--allow-input-url", server.url() + "/"});
  ASSERT_TRUE(stack_.worker(1)->running()) << stack_.worker(1)->log();
  const std::string refused = stack_.PushJob("command: [\"gatos-scan\"]\nargs: [\"--input\", \"0\"]\ninputs:\n"
                                             "  - {kind: git, url: \"" + url + "\", ref: main, nonce: \"2\"}\n"
                                             "timeout: 60\n");
  EXPECT_EQ(WaitState(refused), "failed") << stack_.worker(1)->log();
  json rp = Poe(refused);
  ASSERT_TRUE(rp.is_object());
  EXPECT_HAS(rp.value("reason", ""), "authentication refused");
  EXPECT_HAS(rp.value("reason", ""), "[permanent");
  EXPECT_TRUE(rp["exit"]["code"].is_null()) << rp.dump();  // the command never started
  EXPECT_EQ(stack_.worker(1)->log().find("retrying in"), std::string::npos) << stack_.worker(1)->log();

  // The credential is nowhere: ledger objects, the ledger's and the workers'
  // logs and state (mirror configs included), the server's own log aside.
  RunResult everything = testing::Run(
      {"sh", "-c", "git --git-dir " + stack_.ledger() + " cat-file --batch-all-objects --batch; cat " +
                       stack_.dir().path() + "/*.log"});
  EXPECT_EQ(everything.out.find(token), std::string::npos) << "the token reached the ledger or a log";
  EXPECT_EQ(everything.out.find("tok-wrong-"), std::string::npos);
  for (int i = 0; i < 2; ++i) {
    RunResult grep = testing::Run({"grep", "-rqaF", token, stack_.worker_state(i)});
    EXPECT_NE(grep.exit_code, 0) << "the token is in worker " << i << "'s state";
  }
}

}  // namespace
}  // namespace gatos::testing
