#include "server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "gatos/bus.h"
#include "gatos/bus_identity.h"
#include "gatos/encoding.h"
#include "gatos/job_service.h"
#include "gatos/job_stream.h"
#include "gatos/ledger_writer.h"
#include "gatos/local_ledger.h"
#include "gatos/maintenance.h"
#include "gatos/rpc.h"
#include "dashboard.h"
#include "dashboard_state.h"
#include "http.h"
#include "metrics.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;

void Log(const std::string& line) {
  std::string out = "gatosd: " + FormatRfc3339Millis(SystemNowMs()) + " " + TruncateUtf8(line, 4000) + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
}

// ---- the request queue: NATS callbacks and local connections enqueue,
// the ledger thread takes whole batches ----

struct Request {
  ServiceRequest req;
  Message nats;                                // NATS: reply through the bus
  std::shared_ptr<std::promise<std::string>> local;  // local socket: the connection thread waits
};

class RequestQueue {
 public:
  void Push(Request r) {
    {
      std::lock_guard<std::mutex> l(mu_);
      EnqueueLocked(std::move(r));
    }
    cv_.notify_one();
  }
  // Together: the ledger thread takes them in the same batch when it can.
  void PushAll(std::vector<Request> rs) {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& r : rs) EnqueueLocked(std::move(r));
    }
    cv_.notify_one();
  }
  // Waits up to `wait` for the first request, then takes everything waiting,
  // up to `max`. Empty on timeout or when closed and drained.
  std::vector<Request> PopBatch(size_t max, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, wait, [&] { return !q_.empty() || closed_; });
    std::vector<Request> out;
    while (!q_.empty() && out.size() < max) {
      out.push_back(std::move(q_.front()));
      q_.pop_front();
    }
    return out;
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
  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }

 private:
  void EnqueueLocked(Request r) {
    if (closed_) {
      if (r.local) r.local->set_value(rpc::Dump(rpc::ErrorReply(TransitionError::kRetry, "gatosd is stopping")));
      return;
    }
    q_.push_back(std::move(r));
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> q_;
  bool closed_ = false;
};

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
    (e.kind == ServiceEvent::Kind::kJetStream && e.subject == rpc::kPendingSubject ? offers : rest)
        .push_back(std::move(e));
  }
  *events = std::move(rest);
  return offers;
}

// Publishes job events in order, retrying while JetStream is unreachable. A
// lost event is never lost state: the log is the outbox, and every start
// offers every pending job again (the stream drops duplicates by id).
class Publisher {
 public:
  Publisher(Bus* bus, Metrics* metrics) : bus_(bus), metrics_(metrics) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Publisher() { Stop(std::chrono::milliseconds(0)); }

