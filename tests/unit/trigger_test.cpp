// Triggers' pure rules (gatos/model/trigger.h; docs/scheduling.md,
// "Triggers"): ref patterns, git ls-remote output, the fired job, the
// schedule.yaml form and the recorded positions.
#include "gatos/model/trigger.h"

#include <gtest/gtest.h>

#include "gatos/model/schedule.h"

namespace gatos {
namespace {

bool Has(const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; }

TEST(TriggerTest, RefPatterns) {
  for (const char* ok :
       {"refs/heads/main", "refs/heads/*", "refs/tags/v*", "refs/heads/release-*-rc", "HEAD"}) {
    EXPECT_EQ(RefPatternProblem(ok), "") << ok;
  }
  EXPECT_TRUE(Has(RefPatternProblem("main"), "not a full ref name"));
  EXPECT_TRUE(Has(RefPatternProblem("refs/heads/*/*"), "more than one '*'"));
  EXPECT_TRUE(Has(RefPatternProblem("refs/heads/a..b"), "not a valid ref name"));
  EXPECT_TRUE(Has(RefPatternProblem("refs/heads/a b"), "character git does not allow"));
  EXPECT_TRUE(Has(RefPatternProblem("refs/heads/[ab]"), "pattern"));
  EXPECT_TRUE(Has(RefPatternProblem("refs/*"), "names no ref under refs/"));
  EXPECT_TRUE(Has(RefPatternProblem("-refs/heads/x"), "not a full ref name"));
  EXPECT_TRUE(RefPatternMatches("refs/heads/*", "refs/heads/team/x"));
  EXPECT_TRUE(RefPatternMatches("refs/tags/v*", "refs/tags/v1.2"));
  EXPECT_FALSE(RefPatternMatches("refs/tags/v*", "refs/tags/x1"));
  EXPECT_TRUE(RefPatternMatches("refs/heads/main", "refs/heads/main"));
  EXPECT_FALSE(RefPatternMatches("refs/heads/main", "refs/heads/main2"));
  EXPECT_FALSE(
      RefPatternMatches("refs/heads/a*a", "refs/heads/a"));  // head and tail do not overlap
}

TEST(TriggerTest, WatchListProblems) {
  EXPECT_EQ(WatchListProblem({{"/srv/app", {"refs/heads/main"}}}), "");
  EXPECT_TRUE(Has(WatchListProblem({}), "at least one"));
  EXPECT_TRUE(Has(WatchListProblem({{"/srv/app", {}}}), "no ref pattern"));
  EXPECT_TRUE(Has(WatchListProblem({{"https://u:p@h/x", {"refs/heads/main"}}}), "credentials"));
  EXPECT_TRUE(Has(WatchListProblem({{"app", {"refs/heads/main"}}}), "watch url"));
  EXPECT_TRUE(Has(WatchListProblem({{"/a", {"HEAD"}}, {"/a", {"HEAD"}}}), "given twice"));
}

TEST(TriggerTest, LsRemoteOutput) {
  const std::string a(40, 'a'), b(40, 'b'), c(40, 'c');
  auto r = ParseLsRemote(a + "\tHEAD\n" + a + "\trefs/heads/main\n" + b + "\trefs/tags/v1\n" + c +
                         "\trefs/tags/v1^{}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->at("HEAD"), a);
  EXPECT_EQ(r->at("refs/tags/v1"), c);  // the annotated tag's commit
  EXPECT_EQ(r->size(), 3u);
  EXPECT_TRUE(ParseLsRemote("").ok());
  auto bad = ParseLsRemote(a + "\trefs/heads/main\nfatal: token=supersecret\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "line 2"));
  EXPECT_FALSE(Has(bad.status().message(), "supersecret"));
  EXPECT_FALSE(ParseLsRemote(a + "\trefs/heads/a..b\n").ok());
  EXPECT_FALSE(ParseLsRemote(std::string(40, 'A') + "\trefs/heads/x\n").ok());
  const WatchSpec w{"/srv/app", {"refs/heads/*"}};
  auto watched = WatchedRefs(w, *r);
  EXPECT_EQ(watched.size(), 1u);
  EXPECT_EQ(watched.at("refs/heads/main"), a);
  // git allows any bytes in a ref name; a job input holds UTF-8 only, so
  // such a ref is not watched (found by trigger_fuzz: the fired job could
  // not be encoded).
  auto odd = ParseLsRemote(a + "\trefs/heads/\x8c\x9a/x\n" + b + "\trefs/heads/ok\n");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->size(), 2u);
  watched = WatchedRefs(w, *odd);
  ASSERT_EQ(watched.size(), 1u);
  EXPECT_EQ(watched.begin()->first, "refs/heads/ok");
}

TEST(TriggerTest, TheFiredJobPinsTheWatchedInput) {
  Manifest t = *ParseManifest(
      "command: [scan]\ntimeout: 60\ninputs:\n  - {kind: git, url: /srv/lib, ref: main}\n"
      "  - {kind: git, url: /srv/app, ref: main, nonce: n}\n",
      "job.yaml");
  const std::string c(40, 'd');
  Manifest m = TriggeredManifest(t, "app", "/srv/app", "refs/heads/release", c);
  const auto& in = *m.inputs;
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0], (*t.inputs)[0]);
  EXPECT_EQ(in[1]["commit"], c);
  EXPECT_EQ(in[1]["ref"], "refs/heads/release");
  EXPECT_EQ(in[1]["nonce"], "n");
  EXPECT_EQ(in[2]["kind"], "schedule");
  EXPECT_EQ(in[2]["nonce"], "refs/heads/release@" + c);
  // A template without an input of the url gets one.
  Manifest plain = *ParseManifest("command: [scan]\ntimeout: 60\n", "job.yaml");
  Manifest p = TriggeredManifest(plain, "app", "/srv/app", "HEAD", c);
  ASSERT_EQ(p.inputs->size(), 2u);
  EXPECT_EQ((*p.inputs)[0]["url"], "/srv/app");
  EXPECT_EQ((*p.inputs)[0]["commit"], c);
  // Each (ref, commit) is its own job; the same one the same job.
  EXPECT_NE(JobIdHex(m), JobIdHex(TriggeredManifest(t, "app", "/srv/app", "refs/heads/main", c)));
  EXPECT_EQ(JobIdHex(m),
            JobIdHex(TriggeredManifest(t, "app", "/srv/app", "refs/heads/release", c)));
  // The fired job is a valid manifest.
  EXPECT_TRUE(ParseManifest(ManifestJson(m).dump(), "job.yaml").ok());
}

TEST(TriggerTest, ScheduleYamlWithWatch) {
  auto s = ParseSchedule(
      "name: app\nwatch:\n  - url: /srv/app\n    refs: [refs/heads/main, refs/tags/v*]\npoll: 5s\n"
      "template: {command: [scan], timeout: 60}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->is_trigger());
  EXPECT_EQ(s->poll_ms, 5000);
  ASSERT_EQ(s->watch.size(), 1u);
  EXPECT_EQ(s->watch[0].refs.size(), 2u);
  auto again = ParseSchedule(EncodeSchedule(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *s);
  auto clock = ScheduleClock::Make(*s, TimeZone::Utc());
  ASSERT_TRUE(clock.ok());
  EXPECT_FALSE(clock->Next(0).has_value());
  // The default poll, and one url's refs as a single string.
  auto d = ParseSchedule(
      "name: app\nwatch: [{url: /srv/app, refs: HEAD}]\ntemplate: {command: [x], timeout: 5}\n");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->poll_ms, kDefaultPollMs);
  struct Bad {
    const char* yaml;
    const char* says;
  } bad[] = {
      {"name: a\nwatch: [{url: /srv/app, refs: main}]\ntemplate: {command: [x], timeout: 5}\n",
       "not a full ref name"},
      {"name: a\nwatch: [{url: /srv/app}]\ntemplate: {command: [x], timeout: 5}\n",
       "no ref pattern"},
      {"name: a\nwatch: [{refs: HEAD}]\ntemplate: {command: [x], timeout: 5}\n", "url is missing"},
      {"name: a\nwatch: [{url: /srv/app, refs: HEAD}]\nevery: 1s\ntemplate: {command: [x], "
       "timeout: 5}\n",
       "exactly one of cron and every (or watch"},
      {"name: a\nwatch: [{url: /srv/app, refs: HEAD}]\ncatch_up: all\ntemplate: {command: [x], "
       "timeout: 5}\n",
       "catch_up"},
      {"name: a\nevery: 1s\npoll: 1s\ntemplate: {command: [x], timeout: 5}\n",
       "applies to watch only"},
      {"name: a\nwatch: [{url: /srv/app, refs: HEAD}]\npoll: 2d\ntemplate: {command: [x], timeout: "
       "5}\n",
       "over 1d"},
      {"name: a\nwatch: [{url: /srv/app, refs: HEAD, token: x}]\ntemplate: {command: [x], timeout: "
       "5}\n",
       "not a watch field"},
      {"name: a\nwatch: [{url: /srv/app, refs: HEAD}]\ntemplate: {command: [x], timeout: 5, "
       "inputs: "
       "[{kind: git, url: /srv/app, ref: a}, {kind: git, url: /srv/app, ref: b}]}\n",
       "ambiguous"},
  };
  for (const auto& b : bad) {
    auto r = ParseSchedule(b.yaml);
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_TRUE(Has(r.status().message(), b.says)) << r.status().message();
  }
}

TEST(TriggerTest, PositionsRoundTripAndAreStrict) {
  WatchPositions p{std::string(40, '1'),
                   {{"/srv/app", {{"refs/heads/main", std::string(40, 'a')}}}, {"/srv/b", {}}}};
  auto back = ParseWatchPositions(EncodeWatchPositions(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(ParseWatchPositions("[]").ok());
  EXPECT_FALSE(ParseWatchPositions("{\"schedule_commit\":\"x\",\"refs\":{}}").ok());
  EXPECT_FALSE(ParseWatchPositions("{\"schedule_commit\":\"" + std::string(40, '1') +
                                   "\",\"refs\":{\"/a\":{\"refs/heads/a..b\":\"" +
                                   std::string(40, 'a') + "\"}}}")
                   .ok());
  EXPECT_FALSE(ParseWatchPositions("{\"schedule_commit\":\"" + std::string(40, '1') +
                                   "\",\"refs\":{},\"x\":1}")
                   .ok());
}

}  // namespace
}  // namespace gatos
