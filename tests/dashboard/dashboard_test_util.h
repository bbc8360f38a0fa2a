// Shared by the dashboard's process tests: a hostile job, JSON fetches,
// waiting for a job's state, reading an event stream.
//
// Thread-safety: use from the test's thread.
#ifndef GATOS_TESTS_DASHBOARD_DASHBOARD_TEST_UTIL_H_
#define GATOS_TESTS_DASHBOARD_DASHBOARD_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace gatos::testing {

// A job whose command, env and stdout are markup: a page that ran any of
// it would set window.__xss or load an image.
inline constexpr char kHostileJob[] = R"Y(command: ["/bin/sh", "-c", "echo '<script>window.__xss=1</script>'; echo '\"><img src=x onerror=window.__xss=2>'"]
env:
  EVIL: "\"><img src=x onerror=window.__xss=3>"
timeout: 30
)Y";
inline constexpr char kHostileEnv[] = "\"><img src=x onerror=window.__xss=3>";

// GET path; a test failure unless it is 200 with JSON.
nlohmann::json GetJson(int port, const std::string& path);
// Polls /jobs/<hex>.json until its state is `want` or timeout_ms passed;
// returns the last state seen.
std::string WaitForState(int port, const std::string& hex, const std::string& want, int timeout_ms);
// refs/gatos/log of the ledger (git rev-parse).
std::string LogHead(const std::string& ledger);
// No hostile markup in a page: no <script> but ours, no <img>, every
// onerror inside escaped text.
void ExpectNoHostileMarkup(const std::string& html, const std::string& what);

// A raw connection to a server-sent event stream.
class EventStreamReader {
 public:
  EventStreamReader(int port, const std::string& path);
  ~EventStreamReader();
  bool connected() const { return fd_ >= 0; }
  // Reads until the text received holds `needle` (returns all of it) or
  // timeout_ms passed (returns what came).
  std::string ReadUntil(const std::string& needle, int timeout_ms);

 private:
  int fd_ = -1;
  std::string buf_;
  size_t consumed_ = 0;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_DASHBOARD_DASHBOARD_TEST_UTIL_H_
