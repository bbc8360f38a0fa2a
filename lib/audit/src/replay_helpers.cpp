// Small helpers of the auditor's replay (replay_internal.h).
#include "gatos/audit/log_audit.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

std::string SignatureProblem(const CommitInfo& c, const Ed25519PublicKey& key) {
  if (c.signature.empty()) return "it is not signed (no gpgsig header)";
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return "gpgsig: " + sig.status().message();
  if (sig->key != key) return "it is signed by " + sig->key.WorkerId() + ", not by " + key.WorkerId();
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return "its SSH signature does not verify: " + v.message();
  return "";
}

bool Verifies(const std::string& key_hex, const std::string& payload, const std::string& sig_hex) {
  auto key = ParseWorkerId("ed25519:" + key_hex);
  auto sig = HexDecode(sig_hex);
  return key.ok() && sig.ok() && sig->size() == 64 && Ed25519Verify(*key, payload, sig->data()).ok();
}



std::vector<LoggedTransition> Group(const std::vector<LogEntry>& entries) {
  std::vector<LoggedTransition> out;
  std::set<std::string> refs;
  for (const LogEntry& e : entries) {
    bool join = !out.empty() && !e.job_hex.empty() && out.back().kind == e.kind &&
                out.back().job_hex == e.job_hex && !e.ref.empty() && !refs.count(e.ref) &&
                !out.back().entries.back().ref.empty();
    if (!join) {
      out.push_back({e.kind, e.job_hex, {}});
      refs.clear();
    }
    out.back().entries.push_back(e);
    if (!e.ref.empty()) refs.insert(e.ref);
  }
  return out;
}

// The fields in which `index` (what the ledger wrote) and `replayed` differ.
std::string RecordDifference(const JobRecord& index, const JobRecord& replayed) {
  std::string out;
  auto field = [&](const char* name, const auto& a, const auto& b) {
    if (a == b) return;
    std::ostringstream os;
    os << (out.empty() ? "" : "; ") << name << ": index " << a << ", log " << b;
    out += os.str();
  };
  field("job_commit", index.job_commit, replayed.job_commit);
  field("submitter", index.submitter_hex, replayed.submitter_hex);
  field("submitted_ms", index.submitted_ms, replayed.submitted_ms);
  field("attempt", index.attempt, replayed.attempt);
  field("epoch", index.epoch, replayed.epoch);
  field("lease_commit", index.lease_commit, replayed.lease_commit);
  field("worker", index.worker_hex, replayed.worker_hex);
  field("expires_ms", index.expires_ms, replayed.expires_ms);
  field("requested_at_ms", index.requested_at_ms, replayed.requested_at_ms);
  field("claim_commit", index.claim_commit, replayed.claim_commit);
  field("claims", index.claims.size(), replayed.claims.size());
  field("cancel_commit", index.cancel_commit, replayed.cancel_commit);
  field("retry_commit", index.retry_commit, replayed.retry_commit);
  field("result_commit", index.result_commit, replayed.result_commit);
  field("result_status", index.result_status, replayed.result_status);
  field("attempts", index.attempts.size(), replayed.attempts.size());
  field("not_before_ms", index.not_before_ms, replayed.not_before_ms);
  field("finished_ms", index.finished_ms, replayed.finished_ms);
  field("pruned_ms", index.pruned_ms, replayed.pruned_ms);
  if (out.empty() && index.claims != replayed.claims) out = "claims";
  if (out.empty()) out = "attempts";
  return out;
}

std::string EntryText(const LogEntry& e) {
  std::string s = EncodeBatch({e});
  if (!s.empty()) s.pop_back();
  return s;
}

bool IsPushTarget(const std::string& ref) {
  return ref.rfind(kSubmitPrefix, 0) == 0 || ref.rfind(kResultsPushPrefix, 0) == 0 ||
         ref.rfind(kWitnessPushPrefix, 0) == 0;
}

}  // namespace audit_internal
}  // namespace gatos
