#include "server.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "gatos/bus.h"
#include "gatos/encoding.h"
#include "gatos/job_index.h"
#include "gatos/job_plane.h"
#include "gatos/ledger.h"
#include "gatos/result.h"
#include "gatos/rpc.h"
#include "gatos/job_stream.h"
#include "hooks.h"
#include "http.h"
#include "ledger_setup.h"
#include "metrics.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

void Log(const std::string& line) {
  std::string out = "gatosd: " + FormatRfc3339Millis(SystemNowMs()) + " " + line + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- queues ----

struct Request {
  Message msg;
  Clock::time_point received;
};

class RequestQueue {
 public:
  void Push(Request r) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (closed_) return;
      q_.push_back(std::move(r));
    }
    cv_.notify_one();
  }
  // Waits up to `wait`; nullopt on timeout or when closed and empty.
  std::optional<Request> Pop(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, wait, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return std::nullopt;
    Request r = std::move(q_.front());
    q_.pop_front();
    return r;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> l(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() {
    std::lock_guard<std::mutex> l(mu_);
    return closed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> q_;
  bool closed_ = false;
};

struct PublishItem {
  std::string subject;
  std::string data;
  std::string msg_id;
};

// Publishes job events in order, retrying while JetStream is unreachable.
// Items with a msg_id already queued are dropped (the stream would drop them
// as duplicates anyway).
class Publisher {
 public:
  Publisher(Bus* bus, Metrics* metrics) : bus_(bus), metrics_(metrics) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Publisher() { Stop(std::chrono::milliseconds(0)); }

  void Enqueue(PublishItem item) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!item.msg_id.empty() && !queued_ids_.insert(item.msg_id).second) return;
      q_.push_back(std::move(item));
      metrics_->SetPublishBacklog(q_.size());
    }
    cv_.notify_one();
  }
  size_t backlog() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }
  // Gives the queue up to `grace` to drain, then stops.
  void Stop(std::chrono::milliseconds grace) {
    if (!thread_.joinable()) return;
    auto deadline = Clock::now() + grace;
    while (Clock::now() < deadline && backlog() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    size_t left = backlog();
    if (left) Log(std::to_string(left) + " job events unpublished at shutdown; the next start republishes from refs");
  }

 private:
  void Loop() {
    int backoff_ms = 100;
    bool warned = false;
    while (true) {
      PublishItem item;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !q_.empty(); });
        if (stop_) return;
        item = q_.front();
      }
      auto ack = bus_->JsPublish(item.subject, item.data, item.msg_id);
      if (!ack.ok() && ack.status().code() == StatusCode::kUnavailable) {
        if (!warned) Log("JetStream unavailable, job events wait: " + ack.status().message());
        warned = true;
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
        backoff_ms = std::min(backoff_ms * 2, 2000);
        continue;
      }
      if (warned) Log("JetStream reachable again");
      warned = false;
      backoff_ms = 100;
      if (!ack.ok()) {
        Log("dropping event " + item.subject + " " + item.msg_id + ": " + ack.status().message());
      } else {
        metrics_->CountPublished();
      }
      std::lock_guard<std::mutex> l(mu_);
      q_.pop_front();
      queued_ids_.erase(item.msg_id);
      metrics_->SetPublishBacklog(q_.size());
    }
  }

  Bus* bus_;
  Metrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PublishItem> q_;
  std::set<std::string> queued_ids_;
  bool stop_ = false;
  std::thread thread_;
};

std::string NormalizeJobHex(std::string s) {
  if (s.rfind("blake3:", 0) == 0) s = s.substr(7);
  return s;
}

// ---- the ledger thread ----

class Daemon {
 public:
  Daemon(const ServeOptions& opts, std::unique_ptr<Ledger> ledger, Ed25519PrivateKey key,
         Bus* bus, Metrics* metrics, Publisher* publisher)
      : opts_(opts),
        ledger_(std::move(ledger)),
        ledger_pub_(key.public_key()),
        plane_(ledger_.get(), std::move(key), SystemNowMs),
        bus_(bus),
        metrics_(metrics),
        publisher_(publisher),
        inbox_(opts.ledger_dir) {
    const char* fault = std::getenv("GATOSD_FAULT");
    crash_after_adopt_ = fault && std::string(fault) == "crash-after-adopt";
  }

