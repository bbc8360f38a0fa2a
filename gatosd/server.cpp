#include "server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint_publisher.h"
#include "dashboard.h"
#include "dashboard_state.h"
#include "gatos/exec/ls_remote.h"
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/maintenance.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/encoding.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/nats/job_stream.h"
#include "gatos/sys/log.h"
#include "http.h"
#include "local_server.h"
#include "metrics.h"
#include "metrics_observer.h"
#include "progress_board.h"
#include "publisher.h"
#include "request_queue.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;

// The replies a worker waits for before it runs or keeps running a job.
bool WorkerLeaseSubject(const std::string& subject) {
  return subject == rpc::kClaim || subject == rpc::kClaimBatch || subject == rpc::kRenew;
}

// Answers a request that came over NATS, once (its reply subject is then
// cleared); a request with no reply subject gets nothing.
void SendReply(Bus& bus, Request& r, const std::string& reply) {
  if (r.nats.reply.empty()) return;
  Status s = bus.Respond(r.nats, reply);
  if (!s.ok()) Log("reply on " + r.nats.subject + " failed: " + s.message());
  r.nats.reply.clear();
}

// Moves the job offers out of `events` (the rest keep their order).
std::vector<ServiceEvent> TakeOffers(std::vector<ServiceEvent>* events) {
  std::vector<ServiceEvent> offers, rest;
  for (auto& e : *events) {
    (e.kind == ServiceEvent::Kind::kJetStream && e.subject.rfind(rpc::kPendingSubject, 0) == 0 ? offers : rest)
        .push_back(std::move(e));
  }
  *events = std::move(rest);
  return offers;
}

// The per-pool gauges: the scheduler's counts and the paused pools.
void UpdatePools(Metrics* metrics, const JobService& s, const LedgerWriter& w) {
  std::map<std::string, Metrics::PoolGauge> pools;
  for (const auto& [pool, c] : s.scheduler().Pools()) pools[pool] = {c.queued, c.offered, c.running, false};
  for (const auto& pool : w.policy().settings.scheduling.paused) pools[pool].paused = true;
  metrics->SetPools(std::move(pools));
}

void UpdateCounts(Metrics* metrics, const LedgerWriter& w) {
  std::array<size_t, 6> c{};
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<size_t>(std::max<int64_t>(0, w.stats().by_state[i]));
  metrics->SetJobCounts(c);
}

// gatosd serve as an object: Start opens the ledger and connects
// everything, Run is the ledger thread's loop until a shutdown, Stop drains
// and closes in order.
class Server {
 public:
  explicit Server(const ServeOptions& opts) : opts_(opts), dir_(opts.ledger_dir) {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  }

  // Every part, in the order the others need them; a message says what
  // failed. Signals are blocked first: the threads made below inherit that.
  Status Start() {
    sigemptyset(&signals_set_);
    sigaddset(&signals_set_, SIGINT);
    sigaddset(&signals_set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_set_, nullptr);
    signal(SIGPIPE, SIG_IGN);
    GATOS_RETURN_IF_ERROR(OpenLedger());
    // The local socket first: pushes and the CLI work even while NATS is away.
    GATOS_ASSIGN_OR_RETURN(local_, LocalServer::Start(LedgerSocketPath(dir_), &queue_));
    SyncNatsAuth();
    GATOS_RETURN_IF_ERROR(ConnectNats());
    GATOS_RETURN_IF_ERROR(EnsureJetStream());
    StartService();
    GATOS_RETURN_IF_ERROR(Subscribe());
    GATOS_RETURN_IF_ERROR(StartHttp());
    if (opts_.checkpoint_ms > 0) {
      checkpoints_ = std::make_unique<CheckpointPublisher>(dir_, writer_->ledger_private_key(),
                                                           std::chrono::milliseconds(opts_.checkpoint_ms));
    }
    signals_ = std::thread([this] {
      int sig = 0;
      sigwait(&signals_set_, &sig);
      if (stepped_down_) return;  // Stop woke this thread
      Log(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + "; shutting down");
      queue_.Close();
    });
    if (opts_.stream_replicas > 1) {
      Log("stream " + std::string(rpc::kStream) + " kept with " +
          std::to_string(opts_.stream_replicas) + " replicas");
    }
    Log("serving ledger " + dir_ + " on " + opts_.nats_url + " (pid " + std::to_string(getpid()) +
        ")");
    return OkStatus();
  }

