// The dashboard in a real headless Chromium (Debian's chromium, driven by
// chromium-driver over the W3C WebDriver protocol; both installed by
// scripts/install-deps.sh): the overview, a job opened from the list with
// its timeline and verification badge, hostile text that must not run, and
// a pending job that turns succeeded on screen without a reload (server-sent
// events). Screenshots go to <build>/dashboard-screenshots/.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "child_process.h"
#include "dashboard_test_util.h"
#include "gatos/model/encoding.h"
#include "http_client.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

constexpr char kChromium[] = "/usr/bin/chromium";
constexpr char kChromedriver[] = "/usr/bin/chromedriver";
constexpr char kElementKey[] = "element-6066-11e4-a52e-4f735466cecf";

bool Exists(const char* path) {
  struct stat st;
  return ::stat(path, &st) == 0;
}

// A WebDriver session on a chromedriver child process.
class Browser {
 public:
  explicit Browser(TempDir* dir) : dir_(dir) {}
  ~Browser() {
    if (!session_.empty()) Call("DELETE", "/session/" + session_, json());
    if (driver_.running()) driver_.Stop(SIGTERM, 5000);
  }

  ::testing::AssertionResult Start() {
    port_ = FreePort();
    std::string error;
    if (!driver_.Start({kChromedriver, "--port=" + std::to_string(port_)}, {},
                       dir_->Join("chromedriver.log"), &error)) {
      return ::testing::AssertionFailure() << error;
    }
    // Ready when /status says so (bounded wait, polled).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      HttpReply r = HttpCall(port_, "GET", "/status", {}, "", 2000);
      json j = json::parse(r.body, nullptr, false);
      if (r.code == 200 && j.is_object() && j["value"].value("ready", false)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return ::testing::AssertionFailure() << "chromedriver not ready:\n" << driver_.log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    json caps = {
        {"capabilities",
         {{"alwaysMatch",
           {{"browserName", "chrome"},
            {"goog:chromeOptions",
             {{"binary", kChromium},
              {"args",
               {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1280,1100",
                "--user-data-dir=" + dir_->Join("chromium-profile")}}}}}}}}};
    json r = Call("POST", "/session", caps, 120000);
    if (!r.is_object() || !r["value"].is_object() || !r["value"].contains("sessionId")) {
      return ::testing::AssertionFailure() << "new session: " << r.dump() << "\n" << driver_.log();
    }
    session_ = r["value"]["sessionId"];
    return ::testing::AssertionSuccess();
  }

  void Go(const std::string& url) { S("POST", "/url", {{"url", url}}); }
  std::string Url() { return S("GET", "/url", json())["value"].get<std::string>(); }
  std::string Title() { return S("GET", "/title", json())["value"].get<std::string>(); }
  // The element's id, "" when none matches.
  std::string Find(const std::string& css) {
    json r = Call("POST", "/session/" + session_ + "/element",
                  {{"using", "css selector"}, {"value", css}});
    if (!r.is_object() || !r["value"].is_object() || !r["value"].contains(kElementKey)) return "";
    return r["value"][kElementKey];
  }
  // The element's text. A live page replaces nodes when a log batch lands,
  // so an element found a moment ago can be gone ("stale element
  // reference"): then it is found again (a bounded number of times).
  std::string Text(const std::string& css) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      std::string e = Find(css);
      if (e.empty()) return "";
      json r = Call("GET", "/session/" + session_ + "/element/" + e + "/text", json());
      if (r.is_object() && r["value"].is_string()) return r["value"].get<std::string>();
      bool stale = r.is_object() && r["value"].is_object() &&
                   r["value"].value("error", "") == "stale element reference";
      if (!stale) {
        ADD_FAILURE() << "GET text of " << css << ": "
                      << (r.is_object() ? r.dump().substr(0, 500) : "no reply");
        return "";
      }
    }
    ADD_FAILURE() << css << " was replaced 20 times in a row while reading its text";
    return "";
  }
  void Click(const std::string& css) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      std::string e = Find(css);
      ASSERT_FALSE(e.empty()) << "no element " << css;
      json r = Call("POST", "/session/" + session_ + "/element/" + e + "/click", json::object());
      bool stale = r.is_object() && r["value"].is_object() &&
                   r["value"].value("error", "") == "stale element reference";
      if (stale) continue;  // replaced by a live update: find it again
      EXPECT_TRUE(r.is_object() && !(r["value"].is_object() && r["value"].contains("error")))
          << "click " << css << ": " << (r.is_object() ? r.dump().substr(0, 500) : "no reply");
      return;
    }
    ADD_FAILURE() << css << " was replaced 20 times in a row while clicking it";
  }
  json Execute(const std::string& script) {
    return S("POST", "/execute/sync", {{"script", script}, {"args", json::array()}})["value"];
  }
  // Polls `css`'s text until it contains `want` (bounded), returns the last text.
  std::string WaitForText(const std::string& css, const std::string& want, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string text;
    while (std::chrono::steady_clock::now() < deadline) {
      text = Text(css);
      if (text.find(want) != std::string::npos) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return text;
  }
  void Screenshot(const std::string& name) {
    json r = S("GET", "/screenshot", json());
    ASSERT_TRUE(r["value"].is_string());
    auto png = Base64Decode(r["value"].get<std::string>());
    ASSERT_TRUE(png.ok());
    std::string dir = std::string(GATOS_BINARY_DIR) + "/dashboard-screenshots";
    ::mkdir(dir.c_str(), 0755);
    WriteFile(dir + "/" + name, std::string(png->begin(), png->end()));
  }

 private:
  json S(const std::string& method, const std::string& path, const json& body) {
    json r = Call(method, "/session/" + session_ + path, body);
    EXPECT_TRUE(r.is_object() && !(r["value"].is_object() && r["value"].contains("error")))
        << method << " " << path << ": " << r.dump().substr(0, 500);
    return r.is_object() ? r : json{{"value", nullptr}};
  }
  json Call(const std::string& method, const std::string& path, const json& body,
            int timeout_ms = 60000) {
    HttpReply r = HttpCall(port_, method, path, {{"Content-Type", "application/json"}},
                           body.is_null() ? "" : body.dump(), timeout_ms);
    return json::parse(r.body, nullptr, false);
  }

  TempDir* dir_;
  ChildProcess driver_;
  int port_ = 0;
  std::string session_;
};

