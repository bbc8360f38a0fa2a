#include "job.h"

#include "gatos/model/clock.h"
#include "gatos/sys/log.h"

namespace gatos::worker {

void AbandonLease(Outbox* outbox, const Job& job) {
  Status s = outbox->FinishLease(job.hex, job.epoch, LeaseState::kAbandoned, SystemNowMs());
  if (!s.ok()) Log("job " + Short(job.hex) + ": cannot record the abandoned lease: " + s.message());
}

}  // namespace gatos::worker
