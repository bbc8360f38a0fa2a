#include "checkpoint_publisher.h"

#include "gatos/audit/checkpoint_store.h"
#include "gatos/git/ledger.h"
#include "gatos/model/refs.h"
#include "gatos/sys/log.h"

namespace gatos::gatosd {

CheckpointPublisher::CheckpointPublisher(std::string ledger_dir, Ed25519PrivateKey key,
                                         std::chrono::milliseconds period)
    : dir_(std::move(ledger_dir)), key_(std::move(key)), period_(period), thread_([this] { Loop(); }) {}

CheckpointPublisher::~CheckpointPublisher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t CheckpointPublisher::published_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return published_size_;
}

void CheckpointPublisher::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait_for(l, period_, [this] { return stop_; });
    const bool last = stop_;
    l.unlock();
    PublishIfMoved();
    l.lock();
    if (last) return;
  }
}

void CheckpointPublisher::PublishIfMoved() {
  auto ledger = Ledger::Open(dir_);
  auto head = ledger.ok() ? (*ledger)->ResolveRef(kLogRef) : Result<std::string>(ledger.status());
  if (head.ok() && *head == last_head_) return;
  auto tree = head.ok() ? UpdatedLogTree(**ledger, dir_) : Result<LogTree>(head.status());
  auto note = tree.ok() ? SignAndStoreCheckpoint(*tree, dir_, key_) : Result<std::string>(tree.status());
  if (!note.ok()) {
    // Said once until it works again: a rewritten log (DataLoss) stays an
    // error on every turn, and is what an operator must look at.
    if (!said_error_) Log("ERROR: no checkpoint signed: " + note.status().message());
    said_error_ = true;
    return;
  }
  if (said_error_) Log("checkpoints are signed again");
  said_error_ = false;
  last_head_ = *head;
  std::lock_guard<std::mutex> l(mu_);
  published_size_ = tree->size();
}

}  // namespace gatos::gatosd
