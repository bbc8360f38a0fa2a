// The shared state of one scan run (scanner.cpp): the queues between the
// walk, the scanning threads and the SQLite writer, the jobs on them, and
// the counters and problems every thread reports into.
//
// Thread-safety: Queue and RunState are safe to share; jobs move between
// threads by value.
#ifndef GATOS_SCAN_SRC_SCAN_RUN_H_
#define GATOS_SCAN_SRC_SCAN_RUN_H_

#include <git2.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gatos/scan/done_ledger.h"
#include "gatos/scan/scanner.h"
#include "gatos/scan/pack_store.h"

namespace gatos::scan {

using Clock = std::chrono::steady_clock;

// A bounded multi-producer multi-consumer queue; Close() wakes everyone and
// makes Pop return false once drained.
template <typename T>
class Queue {
 public:
  explicit Queue(size_t cap) : cap_(cap) {}
  void Push(T v) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return q_.size() < cap_ || closed_; });
    q_.push_back(std::move(v));
    not_empty_.notify_one();
  }
  bool Pop(T* out) {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    *out = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  // Pops up to `max` items, waiting at most `wait` for the first.
  size_t PopSome(std::vector<T>* out, size_t max, std::chrono::milliseconds wait, bool* closed) {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait_for(l, wait, [&] { return !q_.empty() || closed_; });
    size_t n = 0;
    while (!q_.empty() && n < max) {
      out->push_back(std::move(q_.front()));
      q_.pop_front();
      ++n;
    }
    *closed = closed_ && q_.empty();
    not_full_.notify_all();
    return n;
  }
  // True when nothing waits to be popped (a hint: it may change at once).
  bool Empty() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.empty();
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<T> q_;
  size_t cap_;
  bool closed_ = false;
};

struct BlobJob {
  git_oid oid;
  std::string commit;
  std::string path;
  std::optional<PackLocation> loc;  // in the packs read directly, if there
};

// Blobs are handed to scanning threads in runs that are contiguous in the
// pack, so each thread's delta-base cache serves the run's deltas.
using BlobRun = std::vector<BlobJob>;

using WriterItem = std::variant<BlobRecord, BlobLocation>;

// Shared state of one run. Counters are atomics read by the progress thread.
struct RunState {
  std::atomic<uint64_t> commits_walked{0}, blobs_seen{0}, blobs_scanned{0}, bytes_scanned{0},
      blobs_skipped_done{0}, blobs_skipped_binary{0}, bytes_skipped_binary{0},
      blobs_skipped_too_large{0}, bytes_skipped_too_large{0}, blobs_not_reached{0}, findings_new{0};
  std::atomic<bool> stop{false};  // stop reading blobs (budget or fatal error)
  std::atomic<bool> budget_hit{false};
  std::optional<Clock::time_point> deadline;
  std::mutex mu;
  std::vector<std::string> problems;  // why the run is partial; never secret bytes

  void Problem(std::string what) {
    std::lock_guard<std::mutex> l(mu);
    if (problems.size() < 100) problems.push_back(std::move(what));
  }
  bool PastDeadline() {
    if (deadline && Clock::now() >= *deadline) {
      if (!budget_hit.exchange(true)) Problem("the --max-seconds budget ran out");
      stop = true;
    }
    return stop;
  }
  ScanCounters Snapshot() const {
    ScanCounters c;
    c.commits_walked = commits_walked;
    c.blobs_seen = blobs_seen;
    c.blobs_scanned = blobs_scanned;
    c.bytes_scanned = bytes_scanned;
    c.blobs_skipped_done = blobs_skipped_done;
    c.blobs_skipped_binary = blobs_skipped_binary;
    c.bytes_skipped_binary = bytes_skipped_binary;
    c.blobs_skipped_too_large = blobs_skipped_too_large;
    c.bytes_skipped_too_large = bytes_skipped_too_large;
    c.blobs_not_reached = blobs_not_reached;
    c.findings_new = findings_new;
    return c;
  }
};


}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_SCAN_RUN_H_
