#include "gatos/worker/concurrency.h"

#include <algorithm>

namespace gatos::worker {

int ConcurrencyForCpus(int cpus) {
  return std::clamp(kConcurrencyPerCpu * std::max(cpus, 1), kMinDefaultConcurrency,
                    kMaxDefaultConcurrency);
}

}  // namespace gatos::worker
