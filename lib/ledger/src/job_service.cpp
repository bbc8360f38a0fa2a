// JobService: requests decoded and authenticated off the ledger thread,
// applied as one batch, answered after it (job_service.h).
#include "gatos/ledger/job_service.h"

#include "gatos/model/clock.h"
#include "gatos/model/time_format.h"

#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals


JobService::JobService(LedgerWriter* writer, ServiceOptions options, ServiceObserver* observer)
    : writer_(writer), options_(options), observer_(observer ? observer : &default_observer_) {
  scheduler_.set_fixed_window(options_.offer_window);
  PublishPolicy();
  if (options_.list_remote_refs) {
    poller_ = std::make_unique<WatchPoller>(options_.list_remote_refs, SystemNowMs);
  }
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
      p.decoded.empty() ? std::vector<std::string>() : Apply(p.decoded);
  // One signature per reply message: a claim-batch reply signs its grants
  // together.
  for (const PreparedBatch::Span& sp : spans) {
    if (!sp.refused) SignGrants(p.decoded, sp.first, sp.count, &flat_replies);
  }
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

void JobService::SignGrants(std::vector<DecodedRequest>& batch, size_t first, size_t count,
                            std::vector<std::string>* replies) {
  std::vector<rpc::Grant> grants;
  for (size_t i = first; i < first + count; ++i) {
    if (batch[i].grant) grants.push_back(*batch[i].grant);
  }
  if (grants.empty()) return;
  auto sig = Ed25519Sign(writer_->ledger_private_key(), rpc::GrantsPayload(grants));
  const std::string sig_hex = HexEncode(sig.data(), sig.size());
  for (size_t i = first; i < first + count; ++i) {
    DecodedRequest& d = batch[i];
    if (!d.grant) continue;
    d.grant_reply[rpc::kGrantSigField] = sig_hex;
    (*replies)[i] = rpc::Dump(d.grant_reply);
    d.grant.reset();
  }
}

std::vector<std::string> JobService::Handle(std::vector<DecodedRequest> batch) {
  std::vector<std::string> replies = Apply(batch);
  for (size_t i = 0; i < batch.size(); ++i) SignGrants(batch, i, 1, &replies);
  return replies;
}

std::vector<std::string> JobService::Apply(std::vector<DecodedRequest>& batch) {
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
      if (std::optional<std::string> refused = Admission(*d.op, writer_->Now())) {
        d.reply = std::move(*refused);
        d.op.reset();
        continue;
      }
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
      for (auto& r : results) r.outcome = Decision::Error(TransitionError::kInternal, "internal error; not applied");
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
    replies[i] = d.reply ? std::move(*d.reply)
                 : d.grant   ? std::string()  // SignGrants writes it
                             : ErrorText(TransitionError::kInternal, "no reply was produced");
    double secs = d.req.received_ms ? static_cast<double>(now - d.req.received_ms) / 1000.0 : 0.0;
    observer_->OnRequest(d.kind, OutcomeOf(replies[i]), secs);
  }
  if (stats.seq) observer_->OnCommitted(stats.seq, stats.log_commit, stats.entries, stats.records);
  if (!ops.empty()) {
    observer_->OnBatch(batch.size(), stats.changes,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  ProcessDue(writer_->Now());
  scheduler_.EndBatch();
  return replies;
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
      rpc::Grant g{r.job_hex, rec.epoch, r.commit, rec.expires_ms, rec.job_commit};
      rpc::SetGrantFields(g, &reply);
      reply["attempt"] = rec.attempt;
      std::vector<GitObject> objs = r.grant;
      objs.insert(objs.end(), r.notice.begin(), r.notice.end());
      reply["objects"] = Objects(objs);
      if (subj == rpc::kRenew) {
        reply["cancel_requested"] = !rec.cancel_commit.empty();
      } else if (rec.epoch == 1 && rec.attempt == 1) {
        observer_->OnSubmitToClaim(static_cast<double>(now - rec.submitted_ms) / 1000.0);
      }
      p.grant = std::move(g);
      p.grant_reply = std::move(reply);
      continue;
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
    } else if (subj == rpc::kLocalBatch || subj == rpc::kLocalPushWitness || subj == rpc::kForwardWitness ||
               subj == rpc::kLocalSchedule) {
      reply["existing"] = r.existing;
      reply["commit"] = r.commit;
      if (subj == rpc::kLocalSchedule && !r.existing) {
        Log("schedule commit " + Short(r.commit) + " recorded");
        schedules_stale_ = true;
      }
      if ((subj == rpc::kLocalPushWitness || subj == rpc::kForwardWitness) && !r.existing) {
        Log("witness " + Short(r.commit) + " recorded" + (subj == rpc::kForwardWitness ? " (forwarded by a follower)" : ""));
      }
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

}  // namespace gatos
