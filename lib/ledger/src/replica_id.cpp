#include "gatos/ledger/replica_id.h"

#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/refs.h"
#include "gatos/sys/file.h"

namespace gatos {

Result<std::string> ReplicaLedgerId(const std::string& ledger_dir) {
  const std::string cache = LedgerStateDir(ledger_dir) + "/replica-ledger-id";
  if (auto cached = ReadFileToString(cache, 64); cached.ok() && cached->size() == 17 && cached->back() == '\n') {
    return cached->substr(0, 16);
  }
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(ledger_dir));
  GATOS_ASSIGN_OR_RETURN(std::string cur, ledger->ResolveRef(kLogRef));
  if (cur.empty()) return FailedPreconditionError(ledger_dir + " has no " + std::string(kLogRef));
  while (true) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger->ReadCommit(cur));
    if (c.parents.empty()) break;
    cur = c.parents[0];
  }
  const std::string id = cur.substr(0, 16);
  (void)WriteFileAtomically(cache, id + "\n");  // a cache: recomputed when missing
  return id;
}

std::string LeaderBucketName(const std::string& ledger_id) { return "GATOS_LEADER_" + ledger_id; }
std::string WalStreamName(const std::string& ledger_id) { return "GATOS_WAL_" + ledger_id; }
std::string WalSubject(const std::string& ledger_id) { return "gatos.wal." + ledger_id; }

}  // namespace gatos
