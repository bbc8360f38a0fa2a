// Checkpoints of the ledger's Merkle tree in the C2SP tlog-checkpoint format:
// a signed note (signed_note.h) whose text is
//   <origin>\n<tree size, decimal>\n<base64 root hash>\n[extension lines]
// The ledger's origin is "gatos/ledger/<40 hex>", the log commit of sequence
// 1 (the ledger's identity), and the ledger signs with its Ed25519 key under
// that name (type 0x01); witnesses add tlog-cosignature/v1 lines
// (docs/ledger-format.md, section 7b).
//
// Thread-safety: pure functions on values.
#ifndef GATOS_CHECKPOINT_H_
#define GATOS_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/merkle.h"
#include "gatos/crypto/signed_note.h"
#include "gatos/model/status.h"

namespace gatos {

struct Checkpoint {
  std::string origin;
  uint64_t size = 0;
  MerkleHash root{};
  std::vector<std::string> extensions;  // lines after the root, without newlines
  bool operator==(const Checkpoint&) const = default;
};

// "gatos/ledger/<root log commit>".
std::string LedgerOrigin(std::string_view root_log_commit);

std::string FormatCheckpointText(const Checkpoint& c);
// Strict: a non-empty origin, a decimal size without leading zeros (below
// 2^63), a base64 32-byte root, non-empty extension lines; InvalidArgument
// names the line.
Result<Checkpoint> ParseCheckpointText(std::string_view text);

// A checkpoint note signed by `key` under the checkpoint's origin.
std::string SignCheckpoint(const Checkpoint& c, const Ed25519PrivateKey& key);

struct OpenedCheckpoint {
  Checkpoint checkpoint;
  Note note;
  struct Cosigner {
    std::string name;
    uint64_t timestamp = 0;
  };
  std::vector<Cosigner> cosigners;  // witnesses of `witnesses` whose cosignature verified
};
// Parses a checkpoint note and checks it: it carries a valid signature of
// `ledger` (name = the checkpoint's origin, or `ledger.name` when it is not
// empty); signatures of other keys are ignored, but a signature that claims
// to be by a known key (name and key id) and does not verify fails the whole
// note (C2SP signed-note). Cosignatures by `witnesses` (type 0x04 keys) that
// verify are listed. InvalidArgument for a malformed note, PermissionDenied
// for a missing or bad ledger signature or a bad cosignature.
Result<OpenedCheckpoint> OpenCheckpoint(std::string_view note, const NoteVerifierKey& ledger,
                                        const std::vector<NoteVerifierKey>& witnesses);

}  // namespace gatos

#endif  // GATOS_CHECKPOINT_H_
