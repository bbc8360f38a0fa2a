// libFuzzer target: what gatosd reads from the network for a result or a
// submit: the RPC frame, the object batch, and the result checks over raw
// commit and tree objects (hand-parsed in result.cpp).
// Invariants: no crash; a decoded batch re-encodes to the same bytes; a
// result that passes every check has a canonical poe.json and two parents.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/git/result.h"
#include "gatos/model/rpc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  nlohmann::json header;
  std::string_view batch_bytes = bytes;
  if (gatos::rpc::DecodeFrame(bytes, gatos::rpc::kMaxJsonRequest, &header, &batch_bytes).ok()) {
    (void)gatos::rpc::StringField(header, "commit");
  } else {
    batch_bytes = bytes;
  }
  gatos::BatchLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_objects = 64;
  auto objects = gatos::DecodeObjectBatch(batch_bytes, limits);
  if (!objects.ok()) return 0;
  if (gatos::EncodeObjectBatch(*objects) != batch_bytes) abort();
  gatos::ObjectLookup lookup = gatos::BatchLookup(&*objects, nullptr);
  for (const auto& o : *objects) {
    if (o.type != gatos::ObjectType::kCommit) continue;
    gatos::ResultReport r = gatos::CheckResultCommit(lookup, o.id);
    if (r.ok() && (r.parsed.parents.size() != 2 || r.parsed.poe_json.empty())) abort();
  }
  return 0;
}
