// Independent items checked on every CPU at once (a push's jobs, a batch's
// signatures): how many threads, and running them.
//
// Thread-safety: both functions may be called from any thread.
#ifndef GATOS_PARALLEL_H_
#define GATOS_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace gatos {

// Threads for `items` when each extra thread should get at least
// `per_thread` of them: 1 + items / per_thread, at most the CPUs (read once
// per process), at least 1.
size_t ThreadsFor(size_t items, size_t per_thread);

// Runs fn(0) on the calling thread and fn(1) .. fn(threads - 1) on threads
// of their own; returns when every call has. Item i belongs to the call
// i % threads, so callers stride: for (i = t; i < n; i += threads).
void RunOnThreads(size_t threads, const std::function<void(size_t)>& fn);

}  // namespace gatos

#endif  // GATOS_PARALLEL_H_
