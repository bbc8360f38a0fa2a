// Helpers for integration tests: temp dirs and real subprocesses.
// Not thread-safe across tests that chdir; none do.
#ifndef GATOS_TESTS_SUPPORT_TEST_UTIL_H_
#define GATOS_TESTS_SUPPORT_TEST_UTIL_H_

#include <chrono>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gatos::testing {

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

struct RunOptions {
  std::string stdin_data;
  std::string cwd;                            // empty: inherit
  std::map<std::string, std::string> env;     // added to / overriding the environment
  int timeout_seconds = 120;                  // SIGKILL after this
};

// Runs argv[0] (PATH lookup) with the test's environment plus opts.env and
// waits (gatos::RunAndCapture). A program that cannot be started gives exit
// code 127 (not found) or 126, with the reason in `err`. Never throws.
RunResult Run(const std::vector<std::string>& argv, const RunOptions& opts = {});

// Path of a built program (gatos, gatosd, gatos-worker, ...) in the build tree.
std::string BinaryPath(const std::string& name);
// Path of a file in the source tree.
std::string SourcePath(const std::string& rel);

std::string ReadFile(const std::string& path);

// The environment a test's git and gatos commands run in: HOME = `home`, no
// system git config, and Alice as author and committer.
std::map<std::string, std::string> GitTestEnv(const std::string& home);

// `s` without its trailing newlines and spaces (a command's one-line output).
std::string TrimEnd(std::string s);
void WriteFile(const std::string& path, const std::string& data, int mode = 0644);
// One random edit of `text` (not empty) for tests of parsers: a byte of
// `alphabet` replaces one, or is inserted, or a byte is erased.
void MutateOneByte(std::string* text, std::mt19937_64& rng, std::string_view alphabet);
// True when the ledger's write-ahead log (<ledger>/gatos/wal) holds no
// record file (*.wal; the spare a checkpoint keeps is not one).
bool WalHasNoRecordFiles(const std::string& wal_dir);

// An unused TCP port on 127.0.0.1.
int FreePort();

// Polls `done` every 20 ms until it holds or `ms` pass; returns whether it
// held. The caller asserts on the result: a wait that timed out says so.
template <typename F>
bool PollFor(int ms, F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_TEST_UTIL_H_
