// Unit tests of precision and reporting: every default rule against its own
// examples (the acceptance test of the rule set), the example checker's
// reports, path rules, match/line allow-lists, inline gatos:allow, the
// baseline parser and SARIF output.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "detector_findings.h"
#include "gatos/scan/baseline.h"
#include "gatos/scan/detector.h"
#include "gatos/scan/examples.h"
#include "gatos/scan/rules.h"
#include "gatos/scan/scanner.h"
#include "secrets_for_tests.h"
#include "test_util.h"

namespace gatos::scan {
namespace {

using nlohmann::json;
using testing::SecretMaker;

// The acceptance test of the rule set: each rule has true and false positive
// examples, reports every true positive and none of its false positives.
TEST(ScanRuleExamples, EveryDefaultRuleFindsItsTruePositivesAndNoFalsePositive) {
  Result<RuleSet> rules = DefaultRules();
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  Result<ExampleReport> rep = CheckRuleExamples(*rules, /*require_both=*/true);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok()) << FormatExampleReport(*rep);
  EXPECT_TRUE(rep->incomplete.empty());
  EXPECT_EQ(rep->tp_found, rep->tp_total);
  EXPECT_EQ(rep->fp_silent, rep->fp_total);
  EXPECT_GE(rep->rules, 200u);
  EXPECT_GE(rep->tp_total, rep->rules);
  EXPECT_GE(rep->fp_total, rep->rules);
  for (const Rule& r : rules->rules) EXPECT_FALSE(r.description.empty()) << r.id;
}

TEST(ScanRuleExamples, DefaultRulesUseTheCommonIdsAndCoverTheFamilies) {
  Result<RuleSet> rules = DefaultRules();
  ASSERT_TRUE(rules.ok());
  std::set<std::string> ids;
  for (const Rule& r : rules->rules) ids.insert(r.id);
  for (const char* id : {"kubernetes-secret-yaml",
                         "curl-auth-header",
                         "curl-auth-user",
                         "cloudflare-api-key",
                         "cloudflare-global-api-key",
                         "cloudflare-origin-ca-key",
                         "heroku-api-key",
                         "okta-access-token",
                         "facebook-secret",
                         "facebook-access-token",
                         "notion-api-token",
                         "snyk-api-token",
                         "sonar-api-token",
                         "nuget-config-password",
                         "pkcs12-file",
                         "aws-amazon-bedrock-api-key-long-lived",
                         "aws-amazon-bedrock-api-key-short-lived",
                         "hubspot-api-key",
                         "sumologic-access-id",
                         "sumologic-access-token",
                         "slack-legacy-bot-token",
                         "flyio-access-token",
                         "1password-secret-key",
                         "generic-api-key"}) {
    EXPECT_EQ(ids.count(id), 1u) << id;
  }
  EXPECT_EQ(ids.count("fly-access-token"), 0u);
  EXPECT_EQ(ids.count("onepassword-secret-key"), 0u);
}

TEST(ScanRuleExamples, FailuresNameTheExampleNotItsText) {
  Result<RuleSet> rules = ParseRules(R"(rules:
  - id: acme-token
    regex: 'acme_([a-z0-9]{12})'
    examples:
      tp:
        - 'acme_a1b2c3d4e5f6'
        - 'acme_SHOUTING1234'
      fp:
        - 'acme_0123456789ab'
  - id: untested
    regex: 'zz[0-9]{6}'
)",
                                     "user.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  Result<ExampleReport> rep = CheckRuleExamples(*rules, /*require_both=*/false);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->tp_total, 2u);
  EXPECT_EQ(rep->tp_found, 1u);
  EXPECT_EQ(rep->fp_total, 1u);
  EXPECT_EQ(rep->fp_silent, 0u);
  ASSERT_EQ(rep->failures.size(), 2u);
  EXPECT_EQ(rep->failures[0].origin, "user.yaml:7");
  EXPECT_EQ(rep->failures[0].what, "true positive not reported by the rule");
  EXPECT_EQ(rep->failures[1].origin, "user.yaml:9");
  EXPECT_EQ(rep->failures[1].what, "false positive reported by the rule");
  EXPECT_EQ(rep->incomplete, std::vector<std::string>{"untested"});
  const std::string text = FormatExampleReport(*rep);
  EXPECT_NE(text.find("user.yaml:7: acme-token: true positive not reported"), std::string::npos);
  EXPECT_EQ(text.find("SHOUTING"), std::string::npos) << "example text must not be printed";
  // Requiring both kinds makes the untested rule a failure too.
  Result<ExampleReport> strict = CheckRuleExamples(*rules, /*require_both=*/true);
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(strict->failures.size(), 3u);
  EXPECT_EQ(strict->failures[2].rule, "untested");
}

TEST(ScanRuleExamples, ParseErrorsNameFileAndLine) {
  struct Case {
    std::string yaml;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"rules:\n  - id: a\n    regex: 'x+'\n    examples: [x]\n",
       "e.yaml:4: `examples` must be a mapping"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    examples:\n      tps: [x]\n",
       "e.yaml:5: unknown examples key `tps`"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    examples:\n      tp: x\n",
       "e.yaml:5: `examples.tp` must be a list"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    examples:\n      tp:\n        - {pathz: a}\n",
       "e.yaml:6: unknown example key `pathz`"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    examples:\n      tp:\n        - [a]\n",
       "e.yaml:6: an example must be a string or a mapping"},
      {"rules:\n  - id: a\n    path: '(unclosed'\n", "e.yaml:3: rule a path does not compile"},
      {"rules:\n  - id: a\n    path: 'x'\n    entropy: 3\n",
       "e.yaml:2: rule a has no `regex`: keywords, entropy"},
      {"rules:\n  - id: a\n    description: nothing\n", "e.yaml:2: rule a has no `regex`"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    allowlist:\n      line_regexes: ['(']\n",
       "e.yaml:5: allowlist line_regexes entry does not compile"},
  };
  for (const Case& c : cases) {
    Result<RuleSet> r = ParseRules(c.yaml, "e.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().message().rfind(c.want, 0), 0u)
        << "got: " << r.status().message() << "\nwant prefix: " << c.want;
  }
}

class RulesDetector {
 public:
  explicit RulesDetector(const std::string& yaml) {
    Result<RuleSet> rules = ParseRules(yaml, "t.yaml");
    EXPECT_TRUE(rules.ok()) << rules.status().ToString();
    Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    detector_ = std::move(*d);
    scratch_ = std::move(*detector_->NewScratch());
  }
  // "rule-id:secret" per match.
  std::vector<std::string> Find(const std::string& text, const std::string& path = "") {
    return DetectorFindings(*detector_, scratch_.get(), text, path);
  }
  const Detector& detector() const { return *detector_; }

