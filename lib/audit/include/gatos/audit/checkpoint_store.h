// The ledger's stored checkpoint, <repo>/gatos/tlog/checkpoint: the newest
// signed checkpoint of its Merkle tree with the witnesses' cosignatures
// (docs/ledger-format.md section 7b). Written by `gatos checkpoint`, `gatos
// proof` on the ledger's host, and gatosd itself (serve --checkpoint-s).
//
// Thread-safety: uses the Ledger and LogTree of the calling thread; several
// processes may store checkpoints of one ledger (the tree's update holds its
// lock; the file is replaced atomically).
#ifndef GATOS_CHECKPOINT_STORE_H_
#define GATOS_CHECKPOINT_STORE_H_

#include <string>

#include "gatos/audit/log_tree.h"
#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/model/status.h"

namespace gatos {

// <repo>/gatos/tlog/checkpoint.
std::string CheckpointPath(const std::string& repo);

// The tree of `repo`, brought up to its log head.
Result<LogTree> UpdatedLogTree(Ledger& ledger, const std::string& repo);

// Signs a checkpoint of the whole of `tree` with the ledger key and stores
// it; when the stored one is the same checkpoint, it is kept as it is (with
// its cosignatures) and returned.
Result<std::string> SignAndStoreCheckpoint(LogTree& tree, const std::string& repo, const Ed25519PrivateKey& key);

}  // namespace gatos

#endif  // GATOS_CHECKPOINT_STORE_H_
