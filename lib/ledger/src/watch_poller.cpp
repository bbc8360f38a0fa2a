#include "gatos/ledger/watch_poller.h"

#include <chrono>

namespace gatos {

WatchPoller::WatchPoller(ListRemoteRefs list, std::function<int64_t()> now_ms)
    : list_(std::move(list)), now_ms_(std::move(now_ms)), thread_([this] { Run(); }) {}

WatchPoller::~WatchPoller() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WatchPoller::SetWatches(std::vector<Watch> watches) {
  {
    std::lock_guard<std::mutex> l(mu_);
    std::map<std::string, Entry> next;
    for (auto& w : watches) {
      Entry e{w, 0};
      auto old = watches_.find(w.schedule);
      if (old != watches_.end() && old->second.watch.schedule_commit == w.schedule_commit) e.next_ms = old->second.next_ms;
      next.emplace(w.schedule, std::move(e));
    }
    watches_ = std::move(next);
  }
  cv_.notify_all();
}

std::vector<WatchPoller::Observation> WatchPoller::Take() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Observation> out;
  out.reserve(ready_.size());
  for (auto& [key, o] : ready_) out.push_back(std::move(o));
  ready_.clear();
  return out;
}

void WatchPoller::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    const int64_t now = now_ms_();
    // The first watch due; read it without the lock.
    const Entry* due = nullptr;
    int64_t wake = now + 60'000;
    for (const auto& [name, e] : watches_) {
      if (e.next_ms <= now) {
        due = &e;
        break;
      }
      wake = std::min(wake, e.next_ms);
    }
    if (!due) {
      cv_.wait_for(l, std::chrono::milliseconds(std::max<int64_t>(wake - now, 1)));
      continue;
    }
    const Watch w = due->watch;
    watches_[w.schedule].next_ms = now + w.poll_ms;
    l.unlock();
    std::vector<Observation> seen;
    for (const std::string& url : w.urls) {
      Observation o{w.schedule, w.schedule_commit, url, 0, false, "", {}};
      auto refs = list_(url);
      o.seen_ms = now_ms_();
      if (refs.ok()) {
        o.ok = true;
        o.refs = std::move(*refs);
      } else {
        o.error = refs.status().message();
      }
      seen.push_back(std::move(o));
    }
    l.lock();
    for (auto& o : seen) {
      auto cur = watches_.find(o.schedule);
      if (cur == watches_.end() || cur->second.watch.schedule_commit != o.schedule_commit) continue;
      ready_[{o.schedule, o.url}] = std::move(o);
    }
  }
}

}  // namespace gatos
