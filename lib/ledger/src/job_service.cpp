#include "gatos/job_service.h"

#include "gatos/witness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "gatos/blake3.h"
#include "gatos/canonical_json.h"
#include "gatos/encoding.h"
#include "gatos/ledger_commits.h"
#include "gatos/parallel.h"
#include "gatos/keys.h"
#include "gatos/poe.h"
#include "gatos/result.h"
#include "gatos/trailers.h"
#include "gatos/transition.h"

namespace gatos {
namespace {

using nlohmann::json;

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

std::string ErrorText(TransitionError e, std::string_view m) { return rpc::Dump(rpc::ErrorReply(e, m)); }
std::string ErrorText(const Outcome& o) { return ErrorText(o.error, o.message); }
std::string Invalid(std::string_view m) { return ErrorText(TransitionError::kInvalid, m); }

bool IsLocalPush(const std::string& subject) {
  return subject == rpc::kLocalPushSubmit || subject == rpc::kLocalPushResult;
}

std::string KindOf(const std::string& subject) {
  size_t dot = subject.rfind('.');
  return dot == std::string::npos ? subject : subject.substr(dot + 1);
}

std::string Objects(const std::vector<GitObject>& objects) {
  std::string batch = EncodeObjectBatch(objects);
  return Base64Encode(reinterpret_cast<const uint8_t*>(batch.data()), batch.size());
}

// The class of an error reply, for metrics; "ok" for an ok reply.
std::string OutcomeOf(const std::string& reply) {
  if (reply.find("\"ok\":false") == std::string::npos) return "ok";
  size_t e = reply.find("\"error\":\"");
  if (e == std::string::npos) return "error";
  size_t end = reply.find('"', e + 9);
  return reply.substr(e + 9, end - e - 9);
}

}  // namespace


JobService::JobService(LedgerWriter* writer, ServiceOptions options, ServiceObserver* observer)
    : writer_(writer), options_(options), observer_(observer ? observer : &default_observer_) {
  PublishPolicy();
}

void JobService::PublishPolicy() {
  auto snap = std::make_shared<PolicySnapshot>(PolicySnapshot{writer_->policy(), writer_->policy_commit()});
  std::lock_guard<std::mutex> l(policy_mu_);
  policy_ = std::move(snap);
}

std::shared_ptr<const PolicySnapshot> JobService::policy_snapshot() const {
  std::lock_guard<std::mutex> l(policy_mu_);
  return policy_;
}

void JobService::Log(const std::string& line) { observer_->Log(line); }

void JobService::Start() {
  for (const auto& [job, rec] : writer_->live()) Track(rec);
  ProcessDue(writer_->Now());
}

std::vector<ServiceEvent> JobService::TakeEvents() {
  std::vector<ServiceEvent> out;
  out.swap(events_);
  return out;
}

void AppendPrepared(PreparedBatch* into, PreparedBatch more) {
  size_t offset = into->decoded.size();
  for (auto& sp : more.spans) {
    sp.first += offset;
    into->spans.push_back(std::move(sp));
  }
  for (auto& d : more.decoded) into->decoded.push_back(std::move(d));
}

std::vector<std::string> JobService::Handle(const std::vector<ServiceRequest>& requests) {
  return Finish(Prepare(requests));
}

PreparedBatch JobService::Prepare(const std::vector<ServiceRequest>& requests) const {
  // A batch request (claim-batch, result-batch) becomes one request of the
  // single form per entry, applied in the same log batch as everything
  // else; its entries' replies are joined into one batch reply below. A
  // message that is not a well-formed batch is refused as a whole.
  PreparedBatch p;
  std::vector<ServiceRequest> flat;
  flat.reserve(requests.size());
  using Span = PreparedBatch::Span;
  std::vector<Span>& spans = p.spans;
  spans.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const ServiceRequest& r = requests[i];
    Span& sp = spans[i];
    sp.first = flat.size();
    const char* single = r.subject == rpc::kClaimBatch    ? rpc::kClaim
                         : r.subject == rpc::kResultBatch ? rpc::kResult
                                                          : nullptr;
    if (!single) {
      flat.push_back(r);
      sp.count = 1;
      continue;
    }
    sp.batch = true;
    auto entries = rpc::DecodeBatch(r.data);
    if (!entries.ok()) {
      sp.refused = Invalid(KindOf(r.subject) + ": " + entries.status().message());
      observer_->OnRequest(KindOf(r.subject), "invalid", 0);
      continue;
    }
    for (std::string_view e : *entries) flat.push_back({single, std::string(e), r.received_ms});
    sp.count = entries->size();
  }

  auto snap = policy_snapshot();
  int64_t now = writer_->Now();
  std::vector<DecodedRequest> batch(flat.size());
  // Jobs and results pushed with git are read from the ledger's object store:
  // each thread here with a repository handle of its own (libgit2 handles
  // belong to one thread), opened at its first such request, so they are
  // checked off the ledger thread too. The calling thread (gatosd's decoder
  // thread) keeps its handle from one call to the next.
  const std::string ledger_path = writer_->ledger().path();
  const size_t threads = ThreadsFor(flat.size(), 8);
  RunOnThreads(threads, [&](size_t t) {
    std::unique_ptr<Ledger> own;
    std::unique_lock<std::mutex> kept(prepare_mu_, std::defer_lock);
    std::unique_ptr<Ledger>* handle = t == 0 && kept.try_lock() ? &prepare_ledger_ : &own;
    bool tried = *handle != nullptr;
    for (size_t i = t; i < flat.size(); i += threads) {
      if (!tried && IsLocalPush(flat[i].subject)) {
        tried = true;  // once: on failure, the ledger thread decodes them
        auto opened = Ledger::Open(ledger_path);
        if (opened.ok()) *handle = std::move(*opened);
      }
      batch[i] = Predecode(std::move(flat[i]), *snap, now, handle->get());
    }
  });
  p.decoded = std::move(batch);
  return p;
}

