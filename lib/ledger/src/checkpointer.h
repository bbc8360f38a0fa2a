// The ledger writer's checkpoint thread (WriterOptions::wal).
//
// Thread-safety: Written may be called from any thread; Checkpoint runs on
// the thread it owns.
#ifndef GATOS_LEDGER_SRC_CHECKPOINTER_H_
#define GATOS_LEDGER_SRC_CHECKPOINTER_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "writer_internal.h"

namespace gatos {

// Checkpoints in the background: when the write-ahead log's open file holds
// checkpoint_bytes, or checkpoint_ms after a batch, whichever comes first.
class LedgerWriter::Checkpointer {
 public:
  explicit Checkpointer(LedgerWriter* w) : w_(w), thread_([this] { Loop(); }) {}
  ~Checkpointer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // After each batch: `bytes` in the log's open file.
  void Written(uint64_t bytes) {
    bool wake;
    {
      std::lock_guard<std::mutex> l(mu_);
      const bool first = !pending_;
      if (first) since_ = std::chrono::steady_clock::now();
      pending_ = true;
      const bool full = bytes >= w_->options_.checkpoint_bytes;
      full_ |= full;
      wake = first || full;  // starts the timer, or checkpoints now
    }
    if (wake) cv_.notify_one();
  }

 private:
  void Loop() {
    const auto period = std::chrono::milliseconds(std::max(1, w_->options_.checkpoint_ms));
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (pending_ && !full_) {
        cv_.wait_until(l, since_ + period, [this] { return stop_ || full_; });
      } else if (!pending_) {
        cv_.wait(l, [this] { return stop_ || pending_; });
        continue;
      }
      if (stop_) return;
      pending_ = full_ = false;
      l.unlock();
      Status s = w_->Checkpoint();
      if (!s.ok()) std::fprintf(stderr, "gatos: checkpoint of the write-ahead log failed (retried): %s\n", s.message().c_str());
      l.lock();
      if (!s.ok() && !pending_) {
        pending_ = true;
        since_ = std::chrono::steady_clock::now();
      }
    }
  }

  LedgerWriter* w_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, full_ = false;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;  // last
};

}  // namespace gatos

#endif  // GATOS_LEDGER_SRC_CHECKPOINTER_H_
