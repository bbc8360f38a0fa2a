#include "follower_door.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "gatos/git/commit_objects.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/witness.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/encoding.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/log.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;

// As the leader's submit decode allows (service_decode.cpp).
constexpr size_t kMaxForwardedObjects = 8;

std::string Refusal(TransitionError e, const std::string& message) {
  return rpc::Dump(rpc::ErrorReply(e, message));
}

}  // namespace

Result<std::vector<GitObject>> ForwardedJobObjects(Ledger& ledger, const std::string& commit) {
  CommitObjectLimits limits;
  limits.max_objects = kMaxForwardedObjects;
  RawCommit raw;
  auto out = CommitObjects(LedgerLookup(&ledger), commit, limits, &raw);
  if (!out.ok()) {
    if (out.status().code() != StatusCode::kFailedPrecondition) return out.status();
    return FailedPreconditionError(
        "this replica follows and forwards a pushed job to the leader as a submit, which carries at most " +
        std::to_string(kMaxForwardedObjects) +
        " objects: keep only job.yaml in the job commit's tree, or push to the leader's front door");
  }
  if (!raw.parents.empty()) {
    return FailedPreconditionError(
        "a replicated ledger takes a pushed job without its history (this replica forwards the commit and "
        "its tree to the leader): push a commit with no parent (git checkout --orphan NAME)");
  }
  return out;
}

Result<std::vector<GitObject>> ForwardedResultObjects(Ledger& ledger, const std::string& commit,
                                                      const Policy& policy) {
  // As the leader's result decode allows (service_decode.cpp).
  const BatchLimits rpc_limits;
  CommitObjectLimits limits;
  limits.max_objects = rpc_limits.max_objects;
  limits.max_bytes = static_cast<size_t>(policy.settings.max_result_bytes);
  auto out = CommitObjects(LedgerLookup(&ledger), commit, limits);
  if (!out.ok() && out.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPreconditionError("this replica follows and forwards a pushed result to the leader as the result "
                                   "RPC carries one, and " +
                                   out.status().message() +
                                   " (max_result_bytes): push it to the leader's front door");
  }
  return out;
}