std::vector<std::string> JobService::Finish(PreparedBatch p) {
  const std::vector<PreparedBatch::Span>& spans = p.spans;
  std::vector<std::string> flat_replies =
      p.decoded.empty() ? std::vector<std::string>() : Handle(std::move(p.decoded));
  std::vector<std::string> replies(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const PreparedBatch::Span& sp = spans[i];
    if (sp.refused) {
      replies[i] = *sp.refused;
    } else if (!sp.batch) {
      replies[i] = std::move(flat_replies[sp.first]);
    } else {
      std::vector<std::string> entries(std::make_move_iterator(flat_replies.begin() + sp.first),
                                       std::make_move_iterator(flat_replies.begin() + sp.first + sp.count));
      replies[i] = rpc::EncodeBatch(entries);
    }
  }
  return replies;
}

std::vector<std::string> JobService::Handle(std::vector<DecodedRequest> batch) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Op> ops;
  std::vector<int> op_of(batch.size(), -1);
  ops.reserve(batch.size());
  std::shared_ptr<const PolicySnapshot> snap;
  for (size_t i = 0; i < batch.size(); ++i) {
    DecodedRequest& d = batch[i];
    try {
      if (d.deferred) {
        DecodeOnLedgerThread(&d);
      } else if (!d.read && d.policy_commit != writer_->policy_commit()) {
        // Checked against a policy that changed since: check again.
        if (!snap) snap = policy_snapshot();
        d = Predecode(std::move(d.req), *snap, writer_->Now());
        if (d.deferred) DecodeOnLedgerThread(&d);
      }
    } catch (const std::exception& e) {
      Log("internal error decoding a " + d.kind + " request: " + TruncateUtf8(e.what(), 200));
      d.op.reset();
      d.reply = ErrorText(TransitionError::kInternal, "internal error; the request was not applied");
    }
    if (!d.rejected_reason.empty()) {
      observer_->OnRejectedSubmit(d.req.subject == rpc::kSubmit ? "rpc" : "push", d.rejected_reason);
    }
    if (!d.log_line.empty()) Log(d.log_line);
    if (d.op) {
      op_of[i] = static_cast<int>(ops.size());
      ops.push_back(std::move(*d.op));
      d.op.reset();
    }
  }
  std::vector<OpResult> results;
  BatchStats stats;
  if (!ops.empty()) {
    try {
      results = writer_->Apply(ops, &stats);
    } catch (const std::exception& e) {
      Log("internal error applying a batch: " + TruncateUtf8(e.what(), 200));
      results.assign(ops.size(), OpResult{});
      for (auto& r : results) r.outcome = Outcome::Error(TransitionError::kInternal, "internal error; not applied");
    }
  }
  try {
    AfterBatch(batch, op_of, results);
  } catch (const std::exception& e) {
    Log("internal error after a batch: " + TruncateUtf8(e.what(), 200));
  }
  std::vector<std::string> replies(batch.size());
  int64_t now = SystemNowMs();
  for (size_t i = 0; i < batch.size(); ++i) {
    DecodedRequest& d = batch[i];
    if (d.read) {
      try {
        d.reply = ReadReply(d.req);
      } catch (const std::exception& e) {
        Log("internal error answering a " + d.kind + " request: " + TruncateUtf8(e.what(), 200));
        d.reply = ErrorText(TransitionError::kInternal, "internal error");
      }
    }
    replies[i] = d.reply ? std::move(*d.reply) : ErrorText(TransitionError::kInternal, "no reply was produced");
    double secs = d.req.received_ms ? static_cast<double>(now - d.req.received_ms) / 1000.0 : 0.0;
    observer_->OnRequest(d.kind, OutcomeOf(replies[i]), secs);
  }
  if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
  if (!ops.empty()) {
    observer_->OnBatch(batch.size(), stats.changes,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  ProcessDue(writer_->Now());
  return replies;
}

namespace {

// A job or result pushed with stock git (the front door's proc-receive hook
// names the commit; its objects are in the ledger's object store): checked
// like a submit or result RPC, reading the objects through `ledger`. A
// refusal is left in p->reply (and p->rejected_reason).
std::optional<Op> DecodeLocalPush(const ServiceRequest& r, Ledger* ledger, const Policy& policy, int64_t now,
                                  DecodedRequest* p) {
  const std::string& subj = r.subject;
  auto refuse = [&](std::string reply) -> std::optional<Op> {
    p->reply = std::move(reply);
    return std::nullopt;
  };
  auto j = rpc::ParseRequest(r.data, subj);
  if (!j.ok()) return refuse(Invalid(j.status().message()));
  auto commit = rpc::StringField(*j, "commit");
  if (!commit.ok() || !IsLowerHex(*commit, 40)) return refuse(Invalid("commit must be a 40-hex id"));
  std::string expected = j->value("job", "");
  if (subj == rpc::kLocalPushSubmit) {
    auto check = CheckJobCommit(LedgerLookup(ledger), *commit, expected, policy, now);
    if (!check.ok()) {
      p->rejected_reason = RejectReasonLabel(check.status());
      return refuse(ErrorText(Outcome::FromStatus(check.status())));
    }
    return SubmitOp{std::move(*check), {}};
  }
  ParsedResult parsed;
  Outcome o = CheckResultContent(LedgerLookup(ledger), *commit, policy, &parsed);
  if (o.ok() && !expected.empty() && parsed.job_hex != expected) {
    o = Outcome::Error(TransitionError::kInvalid, "the result is of job blake3:" + parsed.job_hex +
                                                      ", not of the job its ref names");
  }
  if (!o.ok()) {
    p->rejected_reason = "bad_result";
    return refuse(ErrorText(o));
  }
  return ResultOp{std::move(parsed), {}};
}

std::optional<Op> PredecodeOp(const ServiceRequest& r, const Policy& policy, int64_t now, Ledger* objects,
                              DecodedRequest* p) {
  const std::string& subj = r.subject;
  auto refuse = [&](std::string reply) -> std::optional<Op> {
    p->reply = std::move(reply);
    return std::nullopt;
  };
  if (subj == rpc::kStatus || subj == rpc::kList) {
    p->read = true;
    return std::nullopt;
  }
  if (subj == rpc::kLocalRejected) {
    auto j = rpc::ParseRequest(r.data, subj);
    std::string reason = j.ok() ? j->value("reason", "other") : "other";
    static const char* kKnown[] = {"unsigned", "untrusted_signer", "bad_signature", "wrong_job_id", "missing_trailer",
                                   "policy_root", "not_a_file", "bad_manifest", "forbidden_ref", "bad_result"};
    bool known = false;
    for (const char* k : kKnown) known = known || reason == k;
    p->rejected_reason = known ? reason : "other";
    return refuse(rpc::Dump(rpc::OkReply()));
  }
  if (subj == rpc::kClaim || subj == rpc::kRenew) {
    auto j = rpc::ParseRequest(r.data, subj);
    if (!j.ok()) return refuse(Invalid(j.status().message()));
    auto req = rpc::ParseLeaseRequest(*j, subj == rpc::kRenew);
    if (!req.ok()) return refuse(Invalid(req.status().message()));
    Outcome v = VerifyLeaseRequest(*req, policy, now);
    if (!v.ok()) return refuse(ErrorText(v));
    return LeaseOp{std::move(*req)};
  }
  if (subj == rpc::kCancel || subj == rpc::kRetry) {
    bool retry = subj == rpc::kRetry;
    auto j = rpc::ParseRequest(r.data, subj);
    if (!j.ok()) return refuse(Invalid(j.status().message()));
    auto req = rpc::ParseUserRequest(*j, retry);
    if (!req.ok()) return refuse(Invalid(req.status().message()));
    if (!IsLowerHex(req->job_hex, 64)) return refuse(Invalid("\"" + TruncateUtf8(req->job_hex, 80) + "\" is not a job id"));
    Outcome v = VerifyUserRequest(req->requester_hex, UserRequestPayload(*req), req->requested_at_ms, req->sig_hex, now);
    if (!v.ok()) return refuse(ErrorText(v));
    return UserOp{retry, req->job_hex, req->requester_hex, req->attempt, req->requested_at_ms, req->sig_hex};
  }
  if (subj == rpc::kResult || subj == rpc::kSubmit) {
    bool result = subj == rpc::kResult;
    json header;
    std::string_view batch_bytes;
    Status s = rpc::DecodeFrame(r.data, rpc::kMaxJsonRequest, &header, &batch_bytes);
    if (!s.ok()) return refuse(Invalid(p->kind + " frame: " + s.message()));
    auto commit = rpc::StringField(header, "commit");
    if (!commit.ok()) return refuse(Invalid(p->kind + " header: " + commit.status().message()));
    if (!IsLowerHex(*commit, 40)) return refuse(Invalid(p->kind + " header: commit is not a 40-hex id"));
    BatchLimits limits;
    if (result) {
      limits.max_bytes = static_cast<size_t>(policy.settings.max_result_bytes);
    } else {
      limits.max_bytes = static_cast<size_t>(policy.settings.max_manifest_bytes) + 64 * 1024;
      limits.max_objects = 8;
    }
    auto objects = DecodeObjectBatch(batch_bytes, limits);
    if (!objects.ok()) return refuse(Invalid(objects.status().message()));
    if (result) {
      ParsedResult parsed;
      // Parents are never looked up in the batch: a worker cannot bring its
      // own "claim commit".
      Outcome o = CheckResultContent(BatchLookup(&*objects, nullptr), *commit, policy, &parsed);
      if (!o.ok()) {
        p->log_line = o.message;
        return refuse(ErrorText(o));
      }
      return ResultOp{std::move(parsed), std::move(*objects)};
    }
    bool has_commit = false;
    for (const auto& o : *objects) has_commit |= o.id == *commit && o.type == ObjectType::kCommit;
    if (!has_commit) return refuse(Invalid("the batch does not hold commit " + *commit));
    // A submit carries all its objects (commit, tree, job.yaml): nothing is
    // read from the ledger, so this runs on any thread.
    auto check = CheckJobCommit(BatchLookup(&*objects, nullptr), *commit, "", policy, now);
    if (!check.ok()) {
      p->rejected_reason = RejectReasonLabel(check.status());
      return refuse(ErrorText(Outcome::FromStatus(check.status())));
    }
    return SubmitOp{std::move(*check), std::move(*objects)};
  }
  if (IsLocalPush(subj) && objects) return DecodeLocalPush(r, objects, policy, now, p);
  if (subj == rpc::kLocalPushSubmit || subj == rpc::kLocalPushResult || subj == rpc::kLocalBatch ||
      subj == rpc::kLocalPolicy || subj == rpc::kLocalPushWitness) {
    p->deferred = true;
    return std::nullopt;
  }
  return refuse(Invalid("unknown subject " + TruncateUtf8(subj, 80)));
}

}  // namespace

DecodedRequest JobService::Predecode(ServiceRequest r, const PolicySnapshot& snap, int64_t now, Ledger* objects) {
  DecodedRequest d;
  d.req = std::move(r);
  d.kind = KindOf(d.req.subject);
  d.policy_commit = snap.commit;
  try {
    d.op = PredecodeOp(d.req, snap.policy, now, objects, &d);
  } catch (const std::exception& e) {
    d.op.reset();
    d.log_line = "internal error decoding a " + d.kind + " request: " + TruncateUtf8(e.what(), 200);
    d.reply = ErrorText(TransitionError::kInternal, "internal error; the request was not applied");
  }
  return d;
}

void JobService::DecodeOnLedgerThread(DecodedRequest* p) {
  p->deferred = false;
  const ServiceRequest& r = p->req;
  const std::string& subj = r.subject;
  const Policy& policy = writer_->policy();
  int64_t now = writer_->Now();
  p->policy_commit = writer_->policy_commit();
  auto refuse = [&](std::string reply) {
    p->reply = std::move(reply);
    p->op.reset();
  };
  if (IsLocalPush(subj)) {
    p->op = DecodeLocalPush(r, &writer_->ledger(), policy, now, p);
    return;
  }
  if (subj == rpc::kLocalBatch) {
    // A batch record (gatos batch submit): canonical JSON, kept under
    // refs/gatos/batches/<its BLAKE3> in a ledger-signed commit.
    if (r.data.size() > (16u << 20)) return refuse(Invalid("batch record too large"));
    json rec = json::parse(r.data, nullptr, false);
    auto canonical = rec.is_discarded() ? Result<std::string>(InvalidArgumentError("not JSON")) : CanonicalJson(rec);
    if (!canonical.ok() || *canonical != r.data) return refuse(Invalid("a batch record must be canonical JSON"));
    std::string hex = Blake3Tagged(r.data).substr(7);
    std::vector<GitObject> objects;
    objects.push_back(MakeObject(ObjectType::kBlob, r.data + "\n"));
    auto tree = EncodeTree({{"batch.json", objects.back().id, 0100644}});
    if (!tree.ok()) return refuse(ErrorText(Outcome::FromStatus(tree.status())));
    objects.push_back(MakeObject(ObjectType::kTree, *tree));
    auto commit = BuildCommitObject(objects.back().id, {}, "gatos: batch record\n\nBatch-Id: blake3:" + hex + "\n",
                                    kLedgerCommitterName, kLedgerCommitterEmail, now, &writer_->ledger_private_key());
    if (!commit.ok()) return refuse(ErrorText(Outcome::FromStatus(commit.status())));
    objects.insert(objects.begin(), std::move(*commit));
    p->op = NoteOp{LogKind::kBatch, kBatchPrefix + hex, true, std::move(objects)};
    return;
  }
  if (subj == rpc::kLocalPushWitness) {
    auto j = rpc::ParseRequest(r.data, subj);
    if (!j.ok()) return refuse(Invalid(j.status().message()));
    auto commit = rpc::StringField(*j, "commit");
    auto key = rpc::StringField(*j, "key");
    if (!commit.ok() || !IsLowerHex(*commit, 40)) return refuse(Invalid("commit must be a 40-hex id"));
    if (!key.ok() || !IsLowerHex(*key, 64)) return refuse(Invalid("key must be 64 hex (the ref's name)"));
    auto w = CheckWitness(*commit, *key);
    if (!w.ok()) return refuse(ErrorText(Outcome::FromStatus(w.status())));
    auto raw = writer_->ledger().ReadRawObject(*commit);
    if (!raw.ok()) return refuse(ErrorText(Outcome::FromStatus(raw.status())));
    std::vector<GitObject> objects;
    objects.push_back({raw->first, std::move(raw->second), *commit});
    p->op = NoteOp{LogKind::kWitness, WitnessRef(*key), false, std::move(objects)};
    return;
  }
  if (subj == rpc::kLocalPolicy) {
    auto j = rpc::ParseRequest(r.data, subj);
    if (!j.ok()) return refuse(Invalid(j.status().message()));
    p->op = DecodePolicy(*j, p);
    return;
  }
  refuse(Invalid("unknown subject " + TruncateUtf8(subj, 80)));
  return;
}

Result<WitnessStatement> JobService::CheckWitness(const std::string& commit, const std::string& key_hex) {
  Ledger& ledger = writer_->ledger();
  GATOS_ASSIGN_OR_RETURN(WitnessStatement w, CheckWitnessCommit(LedgerLookup(&ledger), commit));
  if (w.key_hex != key_hex) {
    return PermissionDeniedError("the witness is signed by ed25519:" + w.key_hex +
                                 "; push it to refs/gatos/witnesses/" + w.key_hex);
  }
  // This ledger's identity (its first log commit) and the log commit at the
  // witnessed sequence: walked down from the head once, then remembered.
  if (w.seq > writer_->seq()) {
    return InvalidArgumentError("the witness names sequence " + std::to_string(w.seq) + " but this log ends at " +
                                std::to_string(writer_->seq()));
  }
  if (log_root_.empty() || log_by_seq_.empty() || log_by_seq_.rbegin()->first < writer_->seq()) {
    std::string cur = writer_->head();
    for (int64_t s = writer_->seq(); s >= 1 && !cur.empty(); --s) {
      if (log_by_seq_.count(s) && log_by_seq_[s] == cur) break;
      log_by_seq_[s] = cur;
      GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger.ReadCommit(cur));
      cur = s > 1 && !c.parents.empty() ? c.parents[0] : "";
    }
    log_root_ = log_by_seq_.count(1) ? log_by_seq_[1] : "";
  }
  if (w.ledger_root != log_root_) {
    return InvalidArgumentError("the witness is about ledger " + w.ledger_root + ", not this one (" + log_root_ + ")");
  }
  const std::string& at = log_by_seq_[w.seq];
  if (at != w.log_commit) {
    return InvalidArgumentError("the witness says the log at sequence " + std::to_string(w.seq) + " is " +
                                w.log_commit + ", but this ledger's log has " + at);
  }
  return w;
}