 private:
  std::unique_ptr<Detector> detector_;
  std::unique_ptr<Detector::Scratch> scratch_;
};

TEST(ScanDetectorPrecision, InlineAllowCommentSilencesOnlyItsLine) {
  RulesDetector d("rules:\n  - {id: acme, regex: 'acme_([a-z0-9]{8})'}\n");
  EXPECT_TRUE(d.Find("k = acme_a1b2c3d4  # gatos:allow\n").empty());
  EXPECT_TRUE(d.Find("k = acme_a1b2c3d4  // GATOS:ALLOW fixture\n").empty());
  EXPECT_EQ(d.Find("# gatos:allow\nk = acme_a1b2c3d4\n"),
            std::vector<std::string>{"acme:a1b2c3d4"});
  EXPECT_EQ(d.Find("k = acme_a1b2c3d4\nj = acme_e5f6a7b8 # gatos:allow\n"),
            std::vector<std::string>{"acme:a1b2c3d4"});
}

TEST(ScanDetectorPrecision, MatchAndLineAllowlists) {
  RulesDetector d(R"(rules:
  - id: kv
    regex: '[\w.-]{0,20}?key\s*=\s*([a-z0-9]{10})'
    allowlist:
      match_regexes: ['(?i)primary[_.-]?key']
      line_regexes: ['--mount=type=secret']
)");
  EXPECT_EQ(d.Find("api_key = q1w2e3r4t5\n"), std::vector<std::string>{"kv:q1w2e3r4t5"});
  EXPECT_TRUE(d.Find("primary_key = q1w2e3r4t5\n").empty());
  EXPECT_TRUE(d.Find("RUN --mount=type=secret,id=x key=q1w2e3r4t5 make\n").empty());
  EXPECT_EQ(d.Find("# --mount=type=secret\napi_key = q1w2e3r4t5\n"),
            std::vector<std::string>{"kv:q1w2e3r4t5"});
}

TEST(ScanDetectorPrecision, PathRules) {
  RulesDetector d(R"y(rules:
  - id: p12
    path: '(?i)\.p12$'
  - id: tf-password
    regex: 'password = "([^"]{8,})"'
    path: '\.tf$'
)y");
  const std::string text = "password = \"hunter2hunter2\"\n";
  EXPECT_TRUE(d.Find(text).empty());  // no path: path rules do not apply
  EXPECT_TRUE(d.Find(text, "README.md").empty());
  EXPECT_EQ(d.Find(text, "infra/main.tf"), std::vector<std::string>{"tf-password:hunter2hunter2"});
  // A path-only finding is the whole file.
  EXPECT_EQ(d.Find("binary-ish", "certs/client.P12"), std::vector<std::string>{"p12:binary-ish"});
  std::vector<Match> m;
  d.detector().ScanPathRules("certs/client.p12", 1234, &m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].start, 0u);
  EXPECT_EQ(m[0].end, 1234u);
  m.clear();
  d.detector().ScanPathRules("certs/client.p12", 0, &m);  // empty file: nothing
  d.detector().ScanPathRules("certs/client.p12.txt", 10, &m);
  EXPECT_TRUE(m.empty());
}

