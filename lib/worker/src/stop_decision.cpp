#include "gatos/worker/stop_decision.h"

namespace gatos::worker {

RunDisposition DisposeOfRun(bool lease_lost, bool cancelled, bool stopped) {
  if (lease_lost) return RunDisposition::kDiscardLeaseLost;
  if (stopped && !cancelled) return RunDisposition::kDiscardShutdown;
  return RunDisposition::kReport;
}

}  // namespace gatos::worker