  void Enqueue(std::vector<ServiceEvent> events) {
    if (events.empty()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& e : events) {
        if (e.kind == ServiceEvent::Kind::kCore) {
          // At most once, and cheap: straight to the connection's buffer.
          Status s = bus_->Publish(e.subject, e.data);
          if (!s.ok()) Log("cancel notice on " + e.subject + " not sent: " + s.message());
          continue;
        }
        if (!e.msg_id.empty() && !queued_ids_.insert(e.msg_id).second) continue;
        q_.push_back(std::move(e));
      }
      metrics_->SetPublishBacklog(q_.size());
    }
    cv_.notify_one();
  }
  size_t backlog() {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }
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
    if (left) Log(std::to_string(left) + " job events unpublished at shutdown; the next start offers pending jobs again");
  }

 private:
  void Loop() {
    int backoff_ms = 100;
    bool warned = false;
    while (true) {
      ServiceEvent item;
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
  std::deque<ServiceEvent> q_;
  std::set<std::string> queued_ids_;
  bool stop_ = false;
  std::thread thread_;
};

// Whether a read from `fd` would not block (more of a pipelined request).
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// The local socket (<ledger>/gatos/gatosd.sock): hooks and the CLI on the
// ledger host. One thread accepts; one thread per connection reads a
// request, hands it to the ledger thread and writes the reply.
class LocalServer {
 public:
  static Result<std::unique_ptr<LocalServer>> Start(const std::string& path, RequestQueue* queue) {
    ::unlink(path.c_str());
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return UnavailableError("socket: " + std::string(std::strerror(errno)));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) {
      ::close(fd);
      return InvalidArgumentError("socket path too long: " + path);
    }
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    mode_t old = ::umask(0077);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::umask(old);
    if (rc != 0 || ::listen(fd, 64) != 0) {
      std::string e = std::strerror(errno);
      ::close(fd);
      return UnavailableError("cannot listen on " + path + ": " + e);
    }
    return std::unique_ptr<LocalServer>(new LocalServer(fd, path, queue));
  }
  ~LocalServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
    ::unlink(path_.c_str());
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(5), [&] { return active_ == 0; });
  }

 private:
  LocalServer(int fd, std::string path, RequestQueue* queue) : fd_(fd), path_(std::move(path)), queue_(queue) {
    thread_ = std::thread([this] { Loop(); });
  }
  void Loop() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      timeval tv{60, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      {
        std::lock_guard<std::mutex> l(mu_);
        ++active_;
      }
      std::thread([this, c] {
        // A client may pipeline (a push of many jobs): every frame already
        // waiting is taken with the first, so they go to the ledger together
        // and land in one log batch. Replies go back in order from a thread
        // of their own, so the next frames are read (and decoded, and
        // written) while the refs of the ones before are still being written;
        // at most kMaxInFlight requests, or kMaxInFlightBytes of them, wait
        // for their replies.
        std::mutex mu;
        std::condition_variable cv;
        std::deque<std::pair<std::future<std::string>, size_t>> waiting;  // reply, request bytes
        size_t waiting_bytes = 0;
        bool reading = true;
        std::thread writer([&] {
          bool open = true;
          while (true) {
            std::future<std::string> f;
            size_t bytes;
            {
              std::unique_lock<std::mutex> l(mu);
              cv.wait(l, [&] { return !waiting.empty() || !reading; });
              if (waiting.empty()) return;
              f = std::move(waiting.front().first);
              bytes = waiting.front().second;
              waiting.pop_front();
            }
            if (open && !WriteReplyFrame(c, f.get()).ok()) {
              open = false;
              ::shutdown(c, SHUT_RD);  // the reader stops taking requests
            }
            if (!open) f.wait();  // answered anyway: the request may be applied
            {
              std::lock_guard<std::mutex> l(mu);
              waiting_bytes -= bytes;
            }
            cv.notify_all();  // room for the reader
          }
        });
        while (true) {
          std::vector<Request> reqs;
          std::vector<std::pair<std::future<std::string>, size_t>> replies;
          size_t batch_bytes = 0;
          bool eof = false;
          do {
            auto frame = ReadRequestFrame(c);
            if (!frame.ok()) {
              eof = true;
              break;
            }
            const size_t bytes = frame->first.size() + frame->second.size();
            batch_bytes += bytes;
            Request r;
            r.req = {frame->first, std::move(frame->second), SystemNowMs()};
            r.local = std::make_shared<std::promise<std::string>>();
            replies.emplace_back(r.local->get_future(), bytes);
            reqs.push_back(std::move(r));
          } while (reqs.size() < kMaxPipelined && batch_bytes < kMaxInFlightBytes && Readable(c));
          if (!reqs.empty()) queue_->PushAll(std::move(reqs));
          {
            std::unique_lock<std::mutex> l(mu);
            for (auto& f : replies) waiting.push_back(std::move(f));
            waiting_bytes += batch_bytes;
            if (eof) reading = false;
            cv.notify_all();
            if (eof) break;
            cv.wait(l, [&] { return waiting.size() < kMaxInFlight && waiting_bytes < kMaxInFlightBytes; });
          }
        }
        writer.join();
        ::close(c);
        std::lock_guard<std::mutex> l(mu_);
        --active_;
        cv_.notify_all();
      }).detach();
    }
  }

  static constexpr size_t kMaxPipelined = 1024;  // requests taken from one connection at once
  static constexpr size_t kMaxInFlight = 4096;   // requests of one connection waiting for replies
  static constexpr size_t kMaxInFlightBytes = 256u << 20;  // and their bytes (a frame is at most 64 MiB)
  int fd_;
  std::string path_;
  RequestQueue* queue_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;
};

