// A private git server on loopback for tests: tests/support/git_http_server.py
// (`git http-backend` behind HTTP basic auth, Python's standard library),
// started on a free port and stopped with the object.
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_GIT_HTTP_SERVER_H_
#define GATOS_TESTS_SUPPORT_GIT_HTTP_SERVER_H_

#include <gtest/gtest.h>

#include <string>

#include "child_process.h"
#include "test_util.h"

namespace gatos::testing {

class GitHttpServer {
 public:
  // Serves the bare repositories under `root`. With a `user`, every request
  // needs Basic auth with it and the one line of `token_file`.
  GitHttpServer(std::string root, std::string user = "", std::string token_file = "")
      : root_(std::move(root)), user_(std::move(user)), token_file_(std::move(token_file)) {}

  ::testing::AssertionResult Start() {
    const std::string port_file = dir_.Join("port");
    std::vector<std::string> argv = {"/usr/bin/python3", SourcePath("tests/support/git_http_server.py"),
                                     "--root", root_, "--port-file", port_file};
    if (!user_.empty()) argv.insert(argv.end(), {"--user", user_, "--token-file", token_file_});
    std::string error;
    if (!proc_.Start(argv, {}, log_path(), &error)) {
      return ::testing::AssertionFailure() << "git_http_server.py: " << error;
    }
    // Ready once it says so (after the socket listens and the port is written).
    if (!proc_.WaitForLog("listening on ", 20000)) {
      return ::testing::AssertionFailure() << "git_http_server.py did not start: " << proc_.log();
    }
    url_ = "http://127.0.0.1:" + ReadFile(port_file);
    return ::testing::AssertionSuccess();
  }

  // "http://127.0.0.1:<port>"; a repository at <root>/r.git is url() + "/r.git".
  const std::string& url() const { return url_; }
  std::string log() const { return proc_.log(); }
  std::string log_path() const { return dir_.Join("server.log"); }

 private:
  std::string root_, user_, token_file_;
  TempDir dir_;
  ChildProcess proc_;
  std::string url_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_GIT_HTTP_SERVER_H_
