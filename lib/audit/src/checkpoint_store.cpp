#include "gatos/audit/checkpoint_store.h"

#include "gatos/crypto/checkpoint.h"
#include "gatos/crypto/signed_note.h"
#include "gatos/sys/file.h"

namespace gatos {

std::string CheckpointPath(const std::string& repo) { return LogTree::DirFor(repo) + "/checkpoint"; }

Result<LogTree> UpdatedLogTree(Ledger& ledger, const std::string& repo) {
  GATOS_ASSIGN_OR_RETURN(LogTree tree, LogTree::Open(LogTree::DirFor(repo)));
  GATOS_RETURN_IF_ERROR(tree.Update(ledger));
  return tree;
}

Result<std::string> SignAndStoreCheckpoint(LogTree& tree, const std::string& repo, const Ed25519PrivateKey& key) {
  GATOS_ASSIGN_OR_RETURN(auto root_entry, tree.Entry(0));
  Checkpoint cp;
  cp.origin = LedgerOrigin(root_entry.first);
  cp.size = tree.size();
  GATOS_ASSIGN_OR_RETURN(cp.root, tree.Root(cp.size));
  const std::string text = FormatCheckpointText(cp);
  auto old = ReadFileToString(CheckpointPath(repo), 1 << 20);
  if (old.ok()) {
    auto n = ParseNote(*old);
    if (n.ok() && n->text == text) return *old;
  }
  std::string note = SignCheckpoint(cp, key);
  GATOS_RETURN_IF_ERROR(WriteFileAtomically(CheckpointPath(repo), note, 0644, false));
  return note;
}

}  // namespace gatos
