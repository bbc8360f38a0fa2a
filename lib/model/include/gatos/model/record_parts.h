// The replicated write-ahead log's framing: one batch record (the bytes the
// local write-ahead log holds for a batch, docs/ledger-format.md section 7a)
// split into parts that each fit a NATS message, and joined again only when
// every part of it arrived (docs/replication.md, "Records and parts").
//
// Part (all integers little-endian):
//   "GRPL0001" (8) | log sequence (u64) | part index (u32) | part count (u32)
//   | record length (u64) | BLAKE3 of the whole record (32) | chunk
// The parts of one record are published in index order, back to back, on
// one stream; each names the record's sequence, length and digest, so a
// joiner refuses a part that belongs to another record, and a record whose
// joined bytes do not hash to the digest never comes out.
//
// Pure; fuzzed (tests/fuzz/record_parts_fuzz.cpp).
// Thread-safety: free functions are; a RecordJoiner belongs to one thread.
#ifndef GATOS_MODEL_RECORD_PARTS_H_
#define GATOS_MODEL_RECORD_PARTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/blake3.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr size_t kRecordPartHeader = 64;
// Larger records are refused (the local write-ahead log's own bound).
inline constexpr uint64_t kMaxJoinedRecord = uint64_t{1} << 32;

struct RecordPart {
  int64_t seq = 0;
  uint32_t index = 0;
  uint32_t count = 0;
  uint64_t total = 0;  // the whole record's length
  Digest32 digest{};   // BLAKE3 of the whole record
  std::string_view chunk;
};

// Splits `record` (log sequence `seq` >= 1) into parts of at most
// `max_part_bytes` each, header included. InvalidArgument when seq < 1, the
// record is empty or larger than kMaxJoinedRecord, or max_part_bytes leaves
// no room for a chunk (<= kRecordPartHeader), or it would take more than
// 2^32 - 1 parts.
Result<std::vector<std::string>> SplitRecord(int64_t seq, std::string_view record, size_t max_part_bytes);

// Strict: InvalidArgument (saying what is wrong) unless `bytes` is one part
// as SplitRecord writes it: magic, seq >= 1, 0 <= index < count, a
// non-empty chunk no longer than the record, record length within bounds.
// The chunk points into `bytes`.
Result<RecordPart> DecodeRecordPart(std::string_view bytes);

// The message id a part is published under (the stream's duplicate
// detection): the sequence alone for a record of one part;
// "<seq>.<index>.<first 12 hex of the record's digest>" for each part of a
// split one, so that the parts a dead leader left of an incomplete record
// do not make the stream refuse as duplicates the parts of the record the
// next leader writes at that sequence.
std::string RecordPartMsgId(const RecordPart& part);

struct JoinedRecord {
  int64_t seq = 0;
  std::string bytes;
};

// Joins parts read in stream order.
//
// A part with index 0 starts a record; an incomplete record it interrupts
// is dropped (a leader that died between two parts: its record was never
// acknowledged, and the next leader publishes that sequence again) and
// counted in abandoned(). Any other part must be the next one of the
// record being joined (same sequence, count, length and digest, index one
// more): otherwise InvalidArgument, and the joiner forgets the record. A
// record's last part yields it once its length and digest check (DataLoss
// otherwise).
class RecordJoiner {
 public:
  // nullopt while the record is incomplete.
  Result<std::optional<JoinedRecord>> Add(std::string_view part);
  // The record being joined (0 = none).
  int64_t pending_seq() const { return pending_ ? pending_->seq : 0; }
  uint64_t abandoned() const { return abandoned_; }

 private:
  struct Pending {
    int64_t seq = 0;
    uint32_t next = 0;
    uint32_t count = 0;
    uint64_t total = 0;
    Digest32 digest{};
    std::string bytes;
  };
  std::optional<Pending> pending_;
  uint64_t abandoned_ = 0;
};

}  // namespace gatos

#endif  // GATOS_MODEL_RECORD_PARTS_H_
