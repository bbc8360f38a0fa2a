// Unit tests of the scanner library: entropy, rule parsing and its errors,
// the detector (spans, lines, gates, allow-lists), fingerprints, repo keys
// and the done-ledger's replay safety.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "gatos/scan/detector.h"
#include "gatos/scan/done_ledger.h"
#include "gatos/scan/fingerprint.h"
#include "gatos/scan/mirror.h"
#include "gatos/scan/rules.h"
#include "gatos/scan/scanner.h"
#include "secrets_for_tests.h"
#include "test_util.h"

namespace gatos::scan {
namespace {

using testing::SecretMaker;

TEST(ScanEntropy, KnownValues) {
  EXPECT_DOUBLE_EQ(ShannonEntropy(""), 0.0);
  EXPECT_DOUBLE_EQ(ShannonEntropy("aaaaaaaa"), 0.0);
  EXPECT_DOUBLE_EQ(ShannonEntropy("abababab"), 1.0);
  EXPECT_DOUBLE_EQ(ShannonEntropy("abcdabcd"), 2.0);
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_DOUBLE_EQ(ShannonEntropy(all), 8.0);
}

TEST(ScanRules, DefaultRulesLoadAndCompile) {
  Result<RuleSet> rules = DefaultRules();
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  EXPECT_GE(rules->rules.size(), 60u);
  std::set<std::string> ids;
  for (const Rule& r : rules->rules) EXPECT_TRUE(ids.insert(r.id).second) << r.id;
  for (const char* id : {"aws-access-token", "github-pat", "github-fine-grained-pat", "gitlab-pat",
                         "slack-bot-token", "slack-webhook-url", "stripe-access-token",
                         "private-key", "jwt", "generic-api-key", "gcp-api-key"}) {
    EXPECT_EQ(ids.count(id), 1u) << id;
  }
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
}

TEST(ScanRules, ErrorsNameFileAndLine) {
  struct Case {
    std::string yaml;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"rules:\n  - id: a\n    regex: 'x+'\n    colour: red\n",
       "bad.yaml:4: unknown rule key `colour`"},
      {"rules:\n  - id: a\n    description: no regex\n", "bad.yaml:2: rule a has no `regex`"},
      {"rules:\n  - id: a\n    regex: 'x+'\n  - id: a\n    regex: 'y+'\n",
       "bad.yaml:4: duplicate rule id a (first defined at bad.yaml:2"},
      {"rules:\n  - id: a\n    regex: '(unclosed'\n", "bad.yaml:3: rule a regex does not compile"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    entropy: 9\n",
       "bad.yaml:4: `entropy` must be a number"},
      {"rules:\n  - id: Bad_Id\n    regex: 'x+'\n", "bad.yaml:2: rule id must be"},
      {"rules: [\n", "bad.yaml:"},
      {"colour: red\n", "bad.yaml:1: unknown top-level key `colour`"},
      {"rules:\n  - id: a\n    regex: 'x+'\n    allowlist:\n      pathz: [a]\n",
       "bad.yaml:5: unknown allowlist key `pathz`"},
  };
  for (const Case& c : cases) {
    Result<RuleSet> r = ParseRules(c.yaml, "bad.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(c.want, 0), 0u)
        << "got: " << r.status().message() << "\nwant prefix: " << c.want;
  }
}

TEST(ScanRules, ParsesEveryField) {
  Result<RuleSet> r = ParseRules(R"(version: "v7"
rules:
  - id: acme-token
    description: Acme
    regex: 'acme_([a-z0-9]{8})'
    secret_group: 1
    keywords: [ACME_]
    entropy: 2.5
    window: 64
    allowlist:
      paths: ['^docs/']
      regexes: ['^0+$']
      stopwords: [Dead]
)",
                                 "r.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rules.size(), 1u);
  const Rule& rule = r->rules[0];
  EXPECT_EQ(r->version, "v7");
  EXPECT_EQ(rule.keywords, std::vector<std::string>{"acme_"});
  EXPECT_EQ(rule.entropy, 2.5);
  EXPECT_EQ(rule.window, 64u);
  EXPECT_EQ(rule.secret_group, 1);
  EXPECT_EQ(rule.allowlist.stopwords, std::vector<std::string>{"dead"});
  EXPECT_EQ(rule.origin, "r.yaml:3");
}

TEST(ScanRules, MergeReplacesSameIdAndCanonicalFormTracksChanges) {
  Result<RuleSet> a = ParseRules("version: a\nrules:\n  - {id: x, regex: 'x{3}'}\n", "a");
  Result<RuleSet> b = ParseRules(
      "version: b\nrules:\n  - {id: x, regex: 'x{4}'}\n"
      "  - {id: y, regex: 'y{4}'}\n",
      "b");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string before = CanonicalRuleSet(*a);
  RuleSet merged = *a;
  MergeRules(&merged, *b);
  ASSERT_EQ(merged.rules.size(), 2u);
  EXPECT_EQ(merged.rules[0].regex, "x{4}");
  EXPECT_EQ(merged.version, "a+b");
  EXPECT_NE(CanonicalRuleSet(merged), before);
  EXPECT_EQ(CanonicalRuleSet(*a), before);
  Digest32 key{};
  EXPECT_NE(PolicyHash(*a, 100, key), PolicyHash(merged, 100, key));
  EXPECT_NE(PolicyHash(*a, 100, key), PolicyHash(*a, 200, key));
  Digest32 other{};
  other[0] = 1;
  EXPECT_NE(PolicyHash(*a, 100, key), PolicyHash(*a, 100, other));
}

class ScanDetectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<RuleSet> rules = DefaultRules();
    ASSERT_TRUE(rules.ok());
    Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    detector_ = std::move(*d);
    Result<std::unique_ptr<Detector::Scratch>> s = detector_->NewScratch();
    ASSERT_TRUE(s.ok());
    scratch_ = std::move(*s);
  }
  std::vector<std::pair<std::string, std::string>> Find(const std::string& text) {
    std::vector<Match> m;
    Status s = detector_->Scan(text, scratch_.get(), &m);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<std::pair<std::string, std::string>> out;
    for (const Match& x : m) {
      out.emplace_back(detector_->rules().rules[x.rule].id, text.substr(x.start, x.end - x.start));
    }
    return out;
  }
  std::unique_ptr<Detector> detector_;
  std::unique_ptr<Detector::Scratch> scratch_;
};