// Batches authenticated by the decoder thread (JobService::Prepare), in the
// order their requests arrived, waiting for the ledger thread. Bounded: a
// decoder that runs ahead waits, and requests queue in RequestQueue.
struct PreparedRequests {
  std::vector<Request> requests;
  PreparedBatch prepared;
};

class PreparedQueue {
 public:
  // False when closed (the batch is dropped: only at shutdown, after the
  // ledger thread stopped taking batches).
  bool Push(PreparedRequests p) {
    std::unique_lock<std::mutex> l(mu_);
    space_.wait(l, [&] { return q_.size() < kMaxWaiting || closed_; });
    if (closed_) return false;
    q_.push_back(std::move(p));
    ready_.notify_one();
    return true;
  }
  // Waits up to `wait` for a batch, then merges every waiting batch into
  // one log batch (up to `max` requests). nullopt on timeout, or when
  // closed and drained.
  std::optional<PreparedRequests> Pop(size_t max, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    ready_.wait_for(l, wait, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return std::nullopt;
    PreparedRequests out = std::move(q_.front());
    q_.pop_front();
    while (!q_.empty() && out.requests.size() + q_.front().requests.size() <= max) {
      PreparedRequests& next = q_.front();
      AppendPrepared(&out.prepared, std::move(next.prepared));
      for (auto& r : next.requests) out.requests.push_back(std::move(r));
      q_.pop_front();
    }
    space_.notify_all();
    return out;
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    ready_.notify_all();
    space_.notify_all();
  }
  bool drained() {
    std::lock_guard<std::mutex> l(mu_);
    return closed_ && q_.empty();
  }

 private:
  static constexpr size_t kMaxWaiting = 4;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<PreparedRequests> q_;
  bool closed_ = false;
};

class MetricsObserver : public ServiceObserver {
 public:
  MetricsObserver(Metrics* m, LiveState* live, LedgerWriter* w) : m_(m), live_(live), w_(w) {}
  // The dashboard's live state and event stream, and the per-minute series.
  void OnCommitted(int64_t seq, const std::string& log_commit, const std::vector<LogEntry>& entries,
                   const std::map<std::string, JobRecord>& records) override {
    int64_t now = SystemNowMs();
    for (const auto& [name, n] : live_->Committed(*w_, seq, log_commit, entries, records, now)) {
      m_->CountSeries(name, n, now);
    }
  }
  void OnRequest(std::string_view kind, std::string_view outcome, double seconds) override {
    m_->CountRequest(std::string(kind), std::string(outcome));
    if (outcome == "ok") m_->ObserveTransition(std::string(kind), seconds);
    if (kind == "claim" && outcome == "ok") m_->ObserveClaim(seconds);
  }
  void OnRejectedSubmit(std::string_view source, std::string_view reason) override {
    m_->CountRejected(std::string(source), std::string(reason));
  }
  void OnBatch(size_t requests, size_t changes, double seconds) override { m_->ObserveBatch(requests, seconds); }
  void OnSubmitToClaim(double seconds) override { m_->ObserveSubmitToClaim(seconds); }
  void OnPolicyChanged() override { policy_changed = true; }
  void Log(const std::string& line) override { gatosd::Log(line); }
  bool policy_changed = false;

