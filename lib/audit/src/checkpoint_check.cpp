#include "gatos/audit/checkpoint_check.h"

namespace gatos {

Result<OpenedCheckpoint> CheckCheckpoint(Ledger& ledger, LogTree& tree, const std::string& note,
                                         const Ed25519PublicKey& ledger_key,
                                         const std::optional<std::string>& previous) {
  NoteVerifierKey lk;
  lk.key = ledger_key;
  GATOS_ASSIGN_OR_RETURN(OpenedCheckpoint opened, OpenCheckpoint(note, lk, {}));
  const Checkpoint& cp = opened.checkpoint;
  GATOS_RETURN_IF_ERROR(tree.Update(ledger));
  auto root_entry = tree.Entry(0);
  if (!root_entry.ok() || LedgerOrigin(root_entry->first) != cp.origin) {
    return PermissionDeniedError("the checkpoint is of " + cp.origin + ", not of this ledger");
  }
  if (cp.size > tree.size()) {
    return FailedPreconditionError("the checkpoint has " + std::to_string(cp.size) + " log entries; this clone has " +
                                   std::to_string(tree.size()) + ": fetch the log first");
  }
  GATOS_ASSIGN_OR_RETURN(MerkleHash root, tree.Root(cp.size));
  if (root != cp.root) {
    return PermissionDeniedError("the checkpoint's root is not the root of this log at size " +
                                 std::to_string(cp.size) + ": the ledger shows a different history");
  }
  if (!previous) return opened;
  auto old = OpenCheckpoint(*previous, lk, {});
  if (!old.ok()) return old.status().WithContext("the previous checkpoint");
  const Checkpoint& oc = old->checkpoint;
  if (oc.origin != cp.origin) return PermissionDeniedError("the previous checkpoint is of another ledger");
  if (oc.size > cp.size) {
    return PermissionDeniedError("the checkpoint (" + std::to_string(cp.size) +
                                 " entries) is older than the one seen before (" + std::to_string(oc.size) +
                                 "): the log was rolled back");
  }
  GATOS_ASSIGN_OR_RETURN(auto proof, tree.ConsistencyProof(oc.size, cp.size));
  GATOS_RETURN_IF_ERROR(VerifyMerkleConsistency(oc.size, cp.size, proof, oc.root, cp.root)
                            .WithContext("not consistent with the checkpoint seen before"));
  return opened;
}

}  // namespace gatos