TEST_F(ScanDetectorTest, FindsFormatsWithExactSpansAndLines) {
  SecretMaker mk(7);
  const std::string aws = mk.Aws(), gh = mk.GithubPat(), slack = mk.SlackBot(),
                    key = mk.PrivateKey(), hook = mk.SlackWebhook(), gl = mk.GitlabPat(),
                    fg = mk.GithubFineGrained(), stripe = mk.Stripe(), gcp = mk.Gcp();
  const std::string text = "line one\naws = \"" + aws + "\"\n# " + gh + "\n" + key +
                           "\nurl: " + hook + "\ntok " + slack + " " + gl + "\n" + fg + "\n" +
                           stripe + "\n" + gcp + "\n";
  std::vector<Match> m;
  ASSERT_TRUE(detector_->Scan(text, scratch_.get(), &m).ok());
  std::map<std::string, std::pair<std::string, uint64_t>> got;
  for (const Match& x : m) {
    got[detector_->rules().rules[x.rule].id] = {text.substr(x.start, x.end - x.start), x.line};
  }
  EXPECT_EQ(got["aws-access-token"], std::make_pair(aws, uint64_t{2}));
  EXPECT_EQ(got["github-pat"], std::make_pair(gh, uint64_t{3}));
  EXPECT_EQ(got["private-key"], std::make_pair(key, uint64_t{4}));
  EXPECT_EQ(got["slack-webhook-url"].first, hook);
  EXPECT_EQ(got["slack-bot-token"].first, slack);
  EXPECT_EQ(got["gitlab-pat"].first, gl);
  EXPECT_EQ(got["github-fine-grained-pat"].first, fg);
  EXPECT_EQ(got["stripe-access-token"].first, stripe);
  EXPECT_EQ(got["gcp-api-key"].first, gcp);
}

