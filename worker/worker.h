// The worker: takes pending jobs from JetStream, claims them through the
// ledger RPC, runs them (exec.h), renews the lease while they run, builds and
// signs the result (result.h) and delivers it through a durable outbox
// (outbox.h). docs/worker-execution.md is the operator's view. This program
// holds the threads and the I/O; every decision they act on is in
// gatos_worker (lib/worker), with its unit tests.
//
// Threads (docs/worker-execution.md, "The worker's pipeline"): the caller's
// thread fetches job offers and claims them, several per request
// (worker.cpp); one runner thread per concurrent job (`concurrency` of them)
// runs it in its slot and has its result signed (job_runner.h,
// runner_slot.h, result_signer.h); one renewer thread renews the leases of
// all running jobs (renewer.h); one reporter thread stores every result
// ready at that moment in one outbox transaction and sends them in one
// request (reporter.h). NATS library threads only set flags and stop jobs
// (verified cancel notices). The Outbox, the JobLauncher and the
// LedgerClient are thread-safe.
#ifndef GATOS_WORKER_WORKER_H_
#define GATOS_WORKER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/worker/concurrency.h"

namespace gatos::worker {

// Default --concurrency: ConcurrencyForCpus (gatos/worker/concurrency.h) of
// the CPUs this process may run on.
int DefaultConcurrency();

struct WorkerOptions {
  std::string nats_url;
  std::string nats_ca_file;  // CA of a tls:// server
  std::string key_path;
  std::string
      ledger_key_path;  // the ledger's public key(s), one per line: grants must be signed by one
  std::string state_dir;
  int concurrency = DefaultConcurrency();
  ExecSpec::Sandbox sandbox = ExecSpec::Sandbox::kAuto;
  int64_t kill_grace_ms = 2000;
  std::vector<std::string>
      ro_binds;  // host paths jobs may read in the sandbox (e.g. repositories to scan)
  // Git inputs (docs/inputs.md): the credentials file (per URL prefix; ""
  // = none) and the directories local repositories may be inputs from
  // (none: local repositories are refused).
  std::string credentials_path;
  std::vector<std::string> local_inputs;
  // Network input URLs under these prefixes may reach loopback and
  // link-local addresses (all others are refused: --allow-input-url).
  std::vector<std::string> allow_input_urls;
  std::string name;  // for logs and the NATS connection; default: worker-<key prefix>
  // Publish running jobs' output and progress on NATS (live_publisher.h).
  bool live_output = true;
  // The pools whose jobs this worker takes (docs/scheduling.md); the policy
  // decides whether the ledger lets it claim them.
  std::vector<std::string> pools = {"default"};
};

// Runs until `stop` becomes true (SIGINT/SIGTERM in main) and the running jobs
// have finished or been stopped. Returns the process exit code.
int RunWorker(const WorkerOptions& options, std::atomic<bool>* stop);

// `gatos-worker status`: prints the outbox health. Exit 0, or 1 if the state
// directory cannot be read.
int PrintStatus(const std::string& state_dir, bool json);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_WORKER_H_
