// What a worker publishes of a running job's output, and when
// (docs/protocol.md, "Live output and progress"): bounded in memory, in
// bytes and messages per second, so that a job printing 100 MB costs the
// bus at most the budget and the worker at most the buffer; the rest is
// dropped from the live view (the result keeps the first cap bytes, as
// always). Offsets let a reader see where bytes were dropped.
//
// Thread-safety: none; one per running job, used under its owner's lock.
#ifndef GATOS_WORKER_LIVE_OUTPUT_BUFFER_H_
#define GATOS_WORKER_LIVE_OUTPUT_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/live_output.h"

namespace gatos::worker {

struct LiveLimits {
  int64_t bytes_per_s = 32 * 1024;  // sustained, per job
  int64_t burst_bytes = 64 * 1024;
  double messages_per_s = 10;  // sustained, per job (output and progress)
  double burst_messages = 10;
  size_t buffer_bytes = 64 * 1024;  // held per stream while waiting for budget
  size_t chunk_bytes = kMaxLiveChunkBytes;
  int64_t progress_interval_ms = 500;  // at most one progress report per interval
};

struct LiveChunk {
  int stream = 1;  // 1 stdout, 2 stderr
  int64_t offset = 0;
  std::string data;
};

class LiveOutputBuffer {
 public:
  LiveOutputBuffer(const LiveLimits& limits, int64_t now_ms);

  // Bytes the job wrote on `stream` (1 or 2). Kept while the buffer has room;
  // beyond it they are dropped until what is held has been taken, and the
  // next chunk's offset shows the gap.
  void Append(int stream, std::string_view bytes);
  // The chunks the budget allows at `now_ms`, oldest first, each at most
  // chunk_bytes. Takes one message per chunk and its bytes from the budget.
  std::vector<LiveChunk> Take(int64_t now_ms);
  // Whether a progress report may go out at `now_ms` (interval and message
  // budget); when true, the message is counted.
  bool TakeProgressSlot(int64_t now_ms);
  bool HasPending() const { return !streams_[0].held.empty() || !streams_[1].held.empty(); }

  int64_t published_bytes() const { return published_bytes_; }
  int64_t published_messages() const { return published_messages_; }
  int64_t dropped_bytes() const { return dropped_bytes_; }

 private:
  struct Stream {
    std::string held;
    int64_t held_offset = 0;  // offset of held[0]
    int64_t seen = 0;         // bytes the job wrote on it so far
    bool dropping = false;    // dropping until `held` is empty
  };
  void Refill(int64_t now_ms);

  LiveLimits limits_;
  Stream streams_[2];
  double byte_tokens_, message_tokens_;
  int64_t last_refill_ms_;
  int64_t last_progress_ms_ = 0;
  bool sent_progress_ = false;
  int64_t published_bytes_ = 0, published_messages_ = 0, dropped_bytes_ = 0;
};

// `now` with each counter's rate per second since `before` (same counter
// name, `done` did not shrink, at least 100 ms apart); other counters keep
// the rate `before` had for them, or none.
Progress WithRates(const Progress& before, int64_t before_ms, Progress now, int64_t now_ms);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_LIVE_OUTPUT_BUFFER_H_