  // The ledger thread until shutdown: batches, sweeps, maintenance. The
  // decoder thread authenticates the next requests (Ed25519, the bulk of a
  // request's CPU) while this one writes the current batch.
  int Run() {
    std::thread decoder([this] { DecodeLoop(); });
    auto next_sweep = Clock::now();
    auto next_maintenance = Clock::now() + std::chrono::seconds(5);
    auto next_views_sync = Clock::now() + std::chrono::seconds(30);
    int64_t views_synced_seq = writer_->seq();  // Open repaired and synced the views
    while (true) {
      // Replicated leader: with append_window batches unacknowledged, the
      // next one waits (requests meanwhile make it larger).
      Replicated(writer_->WaitForRoom(std::chrono::milliseconds(opts_.sweep_ms)));
      std::optional<PreparedRequests> item =
          prepared_.Pop(batch_limit_.load(), std::chrono::milliseconds(opts_.sweep_ms));
      Replicated(writer_->Acknowledge());
      if (item) {
        const size_t n = item->requests.size();
        const auto started = Clock::now();
        Finish(std::move(*item));
        FitBatchLimit(n, Clock::now() - started);
      }
      if (Clock::now() >= next_sweep) {
        Sweep();
        next_sweep = Clock::now() + std::chrono::milliseconds(opts_.sweep_ms);
      }
      if (Clock::now() >= next_maintenance) {
        if (repacker_->MaybeStart()) Log("repacking the ledger's object store in the background");
        next_maintenance = Clock::now() + std::chrono::seconds(5);
      }
      // The view refs written so far are marked synced now and then, so a
      // start after a crash repairs only the batches since (seconds of
      // them), not every batch since the last clean stop.
      if (Clock::now() >= next_views_sync && writer_->seq() != views_synced_seq) {
        Status synced = writer_->SyncViews();
        if (synced.ok()) {
          views_synced_seq = writer_->seq();
        } else {
          Log("could not mark the ref view synced: " + synced.message());
        }
        next_views_sync = Clock::now() + std::chrono::seconds(30);
      }
      if (opts_.leading && !stepped_down_ && !opts_.leading()) {
        // Replicated: no longer the leader. What is queued is refused
        // (its batches cannot be appended) and the loop drains.
        Log("no longer the leader: stopping to serve");
        stepped_down_ = true;
        queue_.Close();
      }
      if (!item && prepared_.drained()) break;
    }
    Replicated(writer_->DrainReplication());
    writer_->FlushViews();  // the last replies leave while the bus is up
    writer_->StopAppending();
    decoder.join();
    if (stepped_down_ && exit_code_ == 0) return kSteppedDown;
    return exit_code_;
  }

  // After Run: closes the transports, lets a repack finish, marks the views
  // synced.
  void Stop() {
    subs_.clear();
    local_.reset();
    if (publisher_) publisher_->Stop(std::chrono::milliseconds(2000));
    http_.reset();
    if (repacker_)
      (void)repacker_->Wait();  // a repack in flight finishes; its result does not matter here
    if (writer_) {
      Status synced = writer_->SyncViews();
      if (!synced.ok()) Log("could not mark the ref view synced: " + synced.message());
    }
    checkpoints_.reset();  // a last checkpoint of everything written
    if (signals_.joinable()) {
      if (stepped_down_) pthread_kill(signals_.native_handle(), SIGTERM);  // ends its sigwait
      signals_.join();
    }
    Log("stopped");
  }

