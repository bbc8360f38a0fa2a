// RecordStream: the replicated write-ahead log of a ledger on a JetStream
// stream of its own (docs/replication.md, "The replicated write-ahead log").
//
// The leader appends each batch record (its log sequence, log commit and
// objects: docs/ledger-format.md section 7a) as one or more parts
// (gatos/model/record_parts.h) that each fit the server's payload limit.
// Every part is published with Nats-Msg-Id = RecordPartMsgId(...) and
// Nats-Expected-Last-Sequence = the stream sequence of the message before
// it: that header is the fence. An append from a leader that was deposed
// fails, whatever it believes, because the new leader appended first. The
// record is committed when the stream acknowledged its last part (stored
// by a quorum of the stream's replicas).
//
// Codes, beside those of bus.h:
//   Append  Aborted when the stream's last sequence is not `last` (another
//           leader appended) or a part's message id is already in the
//           stream (this log sequence was appended before: by another
//           leader, or by this one before a lost acknowledgement; the
//           caller treats both as a failed append and compares its batch
//           with the stream's as a follower)
//   Read    nullopt past the stream's end (or a message removed by age)
//
// Thread-safety: thread-safe. Must be destroyed before its Bus.
#ifndef GATOS_NATS_RECORD_STREAM_H_
#define GATOS_NATS_RECORD_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/status.h"
#include "gatos/nats/bus.h"

namespace gatos {

struct RecordStreamConfig {
  std::string stream;    // the stream's name
  std::string subject;   // the one subject it captures
  int replicas = 1;      // 1..5: min(cluster size, 3) in production
  int64_t max_age_ms = 0;  // 0: keep every record (never set for a ledger: see max_bytes)
  int64_t duplicate_window_ms = 120'000;
  // Parts are at most this long (0: the server's max payload less room
  // for the headers).
  size_t max_part_bytes = 0;
  // Retention (docs/replication.md, "Retention"): -1 keeps every record;
  // else the oldest go first and the newest is always kept, so the fence
  // and caught-up followers never miss one.
  int64_t max_bytes = -1;
};

class RecordStream {
 public:
  // Creates the stream (file storage, limits retention) or checks it.
  static Result<std::unique_ptr<RecordStream>> Open(Bus& bus, const RecordStreamConfig& config);
  ~RecordStream();
  RecordStream(const RecordStream&) = delete;
  RecordStream& operator=(const RecordStream&) = delete;

  // Appends record `seq`, its first part fenced on the stream's last
  // sequence being `last`. Returns the stream sequence of its last part
  // (the next append's `last`).
  // `retry`, when given, is asked after a part's publish failed with
  // Unavailable (no responders: the stream had no leader; or no
  // acknowledgement in time); true publishes that part again, with the
  // same message id and fence (it waits as it sees fit first). Safe
  // whatever became of the first publish: one that was stored makes the
  // next fail, fenced or as a duplicate (Aborted).
  Result<uint64_t> Append(int64_t seq, std::string_view record, uint64_t last,
                          const std::function<bool(const Status&)>& retry = nullptr);

  // The stream's last sequence (0 when empty).
  Result<uint64_t> LastSequence();
  // Its first sequence (messages before it were removed by age; 0 or
  // last + 1 when empty).
  Result<uint64_t> FirstSequence();

  struct Stored {
    uint64_t stream_seq = 0;
    int64_t stored_ms = 0;  // when the stream stored it (Unix ms, the stream leader's clock)
    std::string data;
  };
  // The message at `stream_seq`.
  Result<std::optional<Stored>> Read(uint64_t stream_seq);

  size_t max_part_bytes() const { return max_part_; }
  const RecordStreamConfig& config() const { return config_; }

 private:
  RecordStream(Bus& bus, RecordStreamConfig config, size_t max_part);
  Bus& bus_;
  RecordStreamConfig config_;
  size_t max_part_;
};

}  // namespace gatos

#endif  // GATOS_NATS_RECORD_STREAM_H_