TEST(DashboardBrowser, OverviewJobDetailEscapingAndLiveUpdate) {
  ASSERT_TRUE(Exists(kChromium) && Exists(kChromedriver))
      << "the browser tests need Debian's chromium and chromium-driver: run "
         "scripts/install-deps.sh";
  Stack stack;
  ASSERT_TRUE(stack.Start());
  int port = stack.http_port();
  std::string base = "http://127.0.0.1:" + std::to_string(port);

  // A finished job with hostile text everywhere, then a pending one.
  stack.StartWorker(0, {"--sandbox", "off"});
  std::string hostile = stack.PushJob(kHostileJob).substr(7);
  ASSERT_EQ(WaitForState(port, hostile, "succeeded", 60000), "succeeded");
  stack.worker(0)->Stop(SIGTERM);
  std::string pending =
      stack.PushJob("command: [\"/bin/echo\", \"turned green live\"]\ntimeout: 30\n").substr(7);
  ASSERT_EQ(WaitForState(port, pending, "pending", 30000), "pending");

  Browser b(&stack.dir());
  ASSERT_TRUE(b.Start());

  // Overview.
  b.Go(base + "/");
  EXPECT_NE(b.Title().find("Overview"), std::string::npos);
  EXPECT_EQ(b.Text("#count-succeeded"), "1");
  EXPECT_EQ(b.Text("#count-pending"), "1");
  EXPECT_EQ(b.WaitForText("#live", "live", 20000), "live");  // the event stream is open
  b.Screenshot("overview.png");

  // Open the hostile job from the list.
  b.Go(base + "/jobs");
  b.Click("a[href=\"/jobs/" + hostile + "\"]");
  EXPECT_EQ(b.Url(), base + "/jobs/" + hostile);
  std::string timeline = b.Text("#timeline");
  EXPECT_NE(timeline.find("submitted"), std::string::npos) << timeline;
  EXPECT_NE(timeline.find("claimed"), std::string::npos) << timeline;
  EXPECT_NE(timeline.find("result: succeeded"), std::string::npos) << timeline;
  EXPECT_EQ(b.Text("#verify-badge"), "verified");
  // Its text is shown as text, and none of it ran.
  EXPECT_NE(b.Text("#stdout").find("<script>window.__xss=1</script>"), std::string::npos);
  EXPECT_NE(b.Text("#manifest-command").find("onerror=window.__xss=2"), std::string::npos);
  json probe =
      b.Execute("return [typeof window.__xss, document.images.length, document.scripts.length];");
  EXPECT_EQ(probe, json::array({"undefined", 0, 1}));
  b.Screenshot("job.png");

  // The pending job turns succeeded on screen, without a reload.
  b.Go(base + "/jobs/" + pending);
  EXPECT_EQ(b.Text("#job-state"), "pending");
  EXPECT_EQ(b.WaitForText("#live", "live", 20000), "live");
  b.Execute("window.__sameDocument = 42; return null;");
  stack.StartWorker(0, {"--sandbox", "off"});
  EXPECT_EQ(b.WaitForText("#job-state", "succeeded", 90000), "succeeded");
  EXPECT_EQ(b.Execute("return window.__sameDocument;"), 42);  // the same page, updated in place
  EXPECT_EQ(b.WaitForText("#verify-badge", "verified", 10000), "verified");
  EXPECT_NE(b.Text("#stdout").find("turned green live"), std::string::npos);
  b.Screenshot("job-live.png");

  b.Go(base + "/workers");
  EXPECT_NE(b.Text("#workers").find("worker-"), std::string::npos);
  b.Screenshot("workers.png");
}

