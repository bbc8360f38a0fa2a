#include "gatos/nats/record_stream.h"

#include "bus_internal.h"
#include "gatos/model/record_parts.h"

namespace gatos {
namespace {

// Room left in each message for its headers (Nats-Msg-Id and
// Nats-Expected-Last-Sequence take under 100 bytes).
constexpr size_t kHeaderRoom = 512;

struct MsgDeleter {
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
};

}  // namespace

RecordStream::RecordStream(Bus& bus, RecordStreamConfig config, size_t max_part)
    : bus_(bus), config_(std::move(config)), max_part_(max_part) {}
RecordStream::~RecordStream() = default;

Result<std::unique_ptr<RecordStream>> RecordStream::Open(Bus& bus, const RecordStreamConfig& config) {
  if (config.subject.empty()) return InvalidArgumentError("RecordStream " + config.stream + ": no subject");
  Bus::StreamConfig sc;
  sc.name = config.stream;
  sc.subjects = {config.subject};
  sc.duplicate_window_ms = config.duplicate_window_ms;
  sc.max_age_ms = config.max_age_ms;
  sc.max_bytes = config.max_bytes;
  sc.replicas = config.replicas;
  GATOS_RETURN_IF_ERROR(bus.EnsureStream(sc));
  int64_t server_max = nats_internal::MaxPayload(*bus.impl_);
  if (server_max <= 0) server_max = 1 << 20;
  size_t max_part = static_cast<size_t>(server_max) - kHeaderRoom;
  if (config.max_part_bytes > 0) max_part = std::min(max_part, config.max_part_bytes);
  if (max_part <= kRecordPartHeader) {
    return InvalidArgumentError("RecordStream " + config.stream + ": parts of " + std::to_string(max_part) +
                                " bytes are too small");
  }
  return std::unique_ptr<RecordStream>(new RecordStream(bus, config, max_part));
}

Result<uint64_t> RecordStream::Append(int64_t seq, std::string_view record, uint64_t last,
                                      const std::function<bool(const Status&)>& retry) {
  GATOS_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRecord(seq, record, max_part_));
  const uint32_t count = static_cast<uint32_t>(parts.size());
  for (uint32_t i = 0; i < count; ++i) {
    GATOS_ASSIGN_OR_RETURN(RecordPart part, DecodeRecordPart(parts[i]));
    const std::string id = RecordPartMsgId(part);
    auto ack = bus_.JsPublish(config_.subject, parts[i], id, {{"Nats-Expected-Last-Sequence", std::to_string(last)}});
    while (!ack.ok() && ack.status().code() == StatusCode::kUnavailable && retry && retry(ack.status())) {
      ack = bus_.JsPublish(config_.subject, parts[i], id, {{"Nats-Expected-Last-Sequence", std::to_string(last)}});
    }
    if (!ack.ok()) {
      if (ack.status().code() == StatusCode::kAborted) {
        return AbortedError("append of record " + std::to_string(seq) + " to stream " + config_.stream +
                            " fenced: the stream is past sequence " + std::to_string(last) +
                            " (another leader appended): " + ack.status().message());
      }
      return ack.status();
    }
    if (ack->duplicate) {
      return AbortedError("append of record " + std::to_string(seq) + " to stream " + config_.stream +
                          ": message id " + id + " is in the stream already (stream sequence " +
                          std::to_string(ack->sequence) + ")");
    }
    last = ack->sequence;
  }
  return last;
}

Result<uint64_t> RecordStream::LastSequence() {
  GATOS_ASSIGN_OR_RETURN(Bus::StreamState st, bus_.GetStreamState(config_.stream));
  return st.last_sequence;
}

Result<uint64_t> RecordStream::FirstSequence() {
  GATOS_ASSIGN_OR_RETURN(Bus::StreamState st, bus_.GetStreamState(config_.stream));
  return st.first_sequence;
}

Result<std::optional<RecordStream::Stored>> RecordStream::Read(uint64_t stream_seq) {
  const std::string what = "read message " + std::to_string(stream_seq) + " of stream " + config_.stream;
  if (!nats_internal::Connected(*bus_.impl_)) return UnavailableError(what + ": not connected to NATS; retry later");
  natsMsg* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetMsg(&raw, nats_internal::JetStream(*bus_.impl_), config_.stream.c_str(), stream_seq, nullptr,
                           &jerr);
  std::unique_ptr<natsMsg, MsgDeleter> m(raw);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return std::optional<Stored>();
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what, jerr);
  Stored out;
  out.stream_seq = stream_seq;
  out.stored_ms = natsMsg_GetTime(m.get()) / 1'000'000;
  if (const char* d = natsMsg_GetData(m.get())) out.data.assign(d, static_cast<size_t>(natsMsg_GetDataLength(m.get())));
  return std::optional<Stored>(std::move(out));
}

}  // namespace gatos
