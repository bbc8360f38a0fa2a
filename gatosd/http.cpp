#include "http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace gatos::gatosd {

namespace {

struct HostPort {
  std::string host;
  long port = 0;
};

Result<HostPort> SplitAddress(const std::string& addr) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("--http " + addr + ": expected HOST:PORT");
  HostPort hp;
  hp.host = addr.substr(0, colon);
  char* end = nullptr;
  hp.port = std::strtol(addr.c_str() + colon + 1, &end, 10);
  if (*end || colon + 1 == addr.size() || hp.port < 0 || hp.port > 65535) {
    return InvalidArgumentError("--http " + addr + ": port must be 0..65535");
  }
  if (hp.host == "localhost") hp.host = "127.0.0.1";
  return hp;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 421: return "Misdirected Request";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Bad Request";
  }
}

bool SendAll(int fd, std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string PercentDecode(std::string_view s, bool plus_is_space, bool* ok) {
  std::string out;
  out.reserve(s.size());
  *ok = true;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '%') {
      int hi = i + 1 < s.size() ? HexValue(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        *ok = false;
        out.push_back(c);
        continue;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PercentEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  size_t pairs = 0;
  while (!query.empty() && pairs < 32) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    ++pairs;
    size_t eq = pair.find('=');
    bool ok = true;
    std::string key = PercentDecode(pair.substr(0, eq), true, &ok);
    std::string value = eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true, &ok);
    out.emplace(std::move(key), std::move(value));
  }
  return out;
}

Result<HttpRequest> ParseHttpRequest(std::string_view bytes) {
  size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() >= kMaxHttpHeaderBytes) return InvalidArgumentError("request headers too large");
    return UnavailableError("incomplete request");
  }
  if (end + 4 > kMaxHttpHeaderBytes) return InvalidArgumentError("request headers too large");
  std::string_view head = bytes.substr(0, end);
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  HttpRequest req;
  // Request line: METHOD SP origin-form-target SP HTTP/1.x
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return InvalidArgumentError("bad request line");
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return InvalidArgumentError("bad request line");
  }
  std::string_view method = line.substr(0, sp1);
  for (char c : method) {
    if (!IsTokenChar(c)) return InvalidArgumentError("bad method");
  }
  std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.0" && version != "HTTP/1.1") return InvalidArgumentError("bad HTTP version");
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target[0] != '/') return InvalidArgumentError("target must be a path");
  for (unsigned char c : target) {
    if (c <= 0x20 || c >= 0x7f) return InvalidArgumentError("bad character in the target");
  }
  req.method = std::string(method);
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  size_t hash = req.query.find('#');
  if (hash != std::string::npos) req.query.resize(hash);
  bool ok = true;
  req.path = PercentDecode(raw_path, false, &ok);
  if (!ok) return InvalidArgumentError("bad %-escape in the path");
  for (unsigned char c : req.path) {
    if (c < 0x20 || c == 0x7f) return InvalidArgumentError("control character in the path");
  }
  // Headers.
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 2;
  size_t count = 0;
  while (pos < head.size()) {
    size_t next = head.find("\r\n", pos);
    std::string_view h = head.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    pos = next == std::string_view::npos ? head.size() : next + 2;
    if (++count > kMaxHttpHeaders) return InvalidArgumentError("too many headers");
    size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return InvalidArgumentError("bad header line");
    std::string_view name = h.substr(0, colon);
    for (char c : name) {
      if (!IsTokenChar(c)) return InvalidArgumentError("bad header name");
    }
    std::string_view value = Trim(h.substr(colon + 1));
    for (unsigned char c : value) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) return InvalidArgumentError("control character in a header");
    }
    req.headers.emplace(Lower(name), std::string(value));
  }
  // Body: only with Content-Length (no chunked requests).
  if (req.headers.count("transfer-encoding")) return InvalidArgumentError("Transfer-Encoding is not supported");
  size_t body_len = 0;
  auto cl = req.headers.find("content-length");
  if (cl != req.headers.end()) {
    const std::string& v = cl->second;
    if (v.empty() || v.size() > 9 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgumentError("bad Content-Length");
    }
    body_len = std::stoul(v);
    if (body_len > kMaxHttpBodyBytes) return InvalidArgumentError("body too large");
  }
  std::string_view rest = bytes.substr(end + 4);
  if (rest.size() < body_len) return UnavailableError("incomplete body");
  if (rest.size() > body_len) return InvalidArgumentError("bytes after the body");
  req.body = std::string(rest);
  return req;
}

