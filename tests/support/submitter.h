// A client for tests of a plane under failures: submits jobs one `gatos
// submit` at a time in a thread of its own and records the ids the ledger
// acknowledged.
#ifndef GATOS_TESTS_SUPPORT_SUBMITTER_H_
#define GATOS_TESTS_SUPPORT_SUBMITTER_H_

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "test_util.h"

namespace gatos::testing {

// Submits jobs one `gatos submit` at a time until stopped; keeps the ids the
// ledger acknowledged (exit 0 and an id printed). A submit that fails (gatosd
// or NATS down at that moment) is not acknowledged; it may still have landed,
// which is no loss.
class Submitter {
 public:
  Submitter(std::vector<std::string> base_argv, std::map<std::string, std::string> env, std::string dir)
      : base_(std::move(base_argv)), env_(std::move(env)), dir_(std::move(dir)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Submitter() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  size_t acked_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }
  int attempts() const { return attempts_; }

 private:
  void Loop() {
    for (int n = 0; !stop_; ++n) {
      const std::string file = dir_ + "/chaos-job" + std::to_string(n) + ".yaml";
      WriteFile(file, "command: [\"/bin/sh\", \"-c\", \"sleep 0.1; echo chaos-" + std::to_string(n) +
                          "\"]\ntimeout: 30\n");
      std::vector<std::string> argv = base_;
      argv.insert(argv.begin() + 2, file);
      RunOptions ro;
      ro.env = env_;
      ro.timeout_seconds = 30;
      RunResult r = Run(argv, ro);
      ++attempts_;
      // About ten submits a second: below what two workers finish, so the
      // backlog at the end stays small and the kills land on running jobs.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string id = TrimEnd(r.out);
      if (r.exit_code == 0 && id.rfind("blake3:", 0) == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        acked_.push_back(id);
      }
    }
  }

  std::vector<std::string> base_;
  std::map<std::string, std::string> env_;
  std::string dir_;
  std::atomic<bool> stop_{false};
  std::atomic<int> attempts_{0};
  std::mutex mu_;
  std::vector<std::string> acked_;
  std::thread thread_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_SUBMITTER_H_