TEST(ScanDetectorPrecision, GenericRuleSeesTheIdentifierAndStopwords) {
  Result<RuleSet> rules = DefaultRules();
  ASSERT_TRUE(rules.ok());
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_TRUE(d.ok());
  auto scratch = std::move(*(*d)->NewScratch());
  SecretMaker mk(31);
  auto generic_hits = [&](const std::string& text) {
    std::vector<Match> m;
    EXPECT_TRUE((*d)->Scan(text, scratch.get(), &m).ok());
    size_t n = 0;
    for (const Match& x : m) n += (*d)->rules().rules[x.rule].id == "generic-api-key";
    return n;
  };
  const std::string value = mk.Alnum(12) + "7Qz" + mk.Alnum(12);
  EXPECT_EQ(generic_hits("service_api_key = \"" + value + "\"\n"), 1u);
  EXPECT_EQ(generic_hits("primaryKey = \"" + value + "\"\n"), 0u);
  EXPECT_EQ(generic_hits("keySize = \"" + value + "\"\n"), 0u);
  EXPECT_EQ(generic_hits("api_key = \"placeholder" + value + "\"\n"), 0u);
  EXPECT_EQ(generic_hits("api_key = os.environ.get(\"" + value + "\")\n"), 0u);
}

std::string Fp(char c) { return "blake3k:" + std::string(64, c); }