namespace {

// A pushed result: checked here as the leader checks its content (it
// checks it again, with the lease), then forwarded as the result RPC.
ForwardPlan PlanResult(Ledger* ledger, const Policy& policy, const std::string& commit,
                       const std::string& expected_job) {
  ForwardPlan plan;
  ParsedResult parsed;
  Decision o = CheckResultContent(LedgerLookup(ledger), commit, policy, &parsed, expected_job);
  if (!o.ok()) {
    plan.reply = rpc::Dump(rpc::ErrorReply(o.error, o.message));
    return plan;
  }
  auto objects = ForwardedResultObjects(*ledger, commit, policy);
  if (!objects.ok()) {
    plan.reply = Refusal(TransitionError::kInvalid, objects.status().message());
    return plan;
  }
  plan.subject = rpc::kResult;
  plan.job_hex = parsed.job_hex;
  plan.result_commit = commit;
  plan.frame = rpc::EncodeFrame({{"commit", commit}}, EncodeObjectBatch(*objects));
  return plan;
}

// A schedule commit, as `gatos schedule` or the push hook frames it:
// checked as a schedule commit here (the leader checks it against the
// schedule's current commit and the policy) and forwarded as it came.
ForwardPlan PlanSchedule(const std::string& frame) {
  ForwardPlan plan;
  auto sc = DecodeScheduleFrame(frame);  // the leader decides the rest
  if (!sc.ok()) {
    plan.reply = rpc::Dump(rpc::ErrorReply(Decision::FromStatus(sc.status()).error, sc.status().message()));
    return plan;
  }
  plan.subject = rpc::kForwardSchedule;
  plan.ref = kSchedulePrefix + sc->schedule.spec.name;
  plan.ref_commit = sc->schedule.commit;
  plan.frame = frame;
  return plan;
}

// A pushed witness: its commit is in this replica's objects; checked as a
// witness commit here (the leader checks what it says against its log)
// and forwarded with that one object.
ForwardPlan PlanWitness(Ledger* ledger, const nlohmann::json& j) {
  ForwardPlan plan;
  auto commit = rpc::StringField(j, "commit");
  auto key = rpc::StringField(j, "key");
  if (!commit.ok() || !IsLowerHex(*commit, 40) || !key.ok() || !IsLowerHex(*key, 64)) {
    plan.reply = Refusal(TransitionError::kInvalid, "a witness push names a 40-hex commit and a 64-hex key");
    return plan;
  }
  auto w = CheckWitnessCommit(LedgerLookup(ledger), *commit);
  if (!w.ok()) {
    plan.reply = rpc::Dump(rpc::ErrorReply(Decision::FromStatus(w.status()).error, w.status().message()));
    return plan;
  }
  auto raw = ledger->ReadRawObject(*commit);
  if (!raw.ok()) {
    plan.reply = Refusal(TransitionError::kRetry, raw.status().message());
    return plan;
  }
  plan.subject = rpc::kForwardWitness;
  plan.ref = WitnessRef(*key);
  plan.ref_commit = *commit;
  plan.frame = rpc::EncodeFrame({{"commit", *commit}, {"key", *key}},
                                EncodeObjectBatch({{raw->first, std::move(raw->second), *commit}}));
  return plan;
}

ForwardPlan Plan(Ledger* ledger, const Result<Policy>& policy, const ServiceRequest& r, int64_t now) {
  ForwardPlan plan;
  if (r.subject == rpc::kLocalRejected) {
    plan.reply = rpc::Dump(rpc::OkReply());
    return plan;
  }
  if (r.subject == rpc::kLocalSchedule) return PlanSchedule(r.data);
  if (r.subject != rpc::kLocalPushSubmit && r.subject != rpc::kLocalPushResult && r.subject != rpc::kLocalPushWitness) {
    plan.reply = Refusal(TransitionError::kInvalid,
                         "this replica follows the leader: change the policy and record batches on the leader "
                         "(gatos cluster status names it)");
    return plan;
  }
  if (!ledger || !policy.ok()) {
    plan.reply = Refusal(TransitionError::kRetry,
                         "this replica cannot read its ledger: " +
                             (policy.ok() ? std::string("no repository") : policy.status().message()));
    return plan;
  }
  auto j = rpc::ParseRequest(r.data, r.subject);
  if (!j.ok()) {
    plan.reply = Refusal(TransitionError::kInvalid, j.status().message());
    return plan;
  }
  auto commit = rpc::StringField(*j, "commit");
  if (!commit.ok() || !IsLowerHex(*commit, 40)) {
    plan.reply = Refusal(TransitionError::kInvalid, "commit must be a 40-hex id");
    return plan;
  }
  if (r.subject == rpc::kLocalPushWitness) return PlanWitness(ledger, *j);
  std::string expected;
  if (j->contains("job")) {
    auto job = rpc::StringField(*j, "job");
    if (!job.ok()) {
      plan.reply = Refusal(TransitionError::kInvalid, job.status().message());
      return plan;
    }
    expected = *job;
  }
  if (r.subject == rpc::kLocalPushResult) return PlanResult(ledger, *policy, *commit, expected);
  // The leader checks it again; this spares it what cannot pass and names
  // the job to wait for.
  auto check = CheckJobCommit(LedgerLookup(ledger), *commit, expected, *policy, now);
  if (!check.ok()) {
    plan.reply = rpc::Dump(rpc::ErrorReply(Decision::FromStatus(check.status()).error, check.status().message()));
    return plan;
  }
  auto objects = ForwardedJobObjects(*ledger, *commit);
  if (!objects.ok()) {
    plan.reply = Refusal(TransitionError::kInvalid, objects.status().message());
    return plan;
  }
  plan.subject = rpc::kSubmit;
  plan.job_hex = check->job_hex;
  plan.frame = rpc::EncodeFrame({{"commit", *commit}}, EncodeObjectBatch(*objects));
  return plan;
}

}  // namespace

ForwardPlan PlanForward(Ledger* ledger, const Result<Policy>& policy, const ServiceRequest& request,
                        int64_t now_ms) {
  try {
    return Plan(ledger, policy, request, now_ms);
  } catch (const std::exception& e) {
    ForwardPlan plan;
    plan.reply = Refusal(TransitionError::kInvalid, "malformed request: " + TruncateUtf8(e.what(), 200));
    return plan;
  }
}

Result<std::unique_ptr<FollowerDoor>> FollowerDoor::Start(const std::string& dir, Bus* bus,
                                                         FollowerDoorOptions options) {
  std::unique_ptr<FollowerDoor> d(new FollowerDoor(dir, bus, options));
  GATOS_ASSIGN_OR_RETURN(d->local_, LocalServer::Start(LedgerSocketPath(dir), &d->queue_));
  d->thread_ = std::thread([p = d.get()] { p->Loop(); });
  return d;
}

FollowerDoor::~FollowerDoor() {
  stop_ = true;
  local_.reset();  // no new connections; the socket file is removed
  queue_.Close();
  if (thread_.joinable()) thread_.join();
}

void FollowerDoor::Loop() {
  while (true) {
    std::vector<Request> batch = queue_.PopBatch(1024, std::chrono::milliseconds(200));
    if (batch.empty()) {
      if (queue_.closed()) return;
      continue;
    }
    std::vector<ServiceRequest> reqs;
    for (auto& r : batch) reqs.push_back(r.req);
    std::vector<std::string> replies = Handle(reqs);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].local) batch[i].local->set_value(std::move(replies[i]));
    }
  }
}

