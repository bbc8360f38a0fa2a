// The dashboard's pieces without processes: request parsing, escaping,
// the token, the secondary index and the time series.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dashboard.h"
#include "dashboard_html.h"
#include "dashboard_state.h"
#include "gatos/model/clock.h"
#include "http.h"
#include "metrics.h"
#include "test_util.h"

namespace gatos::gatosd {
namespace {

using nlohmann::json;

TEST(HttpParse, RequestLineHeadersQueryAndBody) {
  auto r = ParseHttpRequest("GET /jobs/ab%20c?state=failed&q=1 HTTP/1.1\r\nHost: x\r\nX-Thing:  v  \r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path, "/jobs/ab c");
  EXPECT_EQ(r->query, "state=failed&q=1");
  EXPECT_EQ(r->header("host"), "x");
  EXPECT_EQ(r->header("x-thing"), "v");
  auto post = ParseHttpRequest("POST /login HTTP/1.0\r\nContent-Length: 7\r\n\r\ntoken=a");
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->body, "token=a");
}

TEST(HttpParse, IncompleteIsUnavailableAndGarbageIsInvalid) {
  EXPECT_EQ(ParseHttpRequest("GET / HTTP/1.1\r\nHost: x\r\n").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(ParseHttpRequest("POST /login HTTP/1.0\r\nContent-Length: 9\r\n\r\nab").status().code(),
            StatusCode::kUnavailable);
  for (std::string bad : {std::string("GET\r\n\r\n"), std::string("GET  / HTTP/1.1\r\n\r\n"),
                          std::string("GET http://x/ HTTP/1.1\r\n\r\n"), std::string("GET / HTTP/2\r\n\r\n"),
                          std::string("GET /%0a HTTP/1.1\r\n\r\n"), std::string("GET /%zz HTTP/1.1\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nNo colon\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
                          std::string("GET /\x80 HTTP/1.1\r\n\r\n"), std::string(9000, 'a')}) {
    EXPECT_EQ(ParseHttpRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad.substr(0, 40);
  }
}

TEST(HttpParse, QueryDecoding) {
  auto q = ParseQuery("a=1&b=%3Cx%3E+y&a=2&flag&c=%zz&=empty");
  EXPECT_EQ(q["a"], "1");
  EXPECT_EQ(q["b"], "<x> y");
  EXPECT_EQ(q["flag"], "");
  EXPECT_EQ(q["c"], "%zz");
  EXPECT_EQ(PercentEncode("a b/<"), "a%20b%2F%3C");
}

TEST(HttpAddress, LoopbackOrNot) {
  EXPECT_TRUE(*IsLoopbackAddress("127.0.0.1:80"));
  EXPECT_TRUE(*IsLoopbackAddress("127.9.9.9:0"));
  EXPECT_TRUE(*IsLoopbackAddress("localhost:8080"));
  EXPECT_FALSE(*IsLoopbackAddress("0.0.0.0:8080"));
  EXPECT_FALSE(*IsLoopbackAddress("10.1.2.3:8080"));
  EXPECT_FALSE(IsLoopbackAddress("nonsense").ok());
}

TEST(HtmlEscape, HostileTextIsInert) {
  EXPECT_EQ(HtmlEscape("<script>alert(\"x\")</script>"), "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("a'b&c"), "a&#39;b&amp;c");
  EXPECT_EQ(HtmlEscape(std::string("x\xff\xfey")), "x\xEF\xBF\xBD\xEF\xBF\xBDy");
  EXPECT_EQ(HtmlEscape(std::string("a\x1b[31m\nb")), "a\xEF\xBF\xBD[31m\nb");
}

TEST(HtmlRender, PagesEscapeEveryLedgerString) {
  std::string evil = "\"><script>window.__xss=1</script><img src=x onerror=alert(1)>";
  json row = {{"job", "blake3:" + std::string(64, 'a')}, {"hex", std::string(64, 'a')}, {"name", evil},
              {"state", evil}, {"submitter", {{"key", evil}, {"principal", evil}}}, {"worker", nullptr},
              {"submitted", evil}, {"finished", nullptr}, {"attempt", 1}};
  json jobs = {{"filters", {{"state", evil}, {"submitter", evil}, {"worker", ""}, {"since", ""}, {"until", ""}, {"q", evil}}},
               {"errors", json::array({evil})}, {"source", "index"}, {"covers", evil}, {"scanned", 1},
               {"jobs", json::array({row})}, {"next", "/jobs?after=" + evil}, {"first_page", false}};
  std::string html = RenderPageHtml(evil, "jobs", jobs);
  // The only script element is ours, and nothing hostile is markup.
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;window.__xss=1&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("<script src=\"/static/app.js\" defer></script>"), std::string::npos);
}

TEST(Token, LoadedTrimmedAndCheckedWithoutEchoingIt) {
  testing::TempDir dir;
  testing::WriteFile(dir.Join("t"), "  s3cret-token-0123456789\n");
  auto t = LoadHttpToken(dir.Join("t"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "s3cret-token-0123456789");
  testing::WriteFile(dir.Join("short"), "tooshort\n");
  auto s = LoadHttpToken(dir.Join("short"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("tooshort"), std::string::npos);
  testing::WriteFile(dir.Join("space"), "has a space in the token\n");
  EXPECT_FALSE(LoadHttpToken(dir.Join("space")).ok());
  EXPECT_FALSE(LoadHttpToken(dir.Join("missing")).ok());
}

HttpRequest Get(const std::string& path, std::map<std::string, std::string> headers = {}) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  r.headers = std::move(headers);
  return r;
}

TEST(DashboardAuth, TokenBearerCookieAndReadOnly) {
  LiveState live;
  Metrics metrics;
  Dashboard d({"/nonexistent", "correct-horse-battery-staple"}, &live, &metrics);
  EXPECT_EQ(d.Handle(Get("/metrics")).code, 401);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"authorization", "Bearer wrong-token-wrong-token"}})).code, 401);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"authorization", "Bearer correct-horse-battery-staple"}})).code, 200);
  EXPECT_EQ(d.Handle(Get("/static/app.js")).code, 200);  // no data in it
  HttpRequest login = Get("/login");
  login.method = "POST";
  login.body = "token=wrong";
  EXPECT_EQ(d.Handle(login).code, 401);
  login.body = "token=correct-horse-battery-staple";
  HttpResponse ok = d.Handle(login);
  ASSERT_EQ(ok.code, 303);
  std::string cookie;
  for (const auto& [k, v] : ok.headers) {
    if (k == "Set-Cookie") cookie = v.substr(0, v.find(';'));
  }
  ASSERT_FALSE(cookie.empty());
  EXPECT_EQ(cookie.find("correct-horse"), std::string::npos);  // the cookie is not the token
  EXPECT_NE(ok.headers.back().second.find("HttpOnly"), std::string::npos);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"cookie", "a=b; " + cookie}})).code, 200);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"cookie", cookie + "x"}})).code, 401);
  for (const char* m : {"POST", "PUT", "DELETE", "PATCH"}) {
    HttpRequest r = Get("/jobs");
    r.method = m;
    r.headers["authorization"] = "Bearer correct-horse-battery-staple";
    EXPECT_EQ(d.Handle(r).code, 405) << m;
  }
}