TEST_F(ScanDetectorTest, EntropyGateDropsLowEntropyLookalikes) {
  SecretMaker mk(8);
  const std::string low = std::string("AK") + "IA" + std::string(16, 'A');
  EXPECT_TRUE(Find("id = " + low + "\n").empty());
  EXPECT_EQ(Find("id = " + mk.Aws() + "\n").size(), 1u);
  // generic-api-key needs 3.5 bits per byte.
  EXPECT_TRUE(Find("api_key = \"aaaaaaaaaabbbbbbbbbb\"\n").empty());
  const std::string value = mk.GenericValue();
  auto hits = Find("api_key = \"" + value + "\"\n");
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0], std::make_pair(std::string("generic-api-key"), value));
}

TEST_F(ScanDetectorTest, AllowlistsDropFindings) {
  SecretMaker mk(9);
  // Stopword of generic-api-key.
  EXPECT_TRUE(Find("api_key = \"Example" + mk.Alnum(20) + "\"\n").empty());
  // Regex allow-list of aws-access-token.
  const std::string example = std::string("AK") + "IA" + mk.Chars("BCDFGHJ234567", 9) + "EXAMPLE";
  EXPECT_TRUE(Find("k=" + example + "\n").empty());
  // Identifiers and function calls are not values.
  EXPECT_TRUE(Find("auto key = GenerateEd25519Key(flags);\n").empty());
  // Global path allow-list, applied by the caller where the path is known.
  size_t aws_rule = 0;
  for (size_t i = 0; i < detector_->rules().rules.size(); ++i) {
    if (detector_->rules().rules[i].id == "aws-access-token") aws_rule = i;
  }
  EXPECT_TRUE(detector_->PathAllowlisted(aws_rule, "web/package-lock.json"));
  EXPECT_FALSE(detector_->PathAllowlisted(aws_rule, "web/package.json"));
}

TEST(ScanDetector, UserRulesKeywordsAndAllowlists) {
  Result<RuleSet> rules = ParseRules(R"(rules:
  - id: acme-token
    regex: '(?i)acme_([a-z0-9]{12})'
    keywords: [acme_]
    allowlist:
      regexes: ['^0+$']
      stopwords: [dead]
  - id: kw-gated
    regex: 'zz[0-9]{6}'
    keywords: [nope]
)",
                                     "user.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  Result<std::unique_ptr<Detector::Scratch>> s = (*d)->NewScratch();
  ASSERT_TRUE(s.ok());
  const std::string text = "ACME_a1b2c3d4e5f6 acme_000000000000 acme_deadbeef0123 zz123456";
  std::vector<Match> m;
  ASSERT_TRUE((*d)->Scan(text, s->get(), &m).ok());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(text.substr(m[0].start, m[0].end - m[0].start), "a1b2c3d4e5f6");
  EXPECT_EQ(m[0].start, 5u);
  EXPECT_EQ(m[0].line, 1u);
}

TEST(ScanDetector, RejectsRegexThatMatchesEmpty) {
  Result<RuleSet> rules = ParseRules("rules:\n  - {id: empty, regex: 'a*'}\n", "e.yaml");
  ASSERT_TRUE(rules.ok());
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("e.yaml:2: rule empty"), std::string::npos)
      << d.status().message();
}

TEST(ScanFingerprint, KeyedDeterministicAndFormatted) {
  Digest32 k1{}, k2{};
  k2[31] = 7;
  const std::string f = Fingerprint(k1, "secret-bytes");
  EXPECT_EQ(f, Fingerprint(k1, "secret-bytes"));
  EXPECT_NE(f, Fingerprint(k2, "secret-bytes"));
  EXPECT_NE(f, Fingerprint(k1, "secret-bytez"));
  EXPECT_EQ(f.rfind("blake3k:", 0), 0u);
  EXPECT_EQ(f.size(), 8u + 64u);
}

