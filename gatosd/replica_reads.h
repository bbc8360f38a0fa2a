// What every replica of a replicated ledger serves, leader or follower, for
// the life of the process (docs/replication.md, "Reads from any replica"):
// status, list and logs from its own repository, on its own subjects
// (gatos.replica.<name>.*) and on the subjects any replica answers
// (gatos.read.*, queue group gatos-replicas). Each ok reply says how stale
// it can be: "replica": {name, role, term, log_seq, lag_ms}.
//
// Thread-safety: the NATS library's threads call the handlers; one mutex
// guards the repository handle they share.
#ifndef GATOS_GATOSD_REPLICA_READS_H_
#define GATOS_GATOSD_REPLICA_READS_H_

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/ledger/writer.h"
#include "gatos/model/policy.h"
#include "gatos/nats/bus.h"

namespace gatos::gatosd {

// Answers one read from the repository in `dir`, reopening its view when
// the log moved. Thread-compatible (ReplicaReads holds it under a mutex).
class ReplicaReader {
 public:
  explicit ReplicaReader(std::string dir) : dir_(std::move(dir)) {}
  // `replica` is merged into an ok reply as "replica", with "log_seq" (of
  // the view that answered) added.
  std::string Answer(std::string_view subject, std::string_view data, nlohmann::json replica);

 private:
  Status Refresh();
  std::string dir_;
  std::unique_ptr<LedgerView> view_;
  Policy policy_;
  std::string policy_commit_;
};

class ReplicaReads {
 public:
  struct Role {
    bool leader = false;
    uint64_t term = 0;
    int64_t lag_ms = 0;
  };
  // Subscribes on `bus` (it must outlive the result); `role` is read at
  // each reply.
  static Result<std::unique_ptr<ReplicaReads>> Start(Bus& bus, const std::string& dir, const std::string& name,
                                                    std::function<Role()> role);
  ~ReplicaReads();

 private:
  ReplicaReads(std::string dir, std::string name, std::function<Role()> role)
      : name_(std::move(name)), role_(std::move(role)), reader_(std::move(dir)) {}
  void Handle(Bus& bus, const Message& m);

  std::string name_;
  std::function<Role()> role_;
  std::mutex mu_;  // reader_
  ReplicaReader reader_;
  std::vector<std::unique_ptr<Bus::Subscription>> subs_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_REPLICA_READS_H_