 private:
  Metrics* m_;
  LiveState* live_;
  LedgerWriter* w_;
};

std::atomic<bool> g_stop{false};

void UpdateCounts(Metrics* metrics, const LedgerWriter& w) {
  std::array<size_t, 6> c{};
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<size_t>(std::max<int64_t>(0, w.stats().by_state[i]));
  metrics->SetJobCounts(c);
}

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
  auto key = LoadLedgerKey(dir);
  if (!key.ok()) {
    std::cerr << "gatosd serve: " << key.status().message() << "\n";
    return 1;
  }
  WriterOptions wo;
  wo.fsync = opts.fsync;
  wo.wal = opts.wal;
  // The ledger thread goes on with the next batch while the view refs of
  // this one are written; most replies wait for them (AfterViews below).
  wo.async_views = true;
  // Offers and claim/renew replies leave once a batch is in the write-ahead
  // log; its pack and log ref are written right after (CompleteBatch below).
  wo.deferred_tail = true;
  if (const char* fault = std::getenv("GATOSD_FAULT")) {
    wo.crash_at = std::string(fault) == "crash-after-adopt" ? "after-wal" : fault;
  }
  auto t0 = Clock::now();
  auto writer = LedgerWriter::Open(dir, std::move(*key), wo);
  if (!writer.ok()) {
    std::cerr << "gatosd serve: " << writer.status().message() << "\n";
    return 1;
  }
  LedgerWriter& w = **writer;
  Log("ledger " + dir + " at log sequence " + std::to_string(w.seq()) + ": " + std::to_string(w.stats().jobs) +
      " jobs, " + std::to_string(w.live().size()) + " not finished; loaded in " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) + " ms");
  if (!opts.fsync) Log("WARNING: --no-fsync: batches are not durable; a power loss can lose acknowledged work");
  if (opts.fsync && !opts.wal) Log("--no-wal: each batch syncs its pack and log ref (six syncs) instead of a write-ahead log record");
  if (w.policy().settings.dev_mode) {
    Log("WARNING: DEV MODE: this ledger accepts UNSIGNED job commits (gatosd init --dev); never use it for real work");
  }

  Metrics metrics;
  RequestQueue queue;
  // The local socket first: pushes and the CLI work even while NATS is away.
  auto local = LocalServer::Start(LedgerSocketPath(dir), &queue);
  if (!local.ok()) {
    std::cerr << "gatosd serve: " << local.status().message() << "\n";
    return 1;
  }

  // The authorization block first: a nats-server started with an include of
  // this file (gatos nats-config, gatos up) reloads the policy's keys.
  auto sync_nats_auth = [&opts, &w] {
    if (opts.nats_auth_file.empty()) return;
    auto changed = WriteNatsAuthorizationFile(opts.nats_auth_file, w.policy());
    if (!changed.ok()) {
      Log("ERROR: NATS authorization not updated: " + changed.status().message());
      return;
    }
    if (!*changed) return;
    Log("NATS authorization written to " + opts.nats_auth_file + " from the policy");
    if (opts.nats_pid_file.empty()) return;
    Status r = ReloadNatsServer(opts.nats_pid_file);
    if (r.ok()) {
      Log("asked nats-server to reload its authorization");
    } else {
      Log("ERROR: nats-server not reloaded (" + r.message() + "): revoked keys keep their access until it is");
    }
  };
  sync_nats_auth();

  BusOptions bo;
  bo.url = opts.nats_url;
  bo.name = "gatosd " + dir;
  bo.tls_ca_file = opts.nats_ca_file;
  SetBusIdentity(&bo, w.ledger_private_key());
  bo.on_async_error = [](const std::string& what) { Log("NATS: " + what); };
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
  {
    auto anonymous = NatsAcceptsAnonymous(opts.nats_url, opts.nats_ca_file);
    if (anonymous.ok() && *anonymous) {
      if (opts.require_nats_auth) {
        std::cerr << "gatosd serve: NATS at " << opts.nats_url
                  << " lets clients in without a key (--require-nats-auth); configure it with "
                     "'gatos nats-config --ledger "
                  << dir << "'\n";
        return 1;
      }
      Log("WARNING: NATS at " + opts.nats_url +
          " lets anyone in without a key: any client on the network can read jobs, answer workers in "
          "gatosd's place or flood the ledger with requests. Run nats-server with the configuration "
          "'gatos nats-config --ledger " + dir + "' prints.");
    } else if (anonymous.ok()) {
      Log("NATS refuses anonymous clients; gatosd connected as the ledger key");
    }
  }
  Bus::StreamConfig sc;
  sc.name = rpc::kStream;
  sc.subjects = {rpc::kStreamSubjects};
  sc.max_age_ms = opts.stream_max_age_ms;
  sc.replicas = opts.stream_replicas;
  // A cluster that has just formed answers JetStream calls only once it has
  // elected a leader: wait for that as for the server itself.
  Status st = bus->EnsureStream(sc);
  for (bool said = false; st.code() == StatusCode::kUnavailable && Clock::now() < deadline;
       st = bus->EnsureStream(sc)) {
    if (!said) Log("waiting for JetStream: " + st.message());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (!st.ok()) {
    std::cerr << "gatosd serve: JetStream stream " << rpc::kStream << ": " << st.message()
              << " (nats-server must run with -js)\n";
    return 1;
  }
  // The workers' durable consumer exists from now on, so jobs offered before
  // any worker starts are delivered to the first one.
  {
    auto c = bus->PullSubscribe(rpc::WorkerConsumerConfig());
    if (!c.ok()) {
      std::cerr << "gatosd serve: consumer " << rpc::kWorkerDurable << ": " << c.status().message() << "\n";
      return 1;
    }
  }

  Publisher publisher(bus.get(), &metrics);
  LiveState live;  // what the dashboard shows without reading the ledger
  live.Seed(w);
  MetricsObserver observer(&metrics, &live, &w);
  ServiceOptions so;
  so.republish_ms = opts.republish_ms;
  JobService service(&w, so, &observer);
  service.Start();
  publisher.Enqueue(service.TakeEvents());
  UpdateCounts(&metrics, w);

  std::vector<std::unique_ptr<Bus::Subscription>> subs;
  for (const char* subject : {rpc::kClaim, rpc::kRenew, rpc::kResult, rpc::kClaimBatch, rpc::kResultBatch,
                              rpc::kCancel, rpc::kRetry, rpc::kSubmit, rpc::kStatus, rpc::kList}) {
    auto sub = bus->QueueSubscribe(subject, rpc::kQueueGroup, [&queue](Message m) {
      Request r;
      r.req = {m.subject, m.data, SystemNowMs()};
      r.nats = std::move(m);
      queue.Push(std::move(r));
    });
    if (!sub.ok()) {
      std::cerr << "gatosd serve: subscribe " << subject << ": " << sub.status().message() << "\n";
      return 1;
    }
    subs.push_back(std::move(*sub));
  }
  (void)bus->Flush(2000);  // best effort: a slow server only delays the first requests

  // The dashboard reads through a libgit2 handle of its own, on the HTTP
  // thread; it never sees the writer.
  Dashboard dashboard({dir, opts.http_token}, &live, &metrics);
  std::unique_ptr<WindowBackfill> backfill;  // the filters' window, from the newest log batches
  std::unique_ptr<HttpServer> http;
  if (!opts.http_addr.empty()) {
    backfill = std::make_unique<WindowBackfill>(dir, &live);
    auto h = HttpServer::Start(opts.http_addr, [&dashboard](const HttpRequest& r) { return dashboard.Handle(r); });
    if (!h.ok()) {
      std::cerr << "gatosd serve: " << h.status().message() << "\n";
      return 1;
    }
    http = std::move(*h);
    Log("dashboard and metrics on http://" + opts.http_addr.substr(0, opts.http_addr.rfind(':')) + ":" +
        std::to_string(http->port()) + "/ (" + (opts.http_token.empty() ? "no token" : "bearer token required") + ")");
  }

  std::thread signals([&queue, set] {
    int sig = 0;
    sigwait(&set, &sig);
    Log(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + "; shutting down");
    g_stop = true;
    queue.Close();
  });

  if (opts.stream_replicas > 1) {
    Log("stream " + std::string(rpc::kStream) + " kept with " + std::to_string(opts.stream_replicas) + " replicas");
  }
  Log("serving ledger " + dir + " on " + opts.nats_url + " (pid " + std::to_string(getpid()) + ")");
  auto next_sweep = Clock::now();
  int exit_code = 0;
  Repacker repacker(dir);
  auto next_maintenance = Clock::now() + std::chrono::seconds(5);
  auto next_views_sync = Clock::now() + std::chrono::seconds(30);
  int64_t views_synced_seq = w.seq();  // Open repaired and synced the views
  // The decoder thread authenticates the next requests (Ed25519, the bulk
  // of a request's CPU) while the ledger thread below writes this batch.
  PreparedQueue prepared;
  std::thread decoder([&] {
    while (true) {
      std::vector<Request> batch = queue.PopBatch(opts.max_batch, std::chrono::milliseconds(opts.sweep_ms));
      if (batch.empty()) {
        if (queue.closed()) break;
        continue;
      }
      std::vector<ServiceRequest> reqs;
      reqs.reserve(batch.size());
      for (auto& r : batch) reqs.push_back(std::move(r.req));
      PreparedBatch p = service.Prepare(reqs);
      if (!prepared.Push({std::move(batch), std::move(p)})) break;
    }
    prepared.Close();
  });
  while (true) {
    std::optional<PreparedRequests> item = prepared.Pop(opts.max_batch, std::chrono::milliseconds(opts.sweep_ms));
    if (item) {
      std::vector<std::string> replies = service.Finish(std::move(item->prepared));
      // The state gauges as of this batch, before anyone hears of it (they
      // were set by the sweep only: a scrape right after a reply could read
      // counts 200 ms old).
      UpdateCounts(&metrics, w);
      // Replies and events leave once the batch is durable (Finish returned:
      // its record is in the write-ahead log). Job offers and the workers'
      // claim and renew replies leave at once, before the batch's pack, log
      // ref and view refs are written (CompleteBatch, then the view thread):
      // a worker reads nothing of a job from the repository (the grant
      // carries the job), and a push of thousands of jobs would otherwise
      // keep every worker waiting while the view thread writes the refs of
      // all of them. Everything else waits for the batch's refs (the view
      // thread runs it after them), so whoever hears of a finished or new
      // job finds the refs it names.
      std::vector<ServiceEvent> events = service.TakeEvents();
      publisher.Enqueue(TakeOffers(&events));
      for (size_t i = 0; i < item->requests.size(); ++i) {
        Request& r = item->requests[i];
        if (!r.local && WorkerLeaseSubject(r.nats.subject)) SendReply(*bus, r, replies[i]);
      }
      w.CompleteBatch();
      w.AfterViews([batch = std::move(item->requests), replies = std::move(replies), events = std::move(events),
                    &bus, &publisher]() mutable {
        for (size_t i = 0; i < batch.size(); ++i) {
          if (batch[i].local) {
            batch[i].local->set_value(std::move(replies[i]));
          } else {
            SendReply(*bus, batch[i], replies[i]);
          }
        }
        publisher.Enqueue(std::move(events));
      });
      if (observer.policy_changed) {
        observer.policy_changed = false;
        sync_nats_auth();
      }
      if (Status f = w.failed(); !f.ok() && exit_code == 0) {
        // A batch is in the write-ahead log but not in the repository: stop,
        // so that the next start (a supervisor restarts us) writes it.
        Log("stopping: " + f.message());
        exit_code = 1;
        ::kill(::getpid(), SIGTERM);
      }
    }
    if (Clock::now() >= next_sweep) {
      service.Sweep();
      std::vector<ServiceEvent> events = service.TakeEvents();
      publisher.Enqueue(TakeOffers(&events));
      w.AfterViews([events = std::move(events), &publisher]() mutable { publisher.Enqueue(std::move(events)); });
      UpdateCounts(&metrics, w);
      metrics.Heartbeat(SystemNowMs());
      metrics.SetNatsConnected(bus->connected());
      next_sweep = Clock::now() + std::chrono::milliseconds(opts.sweep_ms);
    }
    if (Clock::now() >= next_maintenance) {
      if (repacker.MaybeStart()) Log("repacking the ledger's object store in the background");
      next_maintenance = Clock::now() + std::chrono::seconds(5);
    }
    // The view refs written so far are marked synced now and then, so a
    // start after a crash repairs only the batches since (seconds of them),
    // not every batch since the last clean stop.
    if (Clock::now() >= next_views_sync && w.seq() != views_synced_seq) {
      Status synced = w.SyncViews();
      if (synced.ok()) {
        views_synced_seq = w.seq();
      } else {
        Log("could not mark the ref view synced: " + synced.message());
      }
      next_views_sync = Clock::now() + std::chrono::seconds(30);
    }
    if (!item && prepared.drained()) break;
  }
  w.FlushViews();  // the last replies leave while the bus is up
  decoder.join();
  subs.clear();
  local->reset();
  publisher.Stop(std::chrono::milliseconds(2000));
  http.reset();
  (void)repacker.Wait();  // a repack in flight finishes; its result does not matter here
  Status synced = w.SyncViews();
  if (!synced.ok()) Log("could not mark the ref view synced: " + synced.message());
  signals.join();
  Log("stopped");
  return exit_code;
}

}  // namespace gatos::gatosd
