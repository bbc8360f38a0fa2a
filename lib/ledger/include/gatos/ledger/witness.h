// Witnesses: an auditor's signed statement "the log of ledger L at sequence N
// is commit C" (docs/auditor-guide.md, "Witnesses").
//
// A witness is a git commit with the empty tree and no parent, committed by
// the auditor and signed with the auditor's SSH key (gpgsig, SSHSIG,
// namespace git), so `git verify-commit` checks it with stock tools. Its
// message:
//
//   gatos witness: log of ledger <L> at <N> is <C>
//
//   Witness-Ledger: <L: the ledger's first log commit, 40 hex>
//   Witness-Log-Seq: <N>
//   Witness-Log-Commit: <C, 40 hex>
//   Witness-Key: ed25519:<the auditor's public key, 64 hex>
//   Witness-Time: <RFC 3339 UTC, milliseconds>
//
// The auditor pushes it to refs/gatos/witnesses/<key hex>; the ledger checks
// that it is well formed, signed by the key it names (the one in the ref
// name), about this ledger and about a commit of its log at that sequence,
// and records it in the log at refs/gatos/witness/<key hex> (kind witness).
// The ledger trusts nothing in it: a witness only says what its signer saw.
//
// Thread-safety: pure functions.
#ifndef GATOS_WITNESS_H_
#define GATOS_WITNESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/model/status.h"

namespace gatos {

struct WitnessStatement {
  std::string ledger_root;  // the ledger's identity: its log commit of sequence 1
  int64_t seq = 0;
  std::string log_commit;
  std::string key_hex;  // the witness's Ed25519 key
  int64_t time_ms = 0;
  bool operator==(const WitnessStatement&) const = default;
};

inline constexpr size_t kMaxWitnessMessage = 4096;
// A witness commit's whole object (header, signature, message).
inline constexpr size_t kMaxWitnessCommit = 16 * 1024;

std::string FormatWitnessMessage(const WitnessStatement& w);
// Strict: the title and every trailer as FormatWitnessMessage writes them,
// nothing else. InvalidArgument names what is wrong.
Result<WitnessStatement> ParseWitnessMessage(std::string_view message);

// The witness commit, signed by `key` (w.key_hex is set from it).
Result<GitObject> BuildWitnessCommit(WitnessStatement w, const Ed25519PrivateKey& key);

// Reads and checks a witness commit: empty tree, no parent, a witness
// message, signed by the key it names. InvalidArgument (malformed) or
// PermissionDenied (signature) say why.
Result<WitnessStatement> CheckWitnessCommit(const ObjectLookup& lookup, const std::string& commit_id);

// refs/gatos/witness/<key hex> (recorded by the ledger) and
// refs/gatos/witnesses/<key hex> (where an auditor pushes).
std::string WitnessRef(std::string_view key_hex);
std::string WitnessPushRef(std::string_view key_hex);

}  // namespace gatos

#endif  // GATOS_WITNESS_H_
