// What each request asks for: decoded, checked (signatures, objects,
// policy changes, witness statements), and turned into a writer op.
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"
#include "gatos/sys/zoneinfo.h"
#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

namespace {

// A job or result pushed with stock git (the front door's proc-receive hook
// names the commit; its objects are in the ledger's object store): checked
// like a submit or result RPC, reading the objects through `ledger`. A
// refusal is left in p->reply (and p->rejected_reason).
std::optional<Op> DecodeLocalPush(const ServiceRequest& r, Ledger* ledger, const Policy& policy,
                                  int64_t now, DecodedRequest* p) {
  const std::string& subj = r.subject;
  auto refuse = [&](std::string reply) -> std::optional<Op> {
    p->reply = std::move(reply);
    return std::nullopt;
  };
  auto j = rpc::ParseRequest(r.data, subj);
  if (!j.ok()) return refuse(Invalid(j.status().message()));
  auto commit = rpc::StringField(*j, "commit");
  if (!commit.ok() || !IsLowerHex(*commit, 40))
    return refuse(Invalid("commit must be a 40-hex id"));
  std::string expected = j->value("job", "");
  if (subj == rpc::kLocalPushSubmit) {
    auto check = CheckJobCommit(LedgerLookup(ledger), *commit, expected, policy, now);
    if (!check.ok()) {
      p->rejected_reason = RejectReasonLabel(check.status());
      return refuse(ErrorText(Decision::FromStatus(check.status())));
    }
    return SubmitOp{std::move(*check), {}};
  }
  ParsedResult parsed;
  Decision o = CheckResultContent(LedgerLookup(ledger), *commit, policy, &parsed, expected);
  if (!o.ok()) {
    p->rejected_reason = "bad_result";
    return refuse(ErrorText(o));
  }
  return ResultOp{std::move(parsed), {}};
}

std::optional<Op> PredecodeOp(const ServiceRequest& r, const Policy& policy, int64_t now,
                              Ledger* objects, DecodedRequest* p) {
  const std::string& subj = r.subject;
  auto refuse = [&](std::string reply) -> std::optional<Op> {
    p->reply = std::move(reply);
    return std::nullopt;
  };
  if (subj == rpc::kStatus || subj == rpc::kList || subj == rpc::kLogs || subj == rpc::kPools) {
    p->read = true;
    return std::nullopt;
  }
  if (subj == rpc::kLocalRejected) {
    auto j = rpc::ParseRequest(r.data, subj);
    std::string reason = j.ok() ? j->value("reason", "other") : "other";
    static const char* kKnown[] = {
        "unsigned",    "untrusted_signer", "bad_signature", "wrong_job_id",  "missing_trailer",
        "policy_root", "not_a_file",       "bad_manifest",  "forbidden_ref", "bad_result", "pool"};
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
    Decision v = VerifyLeaseRequest(*req, policy, now);
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
    Decision v = VerifyUserRequest(req->requester_hex, UserRequestPayload(*req), req->requested_at_ms, req->sig_hex, now);
    if (!v.ok()) return refuse(ErrorText(v));
    return UserOp{retry,        req->job_hex,         req->requester_hex,
                  req->attempt, req->requested_at_ms, req->sig_hex};
  }
  if (subj == rpc::kResult || subj == rpc::kSubmit) {
    bool result = subj == rpc::kResult;
    json header;
    std::string_view batch_bytes;
    Status s = rpc::DecodeFrame(r.data, rpc::kMaxJsonRequest, &header, &batch_bytes);
    if (!s.ok()) return refuse(Invalid(p->kind + " frame: " + s.message()));
    auto commit = rpc::StringField(header, "commit");
    if (!commit.ok()) return refuse(Invalid(p->kind + " header: " + commit.status().message()));
    if (!IsLowerHex(*commit, 40))
      return refuse(Invalid(p->kind + " header: commit is not a 40-hex id"));
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
      Decision o = CheckResultContent(BatchLookup(&*objects, nullptr), *commit, policy, &parsed);
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
      return refuse(ErrorText(Decision::FromStatus(check.status())));
    }
    return SubmitOp{std::move(*check), std::move(*objects)};
  }
  if (IsLocalPush(subj) && objects) return DecodeLocalPush(r, objects, policy, now, p);
  if (subj == rpc::kLocalPushSubmit || subj == rpc::kLocalPushResult || subj == rpc::kLocalBatch ||
      subj == rpc::kLocalPolicy || subj == rpc::kLocalPushWitness || subj == rpc::kLocalSchedule ||
      subj == rpc::kForwardWitness) {
    p->deferred = true;
    return std::nullopt;
  }
  return refuse(Invalid("unknown subject " + TruncateUtf8(subj, 80)));
}

}  // namespace