 private:
  Status OpenLedger() {
    GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, LoadLedgerKey(dir_));
    WriterOptions wo;
    wo.fsync = opts_.fsync;
    wo.wal = opts_.wal;
    // The ledger thread goes on with the next batch while the view refs of
    // this one are written; most replies wait for them (AfterViews).
    wo.async_views = true;
    // Offers and claim/renew replies leave once a batch is in the
    // write-ahead log; its pack and log ref are written right after
    // (CompleteBatch in Finish).
    wo.deferred_tail = true;
    wo.replicate = opts_.replicate;  // replicated leader only
    if (opts_.replicate) {
      wo.replicate_window = opts_.append_window;
      wo.on_replicated = [this] { prepared_.Wake(); };
    }
    wo.term = opts_.term;
    if (const char* fault = std::getenv("GATOSD_FAULT")) {
      wo.crash_at = std::string(fault) == "crash-after-adopt" ? "after-wal" : fault;
    }
    auto t0 = Clock::now();
    GATOS_ASSIGN_OR_RETURN(writer_, LedgerWriter::Open(dir_, std::move(key), wo));
    LedgerWriter& w = *writer_;
    Log("ledger " + dir_ + " at log sequence " + std::to_string(w.seq()) + ": " +
        std::to_string(w.stats().jobs) + " jobs, " + std::to_string(w.live().size()) +
        " not finished; loaded in " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) +
        " ms");
    if (!opts_.fsync)
      Log("WARNING: --no-fsync: batches are not durable; a power loss can lose acknowledged work");
    if (opts_.fsync && !opts_.wal) {
      Log("--no-wal: each batch syncs its pack and log ref (six syncs) instead of a write-ahead "
          "log record");
    }
    if (w.policy().settings.dev_mode) {
      Log("WARNING: DEV MODE: this ledger accepts UNSIGNED job commits (gatosd init --dev); never "
          "use it for real work");
    }
    repacker_ = std::make_unique<Repacker>(dir_);
    return OkStatus();
  }

  // The authorization block: a nats-server started with an include of this
  // file (gatos nats-config, gatos up) reloads the policy's keys.
  void SyncNatsAuth() {
    if (opts_.nats_auth_file.empty()) return;
    auto changed = WriteNatsAuthorizationFile(opts_.nats_auth_file, writer_->policy());
    if (!changed.ok()) {
      Log("ERROR: NATS authorization not updated: " + changed.status().message());
      return;
    }
    if (!*changed) return;
    Log("NATS authorization written to " + opts_.nats_auth_file + " from the policy");
    if (opts_.nats_pid_file.empty()) return;
    Status r = ReloadNatsServer(opts_.nats_pid_file);
    if (r.ok()) {
      Log("asked nats-server to reload its authorization");
    } else {
      Log("ERROR: nats-server not reloaded (" + r.message() +
          "): revoked keys keep their access until it is");
    }
  }

  Status ConnectNats() {
    BusOptions bo;
    bo.url = opts_.nats_url;
    bo.name = "gatosd " + dir_;
    bo.tls_ca_file = opts_.nats_ca_file;
    SetBusIdentity(&bo, writer_->ledger_private_key());
    bo.on_async_error = [](const std::string& what) { Log("NATS: " + what); };
    bo.on_disconnected = [this] { metrics_.SetNatsConnected(false); };
    bo.on_reconnected = [this] { metrics_.SetNatsConnected(true); };
    deadline_ = Clock::now() + std::chrono::milliseconds(opts_.nats_wait_ms);
    for (bool said_waiting = false;; said_waiting = true) {
      auto b = Bus::Connect(bo);
      if (b.ok()) {
        bus_ = std::move(*b);
        break;
      }
      if (Clock::now() >= deadline_) {
        return Status(b.status().code(), b.status().message() + " (is nats-server -js running?)");
      }
      if (!said_waiting) Log("waiting for NATS at " + opts_.nats_url + ": " + b.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    metrics_.SetNatsConnected(true);
    auto anonymous = NatsAcceptsAnonymous(opts_.nats_url, opts_.nats_ca_file);
    if (anonymous.ok() && *anonymous) {
      if (opts_.require_nats_auth) {
        return FailedPreconditionError(
            "NATS at " + opts_.nats_url +
            " lets clients in without a key (--require-nats-auth); configure it with "
            "'gatos nats-config --ledger " +
            dir_ + "'");
      }
      Log("WARNING: NATS at " + opts_.nats_url +
          " lets anyone in without a key: any client on the network can read jobs, answer workers "
          "in "
          "gatosd's place or flood the ledger with requests. Run nats-server with the "
          "configuration "
          "'gatos nats-config --ledger " +
          dir_ + "' prints.");
    } else if (anonymous.ok()) {
      Log("NATS refuses anonymous clients; gatosd connected as the ledger key");
    }
    return OkStatus();
  }

  Status EnsureJetStream() {
    Bus::StreamConfig sc;
    sc.name = rpc::kStream;
    sc.subjects = {rpc::kStreamSubjects};
    sc.max_age_ms = opts_.stream_max_age_ms;
    sc.replicas = opts_.stream_replicas;
    // A cluster that has just formed answers JetStream calls only once it
    // has elected a leader, and one that has just lost a node answers
    // "temporarily unavailable" (10008) while its meta group elects
    // another: wait for that as for the server itself. A replicated leader
    // waits only while it is still elected (its election thread keeps the
    // key meanwhile); giving up would make the next leader meet the same.
    bool said = false;
    auto retry = [&](const Status& st) {
      if (st.code() != StatusCode::kUnavailable || Clock::now() >= deadline_) return false;
      if (opts_.leading && !opts_.leading()) return false;
      if (!said) Log("waiting for JetStream: " + st.message());
      said = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      return true;
    };
    Status st = bus_->EnsureStream(sc);
    while (retry(st)) st = bus_->EnsureStream(sc);
    if (!st.ok()) {
      return Status(st.code(), "JetStream stream " + std::string(rpc::kStream) + ": " +
                                   st.message() + " (nats-server must run with -js)");
    }
    // The workers' durable consumer exists from now on, so jobs offered
    // before any worker starts are delivered to the first one.
    auto c = bus_->PullSubscribe(rpc::WorkerConsumerConfig());
    while (!c.ok() && retry(c.status())) c = bus_->PullSubscribe(rpc::WorkerConsumerConfig());
    if (!c.ok())
      return Status(c.status().code(),
                    "consumer " + std::string(rpc::kWorkerDurable) + ": " + c.status().message());
    if (said) Log("JetStream answers again");
    return OkStatus();
  }

  void StartService() {
    publisher_ = std::make_unique<Publisher>(bus_.get(), &metrics_);
    live_.Seed(*writer_);
    observer_ = std::make_unique<MetricsObserver>(&metrics_, &live_, writer_.get());
    ServiceOptions so;
    so.republish_ms = opts_.republish_ms;
    so.offer_window = opts_.offer_window;
    LsRemoteOptions lo;
    lo.home = opts_.ledger_dir + "/gatos/git-home";
    lo.credentials = opts_.input_credentials;
    lo.local_roots = opts_.watch_local_roots;
    lo.local_network_url_prefixes = opts_.watch_allow_urls;
    {
      std::error_code ec;  // never a watched repository: the ledger itself
      const auto ledger = std::filesystem::weakly_canonical(opts_.ledger_dir, ec);
      lo.forbidden_roots = {ec ? opts_.ledger_dir : ledger.string()};
    }
    so.list_remote_refs = [lo](const std::string& url) { return LsRemote(lo, url); };
    service_ = std::make_unique<JobService>(writer_.get(), so, observer_.get());
    service_->Start();
    publisher_->Enqueue(service_->TakeEvents());
    UpdateCounts(&metrics_, *writer_);
    UpdatePools(&metrics_, *service_, *writer_);
    if (opts_.term) metrics_.SetReplicaName(opts_.replica_name);
  }

  Status Subscribe() {
    for (const char* subject :
         {rpc::kClaim, rpc::kRenew, rpc::kResult, rpc::kClaimBatch, rpc::kResultBatch, rpc::kCancel,
          rpc::kRetry, rpc::kSubmit, rpc::kStatus, rpc::kList, rpc::kLogs, rpc::kPools, rpc::kForwardSchedule,
          rpc::kForwardWitness}) {
      auto sub = bus_->QueueSubscribe(subject, rpc::kQueueGroup, [this](Message m) {
        Request r;
        // A schedule a follower forwards is the frame `gatos schedule add`
        // sends here over the local socket, checked the same way.
        r.req = {m.subject == rpc::kForwardSchedule ? std::string(rpc::kLocalSchedule) : m.subject, m.data,
                 SystemNowMs()};
        r.nats = std::move(m);
        // Stopping (a deposed leader drains its last batches while still
        // subscribed): the client is told to retry at once, and its next
        // try reaches the leader.
        if (!queue_.Push(r)) {
          SendReply(*bus_, r, RequestQueue::StoppingReply());
        }
      });
      if (!sub.ok())
        return Status(sub.status().code(),
                      "subscribe " + std::string(subject) + ": " + sub.status().message());
      subs_.push_back(std::move(*sub));
    }
    // Running jobs' progress reports, for status replies and the dashboard
    // (display data: progress_board.h). Output chunks are not received here.
    auto progress = bus_->Subscribe(kAllProgressSubjects,
                                    [this](Message m) { progress_.Record(m.data, SystemNowMs()); });
    if (!progress.ok())
      return Status(progress.status().code(), "subscribe progress: " + progress.status().message());
    subs_.push_back(std::move(*progress));
    // Workers' heartbeats: which pools have a live worker (status, gatos pool ls).
    auto beats = bus_->Subscribe(rpc::kWorkerHeartbeat, [this](Message m) {
      auto h = rpc::DecodeHeartbeat(m.data);
      if (h.ok()) service_->NoteWorker(h->worker_hex, std::move(h->pools), SystemNowMs());
    });
    if (!beats.ok())
      return Status(beats.status().code(), "subscribe heartbeats: " + beats.status().message());
    subs_.push_back(std::move(*beats));
    (void)bus_->Flush(2000);  // best effort: a slow server only delays the first requests
    return OkStatus();
  }

  // The dashboard reads through a libgit2 handle of its own, on the HTTP
  // thread; it never sees the writer.
  Status StartHttp() {
    DashboardOptions dopts;
    dopts.ledger_dir = dir_;
    dopts.token = opts_.http_token;
    Bus* bus = bus_.get();
    dopts.subscribe = [bus](const std::string& subject, Bus::Handler handler) {
      return bus->Subscribe(subject, std::move(handler));
    };
    dashboard_ = std::make_unique<Dashboard>(std::move(dopts), &live_, &metrics_);
    if (opts_.http_addr.empty()) return OkStatus();
    backfill_ = std::make_unique<WindowBackfill>(dir_, &live_);
    GATOS_ASSIGN_OR_RETURN(http_, HttpServer::Start(opts_.http_addr, [this](const HttpRequest& r) {
                             return dashboard_->Handle(r);
                           }));
    Log("dashboard and metrics on http://" + opts_.http_addr.substr(0, opts_.http_addr.rfind(':')) +
        ":" + std::to_string(http_->port()) + "/ (" +
        (opts_.http_token.empty() ? "no token" : "bearer token required") + ")");
    return OkStatus();
  }

  // The next batches' size from what a request cost lately (a moving
  // average): about batch_budget_ms of work, between kMinBatch and
  // max_batch requests. A push of 10,000 jobs is applied a few hundred at a
  // time, so a schedule's fire or a lease's expiry never waits seconds for
  // the ledger thread (docs/benchmarks.md, "Fire lag").
  void FitBatchLimit(size_t n, Clock::duration took) {
    static constexpr size_t kMinBatch = 64;
    // A small batch's time is mostly its one sync, not its requests: only
    // batches of many requests say what a request costs.
    if (n < 32) return;
    const double per = std::chrono::duration<double, std::milli>(took).count() / static_cast<double>(n);
    ms_per_request_ = ms_per_request_ < 0 ? per : 0.7 * ms_per_request_ + 0.3 * per;
    const double fit = static_cast<double>(opts_.batch_budget_ms) / std::max(ms_per_request_, 1e-6);
    const size_t floor = std::min(kMinBatch, opts_.max_batch);
    batch_limit_.store(static_cast<size_t>(std::clamp(fit, static_cast<double>(floor),
                                                      static_cast<double>(opts_.max_batch))));
  }

  void DecodeLoop() {
    while (true) {
      std::vector<Request> batch =
          queue_.PopBatch(batch_limit_.load(), std::chrono::milliseconds(opts_.sweep_ms));
      if (batch.empty()) {
        if (queue_.closed()) break;
        continue;
      }
      std::vector<ServiceRequest> reqs;
      reqs.reserve(batch.size());
      for (auto& r : batch) reqs.push_back(std::move(r.req));
      PreparedBatch p = service_->Prepare(reqs);
      if (!prepared_.Push({std::move(batch), std::move(p)})) break;
    }
    prepared_.Close();
  }

  // One batch: applied, then its replies and events sent in the order that
  // keeps every promise. Replies and events leave once the batch is
  // durable (Finish returned: its record is in the write-ahead log). Job
  // offers and the workers' claim and renew replies leave at once, before
  // the batch's pack, log ref and view refs are written (CompleteBatch,
  // then the view thread): a worker reads nothing of a job from the
  // repository (the grant carries the job), and a push of thousands of jobs
  // would otherwise keep every worker waiting while the view thread writes
  // their refs. Everything else waits for the batch's refs (the view thread
  // runs it after them), so whoever hears of a finished or new job finds
  // the refs it names.
  void Finish(PreparedRequests item) {
    std::vector<std::string> replies = service_->Finish(std::move(item.prepared));
    // The state gauges as of this batch, before anyone hears of it.
    UpdateCounts(&metrics_, *writer_);
    UpdatePools(&metrics_, *service_, *writer_);
    std::vector<ServiceEvent> events = service_->TakeEvents();
    // Shared by the two steps below (never at the same time: the view
    // thread runs the second after the first ran on this one).
    auto batch = std::make_shared<std::vector<Request>>(std::move(item.requests));
    auto answers = std::make_shared<std::vector<std::string>>(std::move(replies));
    // A replicated leader's batch that the stream never acknowledged: its
    // requests are told to retry (the next leader answers), nothing else
    // of it leaves.
    auto refuse = [this, batch](const Status& why) {
      const std::string retry = rpc::Dump(rpc::ErrorReply(
          TransitionError::kRetry, "the ledger could not record this batch: " + why.message()));
      for (Request& r : *batch) {
        if (r.local) {
          r.local->set_value(retry);
          r.local.reset();
        } else {
          SendReply(*bus_, r, retry);
        }
      }
    };
    writer_->AfterDurable([this, batch, answers, refuse, offers = TakeOffers(&events)](const Status& s) mutable {
      if (!s.ok()) return refuse(s);
      publisher_->Enqueue(std::move(offers));
      for (size_t i = 0; i < batch->size(); ++i) {
        Request& r = (*batch)[i];
        if (!r.local && WorkerLeaseSubject(r.nats.subject)) SendReply(*bus_, r, (*answers)[i]);
      }
    });
    writer_->CompleteBatch();
    writer_->AfterViews(
        [this, batch, answers, events = std::move(events)]() mutable {
          for (size_t i = 0; i < batch->size(); ++i) {
            Request& r = (*batch)[i];
            if (r.local) {
              r.local->set_value(std::move((*answers)[i]));
            } else {
              SendReply(*bus_, r,
                        r.nats.subject == rpc::kStatus ? progress_.Annotate((*answers)[i], SystemNowMs())
                                                       : (*answers)[i]);
            }
          }
          publisher_->Enqueue(std::move(events));
        },
        refuse);
    if (observer_->policy_changed) {
      observer_->policy_changed = false;
      SyncNatsAuth();
    }
    if (Status f = writer_->failed(); !f.ok() && exit_code_ == 0) {
      // A batch is in the write-ahead log but not in the repository: stop,
      // so that the next start (a supervisor restarts us) writes it.
      Log("stopping: " + f.message());
      exit_code_ = 1;
      ::kill(::getpid(), SIGTERM);
    }
  }

  // A replicated leader's appends: once one failed (a fenced append, the
  // stream unavailable, this replica's local log failing), it stops
  // serving. The batches the stream did not acknowledge were dropped and
  // their requests told to retry; the replica follows again and gets
  // every acknowledged batch from the stream.
  void Replicated(const Status& s) {
    if (s.ok() || stepped_down_) return;
    if (opts_.leading && opts_.leading()) {
      // Still elected (this replica's own failure): let another one lead.
      Log("stopping to serve as leader: " + s.message());
      if (exit_code_ == 0) exit_code_ = 1;
    } else {
      Log("no longer the leader: stopping to serve (" + s.message() + ")");
    }
    stepped_down_ = true;
    queue_.Close();
  }

  void Sweep() {
    service_->Sweep();
    std::vector<ServiceEvent> events = service_->TakeEvents();
    writer_->AfterDurable([this, offers = TakeOffers(&events)](const Status& s) mutable {
      if (s.ok()) publisher_->Enqueue(std::move(offers));
    });
    writer_->AfterViews(
        [this, events = std::move(events)]() mutable { publisher_->Enqueue(std::move(events)); });
    UpdateCounts(&metrics_, *writer_);
    UpdatePools(&metrics_, *service_, *writer_);
    const int64_t now = SystemNowMs();
    if (now - pools_shown_ms_ >= 1000) {  // the dashboard's /pools
      live_.SetPools(service_->PoolsReply(now));
      pools_shown_ms_ = now;
    }
    metrics_.Heartbeat(now);
    metrics_.SetNatsConnected(bus_->connected());
    if (opts_.term) metrics_.SetReplica(!stepped_down_, static_cast<uint64_t>(opts_.term()), 0);
  }

  const ServeOptions opts_;
  std::string dir_;
  sigset_t signals_set_;
  Clock::time_point deadline_;  // for NATS and JetStream at start
  int exit_code_ = 0;
  int64_t pools_shown_ms_ = 0;
  std::atomic<bool> stepped_down_{false};  // replicated: the leader lost the election
  std::atomic<size_t> batch_limit_{opts_.max_batch};  // FitBatchLimit; read by the decoder thread
  double ms_per_request_ = -1;                       // the ledger thread's only
  // Destroyed in reverse: the transports before the service, the service
  // before the writer.
  std::unique_ptr<LedgerWriter> writer_;
  std::unique_ptr<Repacker> repacker_;
  Metrics metrics_;
  RequestQueue queue_;
  PreparedQueue prepared_;
  LiveState live_;          // what the dashboard shows without reading the ledger
  ProgressBoard progress_;  // running jobs' latest progress reports
  std::unique_ptr<LocalServer> local_;
  std::unique_ptr<Bus> bus_;
  std::unique_ptr<Publisher> publisher_;
  std::unique_ptr<MetricsObserver> observer_;
  std::unique_ptr<JobService> service_;
  std::vector<std::unique_ptr<Bus::Subscription>> subs_;
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<WindowBackfill> backfill_;
  std::unique_ptr<HttpServer> http_;
  std::thread signals_;
  std::unique_ptr<CheckpointPublisher> checkpoints_;
};

}  // namespace

int Serve(const ServeOptions& opts) {
  SetLogProgram("gatosd");
  Server server(opts);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "gatosd serve: " << s.message() << "\n";
    server.Stop();
    return 1;
  }
  const int code = server.Run();
  server.Stop();
  return code;
}

}  // namespace gatos::gatosd