Result<bool> IsLoopbackAddress(const std::string& addr) {
  GATOS_ASSIGN_OR_RETURN(HostPort hp, SplitAddress(addr));
  in_addr a{};
  if (inet_pton(AF_INET, hp.host.c_str(), &a) != 1) {
    return InvalidArgumentError("--http " + addr + ": \"" + hp.host + "\" is not an IPv4 address");
  }
  return (ntohl(a.s_addr) >> 24) == 127;
}

std::string FormatHttpResponse(const HttpResponse& r) {
  std::string out = "HTTP/1.0 " + std::to_string(r.code) + " " + Reason(r.code) +
                    "\r\nContent-Type: " + r.content_type;
  if (!r.stream) out += "\r\nContent-Length: " + std::to_string(r.body.size());
  // Every response: nothing is cached, sniffed, framed or allowed to run
  // from anywhere but our own static files (no inline script can run even if
  // escaping were ever missed).
  out +=
      "\r\nCache-Control: no-store"
      "\r\nX-Content-Type-Options: nosniff"
      "\r\nX-Frame-Options: DENY"
      "\r\nReferrer-Policy: no-referrer"
      "\r\nContent-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
      "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
  for (const auto& [k, v] : r.headers) out += "\r\n" + k + ": " + v;
  out += "\r\nConnection: close\r\n\r\n";
  if (!r.stream) out += r.body;
  return out;
}

bool HttpStream::Write(std::string_view data) {
  if (stop_->load()) return false;
  return SendAll(fd_, data);
}

bool HttpStream::ClientClosed(int ms) {
  pollfd p{fd_, POLLIN, 0};
  int n = ::poll(&p, 1, ms);
  if (n <= 0) return false;
  // Readable: EOF or an error means the client left; bytes are ignored.
  char buf[256];
  ssize_t got = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
  return got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR));
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr, Handler handler) {
  GATOS_ASSIGN_OR_RETURN(HostPort hp, SplitAddress(addr));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(hp.port));
  if (inet_pton(AF_INET, hp.host.c_str(), &sa.sin_addr) != 1) {
    return InvalidArgumentError("--http " + addr + ": \"" + hp.host + "\" is not an IPv4 address");
  }
  // Non-blocking: the loop accepts until the backlog is empty.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, static_cast<int>(kMaxConnections)) != 0) {
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
  std::unique_lock<std::mutex> l(streams_mu_);
  streams_cv_.wait(l, [&] { return active_streams_ == 0; });
  ::close(fd_);
}

namespace {

using Clock = std::chrono::steady_clock;

// One client: its request as read so far, then its response as sent so far.
struct Conn {
  int fd = -1;
  std::string in;
  std::string out;  // non-empty once the response is ready
  size_t sent = 0;
  Clock::time_point deadline;
};

}  // namespace

