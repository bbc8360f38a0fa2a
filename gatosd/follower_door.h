// A follower's front door (docs/replication.md, "Pushes to a follower"):
// while a replica follows, it serves the ledger's local socket so that the
// front door's hooks reach it, and forwards each pushed job to the leader
// as the submit RPC carries one (the job commit and its tree), and each
// pushed result as the result RPC carries one (the result commit and its
// tree; the lease commit it names is in every replica's log already). A
// push is acknowledged only once this replica applied, from the replicated
// log and after the auditor's checks, the record holding the job or the
// result: never on the word of whoever answered on the bus. With no
// leader, or no such record in time, the push is refused and nothing is
// written here.
//
// A pushed witness and a schedule commit (pushed, or from `gatos schedule`)
// are forwarded as well, on subjects only the ledger key may publish
// (rpc::kForwardWitness, rpc::kForwardSchedule), and acknowledged once this
// replica's own ref holds them. The CLI's other local writes (policy,
// batches) are refused with a message that says to use the leader.
//
// Thread-safety: Start and the destructor from one thread; requests are
// handled on a thread of its own.
#ifndef GATOS_GATOSD_FOLLOWER_DOOR_H_
#define GATOS_GATOSD_FOLLOWER_DOOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gatos/git/ledger.h"
#include "gatos/git/git_object.h"
#include "gatos/ledger/job_service.h"
#include "gatos/model/policy.h"
#include "gatos/nats/bus.h"
#include "local_server.h"
#include "request_queue.h"

namespace gatos::gatosd {

struct FollowerDoorOptions {
  int leader_timeout_ms = 5'000;   // for the leader's reply to a forwarded submit
  int apply_timeout_ms = 15'000;   // for the record holding the job to be applied here
};

class FollowerDoor {
 public:
  // `bus` must outlive the door.
  static Result<std::unique_ptr<FollowerDoor>> Start(const std::string& dir, Bus* bus,
                                                    FollowerDoorOptions options = {});
  ~FollowerDoor();

 private:
  FollowerDoor(std::string dir, Bus* bus, FollowerDoorOptions options)
      : dir_(std::move(dir)), bus_(bus), options_(options) {}
  void Loop();
  std::vector<std::string> Handle(std::vector<ServiceRequest>& requests);

  std::string dir_;
  Bus* bus_;
  FollowerDoorOptions options_;
  RequestQueue queue_;
  std::unique_ptr<LocalServer> local_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What a follower does with one request of its local socket before the
// leader is asked: refuse it (`reply` set: the answer), or forward `frame`
// on `subject` (rpc::kSubmit's request for a pushed job, rpc::kResult's for
// a pushed result, rpc::kForwardWitness / kForwardSchedule's) for the job
// `job_hex`; `result_commit` is the pushed result ("" for a job); a witness
// or a schedule names no job but the ref that holds it once recorded
// (`ref` at `ref_commit`). `ledger` and `policy` are the follower's (null /
// an error: refused, retry). Never throws.
struct ForwardPlan {
  std::string reply;
  const char* subject = nullptr;
  std::string job_hex;
  std::string result_commit;
  std::string ref;
  std::string ref_commit;
  std::string frame;
};
ForwardPlan PlanForward(Ledger* ledger, const Result<Policy>& policy, const ServiceRequest& request,
                        int64_t now_ms);

// The objects the submit RPC carries for the job commit `commit` of
// `ledger`: the commit, its tree and every object under it (not its
// parents). FailedPrecondition, with what to do instead, for a commit with
// parents or more objects than a submit carries.
Result<std::vector<GitObject>> ForwardedJobObjects(Ledger& ledger, const std::string& commit);

// The objects the result RPC carries for the result commit `commit` of
// `ledger`: the commit, its tree and every object under it (not its
// parents: the lease commit). FailedPrecondition, with what to do
// instead, past what a result RPC carries (max_result_bytes).
Result<std::vector<GitObject>> ForwardedResultObjects(Ledger& ledger, const std::string& commit,
                                                      const Policy& policy);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_FOLLOWER_DOOR_H_
