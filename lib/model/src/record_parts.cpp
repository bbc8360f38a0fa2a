#include "gatos/model/record_parts.h"

#include <cstring>
#include <limits>

namespace gatos {
namespace {

constexpr char kMagic[8] = {'G', 'R', 'P', 'L', '0', '0', '0', '1'};

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string Name(int64_t seq, uint32_t index, uint32_t count) {
  return "part " + std::to_string(index + 1) + " of " + std::to_string(count) + " of record " +
         std::to_string(seq);
}

}  // namespace

Result<std::vector<std::string>> SplitRecord(int64_t seq, std::string_view record, size_t max_part_bytes) {
  if (seq < 1) return InvalidArgumentError("SplitRecord: log sequence " + std::to_string(seq) + " is not >= 1");
  if (record.empty()) return InvalidArgumentError("SplitRecord: empty record");
  if (record.size() > kMaxJoinedRecord) {
    return InvalidArgumentError("SplitRecord: record of " + std::to_string(record.size()) +
                                " bytes is larger than the limit of " + std::to_string(kMaxJoinedRecord));
  }
  if (max_part_bytes <= kRecordPartHeader) {
    return InvalidArgumentError("SplitRecord: a part of at most " + std::to_string(max_part_bytes) +
                                " bytes leaves no room after its " + std::to_string(kRecordPartHeader) +
                                "-byte header");
  }
  const size_t chunk = max_part_bytes - kRecordPartHeader;
  const uint64_t count = (record.size() + chunk - 1) / chunk;
  if (count > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgumentError("SplitRecord: " + std::to_string(count) + " parts are too many");
  }
  const Digest32 digest = Blake3(record);
  std::vector<std::string> parts;
  parts.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view c = record.substr(i * chunk, chunk);
    std::string p;
    p.reserve(kRecordPartHeader + c.size());
    p.append(kMagic, sizeof kMagic);
    PutLe(&p, static_cast<uint64_t>(seq), 8);
    PutLe(&p, i, 4);
    PutLe(&p, count, 4);
    PutLe(&p, record.size(), 8);
    p.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    p.append(c);
    parts.push_back(std::move(p));
  }
  return parts;
}

Result<RecordPart> DecodeRecordPart(std::string_view bytes) {
  if (bytes.size() <= kRecordPartHeader) {
    return InvalidArgumentError("record part of " + std::to_string(bytes.size()) +
                                " bytes: shorter than its header and a chunk");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return InvalidArgumentError("record part: no GRPL0001 magic");
  }
  RecordPart p;
  const uint64_t seq = GetLe(bytes.data() + 8, 8);
  p.index = static_cast<uint32_t>(GetLe(bytes.data() + 16, 4));
  p.count = static_cast<uint32_t>(GetLe(bytes.data() + 20, 4));
  p.total = GetLe(bytes.data() + 24, 8);
  std::memcpy(p.digest.data(), bytes.data() + 32, p.digest.size());
  p.chunk = bytes.substr(kRecordPartHeader);
  if (seq < 1 || seq > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("record part: log sequence " + std::to_string(seq) + " out of range");
  }
  p.seq = static_cast<int64_t>(seq);
  if (p.count == 0 || p.index >= p.count) {
    return InvalidArgumentError("record part: index " + std::to_string(p.index) + " of " +
                                std::to_string(p.count) + " parts");
  }
  if (p.total == 0 || p.total > kMaxJoinedRecord || p.chunk.size() > p.total) {
    return InvalidArgumentError(Name(p.seq, p.index, p.count) + ": record length " + std::to_string(p.total) +
                                " with a chunk of " + std::to_string(p.chunk.size()) + " bytes");
  }
  return p;
}

std::string RecordPartMsgId(const RecordPart& p) {
  if (p.count <= 1) return std::to_string(p.seq);
  return std::to_string(p.seq) + "." + std::to_string(p.index) + "." + DigestHex(p.digest).substr(0, 12);
}

Result<std::optional<JoinedRecord>> RecordJoiner::Add(std::string_view bytes) {
  auto decoded = DecodeRecordPart(bytes);
  if (!decoded.ok()) {
    pending_.reset();
    return decoded.status();
  }
  const RecordPart& p = *decoded;
  if (p.index == 0) {
    if (pending_) ++abandoned_;
    pending_ = Pending{p.seq, 0, p.count, p.total, p.digest, {}};
  } else {
    const bool follows = pending_ && pending_->seq == p.seq && pending_->count == p.count &&
                         pending_->total == p.total && pending_->digest == p.digest &&
                         pending_->next == p.index;
    if (!follows) {
      std::string why = pending_ ? "record " + std::to_string(pending_->seq) + " expected part " +
                                       std::to_string(pending_->next + 1) + " of " +
                                       std::to_string(pending_->count)
                                 : "no record was started";
      pending_.reset();
      return InvalidArgumentError(Name(p.seq, p.index, p.count) + " does not follow the part before (" + why + ")");
    }
  }
  Pending& r = *pending_;
  if (p.chunk.size() > r.total - r.bytes.size()) {
    const int64_t seq = r.seq;
    pending_.reset();
    return InvalidArgumentError(Name(p.seq, p.index, p.count) + " runs past the record's length of " +
                                std::to_string(p.total) + " bytes (record " + std::to_string(seq) + ")");
  }
  r.bytes.append(p.chunk);
  r.next = p.index + 1;
  if (r.next < r.count) return std::optional<JoinedRecord>();
  Pending done = std::move(r);
  pending_.reset();
  if (done.bytes.size() != done.total) {
    return DataLossError("record " + std::to_string(done.seq) + ": its " + std::to_string(done.count) +
                         " parts hold " + std::to_string(done.bytes.size()) + " bytes, not " +
                         std::to_string(done.total));
  }
  if (Blake3(done.bytes) != done.digest) {
    return DataLossError("record " + std::to_string(done.seq) + ": its joined parts do not hash to the digest they name");
  }
  return std::optional<JoinedRecord>(JoinedRecord{done.seq, std::move(done.bytes)});
}

}  // namespace gatos
