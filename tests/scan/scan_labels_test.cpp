// Labelled findings (gatos/scan/labels.h): the parser's errors, and the
// scores the corpus benchmark prints.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/scan/labels.h"

namespace gatos::scan {
namespace {

std::string B3(char c) { return std::string(64, c); }

std::string Line(const std::string& corpus, const std::string& rule, char b3, bool truth) {
  Label l;
  l.corpus = corpus;
  l.rule = rule;
  l.match_b3 = B3(b3);
  l.truth = truth;
  l.path = "p";
  l.reason = "r";
  return LabelJson(l) + "\n";
}

HashedFinding Found(const std::string& rule, char b3) {
  HashedFinding f;
  f.location.rule = rule;
  f.location.path = "p";
  f.location.commit = std::string(40, '1');
  f.match_b3 = B3(b3);
  return f;
}

TEST(ScanLabels, ParseRoundTripsAndRejectsWithFileAndLine) {
  const std::string text = "# comment\n" + Line("curl", "private-key", 'a', true) +
                           Line("curl", "generic-api-key", 'b', false);
  Result<std::vector<Label>> labels = ParseLabels(text, "l.jsonl");
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  ASSERT_EQ(labels->size(), 2u);
  EXPECT_TRUE((*labels)[0].truth);
  EXPECT_EQ((*labels)[1].origin, "l.jsonl:3");
  EXPECT_EQ(LabelJson((*labels)[0]) + "\n", Line("curl", "private-key", 'a', true));
  struct Case {
    std::string text;
    std::string want;
  };
  const std::string ok = R"("corpus":"c","rule":"r","match_b3":")" + B3('a') + R"(","label":true)";
  const std::vector<Case> cases = {
      {"not json", "l.jsonl:1: not a JSON object"},
      {"{" + ok + R"(,"secret":"x"})", "l.jsonl:1: unknown key `secret`"},
      {R"({"corpus":"C D","rule":"r","match_b3":")" + B3('a') + R"(","label":true})",
       "l.jsonl:1: `corpus` must be"},
      {R"({"corpus":"c","rule":"r","match_b3":"AB","label":true})", "l.jsonl:1: `match_b3` must be"},
      {R"({"corpus":"c","rule":"r","match_b3":")" + B3('a') + R"(","label":"yes"})",
       "l.jsonl:1: `label` must be true or false"},
      {R"({"corpus":"c","rule":"r","match_b3":")" + B3('a') + R"("})", "l.jsonl:1: `label` is missing"},
      {"{" + ok + "}\n{" + ok + "}\n", "l.jsonl:2: this finding (corpus, rule, match_b3) is labelled twice"},
      {R"({"corpus":"c","match_b3":")" + B3('a') + R"(","label":true})", "l.jsonl:1: `rule` is missing"},
  };
  for (const Case& c : cases) {
    Result<std::vector<Label>> r = ParseLabels(c.text, "l.jsonl");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(c.want, 0), 0u) << r.status().message();
  }
  EXPECT_EQ(LoadLabelsFile("/nonexistent/labels.jsonl").status().code(), StatusCode::kNotFound);
}

TEST(ScanLabels, ScoresPerRuleByFindingAndBySecret) {
  Result<std::vector<Label>> labels = ParseLabels(
      Line("c", "private-key", 'a', true) + Line("c", "private-key", 'b', true) +
          Line("c", "generic-api-key", 'c', false) + Line("other", "private-key", 'd', true),
      "l.jsonl");
  ASSERT_TRUE(labels.ok());
  // 'a' in three locations, 'c' (false) in two, 'e' unlabelled; 'b' missing.
  const LabelReport r = EvaluateLabels(
      "c", *labels,
      {Found("private-key", 'a'), Found("private-key", 'a'), Found("private-key", 'a'),
       Found("generic-api-key", 'c'), Found("generic-api-key", 'c'), Found("jwt", 'e')});
  EXPECT_EQ(r.true_labels, 2u);
  EXPECT_EQ(r.total.true_findings, 3u);
  EXPECT_EQ(r.total.false_findings, 2u);
  EXPECT_EQ(r.total.unlabelled_findings, 1u);
  EXPECT_DOUBLE_EQ(r.total.precision(), 0.6);
  EXPECT_DOUBLE_EQ(r.total.secret_precision(), 0.5);
  EXPECT_EQ(r.by_rule.at("private-key").true_secrets, 1u);
  ASSERT_EQ(r.missing_true.size(), 1u);
  EXPECT_EQ(r.missing_true[0].match_b3, B3('b'));
  ASSERT_EQ(r.found_false.size(), 1u);
  ASSERT_EQ(r.unlabelled.size(), 1u);
  EXPECT_EQ(r.unlabelled[0].location.rule, "jwt");
  const std::string text = FormatLabelReport(r);
  EXPECT_NE(text.find("corpus c: precision 60.0% by finding (3 true, 2 false, 1 unlabelled)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("true secrets found: 1 of 2"), std::string::npos) << text;
  Result<std::vector<Label>> stubs = ParseLabels(LabelStubs(r), "s.jsonl");
  ASSERT_TRUE(stubs.ok()) << stubs.status().ToString();
  ASSERT_EQ(stubs->size(), 1u);
  EXPECT_EQ((*stubs)[0].rule, "jwt");
  EXPECT_EQ((*stubs)[0].reason, "unlabelled");
}

}  // namespace
}  // namespace gatos::scan