// One thread multiplexes every connection (poll), so an idle or slow client
// holds nothing but its own slot: it cannot delay /healthz. Each connection
// has kRequestDeadline to send its request and kResponseDeadline to take its
// response; past that it is closed. Handlers run on this thread, one at a
// time, as before.
void HttpServer::Loop() {
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  auto close_conn = [](Conn& c) {
    ::close(c.fd);
    c.fd = -1;
  };
  while (!stop_) {
    fds.clear();
    fds.push_back({fd_, POLLIN, 0});
    Clock::time_point next = Clock::now() + std::chrono::milliseconds(200);
    for (const Conn& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
      next = std::min(next, c.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count()))) < 0 &&
        errno != EINTR) {
      continue;
    }
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      const short ev = fds[i + 1].revents;
      if (now >= c.deadline) {
        close_conn(c);  // too slow: its request (a byte at a time counts) or its reading
        continue;
      }
      if (c.out.empty() && (ev & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          close_conn(c);
          continue;
        }
        c.in.append(buf, static_cast<size_t>(n));
        Result<HttpRequest> parsed = ParseHttpRequest(c.in);
        if (!parsed.ok() && parsed.status().code() == StatusCode::kUnavailable) continue;
        if (Respond(c.fd, parsed, &c.out)) {
          c.fd = -1;  // a stream's thread owns it now
          continue;
        }
        c.deadline = now + kResponseDeadline;
      } else if (!c.out.empty() && (ev & (POLLOUT | POLLHUP | POLLERR))) {
        ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          close_conn(c);
          continue;
        }
        c.sent += static_cast<size_t>(n);
        if (c.sent == c.out.size()) close_conn(c);
      }
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
    if (fds[0].revents & POLLIN) {
      // Every waiting client, up to the limit; past it, the oldest pending
      // one is closed to make room (a client that sends nothing loses).
      while (true) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) break;
        if (conns.size() >= kMaxConnections) {
          auto idle = std::find_if(conns.begin(), conns.end(), [](const Conn& x) { return x.out.empty(); });
          if (idle == conns.end()) {
            ::close(c);
            continue;
          }
          ::close(idle->fd);
          conns.erase(idle);
        }
        conns.push_back({c, "", "", 0, Clock::now() + kRequestDeadline});
      }
    }
  }
  for (Conn& c : conns) close_conn(c);
}

bool HttpServer::Respond(int c, const Result<HttpRequest>& parsed, std::string* out) {
  HttpResponse resp;
  if (!parsed.ok()) {
    resp = {400, "text/plain; charset=utf-8", "bad request: " + parsed.status().message() + "\n", {}, {}};
  } else {
    try {
      resp = handler_(*parsed);
    } catch (const std::exception& e) {
      // A handler bug must not take the daemon down; the message is ours.
      resp = {500, "text/plain; charset=utf-8", "internal error\n", {}, {}};
    }
    if (parsed->method == "HEAD") {
      resp.body.clear();
      resp.stream = nullptr;
    }
  }
  if (resp.stream) {
    std::unique_lock<std::mutex> l(streams_mu_);
    if (active_streams_ >= kMaxStreams) {
      resp = {503, "text/plain; charset=utf-8", "too many event streams\n", {}, {}};
    } else {
      ++active_streams_;
      l.unlock();
      auto stream = std::move(resp.stream);
      resp.stream = [](HttpStream&) {};  // headers only, no Content-Length
      std::string head = FormatHttpResponse(resp);
      // A stream writes as it goes: blocking again, on a thread of its own.
      ::fcntl(c, F_SETFL, ::fcntl(c, F_GETFL) & ~O_NONBLOCK);
      // Detached, counted: the destructor waits for every stream to notice
      // stop_ (they poll it at least every second).
      std::thread([this, c, head = std::move(head), stream = std::move(stream)] {
        if (SendAll(c, head)) {
          HttpStream s(c, &stop_);
          try {
            stream(s);
          } catch (const std::exception&) {
            // The client sees the stream end and reconnects.
          }
        }
        ::close(c);
        std::lock_guard<std::mutex> g(streams_mu_);
        --active_streams_;
        streams_cv_.notify_all();
      }).detach();
      return true;
    }
  }
  *out = FormatHttpResponse(resp);
  return false;
}

}  // namespace gatos::gatosd