TEST(ScanBaseline, ParsesAcceptsAndRoundTrips) {
  Result<Baseline> b = ParseBaseline(
      R"({"gatos_scan_baseline": 1, "comment": "reviewed",
          "accepted": [
            {"fingerprint": ")" +
          Fp('a') + R"(", "rule": "github-pat", "path": "a.py", "line": 3},
            {"fingerprint": ")" +
          Fp('b') + R"("}]})",
      "b.json");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size(), 2u);
  EXPECT_TRUE(b->Accepts("github-pat", Fp('a')));
  EXPECT_FALSE(b->Accepts("generic-api-key", Fp('a')));  // narrowed to its rule
  EXPECT_TRUE(b->Accepts("anything", Fp('b')));          // any rule
  EXPECT_FALSE(b->Accepts("github-pat", Fp('c')));

  ListedFinding f;
  f.blob = std::string(40, '1');
  f.commit = std::string(40, '2');
  f.path = "src/app.py";
  f.finding = {"github-pat", 10, 50, 4, Fp('d')};
  ListedFinding dup = f;  // same secret elsewhere: one entry
  dup.path = "src/other.py";
  const std::string text = BaselineJson({f, dup});
  Result<Baseline> again = ParseBaseline(text, "w.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(again->size(), 1u);
  EXPECT_TRUE(again->Accepts("github-pat", Fp('d')));
  EXPECT_FALSE(again->Accepts("jwt", Fp('d')));
  EXPECT_NE(text.find("\"path\":\"src/app.py\""), std::string::npos) << text;

  // Paths that JSON or the reader cannot carry are replaced, not fatal:
  // the file must always read back.
  ListedFinding odd = f;
  odd.path = std::string("a\0b\xff", 4);
  odd.finding.fingerprint = Fp('e');
  ListedFinding long_path = f;
  long_path.path = std::string(10000, 'p');
  long_path.finding.fingerprint = Fp('9');
  Result<Baseline> odd_back = ParseBaseline(BaselineJson({odd, long_path}), "o.json");
  ASSERT_TRUE(odd_back.ok()) << odd_back.status().ToString();
  EXPECT_TRUE(odd_back->Accepts("github-pat", Fp('e')));
  EXPECT_TRUE(odd_back->Accepts("github-pat", Fp('9')));
}

TEST(ScanBaseline, HostileInputGetsClearErrors) {
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", "b.json:1: document is empty"},
      {"[]", "b.json:1: a baseline must be an object"},
      {"[1, 2", "b.json:1:"},
      {R"({"accepted": []})", "b.json:1: not a gatos-scan baseline"},
      {R"({"gatos_scan_baseline": 2, "accepted": []})", "b.json:1: unsupported baseline version"},
      {"{\"gatos_scan_baseline\": 1,\n \"accepted\": [{\"fingerprint\": \"blake3k:00\"}]}",
       "b.json:2: accepted[0]: `fingerprint` must be"},
      {"{\"gatos_scan_baseline\": 1,\n \"accepted\": [\n {\"fingerprnt\": \"x\"}]}",
       "b.json:3: accepted[0]: unknown key `fingerprnt`"},
      {"{\"gatos_scan_baseline\": 1, \"accepted\": [{\"rule\": \"a\"}]}",
       "b.json:1: accepted[0] has no `fingerprint`"},
      {"{\"gatos_scan_baseline\": 1, \"accepted\": [{\"fingerprint\": \"" + Fp('a') +
           "\", \"rule\": \"Bad Rule\"}]}",
       "b.json:1: accepted[0]: `rule` is not a rule id"},
      {"{\"gatos_scan_baseline\": 1, \"accepted\": {}}", "b.json:1: `accepted` must be a list"},
      {"{\"gatos_scan_baseline\": 1, \"extra\": 1}", "b.json:1: unknown top-level key `extra`"},
      {std::string(200, '[') + std::string(200, ']'), "b.json:1:"},
  };
  for (const Case& c : cases) {
    Result<Baseline> b = ParseBaseline(c.text, "b.json");
    ASSERT_FALSE(b.ok()) << c.text;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(b.status().message().rfind(c.want, 0), 0u)
        << "got: " << b.status().message() << "\nwant prefix: " << c.want;
  }
  EXPECT_EQ(LoadBaselineFile("/nonexistent/b.json").status().code(), StatusCode::kNotFound);
}

