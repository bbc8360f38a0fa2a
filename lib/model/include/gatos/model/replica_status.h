// What each replica of a replicated ledger says about itself, and the
// cluster's status as `gatos cluster status --json` prints it
// (docs/replication.md, "Status"): {"replicas":[{"name","role","term",
// "log_seq","lag_ms"}]}.
//
// Pure. Thread-safety: free functions.
#ifndef GATOS_MODEL_REPLICA_STATUS_H_
#define GATOS_MODEL_REPLICA_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

struct ReplicaStatus {
  std::string name;
  std::string role;       // "leader" | "follower"
  uint64_t term = 0;      // the term it leads with, or last led with (0: never)
  int64_t log_seq = 0;    // its local log's sequence
  int64_t lag_ms = 0;     // how long since it last held everything the stream held (0: the leader)
  int64_t updated_ms = 0; // when it said so (unix ms)
  bool operator==(const ReplicaStatus&) const = default;
};

// Canonical JSON; Decode is strict (InvalidArgument says what is wrong).
std::string EncodeReplicaStatus(const ReplicaStatus& s);
Result<ReplicaStatus> DecodeReplicaStatus(std::string_view json);
// {"replicas":[...]} sorted by name, without updated_ms.
std::string ClusterStatusJson(std::vector<ReplicaStatus> replicas);

// The replica that `self`, a follower that found the leader key gone, lets
// create it first, if any (docs/replication.md, "Election"): among `peers`
// (the statuses in the bucket, whose TTL drops those of stopped replicas),
// the follower with the highest log sequence, when that is above
// `own_log_seq`. A status that says "leader" is the leader whose key went,
// and does not count. A status is at most a second old and a log sequence
// only grows, so two followers never both stand aside for each other.
std::optional<ReplicaStatus> MoreCurrentPeer(const std::vector<ReplicaStatus>& peers, std::string_view self,
                                             int64_t own_log_seq);

}  // namespace gatos

#endif  // GATOS_MODEL_REPLICA_STATUS_H_