TEST(ScanFingerprint, KeyFileCreatedOncePrivateAndReread) {
  gatos::testing::TempDir dir;
  const std::string path = dir.Join("fingerprint.key");
  bool created = false;
  Result<Digest32> k = LoadOrCreateFingerprintKey(path, &created);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_TRUE(created);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<Digest32> again = LoadOrCreateFingerprintKey(path, &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(*again, *k);
  gatos::testing::WriteFile(dir.Join("bad.key"), "short");
  Result<Digest32> bad = ReadFingerprintKey(dir.Join("bad.key"));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().find("short"), std::string::npos);
}

TEST(ScanMirror, NormalizesSpellingsToOneKey) {
  gatos::testing::TempDir dir;
  ASSERT_EQ(mkdir(dir.Join("repo").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("repo/.git").c_str(), 0755), 0);
  Result<RepoTarget> a = NormalizeRepo(dir.Join("repo"));
  Result<RepoTarget> b = NormalizeRepo(dir.Join("repo") + "/");
  Result<RepoTarget> c = NormalizeRepo(dir.Join("repo/.git"));
  Result<RepoTarget> d = NormalizeRepo("file://" + dir.Join("repo"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->key.rfind("file:///", 0), 0u);
  EXPECT_EQ(a->key, b->key);
  EXPECT_EQ(a->key, c->key);
  EXPECT_EQ(a->key, d->key);
  EXPECT_EQ(MirrorPath(*a, "/s"), MirrorPath(*d, "/s"));

  Result<RepoTarget> r = NormalizeRepo("HTTPS://user:tok3n@Example.COM/Org/Repo.git/");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->key, "https://example.com/Org/Repo");
  EXPECT_EQ(r->key.find("tok3n"), std::string::npos);
  Result<RepoTarget> scp = NormalizeRepo("git@Example.com:org/repo.git");
  ASSERT_TRUE(scp.ok());
  EXPECT_EQ(scp->key, "ssh://example.com/org/repo");
  EXPECT_EQ(NormalizeRepo(dir.Join("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(NormalizeRepo("ftp://x/y").status().code(), StatusCode::kInvalidArgument);
}

TEST(ScanDoneLedger, IdempotentBatchesAndWatermarks) {
  gatos::testing::TempDir dir;
  Result<std::unique_ptr<DoneLedger>> l = DoneLedger::Open(dir.Join("s.sqlite"));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  BlobRecord rec;
  rec.blob = std::string(40, 'a');
  rec.size = 10;
  rec.commit = std::string(40, 'c');
  rec.path = "p.txt";
  rec.findings.push_back({"rule-x", 1, 5, 1, "blake3k:00"});
  for (int i = 0; i < 2; ++i) {  // a replayed batch converges
    ASSERT_TRUE((*l)->CommitBatch("P", "repo", {rec}, {}).ok());
  }
  EXPECT_EQ(*(*l)->IsDone("P", rec.blob), true);
  EXPECT_EQ(*(*l)->IsDone("Q", rec.blob), false);
  EXPECT_EQ(*(*l)->HasFindings("P", rec.blob), true);
  EXPECT_EQ(*(*l)->DoneCount("P"), 1);
  Result<std::vector<ListedFinding>> listed = (*l)->ListFindings("repo", "P");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].path, "p.txt");
  EXPECT_TRUE((*l)->ListFindings("other-repo", "P")->empty());
  // Another repository sees the same blob: it gets its own location.
  ASSERT_TRUE((*l)->CommitBatch("P", "repo2", {}, {{rec.blob, std::string(40, 'd'), "q"}}).ok());
  EXPECT_EQ((*l)->ListFindings("repo2", "P")->at(0).path, "q");

  EXPECT_FALSE((*(*l)->Watermark("repo", "refs/heads/main", "P")).has_value());
  ASSERT_TRUE((*l)->AdvanceWatermarks("repo", "P", {{"refs/heads/main", "c1"}}).ok());
  ASSERT_TRUE((*l)->AdvanceWatermarks("repo", "P", {{"refs/heads/main", "c2"}}).ok());
  EXPECT_EQ(*(*(*l)->Watermark("repo", "refs/heads/main", "P")), "c2");
  EXPECT_FALSE((*(*l)->Watermark("repo", "refs/heads/main", "Q")).has_value());
}

}  // namespace
}  // namespace gatos::scan