  Status Start() {
    GATOS_RETURN_IF_ERROR(plane_.LoadPolicy());
    // Lines appended from here on are replayed after the rebuild (harmless
    // duplicates), so nothing a hook writes during the rebuild is missed.
    inbox_.SkipToEnd();
    auto t0 = Clock::now();
    GATOS_ASSIGN_OR_RETURN(size_t n, index_.Rebuild(*ledger_, plane_.Now()));
    Log("index rebuilt from refs: " + std::to_string(n) + " jobs in " +
        std::to_string(static_cast<int>(SecondsSince(t0) * 1000)) + " ms (" +
        std::to_string(index_.Count(JobState::kPending)) + " pending, " +
        std::to_string(index_.Count(JobState::kClaimed)) + " claimed)");
    // The refs are the outbox: everything pending is published again; the
    // stream drops what it already holds (Nats-Msg-Id = job id).
    Sweep(/*republish_all=*/true);
    UpdateCounts();
    return OkStatus();
  }

  void Handle(const Request& r) {
    const std::string& subj = r.msg.subject;
    if (subj == rpc::kClaim) return Claim(r);
    if (subj == rpc::kRenew) return Renew(r);
    if (subj == rpc::kResult) return ResultRpc(r);
    if (subj == rpc::kCancel) return CancelRpc(r);
    if (subj == rpc::kSubmit) return Submit(r);
    if (subj == rpc::kStatus) return StatusRpc(r);
    if (subj == rpc::kList) return List(r);
    Reply(r, rpc::ErrorReply(TransitionError::kInvalid, "unknown subject " + subj));
  }

  // Inbox, expired leases, periodic republication.
  void Sweep(bool republish_all = false) {
    int64_t now = plane_.Now();
    for (const std::string& line : inbox_.ReadNew()) {
      if (line.rfind("job ", 0) == 0) {
        std::string hex = line.substr(4);
        if (!IsJobIdHex(hex)) continue;
        RefreshAndAnnounce(hex);
      } else if (line.rfind("reject ", 0) == 0) {
        metrics_->CountRejected("push", line.substr(7, 40));
      } else if (line == "policy") {
        Status s = plane_.LoadPolicy();
        Log(s.ok() ? "policy reloaded" : "policy reload failed: " + s.message());
      }
    }
    int64_t before = republish_all ? now + 1 : now - opts_.republish_ms;
    for (const std::string& hex : index_.PendingNotPublishedSince(before, 10000)) PublishPending(hex, -1);
    for (const std::string& hex : index_.ExpiredLeases(now, 10000)) {
      bool is_new;
      auto e = index_.Refresh(*ledger_, hex, now, &is_new);
      if (!e.ok() || !*e) continue;
      const IndexEntry* entry = *e;
      if (entry->state == JobState::kClaimed && now >= entry->lease_expires_ms) {
        // A worker died or stalled: offer the job for takeover (epoch+1).
        Log("lease of job " + hex.substr(0, 12) + " (epoch " + std::to_string(entry->epoch) +
            ") expired; published for takeover");
        PublishPending(hex, entry->epoch);
      } else if (entry->state == JobState::kAborted) {
        PublishEvent(rpc::kAbortedSubject, hex, "a", json{{"job", "blake3:" + hex}});
      }
    }
    UpdateCounts();
    metrics_->Heartbeat(SystemNowMs());
    metrics_->SetNatsConnected(bus_->connected());
  }

 private:
  void Reply(const Request& r, const json& j) {
    if (r.msg.reply.empty()) return;
    Status s = bus_->Respond(r.msg, j.dump());
    if (!s.ok()) Log("reply on " + r.msg.subject + " failed: " + s.message());
  }

  void Refuse(const Request& r, const char* kind, TransitionError e, const std::string& message) {
    metrics_->CountRequest(kind, std::string(TransitionErrorName(e)));
    Reply(r, rpc::ErrorReply(e, message));
  }

  void UpdateCounts() {
    std::array<size_t, 6> c{};
    for (size_t i = 0; i < c.size(); ++i) c[i] = index_.Count(static_cast<JobState>(i));
    metrics_->SetJobCounts(c);
  }

