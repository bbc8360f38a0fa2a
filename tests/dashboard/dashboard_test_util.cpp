#include "dashboard_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "http_client.h"
#include "test_util.h"

namespace gatos::testing {

nlohmann::json GetJson(int port, const std::string& path) {
  HttpReply r = HttpCall(port, "GET", path);
  EXPECT_EQ(r.code, 200) << path << ": " << r.body.substr(0, 300);
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << ": not JSON: " << r.body.substr(0, 300);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

std::string WaitForState(int port, const std::string& hex, const std::string& want, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string state;
  while (std::chrono::steady_clock::now() < deadline) {
    HttpReply r = HttpCall(port, "GET", "/jobs/" + hex + ".json");
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (r.code == 200 && j.is_object()) state = j.value("state", "");
    if (state == want) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return state;
}

std::string LogHead(const std::string& ledger) {
  RunResult r = Run({"git", "--git-dir", ledger, "rev-parse", "refs/gatos/log"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

namespace {
size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}
}  // namespace

void ExpectNoHostileMarkup(const std::string& html, const std::string& what) {
  EXPECT_EQ(html.find("<script>"), std::string::npos) << what;
  EXPECT_EQ(Count(html, "<script"), 1u) << what;  // /static/app.js
  EXPECT_EQ(html.find("<img"), std::string::npos) << what;
  EXPECT_EQ(Count(html, "onerror"), Count(html, "&lt;img src=x onerror")) << what;
}

EventStreamReader::EventStreamReader(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return;
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return;
  }
  fd_ = fd;
}

EventStreamReader::~EventStreamReader() {
  if (fd_ >= 0) close(fd_);
}

std::string EventStreamReader::ReadUntil(const std::string& needle, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (fd_ >= 0) {
    size_t hit = buf_.find(needle, consumed_);
    if (hit != std::string::npos) {
      // Return through the end of that event, and read on after it next time.
      size_t end = buf_.find("\n\n", hit);
      end = end == std::string::npos ? buf_.size() : end + 2;
      std::string out = buf_.substr(consumed_, end - consumed_);
      consumed_ = end;
      return out;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char b[4096];
    ssize_t n = read(fd_, b, sizeof b);
    if (n <= 0) break;
    buf_.append(b, static_cast<size_t>(n));
  }
  return buf_.substr(consumed_);
}

}  // namespace gatos::testing
