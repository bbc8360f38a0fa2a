// The corpus slice: a small repository built from committed text fixtures
// that reproduce the false-positive shapes of the real-code corpus
// (bench/scan/corpus: libgit2, curl, git) and from true secrets built at run
// time from fragments, scanned by the built gatos-scan and scored against
// committed labels (tests/scan/corpus_slice/labels.jsonl, the format of
// bench/scan/corpus/labels.jsonl): every labelled true secret is found,
// no labelled false one is, and nothing is unlabelled.
//
// To relabel after changing the fixtures, run this test with
// GATOS_SLICE_STUBS=FILE: the unlabelled findings (of the default rules and
// of the rules without allow-lists) are written there as label lines to
// complete and append.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gatos/model/blake3.h"
#include "gatos/model/secret_groups.h"
#include "gatos/scan/detector.h"
#include "gatos/scan/labels.h"
#include "gatos/scan/rules.h"
#include "secrets_for_tests.h"
#include "test_util.h"

namespace gatos::scan {
namespace {

namespace fs = std::filesystem;
using gatos::testing::ReadFile;
using gatos::testing::RunOptions;
using gatos::testing::RunResult;
using gatos::testing::TempDir;
using gatos::testing::WriteFile;

const std::string kSliceDir = std::string(GATOS_SOURCE_DIR) + "/tests/scan/corpus_slice";

// Fixture file -> its path in the slice repository.
const std::map<std::string, std::string> kFixtures = {
    {"url_vectors.c.txt", "tests/network/url_vectors.c"},
    {"curl_manual.txt", "docs/MANUAL"},
    {"constants.c.txt", "lib/auth.c"},
    {"key_in_memory.c.txt", "docs/examples/key_in_memory.c"},
    {"http_auth.sh.txt", "t/t5563-http-auth.sh"},
};

class CorpusSlice : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = tmp_.Join("slice");
    fs::create_directories(repo_);
    Git({"init", "-q", "-b", "main"});
  }

