// The ledger writer's view thread (WriterOptions::async_views).
//
// Thread-safety: Write, Then and Flush may be called from any thread; the
// thread it owns is the only one that touches its repository handle.
#ifndef GATOS_LEDGER_SRC_VIEW_WRITER_H_
#define GATOS_LEDGER_SRC_VIEW_WRITER_H_

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "writer_internal.h"

namespace gatos {

// Writes the view refs of committed batches on a thread of its own, oldest
// first, and runs the callbacks queued after them. Consecutive batches that
// wait are written as one (the last value of each ref wins). It has its own
// repository handle: libgit2 handles belong to one thread.
class LedgerWriter::ViewWriter {
 public:
  ViewWriter(std::unique_ptr<Ledger> ledger, const WriterOptions* options)
      : ledger_(std::move(ledger)), options_(options), thread_([this] { Loop(); }) {}
  ~ViewWriter() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // drains the queue first
  }
  void Write(int64_t seq, std::vector<std::pair<std::string, std::string>> refs) {
    Push(Item{seq, std::move(refs), nullptr});
  }
  void Then(std::function<void()> fn) { Push(Item{0, {}, std::move(fn)}); }
  void Flush() {
    std::unique_lock<std::mutex> l(mu_);
    idle_cv_.wait(l, [this] { return q_.empty() && !busy_; });
  }

 private:
  struct Item {
    int64_t seq;
    std::vector<std::pair<std::string, std::string>> refs;
    std::function<void()> fn;
  };
  void Push(Item item) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  void Loop() {
    while (true) {
      std::map<std::string, std::string> refs;
      int64_t first = 0, last = 0;
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !q_.empty() || stop_; });
        if (q_.empty()) return;
        busy_ = true;
        while (!q_.empty() && !q_.front().fn) {
          for (auto& [ref, id] : q_.front().refs) refs[ref] = std::move(id);
          if (!first) first = q_.front().seq;
          last = q_.front().seq;
          q_.pop_front();
        }
        if (refs.empty() && !q_.empty()) {
          fn = std::move(q_.front().fn);
          q_.pop_front();
        }
      }
      if (!refs.empty()) {
        Status s = ledger_->SetViewRefs({refs.begin(), refs.end()});
        if (!s.ok()) {
          std::fprintf(stderr, "gatos: refs of log batches %lld..%lld not all written (%s); repaired at next start\n",
                       static_cast<long long>(first), static_cast<long long>(last), s.message().c_str());
        }
        writer_internal::Crash(*options_, "after-views");
      }
      if (fn) {
        try {
          fn();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "gatos: internal error after writing view refs: %s\n", e.what());
        }
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        busy_ = false;
      }
      idle_cv_.notify_all();
    }
  }

  std::unique_ptr<Ledger> ledger_;
  const WriterOptions* options_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Item> q_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace gatos

#endif  // GATOS_LEDGER_SRC_VIEW_WRITER_H_
