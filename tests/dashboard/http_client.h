// A blocking HTTP/1.1 client for the dashboard tests: one request per
// connection (Connection: close) to 127.0.0.1, bounded by a deadline. Used
// for gatosd's pages and for chromedriver's WebDriver endpoint.
//
// Thread-safety: free functions, safe from any thread.
#ifndef GATOS_TESTS_DASHBOARD_HTTP_CLIENT_H_
#define GATOS_TESTS_DASHBOARD_HTTP_CLIENT_H_

#include <map>
#include <string>

namespace gatos::testing {

struct HttpReply {
  int code = 0;  // 0 = no answer (connection refused, timeout, garbage)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// Sends `method path` with `headers` and `body` (Content-Length set when a
// body is given) and reads the whole reply, at most `timeout_ms`.
HttpReply HttpCall(int port, const std::string& method, const std::string& path,
                   const std::map<std::string, std::string>& headers = {}, const std::string& body = "",
                   int timeout_ms = 30000);
// Sends raw bytes and returns the raw reply (for malformed requests).
std::string HttpRaw(int port, const std::string& bytes, int timeout_ms = 10000);

}  // namespace gatos::testing

#endif  // GATOS_TESTS_DASHBOARD_HTTP_CLIENT_H_
