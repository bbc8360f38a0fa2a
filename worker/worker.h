// The worker: takes pending jobs from JetStream, claims them through the
// ledger RPC, runs them (exec.h), renews the lease while they run, builds and
// signs the result (result.h) and delivers it through a durable outbox
// (outbox.h). docs/worker.md is the operator's view.
//
// Threads: the caller's thread fetches and claims; one thread per running
// job (at most `concurrency`) supervises it and renews its lease; one
// delivery thread drains the outbox; NATS library threads only set flags
// (cancel requests). The Outbox is thread-safe.
#ifndef GATOS_WORKER_WORKER_H_
#define GATOS_WORKER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gatos/exec.h"

namespace gatos::worker {

struct WorkerOptions {
  std::string nats_url;
  std::string key_path;
  std::string ledger_key_path;  // the ledger's public key(s), one per line: grants must be signed by one
  std::string state_dir;
  int concurrency = 1;
  ExecSpec::Sandbox sandbox = ExecSpec::Sandbox::kAuto;
  int64_t kill_grace_ms = 2000;
  std::vector<std::string> ro_binds;  // host paths jobs may read in the sandbox (e.g. repositories to scan)
  std::string name;  // for logs and the NATS connection; default: worker-<key prefix>
};

// Runs until `stop` becomes true (SIGINT/SIGTERM in main) and the running jobs
// have finished or been stopped. Returns the process exit code.
int RunWorker(const WorkerOptions& options, std::atomic<bool>* stop);

// `gatos-worker status`: prints the outbox health. Exit 0, or 1 if the state
// directory cannot be read.
int PrintStatus(const std::string& state_dir, bool json);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_WORKER_H_