  void PublishPending(const std::string& hex, int64_t expired_epoch) {
    const IndexEntry* e = index_.Find(hex);
    if (!e) return;
    json j = {{"job", "blake3:" + hex}, {"job_commit", e->job_commit}};
    std::string id = hex;
    if (expired_epoch >= 0) {
      j["takeover_of_epoch"] = expired_epoch;
      id += ".e" + std::to_string(expired_epoch);
    }
    publisher_->Enqueue({rpc::kPendingSubject, j.dump(), id});
    index_.MarkPublished(hex, plane_.Now(), expired_epoch);
  }

  void PublishEvent(const char* subject, const std::string& hex, const std::string& suffix, json j) {
    publisher_->Enqueue({subject, j.dump(), hex + "." + suffix});
  }

  // Re-reads a job changed outside this thread (hook, CLI) and announces it.
  void RefreshAndAnnounce(const std::string& hex) {
    bool is_new = false;
    auto e = index_.Refresh(*ledger_, hex, plane_.Now(), &is_new);
    if (!e.ok()) {
      Log("cannot read job " + hex.substr(0, 12) + ": " + e.status().message());
      return;
    }
    if (!*e) return;
    const IndexEntry* entry = *e;
    if (entry->state == JobState::kPending && entry->last_published_ms == 0) {
      Log("job " + hex.substr(0, 12) + " accepted (push); published");
      PublishPending(hex, -1);
    } else if (entry->state == JobState::kAborted) {
      PublishEvent(rpc::kAbortedSubject, hex, "a", json{{"job", "blake3:" + hex}});
    } else if (entry->state == JobState::kClaimed && entry->cancel_requested) {
      (void)bus_->Publish(rpc::kCancelEventPrefix + hex, "cancel");
    } else if (IsTerminal(entry->state)) {
      PublishEvent(rpc::kFinishedSubject, hex, "r",
                   json{{"job", "blake3:" + hex}, {"state", std::string(JobStateName(entry->state))},
                        {"result_commit", entry->result_commit}});
    }
  }

  bool ParseLease(const Request& r, const char* kind, bool renew, LeaseRequest* req) {
    auto j = rpc::ParseRequest(r.msg.data, r.msg.subject);
    auto parsed = j.ok() ? rpc::ParseLeaseRequest(*j, renew) : Result<LeaseRequest>(j.status());
    if (!parsed.ok()) {
      Refuse(r, kind, TransitionError::kInvalid, parsed.status().message());
      return false;
    }
    *req = std::move(*parsed);
    return true;
  }

  void Claim(const Request& r) {
    LeaseRequest req;
    if (!ParseLease(r, "claim", false, &req)) return;
    LeaseGrant g;
    Outcome o = plane_.Claim(req, &g);
    if (!o.ok()) return Refuse(r, "claim", o.error, o.message);
    if (!index_.ApplyLease(req.job_hex, req.worker_hex, g.epoch, g.expires_ms)) {
      bool is_new;
      (void)index_.Refresh(*ledger_, req.job_hex, plane_.Now(), &is_new);
    }
    const IndexEntry* entry = index_.Find(req.job_hex);
    auto yaml = ledger_->ReadFileAtCommit(g.job_commit, "job.yaml",
                                          static_cast<size_t>(plane_.policy().settings.max_manifest_bytes));
    const PolicySettings& ps = plane_.policy().settings;
    json reply = rpc::OkReply();
    reply["lease_commit"] = g.lease_commit;
    reply["epoch"] = g.epoch;
    reply["expires_ms"] = g.expires_ms;
    reply["job_commit"] = g.job_commit;
    reply["job_yaml"] = yaml.ok() ? *yaml : "";
    reply["lease_ms"] = ps.lease_ms;
    reply["output_cap_bytes"] = ps.output_cap_bytes;
    reply["max_result_bytes"] = ps.max_result_bytes;
    reply["allow_network"] = ps.allow_network;
    Reply(r, reply);
    double took = SecondsSince(r.received);
    metrics_->ObserveClaim(took);
    metrics_->ObserveTransition("claim", took);
    metrics_->CountRequest("claim", "ok");
    if (entry && g.epoch == 1) {
      metrics_->ObserveSubmitToClaim(static_cast<double>(plane_.Now() - entry->seen_ms) / 1000.0);
    }
    PublishEvent(rpc::kClaimedSubject, req.job_hex, "c" + std::to_string(g.epoch),
                 json{{"job", "blake3:" + req.job_hex}, {"worker", "ed25519:" + req.worker_hex}, {"epoch", g.epoch}});
  }

