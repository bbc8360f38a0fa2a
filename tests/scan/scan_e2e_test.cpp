// End-to-end tests of gatos-scan: repositories generated with the real git
// CLI (branches, tags, deleted files, packed and loose objects) with planted
// fake secrets, scanned by the built program as a subprocess.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/scan/fingerprint.h"
#include "secrets_for_tests.h"
#include "test_util.h"

namespace gatos::scan {
namespace {

namespace fs = std::filesystem;
using gatos::testing::BinaryPath;
using gatos::testing::ReadFile;
using gatos::testing::RunOptions;
using gatos::testing::RunResult;
using gatos::testing::TempDir;
using gatos::testing::WriteFile;
using nlohmann::json;

RunResult Exec(const std::vector<std::string>& argv, const RunOptions& o = {}) {
  return gatos::testing::Run(argv, o);
}

struct ScanRun {
  RunResult run;
  json summary;
  std::vector<json> findings;
  std::string findings_text;
};

class ScanE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = tmp_.Join("src");
    state_ = tmp_.Join("state");
    out_ = tmp_.Join("out");
    fs::create_directories(src_);
    fs::create_directories(out_);
    for (size_t i = 0; i < key_.size(); ++i) key_[i] = static_cast<uint8_t>(i * 7 + 3);
    key_file_ = tmp_.Join("fp.key");
    WriteFile(key_file_, HexEncode(key_.data(), key_.size()) + "\n", 0600);
    Git({"init", "-q", "-b", "main"});
  }

  std::string Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git",
                                     "-C",
                                     src_,
                                     "-c",
                                     "user.name=Test",
                                     "-c",
                                     "user.email=test@example.invalid",
                                     "-c",
                                     "commit.gpgsign=false",
                                     "-c",
                                     "tag.gpgsign=false"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"}};
    RunResult r = Exec(argv, o);
    EXPECT_EQ(r.exit_code, 0) << "git " << args[0] << ": " << r.err;
    std::string s = r.out;
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  // Writes files, stages everything and commits; returns the commit id.
  std::string Commit(const std::map<std::string, std::string>& files, const std::string& msg,
                     const std::vector<std::string>& remove = {}) {
    for (const auto& [path, content] : files) {
      fs::create_directories(fs::path(src_ + "/" + path).parent_path());
      WriteFile(src_ + "/" + path, content);
    }
    for (const std::string& p : remove) Git({"rm", "-q", p});
    Git({"add", "-A"});
    Git({"commit", "-q", "-m", msg});
    return Git({"rev-parse", "HEAD"});
  }

  void Plant(const std::string& secret, const std::string& rule) { planted_[secret] = rule; }

  // History: a secret added then deleted, a side branch, an annotated tag,
  // objects packed by gc, then loose objects, and a binary blob.
  void BuildStandardRepo() {
    const std::string aws = mk_.Aws();
    Plant(aws, "aws-access-token");
    first_commit_ = Commit(
        {{"config/aws.env", "AWS_ACCESS_KEY_ID=" + aws + "\n"}, {"README.md", "# demo\n"}}, "c1");
    const std::string gh = mk_.GithubPat();
    Plant(gh, "github-pat");
    Commit({{"src/app.py", "import os\n\nTOKEN = \"" + gh + "\"\n"}}, "c2", {"config/aws.env"});
    Git({"checkout", "-q", "-b", "feature"});
    const std::string pk = mk_.PrivateKey();
    const std::string slack = mk_.SlackBot();
    Plant(pk, "private-key");
    Plant(slack, "slack-bot-token");
    Commit({{"keys/id_rsa", pk + "\n"}, {"chat.txt", "bot: " + slack + "\n"}}, "c3");
    Git({"checkout", "-q", "main"});
    const std::string stripe = mk_.Stripe();
    const std::string generic = mk_.GenericValue();
    Plant(stripe, "stripe-access-token");
    Plant(generic, "generic-api-key");
    Commit({{"billing.rb", "Stripe.api_key = '" + stripe + "'\n"},
            {"settings.ini", "[svc]\napi_key = " + generic + "\n"}},
           "c4");
    Git({"tag", "-a", "v1", "-m", "release"});
    Git({"checkout", "-q", "feature"});
    const std::string gl = mk_.GitlabPat();
    Plant(gl, "gitlab-pat");
    Commit({{"ci.yml", "token: " + gl + "\n"}}, "c5");
    Git({"checkout", "-q", "main"});
    Git({"gc", "-q"});
    // Loose objects from here on.
    const std::string jwt = mk_.Jwt();
    const std::string hook = mk_.SlackWebhook();
    Plant(jwt, "jwt");
    Plant(hook, "slack-webhook-url");
    Commit({{"web/app.js", "const t = '" + jwt + "';\nconst h = \"" + hook + "\";\n"}}, "c6");
    hidden_in_binary_ = mk_.Aws();
    Commit({{"assets/blob.bin", std::string("\x89PNG\0\0", 6) + hidden_in_binary_ + "\n"}}, "c7");
  }

