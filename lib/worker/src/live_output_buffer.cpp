#include "gatos/worker/live_output_buffer.h"

#include <algorithm>

namespace gatos::worker {

LiveOutputBuffer::LiveOutputBuffer(const LiveLimits& limits, int64_t now_ms)
    : limits_(limits),
      byte_tokens_(static_cast<double>(limits.burst_bytes)),
      message_tokens_(limits.burst_messages),
      last_refill_ms_(now_ms) {}

void LiveOutputBuffer::Append(int stream, std::string_view bytes) {
  if (stream != 1 && stream != 2) return;
  Stream& s = streams_[stream - 1];
  if (s.held.empty()) {
    s.dropping = false;
    s.held_offset = s.seen;
  }
  size_t room = s.dropping || s.held.size() >= limits_.buffer_bytes
                    ? 0
                    : limits_.buffer_bytes - s.held.size();
  size_t take = std::min(room, bytes.size());
  s.held.append(bytes.data(), take);
  if (take < bytes.size()) {
    s.dropping = true;
    dropped_bytes_ += static_cast<int64_t>(bytes.size() - take);
  }
  s.seen += static_cast<int64_t>(bytes.size());
}

void LiveOutputBuffer::Refill(int64_t now_ms) {
  if (now_ms <= last_refill_ms_) return;
  double secs = static_cast<double>(now_ms - last_refill_ms_) / 1000.0;
  last_refill_ms_ = now_ms;
  byte_tokens_ = std::min(static_cast<double>(limits_.burst_bytes),
                          byte_tokens_ + secs * static_cast<double>(limits_.bytes_per_s));
  message_tokens_ =
      std::min(limits_.burst_messages, message_tokens_ + secs * limits_.messages_per_s);
}

std::vector<LiveChunk> LiveOutputBuffer::Take(int64_t now_ms) {
  Refill(now_ms);
  std::vector<LiveChunk> out;
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int i = 0; i < 2; ++i) {
      Stream& s = streams_[i];
      if (s.held.empty() || message_tokens_ < 1 || byte_tokens_ < 1) continue;
      size_t n = std::min({s.held.size(), limits_.chunk_bytes, static_cast<size_t>(byte_tokens_)});
      LiveChunk c;
      c.stream = i + 1;
      c.offset = s.held_offset;
      c.data = s.held.substr(0, n);
      s.held.erase(0, n);
      s.held_offset += static_cast<int64_t>(n);
      byte_tokens_ -= static_cast<double>(n);
      message_tokens_ -= 1;
      published_bytes_ += static_cast<int64_t>(n);
      ++published_messages_;
      out.push_back(std::move(c));
      progressed = true;
    }
  }
  return out;
}

bool LiveOutputBuffer::TakeProgressSlot(int64_t now_ms) {
  Refill(now_ms);
  if (sent_progress_ && now_ms - last_progress_ms_ < limits_.progress_interval_ms) return false;
  if (message_tokens_ < 1) return false;
  message_tokens_ -= 1;
  ++published_messages_;
  last_progress_ms_ = now_ms;
  sent_progress_ = true;
  return true;
}

Progress WithRates(const Progress& before, int64_t before_ms, Progress now, int64_t now_ms) {
  for (ProgressCounter& c : now.counters) {
    c.rate = 0;
    for (const ProgressCounter& b : before.counters) {
      if (b.name != c.name) continue;
      if (now_ms - before_ms >= 100 && c.done >= b.done) {
        c.rate =
            static_cast<double>(c.done - b.done) * 1000.0 / static_cast<double>(now_ms - before_ms);
      } else {
        c.rate = b.rate;
      }
    }
  }
  return now;
}

}  // namespace gatos::worker