  void Renew(const Request& r) {
    LeaseRequest req;
    if (!ParseLease(r, "renew", true, &req)) return;
    LeaseGrant g;
    Outcome o = plane_.Renew(req, &g);
    if (!o.ok()) return Refuse(r, "renew", o.error, o.message);
    if (!index_.ApplyLease(req.job_hex, req.worker_hex, g.epoch, g.expires_ms)) {
      bool is_new;
      (void)index_.Refresh(*ledger_, req.job_hex, plane_.Now(), &is_new);
    }
    const IndexEntry* entry = index_.Find(req.job_hex);
    json reply = rpc::OkReply();
    reply["expires_ms"] = g.expires_ms;
    reply["epoch"] = g.epoch;
    reply["cancel_requested"] = entry && entry->cancel_requested;
    Reply(r, reply);
    metrics_->ObserveTransition("renew", SecondsSince(r.received));
    metrics_->CountRequest("renew", "ok");
  }

  void ResultRpc(const Request& r) {
    json header;
    std::string_view batch_bytes;
    Status s = rpc::DecodeFrame(r.msg.data, rpc::kMaxJsonRequest, &header, &batch_bytes);
    if (!s.ok()) return Refuse(r, "result", TransitionError::kInvalid, "result frame: " + s.message());
    auto commit = rpc::StringField(header, "commit");
    if (!commit.ok()) return Refuse(r, "result", TransitionError::kInvalid, "result header: " + commit.status().message());
    BatchLimits limits;
    limits.max_bytes = static_cast<size_t>(plane_.policy().settings.max_result_bytes);
    auto objects = DecodeObjectBatch(batch_bytes, limits);
    if (!objects.ok()) return Refuse(r, "result", TransitionError::kInvalid, objects.status().message());
    ParsedResult accepted;
    bool existing = false;
    Outcome o = plane_.AcceptResult(*objects, *commit, &accepted, &existing);
    if (!o.ok()) {
      if (o.error == TransitionError::kInvalid || o.error == TransitionError::kUnauthorized) {
        Log("result " + commit->substr(0, 12) + " refused: " + o.message);
      }
      return Refuse(r, "result", o.error, o.message);
    }
    auto state = ParseJobState(accepted.status);
    if (!state || !index_.ApplyResult(accepted.job_hex, *commit, *state)) {
      bool is_new;
      (void)index_.Refresh(*ledger_, accepted.job_hex, plane_.Now(), &is_new);
    }
    json reply = rpc::OkReply();
    reply["existing"] = existing;
    reply["status"] = accepted.status;
    reply["job"] = "blake3:" + accepted.job_hex;
    Reply(r, reply);
    metrics_->ObserveTransition("result", SecondsSince(r.received));
    metrics_->CountRequest("result", existing ? "existing" : "ok");
    if (!existing) {
      PublishEvent(rpc::kFinishedSubject, accepted.job_hex, "r",
                   json{{"job", "blake3:" + accepted.job_hex}, {"state", accepted.status},
                        {"result_commit", *commit}});
    }
  }