TEST(ScanSarif, RulesResultsLocationsFingerprintsAndSuppressions) {
  ScanReport r;
  r.repo_key = "file:///repo";
  r.complete = true;
  r.policy_hash = "blake3:00";
  r.rules = {{"github-pat", "GitHub personal access token (classic)"}, {"jwt", "JSON Web Token"}};
  ListedFinding f;
  f.blob = std::string(40, 'b');
  f.commit = std::string(40, 'c');
  f.path = "src/my app#1.py";
  f.finding = {"jwt", 100, 140, 7, Fp('e')};
  ListedFinding old = f;
  old.path = std::string("d\xff/x.txt");  // not UTF-8
  old.finding = {"github-pat", 0, 40, 1, Fp('f')};
  r.findings = {f};
  r.accepted = {old};
  r.baseline_used = true;
  json log = json::parse(SarifJson(r));
  EXPECT_EQ(log["version"], "2.1.0");
  ASSERT_EQ(log["runs"].size(), 1u);
  const json& run = log["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "gatos-scan");
  ASSERT_EQ(run["tool"]["driver"]["rules"].size(), 2u);
  EXPECT_EQ(run["tool"]["driver"]["rules"][1]["id"], "jwt");
  EXPECT_EQ(run["tool"]["driver"]["rules"][0]["name"], "GithubPat");
  EXPECT_EQ(run["versionControlProvenance"][0]["mappedTo"]["uriBaseId"], "%SRCROOT%");
  EXPECT_EQ(run["tool"]["driver"]["rules"][1]["shortDescription"]["text"], "JSON Web Token");
  ASSERT_EQ(run["results"].size(), 2u);
  const json& res = run["results"][0];
  EXPECT_EQ(res["ruleId"], "jwt");
  EXPECT_EQ(res["ruleIndex"], 1);
  EXPECT_EQ(res["level"], "error");
  EXPECT_EQ(res["baselineState"], "new");
  EXPECT_FALSE(res.contains("suppressions"));
  const json& loc = res["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "src/my%20app%231.py");
  EXPECT_EQ(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
  EXPECT_EQ(loc["region"]["startLine"], 7);
  EXPECT_EQ(loc["region"]["byteOffset"], 100);
  EXPECT_EQ(loc["region"]["byteLength"], 40);
  EXPECT_EQ(res["partialFingerprints"]["gatosSecretFingerprint/v1"], Fp('e'));
  EXPECT_EQ(res["fingerprints"]["gatosFinding/v1"].get<std::string>().size(), 64u);
  EXPECT_EQ(res["properties"]["commit"], std::string(40, 'c'));
  const json& acc = run["results"][1];
  EXPECT_EQ(acc["baselineState"], "unchanged");
  EXPECT_EQ(acc["suppressions"][0]["kind"], "external");
  EXPECT_EQ(acc["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "d%FF/x.txt");
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], true);
}

TEST(ScanDetectorCache, CompiledDatabaseIsReusedAndADamagedOneRecompiled) {
  gatos::testing::TempDir dir;
  const std::string cache = dir.Join("hs-cache");
  Result<RuleSet> rules = ParseRules("rules:\n  - {id: acme, regex: 'acme_([a-z0-9]{8})'}\n", "c");
  ASSERT_TRUE(rules.ok());
  auto find = [&](const Detector& d) {
    auto scratch = std::move(*d.NewScratch());
    std::vector<Match> m;
    EXPECT_TRUE(d.Scan("k = acme_a1b2c3d4\n", scratch.get(), &m).ok());
    return m.size();
  };
  Result<std::unique_ptr<Detector>> first = Detector::Create(*rules, cache);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(find(**first), 1u);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(cache)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].ends_with(".hsdb"));
  Result<std::unique_ptr<Detector>> cached = Detector::Create(*rules, cache);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(find(**cached), 1u);
  gatos::testing::WriteFile(files[0], "not a database");
  Result<std::unique_ptr<Detector>> damaged = Detector::Create(*rules, cache);
  ASSERT_TRUE(damaged.ok()) << damaged.status().ToString();
  EXPECT_EQ(find(**damaged), 1u);
  // Other rules get their own file, never the first one's database.
  Result<RuleSet> other = ParseRules("rules:\n  - {id: acme, regex: 'acme_([a-z]{8})'}\n", "c");
  ASSERT_TRUE(other.ok());
  Result<std::unique_ptr<Detector>> d2 = Detector::Create(*other, cache);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(find(**d2), 0u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache),
                          std::filesystem::directory_iterator()),
            2);
}

}  // namespace
}  // namespace gatos::scan