TEST(DashboardAuth, WithoutTokenOnlyLoopbackHostNames) {
  LiveState live;
  Metrics metrics;
  Dashboard d({"/nonexistent", ""}, &live, &metrics);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"host", "127.0.0.1:8080"}})).code, 200);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"host", "localhost:8080"}})).code, 200);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"host", "[::1]:8080"}})).code, 200);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"host", "evil.example:8080"}})).code, 421);
  EXPECT_EQ(d.Handle(Get("/metrics", {{"host", "127.0.0.1.evil.example"}})).code, 421);
  EXPECT_EQ(d.Handle(Get("/nope")).code, 404);
  // Pages that need the ledger fail cleanly without one.
  EXPECT_EQ(d.Handle(Get("/jobs")).code, 500);
}

JobRecord Rec(int i, const std::string& submitter, const std::string& worker, bool done, int64_t t) {
  JobRecord r;
  char hex[65];
  std::snprintf(hex, sizeof hex, "%064x", i);
  r.job_hex = hex;
  r.job_commit = std::string(40, 'c');
  r.submitter_hex = submitter;
  r.submitted_ms = t;
  if (!worker.empty()) {
    r.epoch = 1;
    r.lease_commit = std::string(40, 'l');
    r.claims[worker] = r.lease_commit;
    r.expires_ms = t + 3600000;
    if (done) {
      r.result_commit = std::string(40, 'r');
      r.result_status = "succeeded";
      r.finished_ms = t + 10;
    } else {
      r.worker_hex = worker;
    }
  }
  return r;
}