  ScanRun Scan(const std::vector<std::string>& extra, const std::string& state = "",
               const std::string& out = "") {
    std::vector<std::string> argv = {BinaryPath("gatos-scan"),
                                     "--repo",
                                     src_,
                                     "--state-dir",
                                     state.empty() ? state_ : state,
                                     "--output-dir",
                                     out.empty() ? out_ : out,
                                     "--fingerprint-key",
                                     key_file_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ScanRun s;
    s.run = Exec(argv);
    const std::string dir = out.empty() ? out_ : out;
    if (fs::exists(dir + "/summary.json")) s.summary = json::parse(ReadFile(dir + "/summary.json"));
    if (fs::exists(dir + "/findings.jsonl")) {
      s.findings_text = ReadFile(dir + "/findings.jsonl");
      std::istringstream lines(s.findings_text);
      std::string line;
      while (std::getline(lines, line)) s.findings.push_back(json::parse(line));
    }
    return s;
  }

  // fingerprint -> rule for every finding
  static std::map<std::string, std::string> ByFingerprint(const ScanRun& s) {
    std::map<std::string, std::string> m;
    for (const json& f : s.findings) m[f["fingerprint"]] = f["rule"];
    return m;
  }

  void ExpectAllPlantedFound(const ScanRun& s) {
    const auto found = ByFingerprint(s);
    for (const auto& [secret, rule] : planted_) {
      auto it = found.find(Fingerprint(key_, secret));
      ASSERT_NE(it, found.end()) << "planted " << rule << " not found";
      EXPECT_EQ(it->second, rule);
    }
  }

  TempDir tmp_;
  std::string src_, state_, out_, key_file_;
  Digest32 key_{};
  testing::SecretMaker mk_{1234};
  std::map<std::string, std::string> planted_;  // secret -> rule id
  std::string first_commit_;
  std::string hidden_in_binary_;
};

TEST_F(ScanE2E, FindsEveryPlantedSecretAndNeverWritesOne) {
  BuildStandardRepo();
  ScanRun s = Scan({});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_EQ(s.summary["status"], "complete");
  ExpectAllPlantedFound(s);
  EXPECT_EQ(s.findings.size(), planted_.size());
  EXPECT_EQ(s.summary["findings"], planted_.size());
  EXPECT_EQ(s.summary["blobs_skipped_binary"], 1);
  EXPECT_EQ(ByFingerprint(s).count(Fingerprint(key_, hidden_in_binary_)), 0u);
  // The deleted file's secret is located where it was introduced.
  for (const json& f : s.findings) {
    if (f["rule"] == "aws-access-token") {
      EXPECT_EQ(f["path"], "config/aws.env");
      EXPECT_EQ(f["commit"], first_commit_);
      EXPECT_EQ(f["line"], 1);
      EXPECT_EQ(f["start"], 18);
    }
  }
  // Four refs: main, feature, v1 (annotated tag peeled to its commit).
  std::vector<std::string> refs;
  for (const json& r : s.summary["refs"]) refs.push_back(r["ref"]);
  EXPECT_EQ(refs,
            (std::vector<std::string>{"refs/heads/feature", "refs/heads/main", "refs/tags/v1"}));

  // No raw secret byte sequence anywhere we write: outputs, stdout, stderr,
  // the SQLite state (with its WAL) and the key file. The mirror is a copy
  // of the repository itself and is excluded.
  std::vector<std::string> blobs = {s.run.out, s.run.err};
  for (const std::string& dir : {out_, state_}) {
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
         ++it) {
      if (it->is_directory() && it->path().filename() == "mirrors") {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) blobs.push_back(ReadFile(it->path().string()));
    }
  }
  ASSERT_GE(blobs.size(), 6u);  // stdout, stderr, 3 outputs, sqlite, key
  std::vector<std::string> secrets;
  for (const auto& [secret, rule] : planted_) secrets.push_back(secret);
  secrets.push_back(hidden_in_binary_);
  for (const std::string& secret : secrets) {
    for (const std::string& b : blobs) {
      EXPECT_EQ(b.find(secret), std::string::npos) << "a raw secret was written";
      // Also no long piece of one (e.g. a truncated or redacted copy).
      EXPECT_EQ(b.find(secret.substr(4, 16)), std::string::npos) << "a secret fragment leaked";
    }
  }
}

