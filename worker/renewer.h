// The renewer: one thread that renews the lease of every job the worker
// holds, from its claim until its runner is done with it (docs/worker-
// execution.md, "Renewing"; the schedule is gatos/worker/lease_renewal.h).
// A renewal the ledger did not sign counts as no answer; a lease that is
// lost (refused, or expired while the ledger was unreachable) marks its job
// stale and stops it, and nothing of it is reported. A renew reply that
// carries a verified cancel stops the job as cancelled.
//
// Thread-safety: Add and Remove may be called from any thread; Start and
// Stop by the owner only. Owns its thread; uses (does not own) the ledger
// client, the key, the ledger's keys and the outbox, which must outlive it.
#ifndef GATOS_WORKER_RENEWER_H_
#define GATOS_WORKER_RENEWER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/exec/outbox.h"
#include "job.h"
#include "ledger_client.h"

namespace gatos::worker {

class Renewer {
 public:
  Renewer(LedgerClient* ledger, const Ed25519PrivateKey* key,
          const std::vector<Ed25519PublicKey>* ledger_keys, Outbox* outbox)
      : ledger_(ledger), key_(key), ledger_keys_(ledger_keys), outbox_(outbox) {}
  ~Renewer() { Stop(); }
  Renewer(const Renewer&) = delete;
  Renewer& operator=(const Renewer&) = delete;

  void Start();
  // Renews `job`'s lease from now on; a job already renewed keeps its schedule.
  void Add(const std::shared_ptr<Job>& job);
  void Remove(const Job& job);
  // Ends the thread (a renewal under way finishes first).
  void Stop();

 private:
  void Loop();
  void Renew(Job& job, std::mt19937& rng);

  LedgerClient* ledger_;
  const Ed25519PrivateKey* key_;
  const std::vector<Ed25519PublicKey>* ledger_keys_;
  Outbox* outbox_;

  std::mutex mu_;  // guards jobs_, stop_ and every job's `renewal`
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RENEWER_H_
