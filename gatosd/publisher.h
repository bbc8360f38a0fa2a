// gatosd's JetStream publisher thread.
//
// Thread-safety: Enqueue from any thread; Stop once.
#ifndef GATOS_GATOSD_PUBLISHER_H_
#define GATOS_GATOSD_PUBLISHER_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gatos/ledger/job_service.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/job_stream.h"
#include <set>
#include <thread>

#include "gatos/model/rpc.h"
#include "gatos/sys/log.h"
#include "metrics.h"

namespace gatos::gatosd {

// Publishes job events in order, retrying while JetStream is unreachable. A
// lost event is never lost state: the log is the outbox, and every start
// offers every pending job again (the stream drops duplicates by id).
class Publisher {
 public:
  Publisher(Bus* bus, Metrics* metrics) : bus_(bus), metrics_(metrics) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Publisher() { Stop(std::chrono::milliseconds(0)); }

  void Enqueue(std::vector<ServiceEvent> events) {
    if (events.empty()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& e : events) {
        if (e.kind == ServiceEvent::Kind::kCore) {
          // At most once, and cheap: straight to the connection's buffer.
          Status s = bus_->Publish(e.subject, e.data);
          if (!s.ok()) Log("cancel notice on " + e.subject + " not sent: " + s.message());
          continue;
        }
        if (!e.msg_id.empty() && !queued_ids_.insert(e.msg_id).second) continue;
        q_.push_back(std::move(e));
      }
      metrics_->SetPublishBacklog(q_.size());
    }
    cv_.notify_one();
  }
  size_t backlog() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }
  void Stop(std::chrono::milliseconds grace) {
    if (!thread_.joinable()) return;
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline && backlog() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    size_t left = backlog();
    if (left) Log(std::to_string(left) + " job events unpublished at shutdown; the next start offers pending jobs again");
  }

 private:
  void Loop() {
    int backoff_ms = 100;
    bool warned = false;
    while (true) {
      ServiceEvent item;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !q_.empty(); });
        if (stop_) return;
        item = q_.front();
      }
      if (!EnsurePoolConsumer(item.subject)) {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
        backoff_ms = std::min(backoff_ms * 2, 2000);
        continue;
      }
      auto ack = bus_->JsPublish(item.subject, item.data, item.msg_id);
      if (!ack.ok() && ack.status().code() == StatusCode::kUnavailable) {
        if (!warned) Log("JetStream unavailable, job events wait: " + ack.status().message());
        warned = true;
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
        backoff_ms = std::min(backoff_ms * 2, 2000);
        continue;
      }
      if (warned) Log("JetStream reachable again");
      warned = false;
      backoff_ms = 100;
      if (!ack.ok()) {
        Log("dropping event " + item.subject + " " + item.msg_id + ": " + ack.status().message());
      } else {
        metrics_->CountPublished();
      }
      std::lock_guard<std::mutex> l(mu_);
      q_.pop_front();
      queued_ids_.erase(item.msg_id);
      metrics_->SetPublishBacklog(q_.size());
    }
  }

  // The first offer of a pool creates its workers' durable consumer, so the
  // pool's offers wait for its first worker (workers only bind to it).
  bool EnsurePoolConsumer(const std::string& subject) {
    const std::string prefix = std::string(rpc::kPendingSubject) + ".";
    if (subject.rfind(prefix, 0) != 0 || pool_consumers_.count(subject)) return true;
    auto c = bus_->PullSubscribe(rpc::WorkerConsumerConfig(subject.substr(prefix.size())));
    if (!c.ok()) {
      Log("cannot create the consumer of " + subject + ": " + c.status().message());
      return false;
    }
    pool_consumers_.insert(subject);
    return true;
  }

  Bus* bus_;
  Metrics* metrics_;
  std::set<std::string> pool_consumers_;  // the publisher thread's
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ServiceEvent> q_;
  std::set<std::string> queued_ids_;
  bool stop_ = false;
  std::thread thread_;
};


}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_PUBLISHER_H_
