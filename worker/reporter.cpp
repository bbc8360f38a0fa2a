#include "reporter.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "gatos/model/clock.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/log.h"
#include "gatos/worker/delivery.h"
#include "gatos/worker/poe_assembly.h"

namespace gatos::worker {

namespace {

std::string Fault() {
  const char* f = std::getenv("GATOS_WORKER_FAULT");
  return f ? f : "";
}

}  // namespace

Reporter::Reporter(LedgerClient* ledger, Outbox* outbox, const ResultSigner* signer)
    : ledger_(ledger), outbox_(outbox), signer_(signer), fault_(Fault()) {}

void Reporter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Reporter::Hand(Finished result) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(result));
  }
  cv_.notify_one();
}

void Reporter::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reporter::Loop() {
  int64_t next_prune = 0;
  int64_t next_due_check = SystemNowMs() + 500;
  while (true) {
    std::vector<Finished> batch;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(
          l, std::chrono::milliseconds(std::clamp<int64_t>(next_due_check - SystemNowMs(), 1, 500)),
          [&] { return !queue_.empty() || stop_; });
      // Everything ready now goes into one transaction and one request.
      while (!queue_.empty() && batch.size() < kMaxResultBatchEntries) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (batch.empty() && stop_) return;
    }
    if (!batch.empty()) Report(std::move(batch));
    int64_t now = SystemNowMs();
    if (now >= next_due_check) {
      // Retries of earlier deliveries that failed (rare: read only twice a second).
      DeliverDue(false);
      next_due_check = now + 500;
    }
    if (now >= next_prune) {
      auto pruned = outbox_->Prune();
      if (!pruned.ok()) Log("cannot prune the outbox: " + pruned.status().message());
      next_prune = now + 1000;
    }
  }
}

void Reporter::Report(std::vector<Finished> batch) {
  std::vector<Outbox::Entry> entries;
  for (Finished& f : batch) {
    if (f.frame.empty()) continue;
    entries.push_back({f.job->hex, f.job->epoch, f.commit_id, f.frame});
  }
  // Durable before it is sent: a crash from here on delivers it on restart.
  auto stored = outbox_->EnqueueResults(entries, SystemNowMs());
  if (!stored.ok()) {
    Log("cannot write " + std::to_string(entries.size()) + " result(s) to the outbox: " +
        stored.status().message() + "; their leases run out and the jobs run again");
    for (Finished& f : batch) AbandonLease(outbox_, *f.job);
    return;
  }
  std::vector<Finished*> to_send;
  size_t k = 0;
  for (Finished& f : batch) {
    if (f.frame.empty()) {
      AbandonLease(outbox_, *f.job);
      continue;
    }
    const Outbox::Enqueued& e = (*stored)[k++];
    f.outbox_id = e.id;
    if (e.state == OutboxItemState::kDead) {
      Log("job " + Short(f.job->hex) + ": result dead-lettered: " + e.dead_reason);
      AbandonLease(outbox_, *f.job);
      continue;
    }
    Log("job " + Short(f.job->hex) + " " + f.status + " (result " + Short(f.commit_id) + ")");
    to_send.push_back(&f);
  }
  if (fault_ == "crash-after-enqueue") {
    Log("GATOS_WORKER_FAULT=crash-after-enqueue: killing myself before delivery");
    raise(SIGKILL);
  }
  std::vector<Finished> replacements;
  Deliver(to_send, &replacements);
  if (!replacements.empty()) Report(std::move(replacements));
}

// Sends results in batch requests and settles them in one outbox
// transaction. A result that could not be sent for its size becomes a dead
// letter; when its job is at hand (`replacements` non-null), a small failed
// result saying why takes its place.
void Reporter::Deliver(const std::vector<Finished*>& items, std::vector<Finished>* replacements) {
  std::vector<Outbox::Delivery> settled;
  std::vector<size_t> sizes;
  for (const Finished* f : items) sizes.push_back(f->frame.size());
  for (size_t i = 0; i < items.size();) {
    const size_t start = i;
    i = NextResultBatchEnd(sizes, start);
    std::vector<std::string> frames;
    for (size_t k = start; k < i; ++k) frames.push_back(items[k]->frame);
    std::vector<Reply> replies = ledger_->CallMany(rpc::kResult, rpc::kResultBatch, frames, 10000);
    for (size_t j = 0; j < replies.size(); ++j) {
      Finished& f = *items[start + j];
      const Reply& r = replies[j];
      DeliveryDecision decision = DecideDelivery(r, f.frame.size(), frames.size());
      Outbox::Delivery d;
      d.id = f.outbox_id;
      d.error_text = decision.error_text;
      switch (decision.kind) {
        case DeliveryDecision::Kind::kSendAlone:
          continue;  // the batch was too large: this one goes again on its own below
        case DeliveryDecision::Kind::kDelivered:
          d.outcome = Outbox::Delivery::Outcome::kDelivered;
          break;
        case DeliveryDecision::Kind::kRetry:
          d.outcome = Outbox::Delivery::Outcome::kRetry;
          break;
        case DeliveryDecision::Kind::kRefused:
          d.outcome = Outbox::Delivery::Outcome::kRefused;
          Log("result of job " + Short(f.job_hex) + " refused by the ledger (" +
              std::string(TransitionErrorName(r.error)) + "): " + r.message);
          break;
      }
      if (decision.replace && replacements && f.job) {
        Poe poe = UndeliverablePoe(f.poe, f.frame.size(), r.message);
        replacements->push_back(
            signer_->Sign(f.job, std::move(poe), {{"stdout", ""}, {"stderr", ""}}, "", ""));
      }
      settled.push_back(std::move(d));
    }
    if (frames.size() > 1 &&
        std::any_of(replies.begin(), replies.end(), [](const Reply& r) { return r.too_large; })) {
      // Too large together: send each alone.
      std::vector<Finished*> alone(items.begin() + static_cast<long>(start),
                                   items.begin() + static_cast<long>(i));
      for (Finished* f : alone) Deliver({f}, replacements);
    }
  }
  auto states = outbox_->SettleDeliveries(settled, SystemNowMs());
  if (!states.ok()) {
    // The rows stay pending: they are sent again, and the ledger answers
    // `existing` for those it already has.
    Log("cannot record " + std::to_string(settled.size()) +
        " delivery outcome(s): " + states.status().message());
    return;
  }
  for (size_t j = 0; j < settled.size(); ++j) {
    if ((*states)[j] == OutboxItemState::kDead &&
        settled[j].outcome == Outbox::Delivery::Outcome::kRetry) {
      Log("result " + std::to_string(settled[j].id) +
          " dead-lettered after repeated failures: " + settled[j].error_text);
    }
  }
}

void Reporter::DeliverDue(bool all) {
  int64_t now = SystemNowMs();
  auto due = outbox_->Due(all ? INT64_MAX : now, 1000);
  if (!due.ok()) {
    Log("cannot read the outbox: " + due.status().message());
    return;
  }
  if (due->empty()) return;
  if (all) Log("delivering " + std::to_string(due->size()) + " result(s) from the outbox");
  std::vector<Finished> items(due->size());
  std::vector<Finished*> ptrs;
  for (size_t i = 0; i < due->size(); ++i) {
    items[i].frame = std::move((*due)[i].payload);
    items[i].outbox_id = (*due)[i].id;
    items[i].job_hex = (*due)[i].job_hex;
    items[i].commit_id = (*due)[i].commit_id;
    ptrs.push_back(&items[i]);
  }
  Deliver(ptrs, nullptr);
}

}  // namespace gatos::worker
