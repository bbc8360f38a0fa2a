// A minimal HTTP/1.0 server for /metrics and /healthz: GET only, one request
// per connection, requests over 8 KiB or slower than 2 s are dropped.
//
// Thread-safety: runs one accept thread; the handler is called on it.
#ifndef GATOS_GATOSD_HTTP_H_
#define GATOS_GATOSD_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gatos/status.h"

namespace gatos::gatosd {

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& path)>;
  // addr "HOST:PORT" (IPv4; port 0 picks a free one). InvalidArgument for a
  // malformed address, Unavailable when it cannot bind.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& addr, Handler handler);
  ~HttpServer();
  int port() const { return port_; }

 private:
  HttpServer(int fd, int port, Handler handler);
  void Loop();
  int fd_;
  int port_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_HTTP_H_