TEST_F(ScanE2E, RescanIsIncrementalAndListingStaysComplete) {
  BuildStandardRepo();
  ScanRun first = Scan({});
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_GT(first.summary["blobs_scanned"].get<int>(), 5);

  ScanRun again = Scan({"--json"});
  ASSERT_EQ(again.run.exit_code, 0) << again.run.err;
  EXPECT_EQ(again.summary["blobs_scanned"], 0);
  EXPECT_EQ(again.summary["commits_walked"], 0);
  EXPECT_EQ(again.findings_text, first.findings_text);
  EXPECT_EQ(json::parse(again.run.out), again.summary);

  const std::string npm = mk_.Npm();
  Plant(npm, "npm-access-token");
  const std::string tip = Commit({{".npmrc", "//registry/:_authToken=" + npm + "\n"}}, "c8");
  ScanRun third = Scan({});
  ASSERT_EQ(third.run.exit_code, 0) << third.run.err;
  EXPECT_EQ(third.summary["commits_walked"], 1);
  EXPECT_EQ(third.summary["blobs_scanned"], 1);
  EXPECT_EQ(third.summary["findings_new"], 1);
  EXPECT_EQ(third.findings.size(), first.findings.size() + 1);
  ExpectAllPlantedFound(third);
  for (const json& r : third.summary["refs"]) {
    if (r["ref"] == "refs/heads/main") {
      EXPECT_EQ(r["watermark_after"], tip);
      EXPECT_NE(r["watermark_before"], tip);
    }
  }
}

TEST_F(ScanE2E, PartialScanKeepsWatermarksAndConvergesToFullResult) {
  BuildStandardRepo();
  ScanRun budget = Scan({"--max-blobs", "2"});
  EXPECT_EQ(budget.run.exit_code, 4) << budget.run.err;
  EXPECT_EQ(budget.summary["status"], "partial");
  EXPECT_EQ(budget.summary["blobs_scanned"].get<int>() +
                budget.summary["blobs_skipped_binary"].get<int>(),
            2);
  for (const json& r : budget.summary["refs"]) {
    EXPECT_TRUE(r["watermark_before"].is_null());
    EXPECT_TRUE(r["watermark_after"].is_null());
  }
  ScanRun timed = Scan({"--max-seconds", "0"});
  EXPECT_EQ(timed.run.exit_code, 4) << timed.run.err;
  EXPECT_EQ(timed.summary["status"], "partial");
  EXPECT_EQ(timed.summary["blobs_scanned"], 0);
  for (const json& r : timed.summary["refs"]) EXPECT_TRUE(r["watermark_after"].is_null());

  ScanRun resumed = Scan({});
  ASSERT_EQ(resumed.run.exit_code, 0) << resumed.run.err;
  EXPECT_EQ(resumed.summary["status"], "complete");
  EXPECT_EQ(resumed.summary["blobs_skipped_done"], 2);

  // A fresh state scanned in one go lists exactly the same findings.
  const std::string out2 = tmp_.Join("out2");
  fs::create_directories(out2);
  ScanRun fresh = Scan({}, tmp_.Join("state2"), out2);
  ASSERT_EQ(fresh.run.exit_code, 0) << fresh.run.err;
  EXPECT_EQ(fresh.findings_text, resumed.findings_text);
  EXPECT_EQ(
      fresh.summary["blobs_scanned"].get<int>() + fresh.summary["blobs_skipped_binary"].get<int>(),
      resumed.summary["blobs_scanned"].get<int>() +
          resumed.summary["blobs_skipped_binary"].get<int>() + 2);
}

