#include "gatos/worker/run_status.h"

namespace gatos::worker {

RunStatus StatusOfRun(const ExecResult& run, bool cancelled) {
  if (run.stopped && cancelled) return {"aborted", "cancelled by the ledger"};
  // A limit ended it: failed, saying which (and not retried: it would hit
  // the same limit again).
  if (std::string why = LimitReason(run); !why.empty()) return {"failed", why};
  if (run.timed_out) return {"timed-out", ""};
  if (run.exit_code && *run.exit_code == 0) return {"succeeded", ""};
  return {"failed", ""};
}

}  // namespace gatos::worker
