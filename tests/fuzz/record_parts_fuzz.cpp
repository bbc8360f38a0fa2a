// libFuzzer target: the replicated write-ahead log's parts (record_parts.h),
// both ways.
// Invariants: no crash; a record split under any part size joins back to
// exactly itself, at its last part and not before; and any byte sequence fed
// to a joiner as parts (hostile publishers on the stream) yields only
// records that hash to the digest their parts name, each exactly as long
// as they say, and a record split again from one of them joins back too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/record_parts.h"

namespace {

void RoundTrip(int64_t seq, std::string_view record, size_t max_part) {
  auto parts = gatos::SplitRecord(seq, record, max_part);
  if (!parts.ok()) {
    if (!record.empty() && max_part > gatos::kRecordPartHeader && seq >= 1) abort();
    return;
  }
  gatos::RecordJoiner j;
  for (size_t i = 0; i < parts->size(); ++i) {
    if ((*parts)[i].size() > max_part) abort();
    auto r = j.Add((*parts)[i]);
    if (!r.ok()) abort();
    if (r->has_value() != (i + 1 == parts->size())) abort();
    if (r->has_value() && ((*r)->bytes != record || (*r)->seq != seq)) abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.size() < 2) return 0;
  // Mode 1: the input after two bytes is a record; the two bytes the part size.
  const size_t max_part = gatos::kRecordPartHeader + 1 + (static_cast<uint8_t>(in[0]) | (static_cast<uint8_t>(in[1]) << 8)) % 512;
  RoundTrip(1 + static_cast<uint8_t>(in[0]), in.substr(2), max_part);
  // Mode 2: the input is parts, each preceded by a 2-byte length.
  gatos::RecordJoiner j;
  std::string_view rest = in;
  while (rest.size() >= 2) {
    size_t len = static_cast<uint8_t>(rest[0]) | (static_cast<uint8_t>(rest[1]) << 8);
    rest.remove_prefix(2);
    len = std::min(len, rest.size());
    std::string_view part = rest.substr(0, len);
    rest.remove_prefix(len);
    auto r = j.Add(part);
    if (!r.ok() || !r->has_value()) continue;
    auto last = gatos::DecodeRecordPart(part);
    if (!last.ok()) abort();
    const gatos::JoinedRecord& rec = **r;
    if (rec.bytes.size() != last->total || rec.seq != last->seq) abort();
    if (gatos::Blake3(rec.bytes) != last->digest) abort();
    RoundTrip(rec.seq, rec.bytes, gatos::kRecordPartHeader + 7);
  }
  return 0;
}
