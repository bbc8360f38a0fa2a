// libFuzzer target: what a replica reads from the leader bucket, written by
// anyone allowed to write it: the leader key's value (election.h) and each
// replica's status (replica_status.h).
// Invariants: no crash; whatever decodes encodes to a value that decodes to
// the same thing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/election.h"
#include "gatos/model/replica_status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto v = gatos::DecodeLeaderValue(in); v.ok()) {
    auto again = gatos::DecodeLeaderValue(gatos::EncodeLeaderValue(*v));
    if (!again.ok() || again->name != v->name || again->term != v->term) abort();
  }
  if (auto s = gatos::DecodeReplicaStatus(in); s.ok()) {
    auto again = gatos::DecodeReplicaStatus(gatos::EncodeReplicaStatus(*s));
    if (!again.ok() || !(*again == *s)) abort();
    (void)gatos::ClusterStatusJson({*s});
  }
  return 0;
}
