#include "gatos/sys/background_closer.h"

#include <unistd.h>

namespace gatos {

BackgroundCloser::BackgroundCloser() : thread_([this] { Loop(); }) {}

BackgroundCloser::~BackgroundCloser() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void BackgroundCloser::Close(int fd) {
  if (fd < 0) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (pending_.size() < kMaxPending) {
      pending_.push_back(fd);
      cv_.notify_one();
      return;
    }
  }
  ::close(fd);
}

void BackgroundCloser::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and every descriptor closed
    const int fd = pending_.front();
    pending_.pop_front();
    l.unlock();
    ::close(fd);
    l.lock();
  }
}

}  // namespace gatos