std::optional<Op> JobService::DecodePolicy(const json& j, DecodedRequest* p) {
  auto op = rpc::StringField(j, "op");
  if (!op.ok()) {
    p->reply = Invalid(op.status().message());
    return std::nullopt;
  }
  Policy next = writer_->policy();
  PolicyOp out;
  if (*op == "allow" || *op == "revoke") {
    auto role = rpc::StringField(j, "role");
    auto key_text = rpc::StringField(j, "key");
    if (!role.ok() || !key_text.ok()) {
      p->reply = Invalid("policy " + *op + " needs role and key");
      return std::nullopt;
    }
    auto key = ParseOpenSshPublicKey(*key_text);
    if (!key.ok()) {
      p->reply = Invalid(key.status().message());
      return std::nullopt;
    }
    if (*op == "allow") {
      bool changed = false;
      Status s = PolicyAllow(&next, *role, *key, &changed);
      if (!s.ok()) {
        p->reply = Invalid(s.message());
        return std::nullopt;
      }
      if (!changed) {
        json reply = rpc::OkReply();
        reply["existing"] = true;
        reply["commit"] = writer_->policy_commit();
        p->reply = rpc::Dump(reply);
        return std::nullopt;
      }
    } else {
      Status s = PolicyRevoke(&next, *role, *key);
      if (!s.ok()) {
        p->reply = ErrorText(Outcome::FromStatus(s));
        return std::nullopt;
      }
    }
    out.message = "gatos: " + *op + " " + *role + " " + key->WorkerId() + "\n";
  } else if (*op == "set") {
    if (!j.contains("settings") || !j["settings"].is_object()) {
      p->reply = Invalid("policy set needs a settings object");
      return std::nullopt;
    }
    json merged = json::parse(SerializePolicySettings(next.settings));
    for (const auto& [k, v] : j["settings"].items()) merged[k] = v;
    auto settings = ParsePolicySettings(rpc::Dump(merged));
    if (!settings.ok()) {
      p->reply = Invalid(settings.status().message());
      return std::nullopt;
    }
    next.settings = *settings;
    out.message = "gatos: policy settings " + rpc::Dump(j["settings"]) + "\n";
  } else if (*op == "rotate-ledger-key") {
    auto key = GenerateEd25519Key("gatos ledger key");
    if (!key.ok()) {
      p->reply = ErrorText(Outcome::FromStatus(key.status()));
      return std::nullopt;
    }
    // The new key is on disk before the policy names it, so a crash between
    // the two leaves a key gatosd can pick up (ledger_key.next).
    std::string path = LedgerStateDir(writer_->ledger().path()) + "/ledger_key.next";
    ::unlink(path.c_str());
    ::unlink((path + ".pub").c_str());
    Status w = WriteKeyPair(path, *key);
    if (!w.ok()) {
      p->reply = ErrorText(Outcome::FromStatus(w));
      return std::nullopt;
    }
    p->rotated_key_path = path;
    out.new_ledger_key = std::move(*key);
    out.message = "gatos: rotate the ledger key to " + out.new_ledger_key->public_key().WorkerId() +
                  " (signed by the previous key)\n";
  } else {
    p->reply = Invalid("unknown policy op \"" + TruncateUtf8(*op, 40) + "\"");
    return std::nullopt;
  }
  out.policy = std::move(next);
  return Op{std::move(out)};
}

