// gatosd's HTTP server with real sockets on loopback: idle and slow clients
// hold only their own connection (they cannot delay /healthz), each is
// closed past its deadline, and past kMaxConnections the oldest idle one
// makes room.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "http.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// The whole response to one request on a new connection.
std::string Get(int port, const std::string& path) {
  int fd = Connect(port);
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Whether the server has closed `fd` (EOF readable now), without waiting.
bool ClosedByServer(int fd) {
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// Waits (up to `limit`) for the server to close `fd`.
bool WaitClosed(int fd, std::chrono::milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(limit.count())) == 1 && ClosedByServer(fd);
}

std::unique_ptr<HttpServer> Server() {
  auto s = HttpServer::Start("127.0.0.1:0", [](const HttpRequest& r) {
    HttpResponse resp;
    resp.body = r.path == "/healthz" ? "ok\n" : "other\n";
    return resp;
  });
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(HttpServer, IdleClientsDoNotDelayHealthz) {
  auto server = Server();
  ASSERT_TRUE(server);
  std::vector<int> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(Connect(server->port()));
  // Half a request from some of them too.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(::send(idle[i], "GET /hea", 8, MSG_NOSIGNAL), 8);
  const auto start = Clock::now();
  const std::string r = Get(server->port(), "/healthz");
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  EXPECT_EQ(r.substr(0, 15), "HTTP/1.0 200 OK");
  EXPECT_EQ(r.substr(r.size() - 3), "ok\n");
  // Answered while every idle client still holds its connection: nobody
  // waited for them to give up.
  for (int fd : idle) EXPECT_FALSE(ClosedByServer(fd));
  std::cout << "healthz with 10 idle connections: " << took.count() << " us\n";
  // Each idle one is closed at its request deadline.
  for (int fd : idle) {
    EXPECT_TRUE(WaitClosed(fd, HttpServer::kRequestDeadline * 3));
    ::close(fd);
  }
}

TEST(HttpServer, ASlowClientIsClosedAtItsDeadlineEvenWhileItKeepsSending) {
  auto server = Server();
  ASSERT_TRUE(server);
  int slow = Connect(server->port());
  const std::string req = "GET /healthz HTTP/1.0\r\nX-Pad: " + std::string(200, 'a');
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < req.size() && !closed; ++i) {
    if (::send(slow, &req[i], 1, MSG_NOSIGNAL) != 1) break;
    closed = WaitClosed(slow, std::chrono::milliseconds(50));
  }
  closed = closed || WaitClosed(slow, HttpServer::kRequestDeadline * 3);
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - start, HttpServer::kRequestDeadline * 5);
  ::close(slow);
  EXPECT_EQ(Get(server->port(), "/healthz").substr(0, 15), "HTTP/1.0 200 OK");
}

TEST(HttpServer, PastTheConnectionLimitTheOldestIdleClientMakesRoom) {
  auto server = Server();
  ASSERT_TRUE(server);
  std::vector<int> idle;
  for (size_t i = 0; i < HttpServer::kMaxConnections; ++i) idle.push_back(Connect(server->port()));
  // Served although every slot was taken by a client that sends nothing.
  EXPECT_EQ(Get(server->port(), "/healthz").substr(0, 15), "HTTP/1.0 200 OK");
  EXPECT_TRUE(WaitClosed(idle[0], std::chrono::seconds(5)));
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace gatos::gatosd
