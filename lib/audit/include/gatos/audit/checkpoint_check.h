// Checking a ledger checkpoint against a clone of the ledger, and against
// the checkpoint seen before: what a witness does before it cosigns and what
// `gatos verify --state --checkpoint` does, so an auditor that keeps only
// checkpoints detects a rewritten log (docs/auditor-guide.md, section 13).
//
// Thread-safety: uses the Ledger and LogTree of the calling thread.
#ifndef GATOS_CHECKPOINT_CHECK_H_
#define GATOS_CHECKPOINT_CHECK_H_

#include <optional>
#include <string>

#include "gatos/audit/log_tree.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/git/ledger.h"
#include "gatos/model/status.h"

namespace gatos {

// Opens `note` (signed by `ledger_key`, origin = this clone's ledger) and
// checks that `tree` (brought up to date from `ledger` first) has the
// checkpoint's root at its size; then, when `previous` (a checkpoint note
// seen earlier, also signed by the ledger key) is given, that the new
// checkpoint is not older and is consistent with it (RFC 6962 consistency
// proof from the clone's tree, verified against both signed roots).
// PermissionDenied with the reason: a bad signature, another ledger, a root
// this log does not have ("a different history"), an older checkpoint, an
// inconsistent one ("the log was rewritten"). FailedPrecondition when the
// clone is behind the checkpoint (fetch first).
Result<OpenedCheckpoint> CheckCheckpoint(Ledger& ledger, LogTree& tree, const std::string& note,
                                         const Ed25519PublicKey& ledger_key,
                                         const std::optional<std::string>& previous);

}  // namespace gatos

#endif  // GATOS_CHECKPOINT_CHECK_H_