void JobService::AfterBatch(std::vector<DecodedRequest>& batch, const std::vector<int>& op_of,
                            const std::vector<OpResult>& results) {
  int64_t now = writer_->Now();
  bool policy_changed = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    DecodedRequest& p = batch[i];
    if (op_of[i] < 0) continue;
    const OpResult& r = results[static_cast<size_t>(op_of[i])];
    if (r.record) Track(*r.record);
    if (!r.outcome.ok()) {
      p.reply = ErrorText(r.outcome);
      if (!p.rotated_key_path.empty()) {
        ::unlink(p.rotated_key_path.c_str());
        ::unlink((p.rotated_key_path + ".pub").c_str());
      }
      continue;
    }
    json reply = rpc::OkReply();
    const std::string& subj = p.req.subject;
    if (subj == rpc::kClaim || subj == rpc::kRenew) {
      const JobRecord& rec = *r.record;
      reply["lease_commit"] = r.commit;
      reply["epoch"] = rec.epoch;
      reply["expires_ms"] = rec.expires_ms;
      reply["attempt"] = rec.attempt;
      reply["job_commit"] = rec.job_commit;
      std::vector<GitObject> objs = r.grant;
      objs.insert(objs.end(), r.notice.begin(), r.notice.end());
      reply["objects"] = Objects(objs);
      if (subj == rpc::kRenew) {
        reply["cancel_requested"] = !rec.cancel_commit.empty();
      } else if (rec.epoch == 1 && rec.attempt == 1) {
        observer_->OnSubmitToClaim(static_cast<double>(now - rec.submitted_ms) / 1000.0);
      }
    } else if (subj == rpc::kResult || subj == rpc::kLocalPushResult) {
      reply["existing"] = r.existing;
      reply["job"] = "blake3:" + r.job_hex;
      reply["retried"] = r.retried;
      if (r.record) {
        reply["state"] = std::string(JobStateName(RecordState(*r.record, now)));
        reply["attempt"] = r.record->attempt;
      }
      if (!r.existing && !r.retried && r.record) {
        Emit({ServiceEvent::Kind::kJetStream, rpc::kFinishedSubject,
              rpc::Dump({{"job", "blake3:" + r.job_hex}, {"state", r.record->result_status},
                         {"result_commit", r.commit}, {"attempt", r.record->attempt}}),
              r.job_hex + ".r" + std::to_string(r.record->attempt)});
      }
      if (r.retried && r.record) {
        Log("job " + Short(r.job_hex) + " attempt " + std::to_string(r.record->attempt - 1) + " " +
            r.record->attempts.back().status + "; attempt " + std::to_string(r.record->attempt) + " after " +
            FormatRfc3339Millis(r.record->not_before_ms));
      }
    } else if (subj == rpc::kSubmit || subj == rpc::kLocalPushSubmit) {
      reply["job"] = "blake3:" + r.job_hex;
      reply["existing"] = r.existing;
      reply["commit"] = r.commit;
      if (!r.existing) Log("job " + Short(r.job_hex) + " accepted (" + (subj == rpc::kSubmit ? "rpc" : "push") + ")");
    } else if (subj == rpc::kCancel || subj == rpc::kRetry) {
      reply["already"] = r.existing;
      if (r.record) {
        reply["state"] = std::string(JobStateName(RecordState(*r.record, now)));
        reply["attempt"] = r.record->attempt;
      }
      if (subj == rpc::kCancel && !r.existing) {
        if (!r.notice.empty()) {
          Emit({ServiceEvent::Kind::kCore, rpc::kCancelEventPrefix + r.job_hex,
                rpc::Dump({{"job", "blake3:" + r.job_hex}, {"objects", Objects(r.notice)}}), ""});
        } else {
          Emit({ServiceEvent::Kind::kJetStream, rpc::kAbortedSubject, rpc::Dump({{"job", "blake3:" + r.job_hex}}),
                r.job_hex + ".a"});
        }
      }
    } else if (subj == rpc::kLocalBatch || subj == rpc::kLocalPushWitness) {
      reply["existing"] = r.existing;
      reply["commit"] = r.commit;
      if (subj == rpc::kLocalPushWitness && !r.existing) Log("witness " + Short(r.commit) + " recorded");
    } else if (subj == rpc::kLocalPolicy) {
      reply["commit"] = r.commit;
      reply["revoked_leases"] = r.revoked_jobs.size();
      if (!p.rotated_key_path.empty()) {
        // The policy names the new key now: it becomes the ledger key file.
        std::string dir = LedgerStateDir(writer_->ledger().path());
        std::string retired = dir + "/ledger_key.retired-" + std::to_string(writer_->seq());
        ::rename((dir + "/ledger_key").c_str(), retired.c_str());
        ::rename((dir + "/ledger_key.pub").c_str(), (retired + ".pub").c_str());
        ::rename(p.rotated_key_path.c_str(), (dir + "/ledger_key").c_str());
        ::rename((p.rotated_key_path + ".pub").c_str(), (dir + "/ledger_key.pub").c_str());
        reply["ledger_key"] = writer_->ledger_key().ToOpenSsh();
        Log("ledger key rotated to " + writer_->ledger_key().WorkerId() + "; the old key is " + retired);
      }
      Log("policy changed (" + Short(r.commit) + ")" +
          (r.revoked_jobs.empty() ? "" : "; " + std::to_string(r.revoked_jobs.size()) + " lease(s) of revoked workers ended"));
      policy_changed = true;
      observer_->OnPolicyChanged();
    }
    p.reply = rpc::Dump(reply);
  }
  if (policy_changed) PublishPolicy();
}

