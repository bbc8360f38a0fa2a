#include "replica_reads.h"

#include "gatos/ledger/view_reads.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/log.h"

namespace gatos::gatosd {

Status ReplicaReader::Refresh() {
  if (view_) {
    auto head = view_->ledger().ResolveRef(kLogRef);
    if (head.ok() && *head == view_->head()) return OkStatus();
  }
  GATOS_ASSIGN_OR_RETURN(view_, LedgerView::Open(dir_));
  if (view_->policy_commit() != policy_commit_) {
    auto policy = view_->ReadPolicy();
    if (!policy.ok()) {
      view_.reset();
      return policy.status();
    }
    policy_ = std::move(*policy);
    policy_commit_ = view_->policy_commit();
  }
  return OkStatus();
}

std::string ReplicaReader::Answer(std::string_view subject, std::string_view data, nlohmann::json replica) {
  Status s = Refresh();
  if (!s.ok()) {
    return rpc::Dump(rpc::ErrorReply(TransitionError::kRetry, "this replica cannot read its ledger: " + s.message()));
  }
  replica["log_seq"] = view_->seq();
  return ViewReadReply(*view_, policy_, subject, data, SystemNowMs(), {{"replica", std::move(replica)}});
}

Result<std::unique_ptr<ReplicaReads>> ReplicaReads::Start(Bus& bus, const std::string& dir, const std::string& name,
                                                         std::function<Role()> role) {
  std::unique_ptr<ReplicaReads> r(new ReplicaReads(dir, name, std::move(role)));
  Bus* b = &bus;
  for (const char* subject : {rpc::kStatus, rpc::kList, rpc::kLogs}) {
    auto own = bus.Subscribe(rpc::ReplicaReadSubject(name, subject),
                             [self = r.get(), b](Message m) { self->Handle(*b, m); });
    if (!own.ok()) return own.status();
    r->subs_.push_back(std::move(*own));
    auto any = bus.QueueSubscribe(rpc::ReplicaReadSubject("", subject), rpc::kReplicaQueueGroup,
                                  [self = r.get(), b](Message m) { self->Handle(*b, m); });
    if (!any.ok()) return any.status();
    r->subs_.push_back(std::move(*any));
  }
  return r;
}

ReplicaReads::~ReplicaReads() { subs_.clear(); }

void ReplicaReads::Handle(Bus& bus, const Message& m) {
  if (m.reply.empty()) return;
  // The read's kind is the subject's last token: status, list or logs.
  const std::string kind = m.subject.substr(m.subject.rfind('.') + 1);
  std::string subject = kind == "status" ? rpc::kStatus : kind == "list" ? rpc::kList : rpc::kLogs;
  const Role role = role_();
  nlohmann::json replica = {{"name", name_},
                            {"role", role.leader ? "leader" : "follower"},
                            {"term", role.term},
                            {"lag_ms", role.leader ? 0 : role.lag_ms}};
  std::string reply;
  {
    std::lock_guard<std::mutex> l(mu_);
    reply = reader_.Answer(subject, m.data, std::move(replica));
  }
  Status s = bus.Respond(m, reply);
  if (!s.ok()) Log("reply on " + m.subject + " failed: " + s.message());
}

}  // namespace gatos::gatosd