DecodedRequest JobService::Predecode(ServiceRequest r, const PolicySnapshot& snap, int64_t now,
                                     Ledger* objects) {
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
    auto canonical = rec.is_discarded() ? Result<std::string>(InvalidArgumentError("not JSON"))
                                        : CanonicalJson(rec);
    if (!canonical.ok() || *canonical != r.data)
      return refuse(Invalid("a batch record must be canonical JSON"));
    std::string hex = Blake3Tagged(r.data).substr(7);
    std::vector<GitObject> objects;
    objects.push_back(MakeObject(ObjectType::kBlob, r.data + "\n"));
    auto tree = EncodeTree({{"batch.json", objects.back().id, 0100644}});
    if (!tree.ok()) return refuse(ErrorText(Decision::FromStatus(tree.status())));
    objects.push_back(MakeObject(ObjectType::kTree, *tree));
    auto commit = BuildCommitObject(objects.back().id, {}, "gatos: batch record\n\nBatch-Id: blake3:" + hex + "\n",
                                    kLedgerCommitterName, kLedgerCommitterEmail, now, &writer_->ledger_private_key());
    if (!commit.ok()) return refuse(ErrorText(Decision::FromStatus(commit.status())));
    objects.insert(objects.begin(), std::move(*commit));
    p->op = NoteOp{LogKind::kBatch, kBatchPrefix + hex, true, std::move(objects)};
    return;
  }
  if (subj == rpc::kLocalPushWitness || subj == rpc::kForwardWitness) {
    // Pushed here, the witness commit is in the ledger's objects; forwarded
    // by a follower, it comes in the frame (and nothing else does).
    json header;
    std::vector<GitObject> carried;
    if (subj == rpc::kForwardWitness) {
      std::string_view batch;
      Status s = rpc::DecodeFrame(r.data, rpc::kMaxJsonRequest, &header, &batch);
      if (!s.ok()) return refuse(Invalid("witness frame: " + s.message()));
      BatchLimits limits;
      limits.max_bytes = kMaxWitnessCommit;
      limits.max_objects = 1;
      auto objects = DecodeObjectBatch(batch, limits);
      if (!objects.ok()) return refuse(Invalid("witness frame: " + objects.status().message()));
      carried = std::move(*objects);
    } else {
      auto j = rpc::ParseRequest(r.data, subj);
      if (!j.ok()) return refuse(Invalid(j.status().message()));
      header = std::move(*j);
    }
    auto commit = rpc::StringField(header, "commit");
    auto key = rpc::StringField(header, "key");
    if (!commit.ok() || !IsLowerHex(*commit, 40))
      return refuse(Invalid("commit must be a 40-hex id"));
    if (!key.ok() || !IsLowerHex(*key, 64))
      return refuse(Invalid("key must be 64 hex (the ref's name)"));
    if (subj == rpc::kForwardWitness && (carried.size() != 1 || carried[0].id != *commit)) {
      return refuse(Invalid("a forwarded witness carries its commit " + commit->substr(0, 12) + " and nothing else"));
    }
    const ObjectLookup lookup =
        carried.empty() ? LedgerLookup(&writer_->ledger()) : BatchLookup(&carried, nullptr);
    auto w = CheckWitness(*commit, *key, lookup);
    if (!w.ok()) return refuse(ErrorText(Decision::FromStatus(w.status())));
    std::vector<GitObject> objects;
    if (carried.empty()) {
      auto raw = writer_->ledger().ReadRawObject(*commit);
      if (!raw.ok()) return refuse(ErrorText(Decision::FromStatus(raw.status())));
      objects.push_back({raw->first, std::move(raw->second), *commit});
    } else {
      objects = std::move(carried);
    }
    p->op = NoteOp{LogKind::kWitness, WitnessRef(*key), false, std::move(objects)};
    return;
  }
  if (subj == rpc::kLocalSchedule) {
    p->op = DecodeSchedule(r.data, p);
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

std::optional<Op> JobService::DecodeSchedule(std::string_view data, DecodedRequest* p) {
  auto refuse = [&](std::string reply) -> std::optional<Op> {
    p->reply = std::move(reply);
    return std::nullopt;
  };
  auto frame = DecodeScheduleFrame(data);
  if (!frame.ok()) return refuse(ErrorText(Decision::FromStatus(frame.status())));
  Ledger& ledger = writer_->ledger();
  ScheduleCommit* next = &frame->schedule;
  const std::string& commit = next->commit;
  if (next->spec.every_ms == 0) {
    auto tz = LoadTimeZone(next->spec.tz);
    if (!tz.ok()) return refuse(Invalid(tz.status().message()));
  }
  // Ticks fire from the commit's time on (docs/scheduling.md, "Firing"):
  // it must be the ledger's time, within the skew of a signed request.
  if (std::abs(next->time_ms - writer_->Now()) > rpc::kMaxRequestSkewMs + 1000) {  // committer time: whole seconds
    return refuse(Invalid("schedule commit " + commit.substr(0, 12) + " is dated " +
                          FormatRfc3339Millis(next->time_ms) + ", more than 60 s from the ledger's clock (" +
                          FormatRfc3339Millis(writer_->Now()) + "); check this host's clock"));
  }
  const std::string ref = kSchedulePrefix + next->spec.name;
  writer_->FlushViews();
  auto at = ledger.ResolveRef(ref);
  if (!at.ok()) return refuse(ErrorText(Decision::FromStatus(at.status())));
  std::optional<ScheduleCommit> current;
  if (!at->empty()) {
    auto cur = CheckScheduleCommit(LedgerLookup(&ledger), *at);
    if (!cur.ok()) return refuse(ErrorText(Decision::FromStatus(cur.status())));
    current = std::move(*cur);
  }
  Decision d = ScheduleChangeDecision(current, *next, writer_->policy(), writer_->Now());
  if (!d.ok()) return refuse(ErrorText(d));
  return NoteOp{LogKind::kSchedule, ref, false, std::move(frame->objects)};
}

Result<WitnessStatement> JobService::CheckWitness(const std::string& commit, const std::string& key_hex,
                                                  const ObjectLookup& lookup) {
  Ledger& ledger = writer_->ledger();
  GATOS_ASSIGN_OR_RETURN(WitnessStatement w, CheckWitnessCommit(lookup, commit));
  if (w.key_hex != key_hex) {
    return PermissionDeniedError("the witness is signed by ed25519:" + w.key_hex +
                                 "; push it to refs/gatos/witnesses/" + w.key_hex);
  }
  // This ledger's identity (its first log commit) and the log commit at the
  // witnessed sequence: walked down from the head once, then remembered.
  if (w.seq > writer_->seq()) {
    return InvalidArgumentError("the witness names sequence " + std::to_string(w.seq) +
                                " but this log ends at " + std::to_string(writer_->seq()));
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
    return InvalidArgumentError("the witness is about ledger " + w.ledger_root +
                                ", not this one (" + log_root_ + ")");
  }
  const std::string& at = log_by_seq_[w.seq];
  if (at != w.log_commit) {
    return InvalidArgumentError("the witness says the log at sequence " + std::to_string(w.seq) +
                                " is " + w.log_commit + ", but this ledger's log has " + at);
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
  // A change that leaves the policy as it is: answered with the policy in
  // force, nothing written.
  auto unchanged = [&]() -> std::optional<Op> {
    json reply = rpc::OkReply();
    reply["existing"] = true;
    reply["commit"] = writer_->policy_commit();
    p->reply = rpc::Dump(reply);
    return std::nullopt;
  };
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
      if (j.contains("pools") && (*role == "worker" || *role == "submitter")) {
        // The pools the key may use (null: every pool), in the same commit.
        bool pools_changed = false;
        s = ApplySchedulingChange(&next.settings.scheduling,
                                  {{"action", *role + "-pools"}, {"key", key->Hex()}, {"pools", j["pools"]}},
                                  &pools_changed);
        if (!s.ok()) {
          p->reply = Invalid(s.message());
          return std::nullopt;
        }
        changed = changed || pools_changed;
      }
      if (!changed) return unchanged();
    } else {
      Status s = PolicyRevoke(&next, *role, *key);
      if (!s.ok()) {
        p->reply = ErrorText(Decision::FromStatus(s));
        return std::nullopt;
      }
    }
    out.message = "gatos: " + *op + " " + *role + " " + key->WorkerId() +
                  (j.contains("pools") ? " pools " + rpc::Dump(j["pools"]) : std::string()) + "\n";
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
  } else if (*op == "scheduling") {
    // Pools, limits, pause and resume (docs/scheduling.md).
    if (!j.contains("change") || !j["change"].is_object()) {
      p->reply = Invalid("policy scheduling needs a change object");
      return std::nullopt;
    }
    bool changed = false;
    Status s = ApplySchedulingChange(&next.settings.scheduling, j["change"], &changed);
    if (!s.ok()) {
      p->reply = Invalid(s.message());
      return std::nullopt;
    }
    if (!changed) return unchanged();
    out.message = "gatos: scheduling " + rpc::Dump(j["change"]) + "\n";
  } else if (*op == "rotate-ledger-key") {
    auto key = GenerateEd25519Key("gatos ledger key");
    if (!key.ok()) {
      p->reply = ErrorText(Decision::FromStatus(key.status()));
      return std::nullopt;
    }
    // The new key is on disk before the policy names it, so a crash between
    // the two leaves a key gatosd can pick up (ledger_key.next).
    std::string path = LedgerStateDir(writer_->ledger().path()) + "/ledger_key.next";
    ::unlink(path.c_str());
    ::unlink((path + ".pub").c_str());
    Status w = WriteKeyPair(path, *key);
    if (!w.ok()) {
      p->reply = ErrorText(Decision::FromStatus(w));
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

}  // namespace gatos