TEST_F(ScanE2E, ForcePushIsDetectedAndRewalked) {
  BuildStandardRepo();
  ASSERT_EQ(Scan({}).run.exit_code, 0);
  Git({"reset", "-q", "--hard", "HEAD~2"});
  const std::string gl = mk_.GitlabPat();
  const std::string tip = Commit({{"deploy.sh", "export GL=" + gl + "\n"}}, "rewritten");
  ScanRun s = Scan({});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_EQ(s.summary["status"], "complete");
  EXPECT_EQ(s.summary["force_pushed"], true);
  EXPECT_EQ(s.summary["blobs_scanned"], 1);
  bool saw_main = false;
  for (const json& r : s.summary["refs"]) {
    if (r["ref"] != "refs/heads/main") {
      EXPECT_EQ(r["force_pushed"], false);
      continue;
    }
    saw_main = true;
    EXPECT_EQ(r["force_pushed"], true);
    EXPECT_EQ(r["watermark_after"], tip);
  }
  EXPECT_TRUE(saw_main);
  EXPECT_EQ(ByFingerprint(s).count(Fingerprint(key_, gl)), 1u);
}

TEST_F(ScanE2E, UserRulesAllowlistsAndRefSelection) {
  const std::string acme_src = "acme_" + mk_.Hex(24);
  const std::string acme_doc = "acme_" + mk_.Hex(24);
  Commit({{"src/a.txt", "k=" + acme_src + "\n"}, {"docs/b.md", "k=" + acme_doc + "\n"}}, "c1");
  Git({"checkout", "-q", "-b", "side"});
  const std::string side_secret = mk_.GithubPat();
  Commit({{"side.txt", side_secret + "\n"}}, "side");
  Git({"checkout", "-q", "main"});
  WriteFile(tmp_.Join("acme.yaml"),
            "version: acme-1\nrules:\n  - id: acme-token\n    regex: 'acme_[0-9a-f]{24}'\n");
  WriteFile(tmp_.Join("allow.yaml"), "paths: ['^docs/']\n");
  ScanRun s = Scan(
      {"--rules", tmp_.Join("acme.yaml"), "--allowlist", tmp_.Join("allow.yaml"), "--ref", "main"});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  ASSERT_EQ(s.findings.size(), 1u) << s.findings_text;
  EXPECT_EQ(s.findings[0]["rule"], "acme-token");
  EXPECT_EQ(s.findings[0]["path"], "src/a.txt");
  EXPECT_EQ(s.findings[0]["fingerprint"], Fingerprint(key_, acme_src));
  EXPECT_EQ(s.summary["findings_allowlisted"], 1);
  EXPECT_EQ(s.summary["rules_version"], "gatos-default-2+acme-1");
  ASSERT_EQ(s.summary["refs"].size(), 1u);
  EXPECT_EQ(s.summary["refs"][0]["ref"], "refs/heads/main");

  ScanRun fail = Scan({"--rules", tmp_.Join("acme.yaml"), "--fail-on-findings"});
  EXPECT_EQ(fail.run.exit_code, 3) << fail.run.err;
}