std::vector<std::string> FollowerDoor::Handle(std::vector<ServiceRequest>& requests) {
  std::vector<std::string> replies(requests.size());
  std::map<size_t, ForwardPlan> forwarded;  // request -> what the leader accepted
  std::map<size_t, nlohmann::json> accepted;
  auto ledger = Ledger::Open(dir_);  // a handle per batch: the pushed objects are new
  Result<Policy> policy = ledger.ok() ? (*ledger)->ReadPolicy() : Result<Policy>(ledger.status());
  const int64_t now = SystemNowMs();
  for (size_t i = 0; i < requests.size(); ++i) {
    ForwardPlan plan = PlanForward(ledger.ok() ? ledger->get() : nullptr, policy, requests[i], now);
    if (!plan.reply.empty()) {
      replies[i] = std::move(plan.reply);
      continue;
    }
    auto reply = bus_->Request(plan.subject, plan.frame, options_.leader_timeout_ms);
    if (!reply.ok()) {
      replies[i] = Refusal(TransitionError::kRetry,
                           "this replica follows, and no leader answered the forwarded push (" +
                               reply.status().message() +
                               "); nothing was recorded: push again once a leader is elected (gatos cluster status)");
      continue;
    }
    Decision err;
    auto parsed = rpc::ParseReply(reply->data, plan.subject, &err);
    if (!parsed.ok()) {
      replies[i] = Refusal(TransitionError::kRetry, "the leader's reply to the forwarded push: " +
                                                        parsed.status().message() + "; push again");
      continue;
    }
    if (err.error != TransitionError::kNone) {
      replies[i] = rpc::Dump(rpc::ErrorReply(err.error, "the leader refused the push: " + err.message));
      continue;
    }
    plan.frame.clear();
    forwarded[i] = std::move(plan);
    accepted[i] = std::move(*parsed);
  }
  // Acknowledged once this replica holds each job, or each result, in its
  // own, checked log.
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.apply_timeout_ms);
  while (!forwarded.empty()) {
    auto view = LedgerView::Open(dir_);
    const bool refs = std::any_of(forwarded.begin(), forwarded.end(), [](const auto& f) { return !f.second.ref.empty(); });
    auto handle = refs ? Ledger::Open(dir_) : Result<std::unique_ptr<Ledger>>(nullptr);
    if (view.ok()) {
      for (auto it = forwarded.begin(); it != forwarded.end();) {
        const ForwardPlan& plan = it->second;
        std::optional<JobRecord> rec;
        bool applied = false;
        if (!plan.ref.empty()) {
          applied = handle.ok() && *handle && (*handle)->ResolveRef(plan.ref).value_or("") == plan.ref_commit;
        } else {
          auto found = (*view)->Find(plan.job_hex);
          if (found.ok() && *found) rec = **found;
          applied = rec && (plan.result_commit.empty() || HoldsResult(*rec, plan.result_commit));
        }
        if (!applied) {
          ++it;
          continue;
        }
        // The reply is this replica's own: nothing of the bus's answer
        // but whether the job, the result, the witness or the schedule
        // commit existed already.
        const nlohmann::json& said = accepted[it->first];
        const bool existing = said.contains("existing") && said["existing"].is_boolean() && said["existing"].get<bool>();
        nlohmann::json body = rpc::OkReply();
        if (plan.ref.empty()) {
          body["job"] = "blake3:" + plan.job_hex;
        } else {
          body["commit"] = plan.ref_commit;
        }
        body["existing"] = existing;
        body["forwarded"] = true;
        body["log_seq"] = (*view)->seq();
        if (!plan.result_commit.empty()) {
          body["state"] = std::string(JobStateName(RecordState(*rec, SystemNowMs())));
          body["attempt"] = rec->attempt;
        }
        replies[it->first] = rpc::Dump(body);
        it = forwarded.erase(it);
      }
    }
    if (forwarded.empty()) break;
    if (Clock::now() >= deadline || stop_) {
      for (const auto& [i, plan] : forwarded) {
        const std::string what =
            !plan.ref.empty()              ? plan.ref_commit.substr(0, 12) + " (" + plan.ref + ")"
            : plan.result_commit.empty()   ? "job blake3:" + plan.job_hex
                                           : "the result " + plan.result_commit.substr(0, 12) + " of job blake3:" + plan.job_hex;
        replies[i] = Refusal(TransitionError::kRetry,
                             "the leader answered that it recorded " + what + ", but this replica has not " +
                                 (stop_ ? "applied it before it stopped following"
                                        : "applied it within " + std::to_string(options_.apply_timeout_ms / 1000) +
                                              " s") +
                                 "; push again to find out (what is recorded is not recorded twice)");
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return replies;
}

}  // namespace gatos::gatosd