std::string JobService::ReadReply(const ServiceRequest& r) {
  int64_t now = writer_->Now();
  auto j = rpc::ParseRequest(r.data, r.subject);
  if (!j.ok()) return Invalid(j.status().message());
  if (r.subject == rpc::kStatus) {
    auto job = rpc::ParseJobField(*j);
    if (!job.ok()) return Invalid(job.status().message());
    auto rec = writer_->Find(*job);
    if (!rec.ok()) return ErrorText(Outcome::FromStatus(rec.status()));
    if (!*rec) return Invalid("no job blake3:" + *job + " in this ledger");
    json reply = rpc::OkReply();
    reply["status"] = JobStatusJson(writer_->ledger(), **rec, writer_->policy().settings, now);
    return rpc::Dump(reply);
  }
  auto req = rpc::ParseListRequest(*j);
  if (!req.ok()) return Invalid(req.status().message());
  json reply = ListReply(writer_->index(), writer_->stats(), writer_->live(), *req, now);
  // The ledger's clock, so that a client can tell how far its own is off
  // (leases are judged by it; gatos doctor checks).
  reply["now_ms"] = now;
  return rpc::Dump(reply);
}

namespace {

// The ledger's clock when it granted the claim `claim_commit` (0 if unknown).
int64_t ClaimedMs(Ledger& ledger, const std::string& claim_commit) {
  auto claim = ledger.ReadCommit(claim_commit);
  if (!claim.ok()) return 0;
  auto l = ParseLeaseCommitMessage(claim->message);
  return l.ok() ? l->expires_ms - l->lease_ms : 0;
}

// What an attempt's signed commits say: the result (Worker-Id, poe.json) and
// the claim that opened its epoch (the ledger's clock at the claim). Returns
// the claim time (0 if unknown).
int64_t DescribeResult(Ledger& ledger, const std::string& result_commit, json* a) {
  auto c = ledger.ReadCommit(result_commit);
  if (!c.ok()) return 0;
  if (auto m = ParseCommitMessage(c->message); m.ok()) {
    if (auto w = FindTrailer(m->trailers, "Worker-Id")) (*a)["worker"] = *w;
  }
  if (auto blob = ledger.ReadFileAtCommit(result_commit, "poe.json", 1 << 20); blob.ok()) {
    if (auto poe = ParsePoe(*blob); poe.ok()) {
      (*a)["started"] = poe->started_at;
      (*a)["ended"] = poe->finished_at;
      if (poe->exit_code) (*a)["exit_code"] = *poe->exit_code;
      if (poe->signal) (*a)["signal"] = *poe->signal;
      if (poe->timed_out) (*a)["timed_out"] = true;
      if (!poe->reason.empty()) (*a)["reason"] = poe->reason;
    }
  }
  int64_t claimed = c->parents.size() == 2 ? ClaimedMs(ledger, c->parents[1]) : 0;
  if (claimed) (*a)["claimed"] = FormatRfc3339Millis(claimed);
  return claimed;
}

}  // namespace

