// A minimal HTTP/1.0 server for /metrics, /healthz and the dashboard: one
// request per connection, requests over 8 KiB (headers) or 4 KiB (body) or
// slower than 2 s are dropped, a response the client has not taken in 10 s
// is dropped. Connections are served at once (one thread polls them all), so
// idle or slow clients cannot delay anyone else; at most kMaxConnections
// are open, and past that the oldest one still sending its request is
// closed. A response may instead be a stream (server-sent events): it then
// runs on a thread of its own, at most kMaxStreams at once, until the client
// goes away or the server stops.
//
// Thread-safety: runs one thread; the handler is called on it (never
// concurrently). Stream callbacks run on their own threads.
#ifndef GATOS_GATOSD_HTTP_H_
#define GATOS_GATOSD_HTTP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gatos/model/status.h"

namespace gatos::gatosd {

// A parsed request. Header names are lower-cased; a repeated header keeps
// its first value.
struct HttpRequest {
  std::string method;
  std::string path;   // percent-decoded, starts with '/', no NUL or control bytes
  std::string query;  // raw, after '?' ("" when none)
  std::map<std::string, std::string> headers;
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// Limits of what ParseHttpRequest accepts.
inline constexpr size_t kMaxHttpHeaderBytes = 8192;
inline constexpr size_t kMaxHttpBodyBytes = 4096;
inline constexpr size_t kMaxHttpHeaders = 64;

// Parses one request: a request line and headers ending in CRLF CRLF, then
// exactly Content-Length bytes of body. InvalidArgument for anything
// malformed (a bad request line, a target that is not origin-form, %-escapes
// that decode to control bytes, too many or too large headers, a body over
// kMaxHttpBodyBytes); Unavailable when `bytes` is a valid prefix that needs
// more bytes. Pure; fuzzed (tests/fuzz/dashboard_request_fuzz.cpp).
Result<HttpRequest> ParseHttpRequest(std::string_view bytes);

// "a=1&b=%3Cx%3E+y" -> {a: "1", b: "<x> y"}. Keys and values are
// percent-decoded ('+' is a space); a pair without '=' has an empty value; a
// repeated key keeps its first value; malformed escapes are kept literally;
// at most 32 pairs are read.
std::map<std::string, std::string> ParseQuery(std::string_view query);
// Percent-decoding; nullopt-like empty result signalled by *ok = false for
// malformed escapes.
std::string PercentDecode(std::string_view s, bool plus_is_space, bool* ok);
// Percent-encoding of a query value (unreserved characters kept).
std::string PercentEncode(std::string_view s);

// Writes to a streaming client. Thread-safety: used by one stream thread.
class HttpStream {
 public:
  explicit HttpStream(int fd, const std::atomic<bool>* stop) : fd_(fd), stop_(stop) {}
  // False once the client is gone or the server is stopping.
  bool Write(std::string_view data);
  bool stopping() const { return stop_->load(); }
  // Waits up to `ms` for the client to close (or send anything); true when
  // it did. Streams use it to notice a vanished client between events.
  bool ClientClosed(int ms);

 private:
  int fd_;
  const std::atomic<bool>* stop_;
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  // Set for a streaming response: called on a thread of its own after the
  // headers are sent (no Content-Length); returns when done.
  std::function<void(HttpStream&)> stream;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest& request)>;
  static constexpr int kMaxStreams = 32;
  static constexpr size_t kMaxConnections = 256;
  static constexpr std::chrono::seconds kRequestDeadline{2};
  static constexpr std::chrono::seconds kResponseDeadline{10};
  // addr "HOST:PORT" (IPv4; port 0 picks a free one). InvalidArgument for a
  // malformed address, Unavailable when it cannot bind.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& addr, Handler handler);
  ~HttpServer();
  int port() const { return port_; }

 private:
  HttpServer(int fd, int port, Handler handler);
  void Loop();
  // The response to `parsed` into *out; or true when it is a stream, whose
  // thread now owns `c`.
  bool Respond(int c, const Result<HttpRequest>& parsed, std::string* out);
  int fd_;
  int port_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex streams_mu_;
  std::condition_variable streams_cv_;
  int active_streams_ = 0;  // guarded by streams_mu_
};

// Whether "HOST:PORT" binds only the loopback interface (127.0.0.0/8 or
// "localhost"). InvalidArgument when it is not HOST:PORT.
Result<bool> IsLoopbackAddress(const std::string& addr);

// The bytes of a response as sent (status line, headers, body), for the
// server and for tests.
std::string FormatHttpResponse(const HttpResponse& r);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_HTTP_H_
