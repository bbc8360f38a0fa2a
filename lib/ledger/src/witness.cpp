#include "gatos/ledger/witness.h"

#include "gatos/crypto/sshsig.h"
#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"
#include "gatos/model/policy.h"
#include "gatos/model/refs.h"
#include "gatos/model/trailers.h"

namespace gatos {
namespace {

constexpr char kWitnessName[] = "gatos witness";
constexpr char kWitnessEmail[] = "witness@gatos.invalid";

std::string Title(const WitnessStatement& w) {
  return "gatos witness: log of ledger " + w.ledger_root + " at " + std::to_string(w.seq) + " is " +
         w.log_commit;
}

bool ParseSeq(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18 || s[0] == '0') return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string FormatWitnessMessage(const WitnessStatement& w) {
  CommitMessage m;
  m.body = Title(w);
  m.trailers = {{"Witness-Ledger", w.ledger_root},
                {"Witness-Log-Seq", std::to_string(w.seq)},
                {"Witness-Log-Commit", w.log_commit},
                {"Witness-Key", "ed25519:" + w.key_hex},
                {"Witness-Time", FormatRfc3339Millis(w.time_ms)}};
  return FormatCommitMessage(m);
}

Result<WitnessStatement> ParseWitnessMessage(std::string_view message) {
  if (message.size() > kMaxWitnessMessage) return InvalidArgumentError("a witness message is at most 4096 bytes");
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(message));
  if (m.trailers.size() != 5) {
    return InvalidArgumentError("a witness has exactly 5 trailers (Witness-Ledger, -Log-Seq, -Log-Commit, -Key, -Time)");
  }
  WitnessStatement w;
  GATOS_ASSIGN_OR_RETURN(w.ledger_root, RequireUniqueTrailer(m.trailers, "Witness-Ledger"));
  if (!IsLowerHex(w.ledger_root, 40)) return InvalidArgumentError("Witness-Ledger: expected a 40-hex commit id");
  GATOS_ASSIGN_OR_RETURN(std::string seq, RequireUniqueTrailer(m.trailers, "Witness-Log-Seq"));
  if (!ParseSeq(seq, &w.seq)) return InvalidArgumentError("Witness-Log-Seq: expected a positive integer");
  GATOS_ASSIGN_OR_RETURN(w.log_commit, RequireUniqueTrailer(m.trailers, "Witness-Log-Commit"));
  if (!IsLowerHex(w.log_commit, 40)) return InvalidArgumentError("Witness-Log-Commit: expected a 40-hex commit id");
  GATOS_ASSIGN_OR_RETURN(std::string key, RequireUniqueTrailer(m.trailers, "Witness-Key"));
  if (key.rfind("ed25519:", 0) != 0 || !IsLowerHex(std::string_view(key).substr(8), 64)) {
    return InvalidArgumentError("Witness-Key: expected ed25519:<64 hex>");
  }
  w.key_hex = key.substr(8);
  GATOS_ASSIGN_OR_RETURN(std::string t, RequireUniqueTrailer(m.trailers, "Witness-Time"));
  GATOS_ASSIGN_OR_RETURN(w.time_ms, ParseRfc3339Millis(t));
  if (m.body != Title(w)) return InvalidArgumentError("the witness title does not match its trailers");
  if (FormatWitnessMessage(w) != message) return InvalidArgumentError("the witness message is not in canonical form");
  return w;
}

Result<GitObject> BuildWitnessCommit(WitnessStatement w, const Ed25519PrivateKey& key) {
  w.key_hex = key.public_key().Hex();
  return BuildCommitObject(kEmptyTreeId, {}, FormatWitnessMessage(w), kWitnessName, kWitnessEmail, w.time_ms, &key);
}

Result<WitnessStatement> CheckWitnessCommit(const ObjectLookup& lookup, const std::string& commit_id) {
  if (!IsLowerHex(commit_id, 40)) return InvalidArgumentError("a witness is a commit id (40 hex)");
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(commit_id));
  if (obj.first != ObjectType::kCommit) return InvalidArgumentError("witness " + commit_id.substr(0, 12) + " is not a commit");
  if (obj.second.size() > kMaxWitnessCommit) return InvalidArgumentError("witness " + commit_id.substr(0, 12) + " is too large");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj.second, commit_id));
  if (c.tree != kEmptyTreeId || !c.parents.empty()) {
    return InvalidArgumentError("a witness commit has the empty tree and no parent");
  }
  auto w = ParseWitnessMessage(c.message);
  if (!w.ok()) return InvalidArgumentError("witness " + commit_id.substr(0, 12) + ": " + w.status().message());
  if (c.signature.empty()) return PermissionDeniedError("witness " + commit_id.substr(0, 12) + " is not signed");
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return PermissionDeniedError("witness " + commit_id.substr(0, 12) + ": gpgsig: " + sig.status().message());
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return PermissionDeniedError("witness " + commit_id.substr(0, 12) + ": its signature does not verify: " + v.message());
  if (sig->key.Hex() != w->key_hex) {
    return PermissionDeniedError("witness " + commit_id.substr(0, 12) + " is signed by " + sig->key.WorkerId() +
                                 ", not by the key it names (ed25519:" + w->key_hex + ")");
  }
  return *w;
}

std::string WitnessRef(std::string_view key_hex) { return std::string(kWitnessPrefix) + std::string(key_hex); }
std::string WitnessPushRef(std::string_view key_hex) { return std::string(kWitnessPushPrefix) + std::string(key_hex); }

}  // namespace gatos