json JobStatusJson(Ledger& ledger, const JobRecord& r, const PolicySettings& settings, int64_t now_ms) {
  json j = rpc::RecordJson(r, now_ms);
  j["max_attempts"] = settings.max_attempts;
  json attempts = json::array();
  int64_t prev_finished = 0;  // when the ledger recorded the attempt before
  // "waited_ms": from the record of the attempt before to this attempt's
  // claim, both on the ledger's clock (the backoff as it happened).
  auto waited = [&](int64_t claimed, json* a) {
    if (claimed && prev_finished && claimed >= prev_finished) (*a)["waited_ms"] = claimed - prev_finished;
  };
  for (const auto& x : r.attempts) {
    json a = {{"n", x.n}, {"epoch", x.epoch}, {"status", x.status}, {"result_commit", x.result_commit},
              {"finished", FormatRfc3339Millis(x.finished_ms)}};
    waited(DescribeResult(ledger, x.result_commit, &a), &a);
    prev_finished = x.finished_ms;
    attempts.push_back(std::move(a));
  }
  // The current attempt.
  JobState st = RecordState(r, now_ms);
  json cur = {{"n", r.attempt}, {"status", std::string(JobStateName(st))}};
  if (!r.result_commit.empty()) {
    cur["epoch"] = r.epoch;
    cur["result_commit"] = r.result_commit;
    if (r.finished_ms) cur["finished"] = FormatRfc3339Millis(r.finished_ms);
    waited(DescribeResult(ledger, r.result_commit, &cur), &cur);
  } else if (!r.worker_hex.empty()) {
    cur["epoch"] = r.epoch;
    cur["worker"] = "ed25519:" + r.worker_hex;
    int64_t claimed = ClaimedMs(ledger, r.claim_commit);
    if (claimed) cur["claimed"] = FormatRfc3339Millis(claimed);
    waited(claimed, &cur);
  } else if (r.finished_ms) {
    cur["finished"] = FormatRfc3339Millis(r.finished_ms);  // aborted while pending
  }
  if (r.result_commit.empty() && r.not_before_ms) {
    cur["not_before"] = FormatRfc3339Millis(r.not_before_ms);
    if (!r.attempts.empty() && r.attempts.back().n == r.attempt - 1) {
      int64_t backoff = r.not_before_ms - r.attempts.back().finished_ms;
      cur["backoff_ms"] = backoff;
      j["backoff_ms"] = backoff;
    }
  }
  attempts.push_back(std::move(cur));
  j["attempts"] = std::move(attempts);
  return j;
}

