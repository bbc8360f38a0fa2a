// The worker's default --concurrency: kConcurrencyPerCpu x the CPUs it may
// run on, within [kMinDefaultConcurrency, kMaxDefaultConcurrency]. A job
// slot mostly waits (for the process start, the ledger's replies, the job's
// own I/O), so several per CPU keep the CPUs busy with trivial jobs; a
// machine full of CPU-bound jobs should pass --concurrency = its CPU count.
// docs/worker-execution.md, "Default concurrency", has the measurements.
//
// Thread-safety: pure functions.
#ifndef GATOS_WORKER_CONCURRENCY_H_
#define GATOS_WORKER_CONCURRENCY_H_

namespace gatos::worker {

inline constexpr int kConcurrencyPerCpu = 8;
inline constexpr int kMinDefaultConcurrency = 4;
inline constexpr int kMaxDefaultConcurrency = 64;

// For `cpus` CPUs (fewer than 1 counts as 1).
int ConcurrencyForCpus(int cpus);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_CONCURRENCY_H_
