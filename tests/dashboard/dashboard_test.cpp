// The dashboard served by a real gatosd over a real ledger: pages and their
// JSON twins, hostile input, read-only routes, the event stream and the
// token. (The browser drives the same pages in browser_test.cpp.)
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "../scan/secrets_for_tests.h"
#include "dashboard_test_util.h"
#include "http_client.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<Stack>();
    ASSERT_TRUE(stack_->Start());
  }
  std::unique_ptr<Stack> stack_;
};

TEST_F(DashboardTest, PagesJsonTwinsEscapingAndReadOnly) {
  stack_->StartWorker(0, {"--sandbox", "off"});
  std::string hostile = stack_->PushJob(kHostileJob);
  std::string plain = stack_->PushJob("command: [\"/bin/echo\", \"hello dashboard\"]\ntimeout: 30\n");
  std::string hhex = hostile.substr(7), phex = plain.substr(7);
  int port = stack_->http_port();
  ASSERT_EQ(WaitForState(port, hhex, "succeeded", 60000), "succeeded");
  ASSERT_EQ(WaitForState(port, phex, "succeeded", 60000), "succeeded");

  // Overview: counts from the writer's stats, the hour's series, workers.
  json ov = GetJson(port, "/overview.json");
  EXPECT_GE(ov["jobs"]["by_state"]["succeeded"].get<int>(), 2);
  EXPECT_EQ(ov["last_hour"]["minutes"].size(), 60u);
  EXPECT_GE(ov["last_hour"]["finished"].get<int>(), 2);
  ASSERT_EQ(ov["workers_active"].size(), 1u);
  std::string principal = ov["workers_active"][0]["principal"];
  EXPECT_EQ(principal.compare(0, 7, "worker-"), 0) << principal;
  HttpReply page = HttpCall(port, "GET", "/");
  EXPECT_EQ(page.code, 200);
  EXPECT_NE(page.body.find("<h1>Overview</h1>"), std::string::npos);
  EXPECT_NE(page.headers["content-security-policy"].find("script-src 'self'"), std::string::npos);

  // Jobs: the index in id order, a prefix search, filters from memory.
  json all = GetJson(port, "/jobs.json");
  EXPECT_EQ(all["source"], "index");
  EXPECT_EQ(all["jobs"].size(), 2u);
  EXPECT_LT(all["jobs"][0]["hex"].get<std::string>(), all["jobs"][1]["hex"].get<std::string>());
  json pre = GetJson(port, "/jobs.json?q=" + phex.substr(0, 6));
  ASSERT_GE(pre["jobs"].size(), 1u);
  EXPECT_EQ(pre["jobs"][0]["hex"], phex);
  json by_worker = GetJson(port, "/jobs.json?state=succeeded&worker=" + principal);
  EXPECT_EQ(by_worker["source"], "window");
  EXPECT_EQ(by_worker["jobs"].size(), 2u);
  json none = GetJson(port, "/jobs.json?state=pending");
  EXPECT_EQ(none["source"], "live");
  EXPECT_EQ(none["jobs"].size(), 0u);
  EXPECT_EQ(HttpCall(port, "GET", "/jobs.json?state=bogus").code, 400);
  HttpReply full = HttpCall(port, "GET", "/jobs?q=blake3:" + phex);
  EXPECT_EQ(full.code, 303);
  EXPECT_EQ(full.headers["location"], "/jobs/" + phex);

  // One job: manifest, timeline, result and the auditor's verdict.
  json job = GetJson(port, "/jobs/" + phex + ".json");
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["manifest"]["command"][1], "hello dashboard");
  std::vector<std::string> events;
  for (const auto& t : job["timeline"]) events.push_back(t["event"]);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front(), "submitted");
  EXPECT_EQ(events[1], "claimed");
  EXPECT_EQ(events.back(), "result: succeeded");
  EXPECT_EQ(job["timeline"][1]["by"]["principal"], principal);
  EXPECT_EQ(job["verification"]["badge"], "verified");
  EXPECT_TRUE(job["verification"]["ok"].get<bool>());
  EXPECT_EQ(job["result"]["stdout"]["text"], "hello dashboard\n");
  bool stdout_listed = false;
  for (const auto& o : job["result"]["outputs"]) {
    if (o["path"] == "stdout") {
      stdout_listed = true;
      EXPECT_EQ(o["size"], 16);
      EXPECT_EQ(o["hash"].get<std::string>().compare(0, 7, "blake3:"), 0);
    }
  }
  EXPECT_TRUE(stdout_listed);
  EXPECT_EQ(GetJson(port, "/jobs/blake3:" + phex + ".json")["hex"], phex);
  EXPECT_EQ(HttpCall(port, "GET", "/jobs/" + std::string(64, '0')).code, 404);
  EXPECT_EQ(HttpCall(port, "GET", "/jobs/../../etc/passwd").code, 404);

  // Hostile manifest, env and stdout: shown as text, never as markup.
  json hj = GetJson(port, "/jobs/" + hhex + ".json");
  EXPECT_EQ(hj["manifest"]["env"]["EVIL"], kHostileEnv);
  EXPECT_NE(hj["result"]["stdout"]["text"].get<std::string>().find("<script>window.__xss=1</script>"),
            std::string::npos);
  for (const std::string& path : {"/jobs/" + hhex, std::string("/jobs"), std::string("/jobs?state=succeeded"),
                                  std::string("/")}) {
    HttpReply h = HttpCall(port, "GET", path);
    ASSERT_EQ(h.code, 200) << path;
    ExpectNoHostileMarkup(h.body, path);
  }
  HttpReply hp = HttpCall(port, "GET", "/jobs/" + hhex);
  EXPECT_NE(hp.body.find("&lt;script&gt;window.__xss=1&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(hp.body.find("&quot;&gt;&lt;img src=x onerror=window.__xss=3&gt;"), std::string::npos);

  // Workers: principal from the policy, last seen from its leases.
  json workers = GetJson(port, "/workers.json");
  bool seen = false;
  for (const auto& w : workers["workers"]) {
    if (w["principal"] == principal) {
      seen = true;
      EXPECT_TRUE(w["last_seen"].is_string());
      EXPECT_EQ(w["finished_since_start"], 2);
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(GetJson(port, "/batches.json")["batches"].size(), 0u);

  // No route changes the ledger: every page, every method; the log head stays.
  stack_->worker(0)->Stop(SIGTERM);
  std::string head = LogHead(stack_->ledger());
  for (const std::string& path : {std::string("/"), std::string("/overview.json"), std::string("/jobs"),
                                  "/jobs/" + phex, "/jobs/" + phex + ".json", std::string("/batches"),
                                  std::string("/workers"), std::string("/metrics")}) {
    EXPECT_EQ(HttpCall(port, "GET", path).code, 200) << path;
    for (const char* m : {"POST", "PUT", "DELETE", "PATCH"}) {
      EXPECT_EQ(HttpCall(port, m, path, {}, "x=1").code, 405) << m << " " << path;
    }
  }
  EXPECT_EQ(HttpRaw(port, "GARBAGE\r\n\r\n").substr(0, 12), "HTTP/1.0 400");
  EXPECT_EQ(LogHead(stack_->ledger()), head);

  // After a restart the window is filled again from the newest log batches:
  // the finished jobs are still found by state and worker.
  stack_->StopGatosd(SIGTERM);
  ASSERT_TRUE(stack_->StartGatosd());
  json again;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    again = GetJson(port, "/jobs.json?state=succeeded&worker=" + principal);
    if (again["jobs"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(again["jobs"].size(), 2u) << again.dump();
}

TEST_F(DashboardTest, EventStreamCarriesEachCommittedBatch) {
  int port = stack_->http_port();
  EventStreamReader events(port, "/events");
  ASSERT_TRUE(events.connected());
  std::string id = stack_->PushJob("command: [\"/bin/true\"]\ntimeout: 30\n");
  std::string hex = id.substr(7);
  // The submit of this job arrives as a log event naming it.
  std::string got = events.ReadUntil("\"job\":\"" + hex + "\"", 30000);
  ASSERT_NE(got.find("\"kind\":\"submit\""), std::string::npos) << got;
  EXPECT_NE(got.find("event: log"), std::string::npos);
  EXPECT_NE(got.find("\nid: "), std::string::npos);
  stack_->StartWorker(0, {"--sandbox", "off"});
  got = events.ReadUntil("\"state\":\"succeeded\"", 60000);
  EXPECT_NE(got.find(hex), std::string::npos) << got;
}

// A page carries the newest event it was rendered after; its stream opened
// with ?after= delivers a change that landed between the render and the
// stream's opening (a stream opened without it starts at the newest).
TEST_F(DashboardTest, APagesEventStreamStartsAtTheEventItWasRenderedAt) {
  int port = stack_->http_port();
  auto seq_of = [&] {
    std::string body = HttpCall(port, "GET", "/").body;
    size_t at = body.find("data-seq=\"");
    EXPECT_NE(at, std::string::npos);
    return at == std::string::npos ? -1 : std::stoll(body.substr(at + 10));
  };
  const int64_t rendered = seq_of();
  ASSERT_GE(rendered, 0);
  std::string hex = stack_->PushJob("command: [\"/bin/true\"]\ntimeout: 30\n").substr(7);
  // The push's event is in the dashboard's ring before the stream opens.
  ASSERT_TRUE(PollFor(30000, [&] { return seq_of() > rendered; }));
  EventStreamReader events(port, "/events?after=" + std::to_string(rendered));
  ASSERT_TRUE(events.connected());
  std::string got = events.ReadUntil("\"job\":\"" + hex + "\"", 30000);
  EXPECT_NE(got.find("\"kind\":\"submit\""), std::string::npos) << got;
  // The page's script opens its stream that way.
  EXPECT_NE(HttpCall(port, "GET", "/static/app.js").body.find("'/events?after=' + seq"), std::string::npos);
}

// Pools and submitters' usage against their limits, as the scheduler sees
// them: a paused pool with a job waiting, a pool nobody serves, a limit.
TEST_F(DashboardTest, PoolsPageShowsDepthPausedPoolsAndUsageAgainstLimits) {
  int port = stack_->http_port();
  ASSERT_EQ(stack_->Gatos({"pool", "pause", "default", "--ledger", stack_->ledger()}).exit_code, 0);
  ASSERT_EQ(stack_->Gatos({"policy", "limits", "--ledger", stack_->ledger(), "--default", "--max-pending", "50"}).exit_code,
            0);
  stack_->PushJob("command: [\"/bin/true\"]\ntimeout: 30\n");
  stack_->PushJob("command: [\"/bin/true\"]\npool: gpu\ntimeout: 30\n");
  json pools;
  auto pool = [&](const std::string& name) {
    for (const auto& p : pools["pools"]) {
      if (p["pool"] == name) return p;
    }
    return json::object();  // not listed yet: value() then gives its default
  };
  ASSERT_TRUE(PollFor(10000, [&] {
    pools = GetJson(port, "/pools.json");
    return pool("default").value("pending", 0) == 1 && pool("gpu").value("pending", 0) == 1;
  })) << pools.dump();
  EXPECT_EQ(pool("default")["paused"], true);
  EXPECT_EQ(pool("gpu")["paused"], false);
  EXPECT_EQ(pool("gpu")["workers"], 0);
  ASSERT_EQ(pools["submitters"].size(), 1u) << pools.dump();
  EXPECT_EQ(pools["submitters"][0]["pending"], 2);
  EXPECT_EQ(pools["submitters"][0]["max_pending"], 50);
  EXPECT_EQ(pools["submitters"][0]["principal"].get<std::string>().rfind("submitter-", 0), 0u) << pools.dump();
  HttpReply page = HttpCall(port, "GET", "/pools");
  ASSERT_EQ(page.code, 200);
  EXPECT_NE(page.body.find("<b>paused</b>"), std::string::npos);
  EXPECT_NE(page.body.find("no worker serves this pool"), std::string::npos);
  EXPECT_NE(page.body.find("2 / 50"), std::string::npos);
  EXPECT_NE(page.body.find("href=\"/pools\">Pools</a>"), std::string::npos);
}

// A batch of secret scans: progress per batch and per repository, and each
// job's findings, one row per distinct secret (rule, fingerprint, locations,
// first and last commit, at tip, paths), with no secret on any page.
TEST_F(DashboardTest, BatchProgressAndScanFindingsWithoutSecrets) {
  std::string repos_dir = stack_->dir().Join("repos");
  RunOptions ro;
  ro.env = stack_->env();
  testing::Run({"mkdir", "-p", repos_dir}, ro);
  scan::testing::SecretMaker maker(11);
  std::string secret = maker.Aws();
  std::string repo = repos_dir + "/repo<b>0</b>";
  ASSERT_EQ(testing::Run({"git", "init", "-q", "-b", "main", repo}, ro).exit_code, 0);
  WriteFile(repo + "/config.env", "TOKEN=" + secret + "\n");
  RunOptions in_repo = ro;
  in_repo.cwd = repo;
  testing::Run({"git", "add", "."}, in_repo);
  ASSERT_EQ(testing::Run({"git", "commit", "-q", "-m", "add config"}, in_repo).exit_code, 0);
  WriteFile(stack_->dir().Join("repos.txt"), repo + "\n" + repos_dir + "/missing-repo\n");
  WriteFile(stack_->dir().Join("scan.yaml"), "command: [\"gatos-scan\"]\nargs: [\"--repo\", \"{{repo}}\"]\ntimeout: 120\n");
  stack_->StartWorker(0, {"--ro-bind", repos_dir});
  RunResult b = stack_->Gatos({"batch", "submit", "--template", stack_->dir().Join("scan.yaml"), "--repos",
                               stack_->dir().Join("repos.txt"), "--ledger", stack_->ledger(), "--sign-key",
                               stack_->submitter_key()});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::string batch = b.out.substr(0, b.out.find('\n'));
  std::string hex = batch.substr(7);
  int port = stack_->http_port();
  json list = GetJson(port, "/batches.json");
  ASSERT_EQ(list["batches"].size(), 1u);
  EXPECT_EQ(list["batches"][0]["hex"], hex);
  EXPECT_EQ(list["batches"][0]["repositories"], 2);
  // Wait for both jobs through the batch page itself.
  json detail;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    detail = GetJson(port, "/batches/" + hex + ".json");
    if (detail["by_state"].value("succeeded", 0) + detail["by_state"].value("failed", 0) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(detail["by_state"].value("succeeded", 0), 1) << detail.dump();
  EXPECT_EQ(detail["by_state"].value("failed", 0), 1);
  std::string scan_job;
  for (const auto& row : detail["rows"]) {
    if (row["repo"] == repo) {
      EXPECT_EQ(row["state"], "succeeded");
      scan_job = row["hex"];
    }
  }
  ASSERT_FALSE(scan_job.empty()) << detail.dump();
  json job = GetJson(port, "/jobs/" + scan_job + ".json");
  ASSERT_TRUE(job.contains("findings")) << job.dump().substr(0, 2000);
  ASSERT_EQ(job["findings"]["rows"].size(), 1u);
  const json& f = job["findings"]["rows"][0];
  EXPECT_EQ(job["findings"]["count"], 1);
  EXPECT_EQ(job["findings"]["locations"], 1);
  EXPECT_EQ(f["rule"], "aws-access-token");
  EXPECT_EQ(f["paths"], "config.env");
  EXPECT_EQ(f["locations"], 1);
  EXPECT_EQ(f["at_tip"], true);
  EXPECT_EQ(f["first_commit"], f["last_commit"]);
  EXPECT_EQ(f["first_commit"].get<std::string>().size(), 40u);
  EXPECT_FALSE(f["fingerprint"].get<std::string>().empty());
  for (const std::string& path : {std::string("/batches"), std::string("/batches.json"), "/batches/" + hex, "/batches/" + hex + ".json",
                                  "/jobs/" + scan_job, "/jobs/" + scan_job + ".json", std::string("/jobs")}) {
    HttpReply r = HttpCall(port, "GET", path);
    ASSERT_EQ(r.code, 200) << path;
    EXPECT_EQ(r.body.find(secret), std::string::npos) << "a secret on " << path;
    if (r.headers["content-type"].rfind("text/html", 0) == 0) {  // JSON twins carry the name as a JSON string
      EXPECT_EQ(r.body.find("<b>0</b>"), std::string::npos) << "a repository name as markup on " << path;
    } else {
      EXPECT_EQ(r.headers["content-type"], "application/json") << path;
    }
  }
}

TEST_F(DashboardTest, TokenRequiredOffLoopbackAndNeverLogged) {
  stack_->StopGatosd(SIGTERM);
  // Off loopback without a token: refuses to start, says why.
  RunOptions ro;
  ro.env = stack_->env();
  ro.timeout_seconds = 30;
  RunResult r = testing::Run({BinaryPath("gatosd"), "serve", "--ledger", stack_->ledger(), "--nats", stack_->nats_url(),
                     "--http", "0.0.0.0:0"},
                    ro);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("refusing to serve the dashboard without a token"), std::string::npos) << r.err;

  std::string token = "tok-" + std::string(28, 'z') + "-e2e";
  WriteFile(stack_->dir().Join("token"), token + "\n", 0600);
  int port = FreePort();
  ChildProcess gatosd;
  std::string error;
  ASSERT_TRUE(gatosd.Start({BinaryPath("gatosd"), "serve", "--ledger", stack_->ledger(), "--nats",
                            stack_->nats_url(), "--http", "127.0.0.1:" + std::to_string(port),
                            "--http-token-file", stack_->dir().Join("token")},
                           stack_->env(), stack_->dir().Join("gatosd-token.log"), &error))
      << error;
  ASSERT_TRUE(gatosd.WaitForLog("serving ledger", 20000)) << gatosd.log();
  EXPECT_EQ(HttpCall(port, "GET", "/overview.json").code, 401);
  EXPECT_EQ(HttpCall(port, "GET", "/metrics").code, 401);
  EXPECT_EQ(HttpCall(port, "GET", "/events").code, 401);
  int health = HttpCall(port, "GET", "/healthz").code;  // no data: open (503 until the first sweep)
  EXPECT_TRUE(health == 200 || health == 503) << health;
  HttpReply ok = HttpCall(port, "GET", "/overview.json", {{"Authorization", "Bearer " + token}});
  EXPECT_EQ(ok.code, 200);
  EXPECT_TRUE(json::parse(ok.body)["jobs"].is_object());
  HttpReply login = HttpCall(port, "POST", "/login", {{"Content-Type", "application/x-www-form-urlencoded"}},
                             "token=" + token);
  ASSERT_EQ(login.code, 303);
  std::string cookie = login.headers["set-cookie"].substr(0, login.headers["set-cookie"].find(';'));
  EXPECT_EQ(HttpCall(port, "GET", "/jobs", {{"Cookie", cookie}}).code, 200);
  gatosd.Stop(SIGTERM);
  EXPECT_EQ(gatosd.log().find(token), std::string::npos);
  EXPECT_NE(gatosd.log().find("bearer token required"), std::string::npos);
}

}  // namespace
}  // namespace gatos::testing