json ListReply(StateIndex& index, const IndexStats& st, const std::map<std::string, JobRecord>& live,
               const rpc::ListRequest& req, int64_t now) {
  json jobs = json::array();
  std::string next;
  auto matches = [&](const JobRecord& rec) {
    if (!req.state) return true;
    if (*req.state == "dead") return RecordDead(rec, now);
    return JobStateName(RecordState(rec, now)) == *req.state;
  };
  if (req.state && (*req.state == "pending" || *req.state == "claimed")) {
    for (auto it = req.after.empty() ? live.begin() : live.upper_bound(req.after); it != live.end(); ++it) {
      if (!matches(it->second)) continue;
      jobs.push_back(rpc::RecordJson(it->second, now));
      if (static_cast<int64_t>(jobs.size()) >= req.limit) {
        next = it->first;
        break;
      }
    }
  } else {
    // Finished states: walk the index in id order, at most a bounded number
    // of records per request; "next" continues where this page stopped.
    constexpr int64_t kBudget = 50'000;
    int64_t seen = 0;
    Status s = index.ForEachJob(req.after, [&](const JobRecord& committed) {
      ++seen;
      auto l = live.find(committed.job_hex);
      const JobRecord& rec = l == live.end() ? committed : l->second;
      if (matches(rec)) jobs.push_back(rpc::RecordJson(rec, now));
      if (static_cast<int64_t>(jobs.size()) >= req.limit || seen >= kBudget) {
        next = committed.job_hex;
        return false;
      }
      return true;
    });
    if (!s.ok()) return rpc::ErrorReply(Outcome::FromStatus(s).error, s.message());
  }
  json reply = rpc::OkReply();
  reply["jobs"] = std::move(jobs);
  if (!next.empty()) reply["next"] = "blake3:" + next;
  json counts = json::object();
  for (size_t i = 0; i < 6; ++i) counts[std::string(JobStateName(static_cast<JobState>(i)))] = st.by_state[i];
  counts["dead"] = st.by_state[static_cast<size_t>(JobState::kFailed)] + st.by_state[static_cast<size_t>(JobState::kTimedOut)];
  reply["counts"] = counts;
  reply["jobs_total"] = st.jobs;
  return reply;
}

// ---- offers and timers ----

