// AppendPipeline: a replicated leader's appends to the replicated log
// (docs/replication.md, "Pipelined appends"), on a thread of their own, so
// that the ledger thread decides, signs and indexes the next batches while
// the stream acknowledges the last one.
//
// Records are appended one at a time, in the order they were submitted, by
// `append`, which returns once the stream acknowledged the record (or
// refused it). Each append is fenced on the stream sequence the previous
// one was acknowledged at, never on a predicted one. The first failure ends
// the pipeline: the records submitted after it are failed without being
// sent, and Submit refuses new ones. So what the stream holds of the
// submitted records is always a prefix, acknowledged in order: a record is
// acknowledged only once every record before it is.
//
// Thread-safety: every method from any thread; `append` and `on_change` run
// on the pipeline's thread (on_change after each acknowledgement or the
// failure, without the pipeline's lock held).
#ifndef GATOS_LEDGER_APPEND_PIPELINE_H_
#define GATOS_LEDGER_APPEND_PIPELINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gatos/model/status.h"

namespace gatos {

class AppendPipeline {
 public:
  using AppendFn = std::function<Status(int64_t seq, const std::string& record)>;
  AppendPipeline(AppendFn append, std::function<void()> on_change);
  // Waits for the append in progress; the records not sent yet never are.
  ~AppendPipeline();
  AppendPipeline(const AppendPipeline&) = delete;
  AppendPipeline& operator=(const AppendPipeline&) = delete;

  // Queues record `seq` (greater than every one submitted before).
  // FailedPrecondition (the pipeline's failure) once an append failed.
  Status Submit(int64_t seq, std::string record);
  // The last log sequence the stream acknowledged (0: none yet).
  int64_t acknowledged() const;
  // OK until an append failed; then that append's status for good.
  Status failure() const;
  // Submitted and neither acknowledged nor failed.
  size_t outstanding() const;
  // Waits up to `wait` until `seq` is acknowledged (true) or the pipeline
  // failed (false).
  bool WaitFor(int64_t seq, std::chrono::milliseconds wait);

 private:
  void Loop();

  AppendFn append_;
  std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::condition_variable work_, progress_;
  std::deque<std::pair<int64_t, std::string>> queue_;
  bool sending_ = false;  // an append is in progress
  int64_t last_submitted_ = 0;
  int64_t acknowledged_ = 0;
  Status failure_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gatos

#endif  // GATOS_LEDGER_APPEND_PIPELINE_H_
