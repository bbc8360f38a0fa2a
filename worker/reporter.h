// The reporter: one thread that stores every result ready at that moment in
// ONE outbox transaction (durable before anything is sent) and sends them
// in result-batch requests, settles every outcome in one transaction,
// retries earlier deliveries that are due and prunes the outbox (docs/
// worker-execution.md, "Reporting", "Durable outbox"). What each reply
// means is gatos/worker/delivery.h; a result the bus refuses for its size
// is replaced by a small failed one (ResultSigner), in the same epoch.
//
// GATOS_WORKER_FAULT=crash-after-enqueue kills the process between storing
// and sending (tests of recovery).
//
// Thread-safety: Hand may be called from any thread; DeliverDue, Start and
// Stop by the owner only, DeliverDue before Start (no result is ever sent
// by two threads at once). Owns its thread; uses (does not own) the ledger
// client, the outbox and the signer, which must outlive it.
#ifndef GATOS_WORKER_REPORTER_H_
#define GATOS_WORKER_REPORTER_H_

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gatos/exec/outbox.h"
#include "job.h"
#include "ledger_client.h"
#include "result_signer.h"

namespace gatos::worker {

class Reporter {
 public:
  Reporter(LedgerClient* ledger, Outbox* outbox, const ResultSigner* signer);
  ~Reporter() { Stop(); }
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Delivers the outbox's due rows (`all`: every pending one, as after a
  // restart, before new work).
  void DeliverDue(bool all);
  void Start();
  // A finished job's result, to be stored and sent.
  void Hand(Finished result);
  // Stores and sends what it was handed, then ends the thread.
  void Stop();

 private:
  void Loop();
  void Report(std::vector<Finished> batch);
  void Deliver(const std::vector<Finished*>& items, std::vector<Finished>* replacements);

  LedgerClient* ledger_;
  Outbox* outbox_;
  const ResultSigner* signer_;
  const std::string fault_;

  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;
  std::deque<Finished> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_REPORTER_H_
