// A progress bar for the CLI's long operations (gatos verify --all, gatos
// batch submit): drawn on stderr only when stderr is a terminal, and
// nothing at all otherwise, so piped and scripted output never changes.
//
// Thread-safety: Update may be called from any thread (one mutex); the bar
// is redrawn at most 10 times a second.
#ifndef GATOS_CLI_PROGRESS_BAR_H_
#define GATOS_CLI_PROGRESS_BAR_H_

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace gatos::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool wanted = true)
      : label_(std::move(label)), on_(wanted && ::isatty(2) == 1) {}
  ~ProgressBar() { Done(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return on_; }

  void Update(size_t done, size_t total) {
    if (!on_) return;
    std::lock_guard<std::mutex> l(mu_);
    auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr size_t kWidth = 30;
    size_t filled = total ? done * kWidth / total : 0;
    if (filled > kWidth) filled = kWidth;
    std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
    std::fprintf(stderr, "\r\x1b[K%s %s %zu/%zu", label_.c_str(), bar.c_str(), done, total);
    std::fflush(stderr);
  }
  // Clears the bar's line (once drawn), so what follows starts clean.
  void Done() {
    if (!on_) return;
    std::lock_guard<std::mutex> l(mu_);
    if (!drawn_) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  std::string label_;
  bool on_;
  std::mutex mu_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace gatos::cli

#endif  // GATOS_CLI_PROGRESS_BAR_H_
