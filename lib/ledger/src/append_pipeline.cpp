#include "gatos/ledger/append_pipeline.h"

namespace gatos {

AppendPipeline::AppendPipeline(AppendFn append, std::function<void()> on_change)
    : append_(std::move(append)), on_change_(std::move(on_change)) {
  thread_ = std::thread([this] { Loop(); });
}

AppendPipeline::~AppendPipeline() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_.notify_all();
  progress_.notify_all();
  thread_.join();
}

Status AppendPipeline::Submit(int64_t seq, std::string record) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!failure_.ok()) {
      return FailedPreconditionError("log batch " + std::to_string(seq) +
                                     " not appended: an earlier append failed (" + failure_.message() + ")");
    }
    if (seq <= last_submitted_) {
      return InvalidArgumentError("log batch " + std::to_string(seq) + " submitted after " +
                                  std::to_string(last_submitted_));
    }
    last_submitted_ = seq;
    queue_.emplace_back(seq, std::move(record));
  }
  work_.notify_one();
  return OkStatus();
}

int64_t AppendPipeline::acknowledged() const {
  std::lock_guard<std::mutex> l(mu_);
  return acknowledged_;
}

Status AppendPipeline::failure() const {
  std::lock_guard<std::mutex> l(mu_);
  return failure_;
}

size_t AppendPipeline::outstanding() const {
  std::lock_guard<std::mutex> l(mu_);
  return failure_.ok() ? queue_.size() + (sending_ ? 1 : 0) : 0;
}

bool AppendPipeline::WaitFor(int64_t seq, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> l(mu_);
  progress_.wait_for(l, wait, [&] { return acknowledged_ >= seq || !failure_.ok() || stop_; });
  return acknowledged_ >= seq;
}

void AppendPipeline::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    work_.wait(l, [&] { return stop_ || (!queue_.empty() && failure_.ok()); });
    if (stop_) return;
    std::pair<int64_t, std::string> next = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    l.unlock();
    Status s = append_(next.first, next.second);
    l.lock();
    sending_ = false;
    if (s.ok()) {
      acknowledged_ = next.first;
    } else {
      failure_ = s;
      queue_.clear();  // never sent: the stream holds a prefix
    }
    l.unlock();
    progress_.notify_all();
    if (on_change_) on_change_();
    l.lock();
  }
}

}  // namespace gatos
