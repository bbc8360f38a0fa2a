// The wall clock as the ledger and workers read it. The ledger's clock decides
// lease expiry; tests inject a fake one through ClockFn.
//
// Thread-safety: SystemNowMs is safe from any thread.
#ifndef GATOS_CLOCK_H_
#define GATOS_CLOCK_H_

#include <cstdint>
#include <functional>

namespace gatos {

using ClockFn = std::function<int64_t()>;  // unix milliseconds

// Unix time in milliseconds (CLOCK_REALTIME).
int64_t SystemNowMs();

}  // namespace gatos

#endif  // GATOS_CLOCK_H_
