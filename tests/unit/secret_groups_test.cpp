// Findings grouped by secret (gatos/model/secret_groups.h): what `gatos findings`,
// the dashboard and gatos-scan's secrets.jsonl show.
#include "gatos/model/secret_groups.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gatos {
namespace {

FindingLocation Loc(const std::string& rule, char fp, const std::string& path, char commit,
                    std::optional<int64_t> time, std::optional<bool> at_tip) {
  FindingLocation l;
  l.rule = rule;
  l.fingerprint = "blake3k:" + std::string(64, fp);
  l.blob = std::string(40, commit);
  l.commit = std::string(40, commit);
  l.path = path;
  l.line = 3;
  l.start = 10;
  l.end = 50;
  l.commit_time = time;
  l.at_tip = at_tip;
  return l;
}

TEST(SecretGroups, TheSameSecretInThreeCommitsIsOneSecretWithThreeLocations) {
  std::vector<SecretGroup> g = GroupBySecret({
      Loc("github-pat", 'a', "app.env", '3', 300, true),
      Loc("github-pat", 'a', "app.env", '1', 100, false),
      Loc("github-pat", 'a', "app.env", '2', 200, false),
  });
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].locations.size(), 3u);
  EXPECT_EQ(g[0].first().commit, std::string(40, '1'));
  EXPECT_EQ(g[0].last().commit, std::string(40, '3'));
  EXPECT_EQ(g[0].at_tip, true);
  EXPECT_EQ(g[0].paths(), std::vector<std::string>{"app.env"});
  EXPECT_EQ(g[0].id, SecretId("github-pat", "blake3k:" + std::string(64, 'a')));
  EXPECT_EQ(g[0].id.size(), 64u);
}

TEST(SecretGroups, RuleAndFingerprintBothSeparateSecretsAndOldestComesFirst) {
  std::vector<SecretGroup> g = GroupBySecret({
      Loc("github-pat", 'a', "b.env", '5', 500, false),
      Loc("jwt", 'a', "a.env", '4', 400, false),       // same bytes, another rule
      Loc("github-pat", 'b', "c.env", '2', 200, false),
  });
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].fingerprint, "blake3k:" + std::string(64, 'b'));
  EXPECT_EQ(g[1].rule, "jwt");
  EXPECT_EQ(g[2].rule, "github-pat");
  EXPECT_NE(g[1].id, g[2].id);
  for (const SecretGroup& s : g) EXPECT_EQ(s.at_tip, false);
}

TEST(SecretGroups, RanksOrderCommitsWithOneTimeAsAfterARebase) {
  FindingLocation a = Loc("github-pat", 'a', "z.env", '1', 100, false);
  FindingLocation b = Loc("github-pat", 'a', "a.env", '2', 100, true);
  a.commit_rank = 0;
  b.commit_rank = 1;
  std::vector<SecretGroup> g = GroupBySecret({b, a});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].first().commit, std::string(40, '1'));  // by rank, not by path
  EXPECT_EQ(g[0].last().commit, std::string(40, '2'));
}

TEST(SecretGroups, OlderOutputsWithoutTimesOrTipAreGroupedWithUnknowns) {
  std::vector<SecretGroup> g = GroupBySecret({
      Loc("github-pat", 'a', "b.env", '2', std::nullopt, std::nullopt),
      Loc("github-pat", 'a', "a.env", '1', std::nullopt, std::nullopt),
  });
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].at_tip, std::nullopt);
  EXPECT_EQ(g[0].first().path, "a.env");  // no times: stable by path
  // One known-absent and one unknown location: not known to be gone.
  std::vector<SecretGroup> mixed = GroupBySecret({
      Loc("github-pat", 'a', "a.env", '1', 100, false),
      Loc("github-pat", 'a', "a.env", '2', std::nullopt, std::nullopt),
  });
  EXPECT_EQ(mixed[0].at_tip, std::nullopt);
  EXPECT_EQ(mixed[0].first().commit, std::string(40, '1'));  // a known time is older
}

TEST(SecretGroups, FindingLinesRoundTripAndBadLinesNameTheirLine) {
  FindingLocation l = Loc("github-pat", 'a', "d\xff", '1', 100, true);
  l.path = "d%FF";
  l.path_percent = true;
  const std::string line = LocationJson(l).dump();
  Result<FindingLocation> back = ParseFindingLine(line);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->path, "d%FF");
  EXPECT_TRUE(back->path_percent);
  EXPECT_EQ(back->commit_time, 100);
  EXPECT_EQ(back->at_tip, true);
  EXPECT_EQ(LocationJson(l)["secret"], SecretId(l.rule, l.fingerprint));

  Result<std::vector<FindingLocation>> all = ParseFindingsJsonl(line + "\n\n" + line + "\n");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {line + "\nnot json\n", "line 2: not JSON"},
      {"[1]", "line 1: not a JSON object"},
      {R"({"rule":"r"})", "line 1: `fingerprint` missing or not a string"},
      {R"({"rule":"r","fingerprint":"f","blob":"b","commit":"c","path":"p","line":-1,"start":0,"end":1})",
       "line 1: `line` missing or not a non-negative integer"},
      {R"({"rule":"r","fingerprint":"f","blob":"b","commit":"c","path":"p","line":1,"start":0,"end":1,"at_tip":"yes"})",
       "line 1: `at_tip` is not true or false"},
      {std::string(5000, '['), "line 1: not JSON"},
  };
  for (const Case& c : cases) {
    Result<std::vector<FindingLocation>> r = ParseFindingsJsonl(c.text);
    ASSERT_FALSE(r.ok()) << c.text.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.want);
  }
}

TEST(SecretGroups, GroupJsonSaysFirstLastTipAndPaths) {
  std::vector<SecretGroup> g = GroupBySecret({
      Loc("github-pat", 'a', "x.env", '1', 100, false),
      Loc("github-pat", 'a', "y.env", '2', 200, true),
  });
  nlohmann::json j = GroupJson(g[0], /*with_locations=*/false);
  EXPECT_EQ(j["location_count"], 2);
  EXPECT_EQ(j["first_commit"], std::string(40, '1'));
  EXPECT_EQ(j["last_commit"], std::string(40, '2'));
  EXPECT_EQ(j["first_time"], 100);
  EXPECT_EQ(j["last_time"], 200);
  EXPECT_EQ(j["at_tip"], true);
  EXPECT_EQ(j["paths"], nlohmann::json::array({"x.env", "y.env"}));
  EXPECT_FALSE(j.contains("locations"));
  EXPECT_EQ(GroupJson(g[0], true)["locations"].size(), 2u);
}

}  // namespace
}  // namespace gatos