TEST_F(ScanE2E, UsageAndOperationalErrorsAreClear) {
  Commit({{"a.txt", "hello\n"}}, "c1");
  RunOptions no_env;
  no_env.env = {{"GATOS_STATE_DIR", ""}};
  RunResult no_state =
      Exec({BinaryPath("gatos-scan"), "--repo", src_, "--output-dir", out_}, no_env);
  EXPECT_EQ(no_state.exit_code, 2);
  EXPECT_NE(no_state.err.find("--state-dir DIR or set GATOS_STATE_DIR"), std::string::npos)
      << no_state.err;

  WriteFile(tmp_.Join("bad.yaml"), "rules:\n  - id: x\n    regex: 'x+'\n    colour: red\n");
  ScanRun bad = Scan({"--rules", tmp_.Join("bad.yaml")});
  EXPECT_EQ(bad.run.exit_code, 2);
  EXPECT_NE(bad.run.err.find(tmp_.Join("bad.yaml") + ":4: unknown rule key `colour`"),
            std::string::npos)
      << bad.run.err;

  WriteFile(tmp_.Join("hs.yaml"), "rules:\n  - id: empty\n    regex: 'x*'\n");
  ScanRun hs = Scan({"--rules", tmp_.Join("hs.yaml")});
  EXPECT_EQ(hs.run.exit_code, 2);
  EXPECT_NE(hs.run.err.find(tmp_.Join("hs.yaml") + ":2: rule empty"), std::string::npos)
      << hs.run.err;

  RunResult unknown = Exec({BinaryPath("gatos-scan"), "--repo", src_, "--frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown argument \"--frobnicate\""), std::string::npos);

  RunResult missing = Exec({BinaryPath("gatos-scan"), "--repo", tmp_.Join("nope"), "--state-dir",
                            state_, "--output-dir", out_});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;

  ScanRun bad_ref = Scan({"--ref", "no-such-branch"});
  EXPECT_EQ(bad_ref.run.exit_code, 1);
  EXPECT_NE(bad_ref.run.err.find("--ref no-such-branch matches no ref"), std::string::npos)
      << bad_ref.run.err;

  RunResult help = Exec({BinaryPath("gatos-scan"), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: gatos-scan"), std::string::npos);
}

TEST_F(ScanE2E, RunsLikeAWorkerJobWithEnvironmentAndGeneratedKey) {
  const std::string gh = mk_.GithubPat();
  Commit({{"a.txt", gh + "\n"}}, "c1");
  const std::string ws = tmp_.Join("workspace");
  fs::create_directories(ws);
  RunOptions o;
  o.cwd = ws;
  o.env = {
      {"GATOS_OUTPUT_DIR", ws}, {"GATOS_STATE_DIR", state_}, {"GATOS_FINGERPRINT_KEY_FILE", ""}};
  RunResult r = Exec({BinaryPath("gatos-scan"), "--repo", "file://" + src_}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json summary = json::parse(ReadFile(ws + "/summary.json"));
  EXPECT_EQ(summary["status"], "complete");
  // The generated key is private to the owner and is the one fingerprints use.
  struct stat st {};
  ASSERT_EQ(stat((state_ + "/fingerprint.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<Digest32> key = ReadFingerprintKey(state_ + "/fingerprint.key");
  ASSERT_TRUE(key.ok());
  const std::string findings = ReadFile(ws + "/findings.jsonl");
  EXPECT_NE(findings.find(Fingerprint(*key, gh)), std::string::npos) << findings;
  EXPECT_EQ(r.out.find(HexEncode(key->data(), key->size())), std::string::npos);
  EXPECT_EQ(r.err.find(HexEncode(key->data(), key->size())), std::string::npos);
}

TEST_F(ScanE2E, InputModeScansTheFetchedCommitInPlace) {
  const std::string gh = mk_.GithubPat();
  const std::string c1 = Commit({{"a.txt", gh + "\n"}}, "c1");
  const std::string aws = mk_.Aws();
  Commit({{"b.txt", aws + "\n"}}, "c2");  // after the input's commit: not scanned
  // What the worker shows a job: a bare mirror and the variables naming it.
  const std::string mirror = tmp_.Join("mirror.git");
  ASSERT_EQ(Exec({"git", "clone", "-q", "--bare", src_, mirror}).exit_code, 0);
  RunOptions o;
  o.env = {{"GATOS_OUTPUT_DIR", out_}, {"GATOS_STATE_DIR", state_}, {"GATOS_INPUTS", "0"},
           {"GATOS_INPUT_0", mirror}, {"GATOS_INPUT_0_COMMIT", c1}, {"GATOS_INPUT_0_URL", src_ + "/"},
           {"GATOS_INPUT_0_REF", "main"}};
  // No --repo, one input: that input.
  RunResult r = Exec({BinaryPath("gatos-scan"), "--fingerprint-key", key_file_, "--json"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json summary = json::parse(ReadFile(out_ + "/summary.json"));
  EXPECT_EQ(summary["status"], "complete");
  EXPECT_EQ(summary["repo"], "file://" + src_) << summary.dump();
  EXPECT_EQ(summary["refs"][0]["tip"], c1) << summary.dump();
  EXPECT_EQ(summary["refs"][0]["ref"], "main");
  const std::string findings = ReadFile(out_ + "/findings.jsonl");
  EXPECT_NE(findings.find(Fingerprint(key_, gh)), std::string::npos) << findings;
  EXPECT_EQ(findings.find(Fingerprint(key_, aws)), std::string::npos) << findings;
  EXPECT_FALSE(fs::exists(state_ + "/mirrors")) << "an input needs no mirror of the scanner's own";
  // Misuse is explained.
  RunResult missing = Exec({BinaryPath("gatos-scan"), "--input", "1", "--fingerprint-key", key_file_}, o);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("this job has no git input 1"), std::string::npos) << missing.err;
  RunResult with_ref =
      Exec({BinaryPath("gatos-scan"), "--input", "0", "--ref", "main", "--fingerprint-key", key_file_}, o);
  EXPECT_EQ(with_ref.exit_code, 2);
  RunResult both = Exec({BinaryPath("gatos-scan"), "--input", "0", "--repo", src_}, o);
  EXPECT_EQ(both.exit_code, 2);
  RunResult bad = Exec({BinaryPath("gatos-scan"), "--input", "x"}, o);
  EXPECT_EQ(bad.exit_code, 2);
}

// The same secret in three versions of a file is one secret with three
// locations (secrets.jsonl, summary.json), SARIF keeps one result per
// location with the secret's id as a partial fingerprint, and the listing
// says whether each secret is still at the scanned tip.
TEST_F(ScanE2E, FindingsAreGroupedBySecretWithFirstLastAndTip) {
  const std::string kept = mk_.GithubPat();
  const std::string removed = mk_.Aws();
  const std::string c1 = Commit({{"app.env", "TOKEN=" + kept + "\nv=1\n"},
                                 {"old.env", "AWS_ACCESS_KEY_ID=" + removed + "\n"}},
                                "c1");
  Commit({{"app.env", "TOKEN=" + kept + "\nv=2\n"}}, "c2", {"old.env"});
  const std::string c3 = Commit({{"app.env", "v=3\nTOKEN=" + kept + "\n"}}, "c3");
  ScanRun s = Scan({"--json"});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_EQ(s.summary["findings"], 4);
  EXPECT_EQ(s.summary["secrets"], 2);
  EXPECT_EQ(s.summary["secrets_at_tip"], 1);
  const std::string kept_fp = Fingerprint(key_, kept);
  std::set<std::string> ids;
  for (const json& f : s.findings) {
    EXPECT_EQ(f["secret"].get<std::string>().size(), 64u);
    ids.insert(f["secret"]);
    EXPECT_TRUE(f["commit_time"].is_number_integer());
    // Only the last version of app.env is at the tip.
    EXPECT_EQ(f["at_tip"], f["fingerprint"] == kept_fp && f["commit"] == c3) << f.dump();
  }
  EXPECT_EQ(ids.size(), 2u);

  std::vector<json> secrets;
  std::istringstream lines(ReadFile(out_ + "/secrets.jsonl"));
  for (std::string line; std::getline(lines, line);) secrets.push_back(json::parse(line));
  ASSERT_EQ(secrets.size(), 2u);
  // Oldest first; the removed key was first seen in c1 like the kept one,
  // so they are ordered by rule.
  const json& gh = secrets[0]["rule"] == "github-pat" ? secrets[0] : secrets[1];
  const json& aws = secrets[0]["rule"] == "github-pat" ? secrets[1] : secrets[0];
  EXPECT_EQ(gh["fingerprint"], kept_fp);
  EXPECT_EQ(gh["location_count"], 3);
  EXPECT_EQ(gh["locations"].size(), 3u);
  EXPECT_EQ(gh["first_commit"], c1);
  EXPECT_EQ(gh["last_commit"], c3);
  EXPECT_EQ(gh["at_tip"], true);
  EXPECT_EQ(gh["paths"], json::array({"app.env"}));
  EXPECT_EQ(aws["location_count"], 1);
  EXPECT_EQ(aws["first_commit"], c1);
  EXPECT_EQ(aws["last_commit"], c1);
  EXPECT_EQ(aws["at_tip"], false);

  json sarif = json::parse(ReadFile(out_ + "/findings.sarif"));
  const json& results = sarif["runs"][0]["results"];
  ASSERT_EQ(results.size(), 4u);
  std::map<std::string, int> per_secret;
  for (const json& r : results) ++per_secret[r["partialFingerprints"]["gatosSecret/v1"]];
  EXPECT_EQ(per_secret[gh["secret"]], 3);
  EXPECT_EQ(per_secret[aws["secret"]], 1);
  for (const std::string& file : {"secrets.jsonl", "findings.sarif", "summary.json"}) {
    const std::string text = ReadFile(out_ + "/" + file);
    EXPECT_EQ(text.find(kept), std::string::npos) << file;
    EXPECT_EQ(text.find(removed), std::string::npos) << file;
  }
}

TEST_F(ScanE2E, SarifListsEveryFindingWithRuleMetadataAndNoSecret) {
  BuildStandardRepo();
  ScanRun s = Scan({});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  const std::string text = ReadFile(out_ + "/findings.sarif");
  json log = json::parse(text);
  EXPECT_EQ(log["version"], "2.1.0");
  const json& run = log["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["rules"].size(), s.summary["rules_count"].get<size_t>());
  ASSERT_EQ(run["results"].size(), s.findings.size());
  std::map<std::string, std::string> sarif_by_fp;
  for (const json& r : run["results"]) {
    const std::string rule = r["ruleId"];
    EXPECT_EQ(run["tool"]["driver"]["rules"][r["ruleIndex"].get<size_t>()]["id"], rule);
    EXPECT_FALSE(r.contains("baselineState"));  // no baseline given
    sarif_by_fp[r["partialFingerprints"]["gatosSecretFingerprint/v1"]] = rule;
  }
  EXPECT_EQ(sarif_by_fp, ByFingerprint(s));
  for (const auto& [secret, rule] : planted_) {
    EXPECT_EQ(text.find(secret.substr(4, 16)), std::string::npos) << rule;
  }
}

TEST_F(ScanE2E, BaselineHidesAcceptedFindingsAndShowsNewOnes) {
  BuildStandardRepo();
  const std::string baseline = tmp_.Join("baseline.json");
  ScanRun first = Scan({"--write-baseline", baseline});
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_EQ(first.findings.size(), planted_.size());
  // Adopting the scanner: the old findings are accepted, nothing fails.
  ScanRun adopted = Scan({"--baseline", baseline, "--fail-on-findings"});
  EXPECT_EQ(adopted.run.exit_code, 0) << adopted.run.err;
  EXPECT_TRUE(adopted.findings.empty()) << adopted.findings_text;
  EXPECT_EQ(adopted.summary["findings_baselined"], planted_.size());
  // A new secret is the only finding; the SARIF keeps the accepted ones as
  // suppressed results.
  const std::string fresh = mk_.Npm();
  Commit({{"web/.npmrc", "//registry.npmjs.org/:_authToken=" + fresh + "\n"}}, "c8");
  ScanRun next = Scan({"--baseline", baseline, "--fail-on-findings"});
  EXPECT_EQ(next.run.exit_code, 3) << next.run.err;
  ASSERT_EQ(next.findings.size(), 1u) << next.findings_text;
  EXPECT_EQ(next.findings[0]["rule"], "npm-access-token");
  EXPECT_EQ(next.findings[0]["fingerprint"], Fingerprint(key_, fresh));
  json log = json::parse(ReadFile(out_ + "/findings.sarif"));
  size_t suppressed = 0, fresh_results = 0;
  for (const json& r : log["runs"][0]["results"]) {
    if (r.contains("suppressions")) {
      ++suppressed;
      EXPECT_EQ(r["baselineState"], "unchanged");
    } else {
      ++fresh_results;
      EXPECT_EQ(r["baselineState"], "new");
    }
  }
  EXPECT_EQ(suppressed, planted_.size());
  EXPECT_EQ(fresh_results, 1u);
  // A broken baseline is a usage error that names the file and line.
  WriteFile(tmp_.Join("bad.json"), "{\"gatos_scan_baseline\": 1,\n \"accepted\": [{\"x\": 1}]}");
  ScanRun bad = Scan({"--baseline", tmp_.Join("bad.json")});
  EXPECT_EQ(bad.run.exit_code, 2);
  EXPECT_NE(bad.run.err.find(tmp_.Join("bad.json") + ":2: accepted[0]: unknown key `x`"),
            std::string::npos)
      << bad.run.err;
}

TEST_F(ScanE2E, InlineAllowAndPathOnlyRules) {
  const std::string allowed = mk_.GithubPat();
  const std::string reported = mk_.GithubPat();
  Commit({{"tests/fixture.py",
           "TOKEN = \"" + allowed + "\"  # gatos:allow (test fixture)\nOTHER = \"" + reported +
               "\"\n"},
          {"certs/client.p12", std::string("\x30\x82\x01\x00\0\0binary", 12)},
          {"docs/p12.md", "How to make a .p12 file\n"}},
         "c1");
  ScanRun s = Scan({});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  const auto found = ByFingerprint(s);
  EXPECT_EQ(found.count(Fingerprint(key_, allowed)), 0u);
  EXPECT_EQ(found.count(Fingerprint(key_, reported)), 1u);
  ASSERT_EQ(s.findings.size(), 2u) << s.findings_text;
  bool p12 = false;
  for (const json& f : s.findings) {
    if (f["rule"] == "pkcs12-file") {
      p12 = true;
      EXPECT_EQ(f["path"], "certs/client.p12");
      EXPECT_EQ(f["start"], 0);
      EXPECT_EQ(f["end"], 12);
    }
  }
  EXPECT_TRUE(p12) << s.findings_text;
  EXPECT_EQ(s.summary["blobs_skipped_binary"], 1);
}

TEST_F(ScanE2E, CheckRulesRunsAUsersExamples) {
  WriteFile(tmp_.Join("good.yaml"), R"(version: acme-1
rules:
  - id: acme-token
    description: Acme API token
    regex: '\b(acme_[0-9a-f]{24})\b'
    entropy: 3
    examples:
      tp: ['ACME_TOKEN=acme_3f9a1c7e5b2d4f608a1e9c3b']
      fp: ['acme_000000000000000000000000', 'acme_3f9a1c7e']
  - id: acme-untested
    regex: 'acmeu_[0-9]{8}'
)");
  RunResult good = Exec({BinaryPath("gatos-scan"), "--check-rules", tmp_.Join("good.yaml")});
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("false positives silent"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("rule acme-untested lacks true or false positive examples"),
            std::string::npos)
      << good.out;

  WriteFile(tmp_.Join("bad.yaml"), R"(rules:
  - id: acme-token
    regex: '\b(acme_[0-9a-f]{24})\b'
    examples:
      tp: ['acme_3f9a1c7e']
      fp: ['acme_3f9a1c7e5b2d4f608a1e9c3b']
)");
  RunResult bad = Exec({BinaryPath("gatos-scan"), "--check-rules", tmp_.Join("bad.yaml"),
                        "--no-default-rules"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find(tmp_.Join("bad.yaml") + ":5: acme-token: true positive not reported"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find(tmp_.Join("bad.yaml") + ":6: acme-token: false positive reported"),
            std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("3f9a1c7e5b2d"), std::string::npos) << "example text printed";

  RunResult broken = Exec({BinaryPath("gatos-scan"), "--check-rules", tmp_.Join("nope.yaml")});
  EXPECT_EQ(broken.exit_code, 2);
}

}  // namespace
}  // namespace gatos::scan
