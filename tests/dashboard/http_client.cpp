#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

namespace gatos::testing {

namespace {
// Whether `resp` holds a whole response by its own framing (Content-Length
// or a chunked body's last chunk); a response without either ends at EOF.
bool Complete(const std::string& resp) {
  size_t end = resp.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  std::string head = resp.substr(0, end);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t cl = head.find("\r\ncontent-length:");
  if (cl != std::string::npos) {
    size_t len = std::strtoul(head.c_str() + cl + 17, nullptr, 10);
    return resp.size() >= end + 4 + len;
  }
  if (head.find("transfer-encoding: chunked") != std::string::npos) {
    return resp.size() >= 5 && resp.compare(resp.size() - 5, 5, "0\r\n\r\n") == 0;
  }
  return false;
}
}  // namespace

std::string HttpRaw(int port, const std::string& bytes, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return "";
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string resp;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
    if (Complete(resp)) break;  // a server that keeps the connection open
  }
  close(fd);
  return resp;
}

HttpReply HttpCall(int port, const std::string& method, const std::string& path,
                   const std::map<std::string, std::string>& headers, const std::string& body, int timeout_ms) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST" || method == "DELETE") {
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  std::string raw = HttpRaw(port, req, timeout_ms);
  HttpReply r;
  size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || end == std::string::npos) return r;
  size_t sp = raw.find(' ');
  r.code = std::atoi(raw.c_str() + sp + 1);
  size_t pos = raw.find("\r\n") + 2;
  while (pos < end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    pos = eol + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = line.find_first_not_of(' ', colon + 1);
    r.headers[name] = v == std::string::npos ? "" : line.substr(v);
  }
  r.body = raw.substr(end + 4);
  // chromedriver may answer chunked.
  if (r.headers["transfer-encoding"] == "chunked") {
    std::string out, &in = r.body;
    size_t p = 0;
    while (p < in.size()) {
      size_t eol = in.find("\r\n", p);
      if (eol == std::string::npos) break;
      size_t n = std::stoul(in.substr(p, eol - p), nullptr, 16);
      if (n == 0) break;
      out += in.substr(eol + 2, n);
      p = eol + 2 + n + 2;
    }
    r.body = out;
  }
  return r;
}

}  // namespace gatos::testing
