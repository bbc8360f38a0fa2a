// Witness statements checked against the log the replay walked.
#include "gatos/audit/log_audit.h"

#include "replay_internal.h"

namespace gatos {
namespace audit_internal {

void Replay::CheckWitnesses() {
  std::map<std::string, std::string> found;  // commit -> ref where it was seen
  for (const char* prefix : {kWitnessPrefix, kWitnessPushPrefix}) {
    auto refs = ledger_.ListRefs(prefix);
    if (!refs.ok()) continue;
    for (const auto& r : *refs) {
      auto v = ledger_.ResolveRef(r);
      if (v.ok() && !v->empty()) found.emplace(*v, r);
    }
  }
  for (const auto& [r, c] : logged_witnesses_) found.emplace(c, r + " (in the log)");
  std::map<int64_t, std::vector<const WitnessCheck*>> by_seq;
  rep_->witnesses.reserve(found.size());
  for (const auto& [commit, ref] : found) {
    WitnessCheck w;
    w.ref = ref;
    w.commit = commit;
    auto st = CheckWitnessCommit(lookup_, commit);
    if (!st.ok()) {
      w.detail = st.status().message();
      Problem("witness_invalid", ref + ": " + w.detail, 0, "", ref);
      rep_->witnesses.push_back(std::move(w));
      continue;
    }
    w.key_hex = st->key_hex;
    w.seq = st->seq;
    w.log_commit = st->log_commit;
    if (st->ledger_root != rep_->ledger_root) {
      w.detail = "about another ledger (" + Short(st->ledger_root) + "), not checked";
      w.ok = true;
      rep_->witnesses.push_back(std::move(w));
      continue;
    }
    if (st->seq > rep_->seq) {
      w.detail = "saw sequence " + std::to_string(st->seq) + " (" + Short(st->log_commit) + "), but this log ends at " +
                 std::to_string(rep_->seq);
      Problem("forked_history", "witness ed25519:" + st->key_hex.substr(0, 16) + "… " + w.detail +
                                    ": the log was rolled back or this copy is behind",
              st->seq, "", ref);
      rep_->forked = true;
    } else {
      auto at = LogCommitAt(st->seq);
      if (at.ok() && *at != st->log_commit) {
        w.detail = "saw " + st->log_commit + " at sequence " + std::to_string(st->seq) + ", this log has " + *at;
        Problem("forked_history", "witness ed25519:" + st->key_hex.substr(0, 16) + "… " + w.detail +
                                      ": the ledger showed different histories",
                st->seq, "", ref);
        rep_->forked = true;
      } else {
        w.ok = true;
        w.detail = "agrees with this log";
      }
    }
    rep_->witnesses.push_back(std::move(w));
  }
  for (const auto& w : rep_->witnesses) {
    if (!w.key_hex.empty()) by_seq[w.seq].push_back(&w);
  }
  for (const auto& [seq, ws] : by_seq) {
    for (size_t i = 1; i < ws.size(); ++i) {
      if (ws[i]->log_commit != ws[0]->log_commit) {
        Problem("forked_history", "two witnesses disagree at sequence " + std::to_string(seq) + ": ed25519:" +
                                      ws[0]->key_hex.substr(0, 16) + "… saw " + ws[0]->log_commit + ", ed25519:" +
                                      ws[i]->key_hex.substr(0, 16) + "… saw " + ws[i]->log_commit +
                                      ": proof that the ledger showed two histories",
                seq);
        rep_->forked = true;
      }
    }
  }
}

}  // namespace audit_internal
}  // namespace gatos