TEST(LiveStateIndex, FiltersPagesAndEvictsFinishedJobsOnly) {
  LiveState s(/*window=*/10);
  std::string alice(64, 'a'), bob(64, 'b'), w1(64, '1'), w2(64, '2');
  int64_t t0 = SystemNowMs();
  // 5 pending, 5 claimed by w1, 20 finished (w2), submitted one ms apart.
  int n = 0;
  for (int i = 0; i < 5; ++i, ++n) s.Note(Rec(n, alice, "", false, t0 + n), n + 1, t0);
  for (int i = 0; i < 5; ++i, ++n) s.Note(Rec(n, bob, w1, false, t0 + n), n + 1, t0);
  for (int i = 0; i < 20; ++i, ++n) s.Note(Rec(n, i % 2 ? alice : bob, w2, true, t0 + n), n + 1, t0);
  EXPECT_EQ(s.live_size(), 10u);
  EXPECT_EQ(s.window_size(), 10u);         // the 10 newest changes of finished jobs
  EXPECT_EQ(s.evicted_watermark(), 20);    // the last evicted changed at seq 20

  JobQuery q;
  q.state = "claimed";
  JobPage p = s.Live(q);
  ASSERT_EQ(p.jobs.size(), 5u);
  EXPECT_EQ(p.jobs[0].worker_hex, w1);
  q = {};
  q.worker_hex = w1;
  q.limit = 2;
  p = s.Live(q);
  ASSERT_EQ(p.jobs.size(), 2u);
  ASSERT_FALSE(p.next.empty());
  q.cursor = p.next;
  JobPage p2 = s.Live(q);
  ASSERT_EQ(p2.jobs.size(), 2u);
  EXPECT_GT(p2.jobs[0].job_hex, p.jobs[1].job_hex);

  q = {};
  q.state = "succeeded";
  q.submitter_hex = alice;
  p = s.Recent(q);
  ASSERT_EQ(p.jobs.size(), 5u);  // alice's finished jobs still in the window
  EXPECT_GT(p.jobs[0].submitted_ms, p.jobs[4].submitted_ms);  // newest first
  EXPECT_EQ(p.jobs[0].worker_hex, w2);  // the worker of a finished job is kept
  q = {};
  q.since_ms = t0 + 27;
  p = s.Recent(q);
  EXPECT_EQ(p.jobs.size(), 3u);
  q = {};
  q.until_ms = t0 + 3;
  p = s.Recent(q);
  EXPECT_EQ(p.jobs.size(), 3u);  // 0, 1, 2 (pending ones stay in memory)
  auto workers = s.Workers();
  bool found = false;
  for (const auto& w : workers) {
    if (w.key_hex == w1) {
      found = true;
      EXPECT_EQ(w.running, 5u);
    }
  }
  EXPECT_TRUE(found);
}

TEST(LiveStateIndex, BackfillNeverReplacesNewerChangesAndStopsWhenFull) {
  LiveState s(/*window=*/2);
  std::string alice(64, 'a'), w(64, '2');
  int64_t t0 = SystemNowMs();
  JobRecord newer = Rec(1, alice, w, true, t0);
  newer.result_status = "failed";
  s.Note(newer, 100, t0);
  EXPECT_TRUE(s.Backfilled(Rec(1, alice, w, true, t0), 5, t0, t0));  // held: kept as it is
  EXPECT_EQ(s.Find(newer.job_hex)->state, JobState::kFailed);
  EXPECT_TRUE(s.Backfilled(Rec(2, alice, "", false, t0), 5, t0, t0));  // live: not from the backfill
  EXPECT_FALSE(s.Find(Rec(2, alice, "", false, t0).job_hex).has_value());
  EXPECT_TRUE(s.Backfilled(Rec(3, alice, w, true, t0), 4, t0, t0));
  EXPECT_FALSE(s.Backfilled(Rec(4, alice, w, true, t0), 3, t0, t0));  // full
  EXPECT_EQ(s.window_size(), 2u);
}

TEST(MetricsSeries, CountsPerMinuteForTheLastHour) {
  Metrics m;
  int64_t now = 1'800'000'000'000;
  m.CountSeries("succeeded", 3, now);
  m.CountSeries("succeeded", 1, now - 60000);
  m.CountSeries("succeeded", 7, now - 3600000);  // more than an hour ago: not shown
  auto s = m.Series(now);
  ASSERT_EQ(s.size(), 60u);
  EXPECT_EQ(s.back().counts["succeeded"], 3u);
  EXPECT_EQ(s[58].counts["succeeded"], 1u);
  uint64_t total = 0;
  for (auto& p : s) total += p.counts["succeeded"];
  EXPECT_EQ(total, 4u);
}

}  // namespace
}  // namespace gatos::gatosd