  void CancelRpc(const Request& r) {
    auto j = rpc::ParseRequest(r.msg.data, r.msg.subject);
    if (!j.ok()) return Refuse(r, "cancel", TransitionError::kInvalid, j.status().message());
    auto job = rpc::StringField(*j, "job");
    auto who = rpc::StringField(*j, "requester");
    auto at = rpc::IntField(*j, "requested_at");
    auto sig = rpc::StringField(*j, "sig");
    if (!job.ok() || !who.ok() || !at.ok() || !sig.ok()) {
      return Refuse(r, "cancel", TransitionError::kInvalid, "cancel needs job, requester, requested_at and sig");
    }
    std::string hex = NormalizeJobHex(*job);
    std::string requester = who->rfind("ed25519:", 0) == 0 ? who->substr(8) : *who;
    auto key = ParseWorkerId("ed25519:" + requester);
    auto raw_sig = HexDecode(*sig);
    int64_t now = plane_.Now();
    if (!key.ok() || !raw_sig.ok() || raw_sig->size() != 64 ||
        !Ed25519Verify(*key, rpc::CancelPayload(hex, requester, *at), raw_sig->data()).ok()) {
      return Refuse(r, "cancel", TransitionError::kUnauthorized, "cancel request signature does not verify");
    }
    if (*at < now - rpc::kMaxRequestSkewMs || *at > now + rpc::kMaxRequestSkewMs) {
      return Refuse(r, "cancel", TransitionError::kUnauthorized, "cancel request is more than 60 s from the ledger's clock");
    }
    if (*key != ledger_pub_ && !plane_.policy().submitters.FindKey(*key, kSignerNamespaceGit, now / 1000)) {
      return Refuse(r, "cancel", TransitionError::kUnauthorized,
                    "key " + key->WorkerId() + " may not cancel jobs (only allowed submitters and the ledger key)");
    }
    bool already = false;
    Outcome o = plane_.Cancel(hex, requester, &already);
    if (!o.ok()) return Refuse(r, "cancel", o.error, o.message);
    bool is_new;
    auto e = index_.Refresh(*ledger_, hex, plane_.Now(), &is_new);
    json reply = rpc::OkReply();
    reply["already"] = already;
    if (e.ok() && *e) {
      reply["state"] = std::string(JobStateName((*e)->state));
      if ((*e)->state == JobState::kClaimed) {
        (void)bus_->Publish(rpc::kCancelEventPrefix + hex, "cancel");
      } else if ((*e)->state == JobState::kAborted && !already) {
        PublishEvent(rpc::kAbortedSubject, hex, "a", json{{"job", "blake3:" + hex}});
      }
    }
    Reply(r, reply);
    metrics_->CountRequest("cancel", "ok");
  }

  void Submit(const Request& r) {
    json header;
    std::string_view batch_bytes;
    Status s = rpc::DecodeFrame(r.msg.data, rpc::kMaxJsonRequest, &header, &batch_bytes);
    if (!s.ok()) return Refuse(r, "submit", TransitionError::kInvalid, "submit frame: " + s.message());
    auto commit = rpc::StringField(header, "commit");
    if (!commit.ok()) return Refuse(r, "submit", TransitionError::kInvalid, "submit header: " + commit.status().message());
    BatchLimits limits;
    limits.max_bytes = static_cast<size_t>(plane_.policy().settings.max_manifest_bytes) + 64 * 1024;
    limits.max_objects = 8;
    auto objects = DecodeObjectBatch(batch_bytes, limits);
    if (!objects.ok()) return Refuse(r, "submit", TransitionError::kInvalid, objects.status().message());
    // The commit must be in the batch; objects it refers to are checked by
    // CheckJobCommit once written (unreachable objects of a refused submit
    // are pruned by git gc like any other garbage; no ref ever points at them).
    bool has_commit = false;
    for (const auto& o : *objects) has_commit |= o.id == *commit && o.type == ObjectType::kCommit;
    if (!has_commit) return Refuse(r, "submit", TransitionError::kInvalid, "the batch does not hold commit " + *commit);
    for (const auto& o : *objects) {
      auto w = ledger_->WriteRawObject(o.type, o.data);
      if (!w.ok()) return Refuse(r, "submit", TransitionError::kRetry, w.status().message());
    }
    bool existing = false;
    auto check = plane_.CheckJobCommit(*ledger_, *commit, "");
    if (!check.ok()) {
      metrics_->CountRejected("rpc", RejectReasonLabel(check.status()));
      return Refuse(r, "submit", Outcome::FromStatus(check.status()).error, check.status().message());
    }
    const std::string& hex = check->job_hex;
    Outcome o = plane_.AdoptCheckedJob(*commit, *check, &existing);
    if (!o.ok()) return Refuse(r, "submit", o.error, o.message);
    if (crash_after_adopt_) {
      // Fault injection for the crash tests: die between the ref update and the publication.
      Log("GATOSD_FAULT=crash-after-adopt: killing myself after adopting job " + hex.substr(0, 12));
      raise(SIGKILL);
    }
    if (!existing) RefreshAndAnnounce(hex);
    json reply = rpc::OkReply();
    reply["job"] = "blake3:" + hex;
    reply["existing"] = existing;
    Reply(r, reply);
    metrics_->ObserveTransition("submit", SecondsSince(r.received));
    metrics_->CountRequest("submit", existing ? "existing" : "ok");
  }

