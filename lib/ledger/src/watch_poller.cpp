#include "gatos/ledger/watch_poller.h"

#include <chrono>
#include <thread>

namespace gatos {

WatchPoller::WatchPoller(ListRemoteRefs list, std::function<int64_t()> now_ms)
    : state_(std::make_shared<State>()) {
  state_->list = std::move(list);
  state_->now_ms = std::move(now_ms);
  std::thread([s = state_] { Run(s); }).detach();
}

WatchPoller::~WatchPoller() {
  {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->stop = true;
    state_->watches.clear();
  }
  state_->cv.notify_all();
}

void WatchPoller::SetWatches(std::vector<Watch> watches) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> l(s.mu);
    std::map<std::string, Entry> next;
    for (auto& w : watches) {
      Entry e{w, 0};
      auto old = s.watches.find(w.schedule);
      if (old != s.watches.end() && old->second.watch.schedule_commit == w.schedule_commit) {
        e.next_ms = old->second.next_ms;
      }
      next.emplace(w.schedule, std::move(e));
    }
    s.watches = std::move(next);
  }
  s.cv.notify_all();
}

std::vector<WatchPoller::Observation> WatchPoller::Take() {
  State& s = *state_;
  std::lock_guard<std::mutex> l(s.mu);
  std::vector<Observation> out;
  out.reserve(s.ready.size());
  for (auto& [key, o] : s.ready) out.push_back(std::move(o));
  s.ready.clear();
  return out;
}

void WatchPoller::Run(const std::shared_ptr<State>& state) {
  State& s = *state;
  std::unique_lock<std::mutex> l(s.mu);
  while (!s.stop) {
    const int64_t now = s.now_ms();
    // The first watch due; read it without the lock.
    const Entry* due = nullptr;
    int64_t wake = now + 60'000;
    for (const auto& [name, e] : s.watches) {
      if (e.next_ms <= now) {
        due = &e;
        break;
      }
      wake = std::min(wake, e.next_ms);
    }
    if (!due) {
      s.cv.wait_for(l, std::chrono::milliseconds(std::max<int64_t>(wake - now, 1)));
      continue;
    }
    const Watch w = due->watch;
    s.watches[w.schedule].next_ms = now + w.poll_ms;
    l.unlock();
    std::vector<Observation> seen;
    for (const std::string& url : w.urls) {
      Observation o{w.schedule, w.schedule_commit, url, 0, false, "", {}};
      auto refs = s.list(url);
      o.seen_ms = s.now_ms();
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
      auto cur = s.watches.find(o.schedule);
      if (cur == s.watches.end() || cur->second.watch.schedule_commit != o.schedule_commit)
        continue;
      s.ready[{o.schedule, o.url}] = std::move(o);
    }
  }
}

}  // namespace gatos
