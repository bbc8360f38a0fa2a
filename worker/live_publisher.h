// Publishes running jobs' output and progress on core NATS
// (docs/protocol.md, "Live output and progress"), off the jobs' path: the
// job's output tap only copies bytes into its bounded buffer
// (gatos/worker/live_output_buffer.h); one publisher thread, every
// kTickMs, sends what each job's budget allows and reads each job's
// progress file. Best effort: a failed publish is dropped, never retried;
// the signed result stays the record. A job that prints nothing and
// reports no progress costs two short critical sections.
//
// Scan jobs publish progress only, never lines (their output may name
// findings).
//
// Thread-safety: thread-safe. Begin/End from runner threads, the tap from
// the thread that waits for the job; the publisher thread owns the bus
// calls. The Bus must outlive it.
#ifndef GATOS_WORKER_LIVE_PUBLISHER_H_
#define GATOS_WORKER_LIVE_PUBLISHER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "gatos/nats/bus.h"
#include "gatos/worker/live_output_buffer.h"

namespace gatos::worker {

class LivePublisher {
 public:
  static constexpr int kTickMs = 100;

  struct LiveJob;  // one running job's live state

  LivePublisher(Bus* bus, const LiveLimits& limits);
  ~LivePublisher();  // Stop()
  void Start();
  void Stop();

  // A job about to run. `lines`: publish its output (false for scan jobs).
  // `progress_file`: the file the job may write progress lines to ("" = none).
  std::shared_ptr<LiveJob> Begin(const std::string& job_hex, int64_t attempt,
                                 const std::string& owner_hex, bool lines,
                                 const std::string& progress_file);
  // The tap for ExecSpec::output_tap (empty when `lines` was false).
  std::function<void(int, std::string_view)> Tap(const std::shared_ptr<LiveJob>& job);
  // The job's command ended: what is held is still sent (within the budget,
  // for at most a second), the progress file read once more, then it is
  // forgotten.
  void End(const std::shared_ptr<LiveJob>& job);

  struct Stats {
    int64_t messages = 0, bytes = 0, dropped_bytes = 0, failed = 0;
  };
  Stats stats() const;

 private:
  void Loop();
  // Publishes what `job` may send now; true when it is done with.
  bool Service(LiveJob& job, int64_t now_ms, bool stopping);
  void Send(LiveJob& job, const LiveMessage& m);

  Bus* bus_;
  LiveLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<LiveJob>> jobs_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread thread_;
  std::atomic<int64_t> messages_{0}, bytes_{0}, dropped_{0}, failed_{0};
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_LIVE_PUBLISHER_H_
