#include "renewer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "gatos/crypto/signed_request.h"
#include "gatos/git/grant.h"
#include "gatos/model/clock.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/log.h"

namespace gatos::worker {

void Renewer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Renewer::Add(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!jobs_.emplace(job->hex, job).second) return;
    job->renewal.Start(SystemNowMs());
  }
  cv_.notify_one();
}

void Renewer::Remove(const Job& job) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_.erase(job.hex);
}

void Renewer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Renewer::Loop() {
  std::mt19937 rng(std::random_device{}());
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    int64_t now = SystemNowMs();
    int64_t next = now + 1000;
    std::vector<std::shared_ptr<Job>> due;
    for (auto& [hex, job] : jobs_) {
      if (job->renewal.next_ms() <= now) {
        due.push_back(job);
      } else {
        next = std::min(next, job->renewal.next_ms());
      }
    }
    if (due.empty()) {
      cv_.wait_for(l, std::chrono::milliseconds(std::max<int64_t>(1, next - now)));
      continue;
    }
    l.unlock();
    for (auto& job : due) Renew(*job, rng);
    l.lock();
  }
}

void Renewer::Renew(Job& job, std::mt19937& rng) {
  LeaseRequest sent = SignLeaseRequest(*key_, job.hex, job.epoch, SystemNowMs(), true);
  Reply r = ledger_->Call(rpc::kRenew, rpc::Dump(rpc::LeaseRequestJson(sent)), 5000);
  if (r.ok()) {
    auto signed_grant = VerifyReplyGrants({&r.body}, *ledger_keys_);
    auto renewed = signed_grant.ok() ? VerifyRenewal(ReplyObjects(r.body), signed_grant->front(),
                                                     *ledger_keys_, sent)
                                     : Result<VerifiedGrant>(signed_grant.status());
    if (!renewed.ok()) {
      // An answer the ledger did not sign counts as no answer.
      Log("job " + Short(job.hex) +
          ": ignored an unverified renew reply: " + renewed.status().message());
      r.error = TransitionError::kRetry;
      r.message = "unverified renew reply";
    } else {
      int64_t expires = renewed->lease.expires_ms;
      Status rec = outbox_->UpdateLeaseExpiry(job.hex, job.epoch, expires, SystemNowMs());
      if (!rec.ok())
        Log("job " + Short(job.hex) + ": cannot record the renewed lease: " + rec.message());
      if (!renewed->cancel_commit.empty() && !job.cancel) {
        Log("job " + Short(job.hex) + ": cancel requested; stopping it");
        job.cancel = true;
        job.Stop();
      }
      std::lock_guard<std::mutex> l(mu_);
      job.renewal.Renewed(expires, SystemNowMs());
      return;
    }
  }
  if (r.error == TransitionError::kRetry) {
    // Retryable: back off with jitter, but never past our lease.
    std::lock_guard<std::mutex> l(mu_);
    if (job.renewal.Failed(SystemNowMs(), static_cast<uint32_t>(rng()))) return;
    Log("job " + Short(job.hex) + ": lease expired while the ledger was unreachable (" + r.message +
        ")");
  } else {
    Log("job " + Short(job.hex) + ": renew refused: " + r.message);
  }
  // StaleOwner (or terminal, or expired): stop at once.
  job.stale = true;
  job.Stop();
  std::lock_guard<std::mutex> l(mu_);
  job.renewal.Lost();
}

}  // namespace gatos::worker
