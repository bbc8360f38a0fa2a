#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gatos/sys/process.h"

namespace gatos::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/gatos-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  // GATOS_KEEP_TEST_DIRS=1: left for reading the processes' logs (the
  // tests print where).
  if (const char* keep = std::getenv("GATOS_KEEP_TEST_DIRS"); keep && std::string(keep) == "1") return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

RunResult Run(const std::vector<std::string>& argv, const RunOptions& opts) {
  // Tests also write to sockets and pipes whose other end may be gone.
  signal(SIGPIPE, SIG_IGN);
  SpawnOptions so;
  so.env = Environment::CurrentWith(opts.env);
  so.cwd = opts.cwd;
  so.parent_death_signal = SIGKILL;
  RunResult r;
  Result<Captured> c = RunAndCapture(argv, so, opts.stdin_data, std::chrono::seconds(opts.timeout_seconds));
  if (!c.ok()) {
    // As a shell says it: 127 no such program, 126 found but not started.
    r.exit_code = c.status().code() == StatusCode::kNotFound ? 127 : 126;
    r.err = c.status().message();
    return r;
  }
  r.exit_code = c->status.code;
  r.signal = c->status.signal;
  r.out = std::move(c->out);
  r.err = std::move(c->err);
  return r;
}

std::string BinaryPath(const std::string& name) { return std::string(GATOS_BINARY_DIR) + "/bin/" + name; }
std::string SourcePath(const std::string& rel) { return std::string(GATOS_SOURCE_DIR) + "/" + rel; }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool WalHasNoRecordFiles(const std::string& wal_dir) {
  for (const auto& e : std::filesystem::directory_iterator(wal_dir)) {
    if (e.path().extension() == ".wal") return false;
  }
  return true;
}

void MutateOneByte(std::string* text, std::mt19937_64& rng, std::string_view alphabet) {
  const size_t at = rng() % text->size();
  const char b = alphabet[rng() % alphabet.size()];
  switch (rng() % 3) {
    case 0: (*text)[at] = b; break;
    case 1: text->insert(at, 1, b); break;
    default: text->erase(at, 1); break;
  }
}

void WriteFile(const std::string& path, const std::string& data, int mode) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << data;
  }
  chmod(path.c_str(), static_cast<mode_t>(mode));
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::map<std::string, std::string> GitTestEnv(const std::string& home) {
  return {{"HOME", home},
          {"GIT_CONFIG_NOSYSTEM", "1"},
          {"GIT_AUTHOR_NAME", "Alice"},
          {"GIT_AUTHOR_EMAIL", "alice@example.com"},
          {"GIT_COMMITTER_NAME", "Alice"},
          {"GIT_COMMITTER_EMAIL", "alice@example.com"}};
}

}  // namespace gatos::testing
