// gatosd init DIR --replica-of LEDGER --ledger-key FILE: a follower's
// repository made from an existing ledger (docs/replication.md).
#ifndef GATOS_GATOSD_REPLICA_INIT_H_
#define GATOS_GATOSD_REPLICA_INIT_H_

#include <string>

#include "gatos/model/status.h"

namespace gatos::gatosd {

struct ReplicaInitOptions {
  std::string source;        // the ledger to clone (a path or any git URL)
  std::string key_file;      // the ledger's private key, from the operator
  std::string gatosd_path;   // absolute path the hooks exec
};

// Clones every object and ref of `source` into a new bare repository `dir`
// (git clone --mirror, then its remote removed), verifies the clone's whole
// log with the auditor against the key's public half (pinned: the key is
// the operator's, never fetched over the bus; the refs are not compared: a
// clone of a ledger that writes is not a snapshot, and the replica's first
// start rewrites them from the log), installs the key, the hooks and the
// push front door. FailedPrecondition when `dir` exists and is not
// empty; PermissionDenied when the key is not this ledger's or the log does
// not verify.
Status InitReplica(const std::string& dir, const ReplicaInitOptions& options);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_REPLICA_INIT_H_