  void StatusRpc(const Request& r) {
    auto j = rpc::ParseRequest(r.msg.data, r.msg.subject);
    if (!j.ok()) return Refuse(r, "status", TransitionError::kInvalid, j.status().message());
    auto job = rpc::StringField(*j, "job");
    if (!job.ok()) return Refuse(r, "status", TransitionError::kInvalid, job.status().message());
    std::string hex = NormalizeJobHex(*job);
    if (!IsJobIdHex(hex)) return Refuse(r, "status", TransitionError::kInvalid, "\"" + job->substr(0, 80) + "\" is not a job id");
    bool is_new;
    auto e = index_.Refresh(*ledger_, hex, plane_.Now(), &is_new);
    if (!e.ok()) return Refuse(r, "status", TransitionError::kRetry, e.status().message());
    if (!*e) return Refuse(r, "status", TransitionError::kInvalid, "no job blake3:" + hex + " in this ledger");
    json reply = rpc::OkReply();
    reply["status"] = rpc::EntryJson(**e, plane_.Now());
    Reply(r, reply);
  }

  void List(const Request& r) {
    auto j = rpc::ParseRequest(r.msg.data, r.msg.subject);
    if (!j.ok()) return Refuse(r, "list", TransitionError::kInvalid, j.status().message());
    std::optional<JobState> state;
    if (j->contains("state")) {
      auto st = rpc::StringField(*j, "state");
      auto parsed = st.ok() ? ParseJobState(*st) : std::nullopt;
      if (!parsed) return Refuse(r, "list", TransitionError::kInvalid, "state must be pending, claimed, succeeded, failed, timed-out or aborted");
      state = parsed;
    }
    std::string after = j->contains("after") ? NormalizeJobHex(j->value("after", "")) : "";
    int64_t limit = j->contains("limit") && (*j)["limit"].is_number_integer() ? (*j)["limit"].get<int64_t>() : 1000;
    limit = std::clamp<int64_t>(limit, 1, 10000);
    json jobs = json::array();
    int64_t now = plane_.Now();
    for (const IndexEntry* e : index_.List(state, after, static_cast<size_t>(limit))) jobs.push_back(rpc::EntryJson(*e, now));
    json reply = rpc::OkReply();
    reply["jobs"] = std::move(jobs);
    json counts = json::object();
    for (size_t i = 0; i < 6; ++i) counts[std::string(JobStateName(static_cast<JobState>(i)))] = index_.Count(static_cast<JobState>(i));
    reply["counts"] = counts;
    Reply(r, reply);
  }

  const ServeOptions& opts_;
  std::unique_ptr<Ledger> ledger_;
  Ed25519PublicKey ledger_pub_;
  JobPlane plane_;
  Bus* bus_;
  Metrics* metrics_;
  Publisher* publisher_;
  JobIndex index_;
  InboxReader inbox_;
  bool crash_after_adopt_ = false;
};

std::atomic<bool> g_stop{false};

}  // namespace

