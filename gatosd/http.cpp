#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gatos::gatosd {

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr, Handler handler) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("--http " + addr + ": expected HOST:PORT");
  std::string host = addr.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(addr.c_str() + colon + 1, &end, 10);
  if (*end || colon + 1 == addr.size() || port < 0 || port > 65535) {
    return InvalidArgumentError("--http " + addr + ": port must be 0..65535");
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (host == "localhost") host = "127.0.0.1";
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return InvalidArgumentError("--http " + addr + ": \"" + host + "\" is not an IPv4 address");
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 64) != 0) {
    std::string err = std::strerror(errno);
    ::close(fd);
    return UnavailableError("cannot listen on " + addr + ": " + err);
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return std::unique_ptr<HttpServer>(new HttpServer(fd, ntohs(sa.sin_port), std::move(handler)));
}

HttpServer::HttpServer(int fd, int port, Handler handler)
    : fd_(fd), port_(port), handler_(std::move(handler)) {
  thread_ = std::thread([this] { Loop(); });
}

HttpServer::~HttpServer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

namespace {
const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Bad Request";
  }
}
}  // namespace

void HttpServer::Loop() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::string req;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    char buf[2048];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192 &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd cp{c, POLLIN, 0};
      if (::poll(&cp, 1, 100) <= 0) continue;
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    HttpResponse resp;
    size_t sp1 = req.find(' ');
    size_t sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
    if (sp2 == std::string::npos) {
      resp = {400, "text/plain; charset=utf-8", "bad request\n"};
    } else if (req.compare(0, sp1, "GET") != 0) {
      resp = {405, "text/plain; charset=utf-8", "only GET\n"};
    } else {
      std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
      path = path.substr(0, path.find('?'));
      resp = handler_(path);
    }
    std::string out = "HTTP/1.0 " + std::to_string(resp.code) + " " + Reason(resp.code) +
                      "\r\nContent-Type: " + resp.content_type +
                      "\r\nContent-Length: " + std::to_string(resp.body.size()) +
                      "\r\nConnection: close\r\n\r\n" + resp.body;
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::send(c, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(c);
  }
}

}  // namespace gatos::gatosd