void JobService::Track(const JobRecord& r) {
  if (!writer_->live().count(r.job_hex)) {
    tracked_.erase(r.job_hex);
    return;
  }
  Tracked& t = tracked_[r.job_hex];
  t.next_due = 0;
  due_.emplace(0, r.job_hex);
}

void JobService::Offer(const JobRecord& r, int64_t now) {
  Tracked& t = tracked_[r.job_hex];
  int64_t want = r.epoch + 1;
  // The id names the attempt and the epoch the offer opens: an offer of
  // attempt 2 is never dropped as a duplicate of attempt 1's, and a restart
  // that offers the same attempt and epoch again is.
  std::string base = rpc::PendingMsgId(r.job_hex, r.attempt, want);
  std::string id;
  if (t.offered_epoch != want) {
    t.offered_epoch = want;
    t.republished = 0;
    id = base;
  } else if (now - t.offered_ms >= options_.republish_ms) {
    // Still unclaimed: offered again under a new id, so the stream does not
    // drop it as a duplicate of a message a worker took and lost.
    id = base + ".r" + std::to_string(++t.republished);
  }
  if (!id.empty()) {
    t.offered_ms = now;
    Emit({ServiceEvent::Kind::kJetStream, rpc::kPendingSubject,
          rpc::EncodePending({r.job_hex, want, r.attempt}), id});
    if (r.epoch > 0 && !r.worker_hex.empty()) {
      Log("lease of job " + Short(r.job_hex) + " (epoch " + std::to_string(r.epoch) + ") expired; offered for takeover");
    }
  }
  t.next_due = t.offered_ms + options_.republish_ms;
  due_.emplace(t.next_due, r.job_hex);
}

void JobService::ProcessDue(int64_t now) {
  std::vector<Op> aborts;
  while (!due_.empty() && due_.begin()->first <= now) {
    const int64_t when = due_.begin()->first;
    const std::string job = due_.begin()->second;
    due_.erase(due_.begin());
    auto tr = tracked_.find(job);
    if (tr == tracked_.end() || tr->second.next_due != when) continue;  // stale entry
    auto it = writer_->live().find(job);
    if (it == writer_->live().end()) {
      tracked_.erase(tr);
      continue;
    }
    const JobRecord& r = it->second;
    auto schedule = [&](int64_t at) {
      tr->second.next_due = at;
      due_.emplace(at, job);
    };
    if (!r.worker_hex.empty()) {
      if (LeaseLive(r, now)) {
        schedule(r.expires_ms);
      } else if (DecideAbort(r, now)) {
        aborts.push_back(AbortOp{job});
        schedule(now + options_.republish_ms);
      } else {
        Offer(r, now);
      }
      continue;
    }
    if (!r.cancel_commit.empty()) {
      tracked_.erase(tr);
      continue;
    }
    if (r.not_before_ms > now) {
      schedule(r.not_before_ms);
      continue;
    }
    Offer(r, now);
  }
  if (!aborts.empty()) ApplyTimerOps(std::move(aborts));
}

void JobService::ApplyTimerOps(std::vector<Op> ops) {
  BatchStats stats;
  auto results = writer_->Apply(ops, &stats);
  if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
  for (size_t i = 0; i < results.size(); ++i) {
    const OpResult& r = results[i];
    if (!r.outcome.ok()) {
      if (!std::holds_alternative<PruneOp>(ops[i])) Log("timer transition of job " + Short(r.job_hex) + ": " + r.outcome.message);
      continue;
    }
    if (r.record) Track(*r.record);
    if (std::holds_alternative<AbortOp>(ops[i]) && !r.existing) {
      Emit({ServiceEvent::Kind::kJetStream, rpc::kAbortedSubject, rpc::Dump({{"job", "blake3:" + r.job_hex}}),
            r.job_hex + ".a"});
    }
  }
}

void JobService::Sweep() {
  int64_t now = writer_->Now();
  ProcessDue(now);
  // Pruning: a crawl through the index, a few records per step, so no sweep
  // costs more than a bounded amount at any ledger size. The steps are paced
  // so that a whole pass takes about a quarter of the retention (a job is
  // pruned at most that long after its retention ends), at least one sweep
  // and at most a minute apart: crawling every sweep decoded over a thousand
  // records a second on an idle ledger, for jobs that stay for days.
  int64_t retention = writer_->policy().settings.retention_ms;
  if (retention > 0 && now >= next_prune_step_ms_) {
    const int64_t jobs = std::max<int64_t>(writer_->stats().jobs - writer_->stats().pruned, 1);
    const double pass_ms = static_cast<double>(retention) / 4.0;
    const double step_ms = pass_ms * static_cast<double>(options_.prune_per_sweep) / static_cast<double>(jobs);
    next_prune_step_ms_ = now + static_cast<int64_t>(std::clamp(step_ms, 0.0, 60'000.0));
    std::vector<Op> prunes;
    size_t seen = 0;
    std::string last;
    Status s = writer_->index().ForEachJob(prune_cursor_, [&](const JobRecord& rec) {
      ++seen;
      last = rec.job_hex;
      if (!writer_->live().count(rec.job_hex) && DecidePrune(rec, writer_->policy().settings, now)) {
        prunes.push_back(PruneOp{rec.job_hex});
      }
      return seen < options_.prune_per_sweep;
    });
    prune_cursor_ = s.ok() && seen >= options_.prune_per_sweep ? last : "";
    if (!prunes.empty()) ApplyTimerOps(std::move(prunes));
  }
  if (now - last_views_sync_ms_ >= options_.views_sync_ms) {
    last_views_sync_ms_ = now;
    Status s = writer_->SyncViews();
    if (!s.ok()) Log("cannot mark the ref view synced: " + s.message());
  }
}

}  // namespace gatos
