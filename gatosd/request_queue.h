// The ledger thread's two queues: requests as NATS callbacks and local
// connections enqueue them, and batches the decoder thread authenticated.
//
// Thread-safety: each queue is safe from any thread.
#ifndef GATOS_GATOSD_REQUEST_QUEUE_H_
#define GATOS_GATOSD_REQUEST_QUEUE_H_

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

namespace gatos::gatosd {

// What a request carries from its transport to the ledger thread.

struct Request {
  ServiceRequest req;
  Message nats;                                // NATS: reply through the bus
  std::shared_ptr<std::promise<std::string>> local;  // local socket: the connection thread waits
};

class RequestQueue {
 public:
  // What a request offered to a closed queue is answered.
  static std::string StoppingReply() {
    return rpc::Dump(rpc::ErrorReply(TransitionError::kRetry, "gatosd is stopping; ask again"));
  }
  // False once closed: a local request was answered "retry" here; a NATS
  // request is left in `r` for the caller to answer (a dropped one would
  // keep its client waiting out its whole timeout).
  bool Push(Request& r) {
    bool queued;
    {
      std::lock_guard<std::mutex> l(mu_);
      queued = EnqueueLocked(r);
    }
    cv_.notify_one();
    return queued;
  }
  // Together: the ledger thread takes them in the same batch when it can.
  void PushAll(std::vector<Request> rs) {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& r : rs) (void)EnqueueLocked(r);  // local requests: answered when refused
    }
    cv_.notify_one();
  }
  // Waits up to `wait` for the first request, then takes everything waiting,
  // up to `max`. Empty on timeout or when closed and drained.
  std::vector<Request> PopBatch(size_t max, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, wait, [&] { return !q_.empty() || closed_; });
    std::vector<Request> out;
    while (!q_.empty() && out.size() < max) {
      out.push_back(std::move(q_.front()));
      q_.pop_front();
    }
    return out;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> l(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() {
    std::lock_guard<std::mutex> l(mu_);
    return closed_;
  }
  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }

 private:
  bool EnqueueLocked(Request& r) {
    if (closed_) {
      if (r.local) {
        r.local->set_value(StoppingReply());
        r.local.reset();
      }
      return false;
    }
    q_.push_back(std::move(r));
    return true;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> q_;
  bool closed_ = false;
};

// Batches authenticated by the decoder thread (JobService::Prepare), in the
// order their requests arrived, waiting for the ledger thread. Bounded: a
// decoder that runs ahead waits, and requests queue in RequestQueue.
struct PreparedRequests {
  std::vector<Request> requests;
  PreparedBatch prepared;
};

class PreparedQueue {
 public:
  // False when closed (the batch is dropped: only at shutdown, after the
  // ledger thread stopped taking batches).
  bool Push(PreparedRequests p) {
    std::unique_lock<std::mutex> l(mu_);
    space_.wait(l, [&] { return q_.size() < kMaxWaiting || closed_; });
    if (closed_) return false;
    q_.push_back(std::move(p));
    ready_.notify_one();
    return true;
  }
  // Waits up to `wait` for a batch, then merges every waiting batch into
  // one log batch (up to `max` requests). nullopt on timeout, or when
  // closed and drained.
  std::optional<PreparedRequests> Pop(size_t max, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    ready_.wait_for(l, wait, [&] { return !q_.empty() || closed_ || woken_; });
    woken_ = false;
    if (q_.empty()) return std::nullopt;
    PreparedRequests out = std::move(q_.front());
    q_.pop_front();
    while (!q_.empty() && out.requests.size() + q_.front().requests.size() <= max) {
      PreparedRequests& next = q_.front();
      AppendPrepared(&out.prepared, std::move(next.prepared));
      for (auto& r : next.requests) out.requests.push_back(std::move(r));
      q_.pop_front();
    }
    space_.notify_all();
    return out;
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    ready_.notify_all();
    space_.notify_all();
  }
  // Ends the wait of a Pop in progress (or the next one) early: something
  // else for the ledger thread (an acknowledged append).
  void Wake() {
    std::lock_guard<std::mutex> l(mu_);
    woken_ = true;
    ready_.notify_all();
  }
  bool drained() {
    std::lock_guard<std::mutex> l(mu_);
    return closed_ && q_.empty();
  }

 private:
  static constexpr size_t kMaxWaiting = 4;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<PreparedRequests> q_;
  bool closed_ = false;
  bool woken_ = false;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_REQUEST_QUEUE_H_
