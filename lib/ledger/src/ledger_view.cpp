// LedgerView: a reader of a ledger's state index at its log head.
#include "gatos/ledger/writer.h"

#include "writer_internal.h"

namespace gatos {
using namespace writer_internal;  // NOLINT: this library's own internals

Result<std::unique_ptr<LedgerView>> LedgerView::Open(const std::string& dir) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(TrimDir(dir)));
  std::unique_ptr<LedgerView> v(new LedgerView(std::move(ledger)));
  GATOS_ASSIGN_OR_RETURN(v->head_, v->ledger_->ResolveRef(kLogRef));
  if (v->head_.empty()) {
    return FailedPreconditionError(dir + " has no " + std::string(kLogRef) +
                                   "; it was not created by 'gatosd init' of this version");
  }
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, v->ledger_->ReadCommit(v->head_));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo info, ParseLogMessage(c.message));
  v->seq_ = info.seq;
  v->policy_commit_ = info.policy_commit;
  v->index_.Reset(c.tree);
  return v;
}

}  // namespace gatos
