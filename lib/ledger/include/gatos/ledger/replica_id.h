// The names a replicated ledger's replicas share on NATS
// (docs/replication.md, "Names"): every replica, and `gatos cluster
// status`, derives them from the ledger itself.
#ifndef GATOS_LEDGER_REPLICA_ID_H_
#define GATOS_LEDGER_REPLICA_ID_H_

#include <string>

#include "gatos/model/status.h"

namespace gatos {

// The ledger's identity: the first 16 hex of its root log commit (Log-Seq
// 1), the same in every clone. Cached in <ledger>/gatos/replica-ledger-id
// (the walk to the root reads every log commit once).
Result<std::string> ReplicaLedgerId(const std::string& ledger_dir);
std::string LeaderBucketName(const std::string& ledger_id);  // GATOS_LEADER_<id>
std::string WalStreamName(const std::string& ledger_id);     // GATOS_WAL_<id>
std::string WalSubject(const std::string& ledger_id);        // gatos.wal.<id>
// Each replica's status (replica_status.h) lives in the leader bucket
// under this prefix and its name, refreshed every second (gone with the
// bucket's TTL when the replica stops).
inline constexpr char kReplicaStatusKeyPrefix[] = "replica.";

}  // namespace gatos

#endif  // GATOS_LEDGER_REPLICA_ID_H_