int Serve(const ServeOptions& opts) {
  // Signals go to one thread; NATS and worker threads created below inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string dir = opts.ledger_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto ledger = Ledger::Open(dir);
  if (!ledger.ok()) {
    std::cerr << "gatosd serve: " << ledger.status().message() << "\n";
    return 1;
  }
  auto key = LoadLedgerKey(dir);
  if (!key.ok()) {
    std::cerr << "gatosd serve: " << key.status().message() << "\n";
    return 1;
  }
  {
    auto policy = (*ledger)->ReadPolicy();
    if (!policy.ok()) {
      std::cerr << "gatosd serve: " << policy.status().message() << "\n";
      return 1;
    }
    if (policy->settings.dev_mode) {
      Log("WARNING: DEV MODE: this ledger accepts UNSIGNED job commits (gatosd init --dev); "
          "never use it for real work");
    }
  }

  Metrics metrics;
  RequestQueue queue;
  BusOptions bo;
  bo.url = opts.nats_url;
  bo.name = "gatosd " + dir;
  bo.on_disconnected = [&metrics] { metrics.SetNatsConnected(false); };
  bo.on_reconnected = [&metrics] { metrics.SetNatsConnected(true); };
  std::unique_ptr<Bus> bus;
  auto deadline = Clock::now() + std::chrono::milliseconds(opts.nats_wait_ms);
  bool said_waiting = false;
  while (true) {
    auto b = Bus::Connect(bo);
    if (b.ok()) {
      bus = std::move(*b);
      break;
    }
    if (Clock::now() >= deadline) {
      std::cerr << "gatosd serve: " << b.status().message() << " (is nats-server -js running?)\n";
      return 1;
    }
    if (!said_waiting) Log("waiting for NATS at " + opts.nats_url + ": " + b.status().message());
    said_waiting = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  metrics.SetNatsConnected(true);
  Bus::StreamConfig sc;
  sc.name = rpc::kStream;
  sc.subjects = {rpc::kStreamSubjects};
  sc.max_age_ms = opts.stream_max_age_ms;
  Status st = bus->EnsureStream(sc);
  if (!st.ok()) {
    std::cerr << "gatosd serve: JetStream stream " << rpc::kStream << ": " << st.message()
              << " (nats-server must run with -js)\n";
    return 1;
  }
  // The workers' durable consumer exists from now on, so jobs published
  // before any worker starts are delivered to the first one.
  {
    auto c = bus->PullSubscribe(rpc::WorkerConsumerConfig());
    if (!c.ok()) {
      std::cerr << "gatosd serve: consumer " << rpc::kWorkerDurable << ": " << c.status().message() << "\n";
      return 1;
    }
  }

  Publisher publisher(bus.get(), &metrics);
  Daemon daemon(opts, std::move(*ledger), std::move(*key), bus.get(), &metrics, &publisher);
  Status started = daemon.Start();
  if (!started.ok()) {
    std::cerr << "gatosd serve: " << started.message() << "\n";
    return 1;
  }

  std::vector<std::unique_ptr<Bus::Subscription>> subs;
  for (const char* subject : {rpc::kClaim, rpc::kRenew, rpc::kResult, rpc::kCancel, rpc::kSubmit,
                              rpc::kStatus, rpc::kList}) {
    auto sub = bus->QueueSubscribe(subject, rpc::kQueueGroup, [&queue](Message m) {
      queue.Push(Request{std::move(m), Clock::now()});
    });
    if (!sub.ok()) {
      std::cerr << "gatosd serve: subscribe " << subject << ": " << sub.status().message() << "\n";
      return 1;
    }
    subs.push_back(std::move(*sub));
  }
  (void)bus->Flush(2000);

  std::unique_ptr<HttpServer> http;
  if (!opts.http_addr.empty()) {
    auto h = HttpServer::Start(opts.http_addr, [&metrics](const std::string& path) {
      if (path == "/metrics") return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics.Render()};
      if (path == "/healthz") {
        int64_t age = SystemNowMs() - metrics.last_heartbeat_ms();
        bool nats = metrics.nats_connected();
        if (age > 5000) return HttpResponse{503, "text/plain; charset=utf-8", "ledger thread stalled for " + std::to_string(age) + " ms\n"};
        if (!nats) return HttpResponse{503, "text/plain; charset=utf-8", "NATS disconnected\n"};
        return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
      }
      return HttpResponse{404, "text/plain; charset=utf-8", "try /metrics or /healthz\n"};
    });
    if (!h.ok()) {
      std::cerr << "gatosd serve: " << h.status().message() << "\n";
      return 1;
    }
    http = std::move(*h);
    Log("metrics on http://" + opts.http_addr.substr(0, opts.http_addr.rfind(':')) + ":" +
        std::to_string(http->port()) + "/metrics");
  }

  std::thread signals([&queue, set] {
    int sig = 0;
    sigwait(&set, &sig);
    Log(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + "; shutting down");
    g_stop = true;
    queue.Close();
  });

  Log("serving ledger " + dir + " on " + opts.nats_url + " (pid " + std::to_string(getpid()) + ")");
  auto next_sweep = Clock::now();
  while (true) {
    auto r = queue.Pop(std::chrono::milliseconds(opts.sweep_ms));
    if (r) daemon.Handle(*r);
    if (Clock::now() >= next_sweep) {
      daemon.Sweep();
      next_sweep = Clock::now() + std::chrono::milliseconds(opts.sweep_ms);
    }
    if (!r && queue.closed()) break;
  }
  subs.clear();
  publisher.Stop(std::chrono::milliseconds(2000));
  http.reset();
  signals.join();
  Log("stopped");
  return 0;
}

}  // namespace gatos::gatosd