TEST(DashboardBrowser, ARunningJobsPageTailsItsOutputLive) {
  ASSERT_TRUE(Exists(kChromium) && Exists(kChromedriver))
      << "the browser tests need Debian's chromium and chromium-driver: run "
         "scripts/install-deps.sh";
  Stack stack;
  ASSERT_TRUE(stack.Start());
  int port = stack.http_port();
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  stack.StartWorker(0, {"--sandbox", "off"});
  // Prints a line every 0.1 s, hostile text in each, until the test says
  // stop (the tail starts when the page opens: live output is not replayed,
  // so a fixed number of lines would race a slow browser start).
  const std::string stop = stack.dir().Join("stop-tailing");
  std::string job =
      stack
          .PushJob(
              "command: [\"/bin/sh\", \"-c\", \"i=0; while [ ! -e " + stop +
              " ]; do i=$((i+1)); echo tail-line $i '<img src=x onerror=window.__xss=3>'; sleep 0.1; done; "
              "echo tail-done after $i\"]\ntimeout: 300\n")
          .substr(7);
  ASSERT_EQ(WaitForState(port, job, "claimed", 30000), "claimed");

  Browser b(&stack.dir());
  ASSERT_TRUE(b.Start());
  b.Go(base + "/jobs/" + job);
  std::string tail = b.WaitForText("#live-output", "tail-line ", 30000);
  ASSERT_NE(tail.find("tail-line "), std::string::npos) << tail;
  EXPECT_EQ(b.Text("#job-state"), "claimed");  // shown while it runs
  EXPECT_NE(tail.find("<img src=x onerror=window.__xss=3>"), std::string::npos) << tail;
  json probe =
      b.Execute("return [typeof window.__xss, document.images.length, document.scripts.length];");
  EXPECT_EQ(probe, json::array({"undefined", 0, 1}));
  b.Screenshot("job-tail.png");
  // It keeps growing: a line printed after the page first showed the tail.
  auto last_line = [](const std::string& text) {
    int last = 0;
    for (size_t at = text.find("tail-line "); at != std::string::npos; at = text.find("tail-line ", at + 1)) {
      last = std::max(last, std::atoi(text.c_str() + at + 10));
    }
    return last;
  };
  const int first = last_line(tail);
  ASSERT_GT(first, 0) << tail;
  const std::string later = "tail-line " + std::to_string(first + 10) + " ";
  EXPECT_NE(b.WaitForText("#live-output", later, 60000).find(later), std::string::npos);
  // Told to stop, the job ends and the page turns to the result.
  WriteFile(stop, "");
  EXPECT_EQ(b.WaitForText("#job-state", "succeeded", 60000), "succeeded");
  EXPECT_NE(b.WaitForText("#stdout", "tail-done after", 10000).find("tail-done after"), std::string::npos);
  EXPECT_EQ(b.Find("#live-output"), "");  // the result replaced the live view
}

}  // namespace
}  // namespace gatos::testing