  void Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "-C", repo_, "-c", "user.name=Slice", "-c",
                                     "user.email=slice@example.invalid", "-c",
                                     "commit.gpgsign=false"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    // Fixed dates: the slice's commit ids are the same in every run.
    o.env = {{"GIT_CONFIG_NOSYSTEM", "1"},
             {"GIT_CONFIG_GLOBAL", "/dev/null"},
             {"GIT_AUTHOR_DATE", "2024-01-0" + std::to_string(++commits_) + "T00:00:00Z"},
             {"GIT_COMMITTER_DATE", "2024-01-0" + std::to_string(commits_) + "T00:00:00Z"}};
    RunResult r = gatos::testing::Run(argv, o);
    ASSERT_EQ(r.exit_code, 0) << "git " << args[0] << ": " << r.err;
  }

  void Commit(const std::map<std::string, std::string>& files, const std::string& msg) {
    for (const auto& [path, content] : files) {
      fs::create_directories(fs::path(repo_ + "/" + path).parent_path());
      WriteFile(repo_ + "/" + path, content);
      fixture_texts_.emplace_back(path, content);
    }
    Git({"add", "-A"});
    Git({"commit", "-q", "-m", msg});
  }

  // The slice: the fixtures, then true secrets built from fragments, one of
  // them kept through three versions of its file.
  void Build() {
    std::map<std::string, std::string> files;
    for (const auto& [fixture, path] : kFixtures) files[path] = ReadFile(kSliceDir + "/" + fixture);
    Commit(files, "fixtures: shapes of the corpus's false positives");
    testing::SecretMaker mk(4040);
    const std::string url = "git clone https://deploy:" + mk.Alnum(8) + "7q" + mk.Alnum(6) +
                            "@git.internal.corp/app.git\n";
    const std::string wiki = std::string("$wg") + "SecretKey = \"" + mk.Hex(64) + "\";\n";
    const std::string curl = "curl -u juliust:" + mk.Hex(40) + " https://api.github.com/user\n";
    const std::string pem = mk.PrivateKey() + "\n";
    const std::string p12 = std::string("0\x82\x0b\x8a\x02\x01\x03", 7) + mk.Alnum(64);
    Commit({{"deploy.sh", url},
            {"install-wiki/LocalSettings.php", wiki},
            {"notes/curl.txt", curl},
            {"tests/certs/server.key", pem},
            {"tests/certs/client.p12", p12}},
           "true secrets");
    Commit({{"deploy.sh", "#!/bin/sh\n" + url}}, "v2");
    Commit({{"deploy.sh", "#!/bin/sh\nset -e\n" + url}}, "v3");
  }

  Result<std::vector<HashedFinding>> ScanSlice() {
    const std::string out = tmp_.Join("out");
    fs::create_directories(out);
    RunResult r = gatos::testing::Run({gatos::testing::BinaryPath("gatos-scan"), "--repo", repo_,
                                       "--state-dir", tmp_.Join("state"), "--output-dir", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    GATOS_ASSIGN_OR_RETURN(std::vector<FindingLocation> locations,
                           ParseFindingsJsonl(ReadFile(out + "/findings.jsonl")));
    return HashMatches(repo_ + "/.git", locations);
  }

  // (rule, match_b3) -> path of every match of the default rules stripped
  // of every allow-list, over the slice's files: what the labelled false
  // findings must be among, so they keep describing shapes the regexes
  // still match.
  std::map<std::pair<std::string, std::string>, std::string> StrippedMatches() {
    Result<RuleSet> rules = DefaultRules();
    EXPECT_TRUE(rules.ok());
    rules->allowlist = {};
    for (Rule& r : rules->rules) r.allowlist = {};
    Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    auto scratch = std::move(*(*d)->NewScratch());
    std::map<std::pair<std::string, std::string>, std::string> out;
    for (const auto& [path, text] : fixture_texts_) {
      std::vector<Match> m;
      EXPECT_TRUE((*d)->Scan(text, path, scratch.get(), &m).ok());
      for (const Match& x : m) {
        out.emplace(std::make_pair((*d)->rules().rules[x.rule].id,
                                   DigestHex(Blake3(std::string_view(text).substr(x.start, x.end - x.start)))),
                    path);
      }
    }
    return out;
  }

  TempDir tmp_;
  std::string repo_;
  int commits_ = 0;
  std::vector<std::pair<std::string, std::string>> fixture_texts_;  // (path, text) committed
};

TEST_F(CorpusSlice, LabelledTrueFoundLabelledFalseAbsentNothingUnlabelled) {
  Build();
  Result<std::vector<Label>> labels = LoadLabelsFile(kSliceDir + "/labels.jsonl");
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  Result<std::vector<HashedFinding>> found = ScanSlice();
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  const LabelReport report = EvaluateLabels("slice", *labels, *found);
  const std::map<std::pair<std::string, std::string>, std::string> stripped = StrippedMatches();

  if (const char* stubs = std::getenv("GATOS_SLICE_STUBS")) {
    std::string text = LabelStubs(report);
    std::set<std::pair<std::string, std::string>> labelled;
    for (const Label& l : *labels) labelled.insert({l.rule, l.match_b3});
    for (const HashedFinding& f : report.unlabelled) labelled.insert({f.location.rule, f.match_b3});
    for (const auto& [key, path] : stripped) {
      if (labelled.count(key)) continue;
      Label l{"slice", key.first, key.second, false, path, "", "unlabelled (matched without allow-lists)", ""};
      text += LabelJson(l) + "\n";
    }
    WriteFile(stubs, text);
  }

  EXPECT_TRUE(report.missing_true.empty()) << FormatLabelReport(report);
  EXPECT_TRUE(report.found_false.empty()) << FormatLabelReport(report);
  EXPECT_TRUE(report.unlabelled.empty()) << FormatLabelReport(report);
  EXPECT_EQ(report.true_labels, 5u);
  EXPECT_EQ(report.total.true_secrets, 5u);
  // deploy.sh's URL is one secret in three versions of the file.
  EXPECT_EQ(report.by_rule.at("url-embedded-password").true_findings, 3u);
  EXPECT_EQ(report.total.precision(), 1.0);

  size_t false_labels = 0;
  for (const Label& l : *labels) {
    if (l.corpus != "slice" || l.truth) continue;
    ++false_labels;
    EXPECT_EQ(stripped.count({l.rule, l.match_b3}), 1u)
        << l.origin << ": " << l.rule << " " << l.path
        << ": no longer matched by the rule's regex; the label describes nothing";
  }
  EXPECT_GE(false_labels, 30u);
}

}  // namespace
}  // namespace gatos::scan
