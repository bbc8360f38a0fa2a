// gatosd's own checkpoints: while the ledger serves, its Merkle tree is
// brought up to the log head and a checkpoint signed and stored
// (<ledger>/gatos/tlog/checkpoint) every `period` in which the log moved, so
// proof bundles, witnesses and the tiles served over HTTP (/tlog/) never
// wait for someone to run `gatos checkpoint` (docs/auditor-guide.md
// section 13).
//
// Thread-safety: owns one thread, with its own repository handle; the
// constructor and destructor run on the owner's thread.
#ifndef GATOS_GATOSD_CHECKPOINT_PUBLISHER_H_
#define GATOS_GATOSD_CHECKPOINT_PUBLISHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "gatos/crypto/keys.h"

namespace gatos::gatosd {

class CheckpointPublisher {
 public:
  CheckpointPublisher(std::string ledger_dir, Ed25519PrivateKey key, std::chrono::milliseconds period);
  // Signs a last checkpoint of what the log holds, then stops.
  ~CheckpointPublisher();
  CheckpointPublisher(const CheckpointPublisher&) = delete;
  CheckpointPublisher& operator=(const CheckpointPublisher&) = delete;

  // Tree size of the newest checkpoint stored (0 before the first).
  uint64_t published_size() const;

 private:
  void Loop();
  // One turn: nothing when the log head is the one last checkpointed.
  void PublishIfMoved();

  const std::string dir_;
  const Ed25519PrivateKey key_;
  const std::chrono::milliseconds period_;
  std::string last_head_;
  bool said_error_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t published_size_ = 0;
  std::thread thread_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_CHECKPOINT_PUBLISHER_H_
