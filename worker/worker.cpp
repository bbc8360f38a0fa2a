#include "worker.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/exec/exec.h"
#include "gatos/exec/input_credentials.h"
#include "gatos/exec/inputs.h"
#include "gatos/exec/local_input.h"
#include "gatos/exec/outbox.h"
#include "gatos/git/grant.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/nats/job_stream.h"
#include "gatos/sys/dir_layout.h"
#include "gatos/sys/file.h"
#include "gatos/sys/log.h"
#include "gatos/worker/concurrency.h"
#include "gatos/worker/job_spec.h"
#include "gatos/worker/offer_settlement.h"
#include "gatos/worker/poe_assembly.h"
#include "gatos/worker/prefetch.h"
#include "gatos/worker/rpc_reply.h"
#include "gatos/worker/stop_decision.h"
#include "job.h"
#include "job_runner.h"
#include "ledger_client.h"
#include "renewer.h"
#include "reporter.h"
#include "result_signer.h"
#include "runner_slot.h"

namespace gatos::worker {

int DefaultConcurrency() {
  cpu_set_t set;
  int cpus = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ConcurrencyForCpus(cpus);
}

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr char kVersion[] = "gatos-worker 0.1.0";

std::string Platform() {
  struct utsname u;
  if (uname(&u) != 0) return "linux";
  return std::string("linux-") + u.machine;
}

class Worker {
 public:
  Worker(const WorkerOptions& opts, std::atomic<bool>* stop) : opts_(opts), stop_(stop) {}

  int Run() {
    auto key = ReadPrivateKeyFile(opts_.key_path);
    if (!key.ok()) return Fail("--key: " + key.status().message());
    key_.emplace(std::move(*key));
    worker_hex_ = key_->public_key().Hex();
    if (opts_.name.empty()) opts_.name = "worker-" + worker_hex_.substr(0, 8);
    SetLogProgram("gatos-worker", opts_.name);
    {
      std::ifstream in(opts_.ledger_key_path);
      if (!in) return Fail("--ledger-key " + opts_.ledger_key_path + ": cannot read the file");
      std::stringstream ss;
      ss << in.rdbuf();
      auto keys = ParseLedgerKeys(ss.str());
      if (!keys.ok())
        return Fail("--ledger-key " + opts_.ledger_key_path + ": " + keys.status().message());
      ledger_keys_ = std::move(*keys);
    }
    auto program = Blake3File("/proc/self/exe");
    if (!program.ok()) return Fail("cannot hash the worker binary: " + program.status().message());
    identity_ = {key_->public_key().WorkerId(), TaggedDigest(*program), kVersion, Platform()};

    std::error_code ec;
    // Nothing in the state (keys, mirrors of private repositories, other
    // jobs' workspaces) is ever a job's input, on this worker or another.
    fs::create_directories(opts_.state_dir, ec);
    if (Status m = MarkPrivate(opts_.state_dir); !m.ok())
      return Fail("--state-dir: " + m.message());
    // Workspaces of a previous run (no job of it runs any more: its
    // supervisors killed every job when it died); runners start on empty slots.
    fs::remove_all(opts_.state_dir + "/jobs", ec);
    fs::create_directories(opts_.state_dir + "/jobs", ec);
    if (ec) return Fail("--state-dir " + opts_.state_dir + ": " + ec.message());
    {
      // Each slot's workspace in a block group of its own (dir_layout.h):
      // what jobs create and delete there stays out of everyone's way.
      std::string why;
      (void)SpreadSubdirectories(opts_.state_dir + "/jobs", &why);
    }
    host_.scan_state = fs::absolute(opts_.state_dir + "/scan", ec).lexically_normal().string();
    fs::create_directories(host_.scan_state, ec);
    if (ec) return Fail("--state-dir " + opts_.state_dir + ": " + ec.message());
    host_.self_dir = fs::canonical("/proc/self/exe", ec).parent_path().string();
    for (const auto& b : opts_.ro_binds) {
      if (b.empty() || b[0] != '/' || !fs::exists(b, ec))
        return Fail("--ro-bind " + b + ": not an existing absolute path");
    }
    host_.ro_binds = opts_.ro_binds;
    host_.kill_grace_ms = opts_.kill_grace_ms;
    host_.sandbox = opts_.sandbox;
    OutboxOptions oo;
    OutboxKeepSetting keep = ResolveOutboxKeep(std::getenv("GATOS_OUTBOX_KEEP"), nullptr);
    for (const auto& w : keep.warnings) Log("warning: " + w);
    oo.keep_delivered = keep.keep;
    oo.prune_enabled = keep.enabled;
    auto outbox = Outbox::Open(opts_.state_dir, oo);
    if (!outbox.ok()) return Fail(outbox.status().message());
    outbox_ = std::move(*outbox);
    outbox_soft_cap_ = oo.max_pending_bytes / 2;

    LauncherOptions lo;
    if (opts_.sandbox == ExecSpec::Sandbox::kOff) lo.probe_in_create = false;
    auto launcher = JobLauncher::Create(lo);
    if (!launcher.ok()) return Fail(launcher.status().message());
    launcher_ = std::move(*launcher);
    if (opts_.sandbox != ExecSpec::Sandbox::kOff) {
      Status sandbox = launcher_->SandboxStatus();
      if (!sandbox.ok()) {
        if (opts_.sandbox == ExecSpec::Sandbox::kRequire)
          return Fail("--sandbox require: " + sandbox.message());
        Log("WARNING: jobs run UNSANDBOXED on this host: " + sandbox.message());
      } else {
        Log(launcher_->ActiveEngine() == SandboxEngine::kNamespaces
                ? "jobs run sandboxed (namespaces set up once per slot)"
                : "jobs run in a bubblewrap sandbox");
      }
    } else {
      Log("WARNING: jobs run UNSANDBOXED (--sandbox off)");
    }
    LogJobLimits();

    if (Status s = CreateInputResolver(); !s.ok()) return Fail(s.message());

    // Connected as the worker's own key: the server lets it claim and report,
    // and nothing else; replies come back on an inbox only it can read.
    BusOptions bo;
    bo.url = opts_.nats_url;
    bo.name = "gatos-worker " + opts_.name;
    bo.tls_ca_file = opts_.nats_ca_file;
    SetBusIdentity(&bo, *key_);
    bo.on_async_error = [this](const std::string& what) { Log("NATS: " + what); };
    auto bus = Bus::Connect(bo);
    if (!bus.ok()) {
      const std::string m = bus.status().message();
      if (m.find("uthorization") != std::string::npos) {
        return Fail("NATS refused this worker's key (" + m +
                    "): is it in the ledger's policy (gatos policy " +
                    "allow-worker), and has nats-server reloaded its authorization?");
      }
      return Fail(m + " (is nats-server running?)");
    }
    bus_ = std::move(*bus);
    {
      auto anonymous = NatsAcceptsAnonymous(opts_.nats_url, opts_.nats_ca_file);
      if (anonymous.ok() && *anonymous) {
        Log("WARNING: NATS at " + opts_.nats_url +
            " lets anyone in without a key; this worker checks every grant and cancel against the "
            "ledger "
            "key, but anyone can read the job stream (see gatos nats-config)");
      }
    }

    ledger_.emplace(bus_.get());
    signer_.emplace(&*key_, opts_.name);
    renewer_.emplace(&*ledger_, &*key_, &ledger_keys_, outbox_.get());
    reporter_.emplace(&*ledger_, outbox_.get(), &*signer_);
    if (opts_.live_output) live_.emplace(bus_.get(), LiveLimits{});
    runner_.emplace(JobRunner::Parts{launcher_.get(), resolver_.get(), &host_, &identity_,
                                     &*signer_, &*reporter_, outbox_.get(), &shutting_down_,
                                     live_ ? &*live_ : nullptr});

    Recover();
    // Drain before new work: results finished before a crash go out first.
    reporter_->DeliverDue(/*all=*/true);

    auto cancel_sub =
        bus_->Subscribe(std::string(rpc::kCancelEventPrefix) + "*", [this](Message m) {
          std::string hex = m.subject.substr(std::strlen(rpc::kCancelEventPrefix));
          std::shared_ptr<Job> job = FindRunning(hex);
          if (!job) return;
          // Anyone on the bus can publish here: only a cancel commit the ledger
          // signed stops a job.
          auto verified = VerifyCancelNotice(m.data, ledger_keys_, hex);
          if (!verified.ok()) {
            Log("ignored an unverified cancel notice for job " + Short(hex) + ": " +
                verified.status().message());
            return;
          }
          Log("job " + Short(hex) + ": cancel requested; stopping it");
          job->cancel = true;
          job->Stop();  // a write to the supervisor's socket: does not block
        });
    if (!cancel_sub.ok()) return Fail(cancel_sub.status().message());

    for (const std::string& pool : opts_.pools) consumers_.push_back({pool, nullptr, 0});
    for (int attempt = 0; !*stop_; ++attempt) {
      // Said while waiting too: a pool's consumer appears with its first
      // offer, and until then `gatos status` should know this worker serves it.
      Heartbeat();
      Status bound = BindConsumers();
      if (bound.ok()) break;
      if (attempt == 0) Log("waiting for the job stream (is gatosd serve running?): " + bound.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    std::vector<std::thread> runners;
    for (int i = 0; i < opts_.concurrency; ++i) runners.emplace_back([this, i] { RunnerLoop(i); });
    renewer_->Start();
    reporter_->Start();
    if (live_) live_->Start();
    Log("worker ed25519:" + worker_hex_ + " ready (concurrency " +
        std::to_string(opts_.concurrency) + ")");

    while (!*stop_) {
      Heartbeat();
      Bus::PullConsumer* consumer = NextConsumer();
      if (!consumer) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      FetchAndClaim(*consumer);
    }

    // Shutdown: no new jobs; running ones get a grace period, then stop
    // (their leases run out and another worker takes them over).
    Log("stopping: waiting for " + std::to_string(Active()) + " running job(s)");
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(kShutdownGraceMs), [&] { return active_ == 0; });
      shutting_down_ = true;
      for (auto& [hex, job] : running_) job->Stop();
      runners_stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : runners) t.join();
    if (live_) live_->Stop();
    renewer_->Stop();
    reporter_->Stop();  // it stores and sends what the runners handed it first
    Log("stopped");
    return 0;
  }

 private:
  int Fail(const std::string& m) {
    // Before SetLogProgram the line still names the program (the binary's name).
    Log(m);
    return 1;
  }

  // Git inputs are fetched into <state>/inputs with the credentials file
  // named by --credentials (read now; the secrets stay in their files).
  Status CreateInputResolver() {
    InputResolverOptions io;
    std::error_code ec;
    io.cache_dir = fs::absolute(opts_.state_dir + "/inputs", ec).lexically_normal().string();
    io.local_roots = opts_.local_inputs;
    io.local_network_url_prefixes = opts_.allow_input_urls;
    io.log = [this](const std::string& m) { Log(m); };
    // Never an input: the worker's own state (keys, outbox, other jobs'
    // private mirrors) and its key file.
    io.forbidden_roots = {fs::absolute(opts_.state_dir, ec).lexically_normal().string(),
                          fs::absolute(opts_.key_path, ec).lexically_normal().string()};
    if (!opts_.credentials_path.empty()) {
      auto creds = LoadInputCredentialsFile(opts_.credentials_path);
      if (!creds.ok())
        return Status(creds.status().code(), "--credentials: " + creds.status().message());
      for (const auto& w : creds->warnings()) Log("warning: --credentials: " + w);
      Log("git input credentials: " + std::to_string(creds->entries().size()) +
          " URL prefix(es) from " + opts_.credentials_path);
      io.credentials = std::move(*creds);
    }
    auto resolver = InputResolver::Create(std::move(io));
    if (!resolver.ok()) return resolver.status();
    resolver_ = std::move(*resolver);
    return OkStatus();
  }

  int Active() {
    std::lock_guard<std::mutex> l(mu_);
    return active_;
  }

  std::shared_ptr<Job> FindRunning(const std::string& hex) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = running_.find(hex);
    return it == running_.end() ? nullptr : it->second;
  }

  void Recover() {
    auto held = outbox_->HeldLeases();
    if (!held.ok()) {
      Log("cannot read local leases: " + held.status().message());
      return;
    }
    for (const LocalLease& l : *held) {
      // The job's process tree died with the previous run; its lease runs out
      // on the ledger and the job is taken over (by us or another worker).
      Log("recovered lease of job " + Short(l.job_hex) + " (epoch " + std::to_string(l.epoch) +
          ") from a previous run: abandoned");
      Status s = outbox_->FinishLease(l.job_hex, l.epoch, LeaseState::kAbandoned, SystemNowMs());
      if (!s.ok())
        Log("cannot record the abandoned lease of job " + Short(l.job_hex) + ": " + s.message());
    }
  }

  // ---- fetching and claiming (the caller's thread) ----

  // The consumers of the worker's pools. gatosd creates a pool's consumer
  // with the pool's first offer, so one that is not there yet is looked for
  // again every few seconds. OK once at least one is bound.
  struct PoolConsumer {
    std::string pool;
    std::unique_ptr<Bus::PullConsumer> consumer;
    int64_t next_try_ms = 0;
  };
  Status BindConsumers() {
    Status last = NotFoundError("no pool");
    bool any = false;
    const int64_t now = SystemNowMs();
    for (auto& pc : consumers_) {
      if (pc.consumer) {
        any = true;
        continue;
      }
      if (now < pc.next_try_ms) continue;
      Bus::ConsumerConfig cc = rpc::WorkerConsumerConfig(pc.pool);
      cc.bind_only = true;  // gatosd creates it; a worker may only read from it
      auto c = bus_->PullSubscribe(cc);
      if (c.ok()) {
        pc.consumer = std::move(*c);
        any = true;
        if (pc.pool != kDefaultPool) Log("taking jobs of pool " + pc.pool);
      } else {
        pc.next_try_ms = now + 2000;
        last = c.status();
      }
    }
    return any ? OkStatus() : last;
  }
  // Round-robin over the bound consumers.
  Bus::PullConsumer* NextConsumer() {
    (void)BindConsumers();
    for (size_t i = 0; i < consumers_.size(); ++i) {
      PoolConsumer& pc = consumers_[next_consumer_++ % consumers_.size()];
      if (pc.consumer) return pc.consumer.get();
    }
    return nullptr;
  }
  // Tells gatosd which pools this worker serves (status: "no worker serves
  // pool ..."), every few seconds. Best effort.
  void Heartbeat() {
    const int64_t now = SystemNowMs();
    if (now < next_heartbeat_ms_) return;
    next_heartbeat_ms_ = now + 5000;
    (void)bus_->Publish(rpc::kWorkerHeartbeat, rpc::EncodeHeartbeat({worker_hex_, opts_.pools}));
  }

  void FetchAndClaim(Bus::PullConsumer& consumer) {
    int free_slots;
    {
      std::unique_lock<std::mutex> l(mu_);
      const int limit = opts_.concurrency + Prefetch();
      cv_.wait_for(l, std::chrono::milliseconds(200), [&] { return active_ < limit || *stop_; });
      free_slots = limit - active_;
    }
    if (free_slots <= 0 || *stop_) return;
    if (outbox_->PendingBytes() > outbox_soft_cap_) {
      // Results cannot be stored without bound: take no new job until the
      // ledger has taken some of them.
      if (!outbox_full_logged_)
        Log("outbox holds over half its cap of undelivered results; taking no new job");
      outbox_full_logged_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    outbox_full_logged_ = false;
    // One round trip: the next offer as soon as it comes, with whatever else
    // is there up to the free slots (a plain fetch of several would wait for
    // them all).
    // Several pools: a shorter wait on each, so that none waits for another.
    const int wait_ms = consumers_.size() > 1 ? 50 : 250;
    auto fetched = consumer.FetchAvailable(free_slots, wait_ms);
    // Empty: nothing came, or the server refused the pull at once because
    // other workers' pulls already wait for what is there (408); a plain
    // fetch of one queues behind them instead of asking again in a loop.
    if (fetched.ok() && fetched->empty() && !*stop_) fetched = consumer.Fetch(1, wait_ms);
    if (!fetched.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    std::vector<std::unique_ptr<Bus::JsMessage>> msgs = std::move(*fetched);
    if (msgs.empty()) return;
    Claim(std::move(msgs));
  }

  void Claim(std::vector<std::unique_ptr<Bus::JsMessage>> msgs) {
    std::vector<std::unique_ptr<Bus::JsMessage>> offers;
    std::vector<LeaseRequest> sent;
    std::vector<std::string> requests;
    for (auto& m : msgs) {
      auto pending = rpc::DecodePending(m->data());
      if (!pending.ok()) {
        Log("dropping a malformed pending message (sequence " +
            std::to_string(m->stream_sequence()) + "): " + pending.status().message());
        Settle(*m, kSettleMalformedOffer);  // never redelivered: it can never be claimed
        continue;
      }
      sent.push_back(
          SignLeaseRequest(*key_, pending->job_hex, pending->epoch, SystemNowMs(), false));
      requests.push_back(rpc::Dump(rpc::LeaseRequestJson(sent.back())));
      offers.push_back(std::move(m));
    }
    if (requests.empty()) return;
    std::vector<Reply> replies = ledger_->CallMany(rpc::kClaim, rpc::kClaimBatch, requests, 5000);
    std::vector<std::shared_ptr<Job>> granted;
    std::vector<LocalLease> leases;
    // One ledger signature covers every grant of the reply: checked once,
    // before any of them is acted on.
    std::vector<const nlohmann::json*> ok_bodies;
    for (const Reply& r : replies) {
      if (r.ok()) ok_bodies.push_back(&r.body);
    }
    auto signed_grants = VerifyReplyGrants(ok_bodies, ledger_keys_);
    size_t ok_index = 0;
    for (size_t i = 0; i < replies.size(); ++i) {
      Reply& r = replies[i];
      Bus::JsMessage& m = *offers[i];
      const std::string& hex = sent[i].job_hex;
      if (!r.ok()) {
        OfferSettlement settle = SettleRefusedClaim(r.error);
        if (settle.log) Log("claim of job " + Short(hex) + " refused: " + r.message);
        Settle(m, settle);
        continue;
      }
      const size_t k = ok_index++;
      auto grant = signed_grants.ok()
                       ? VerifyGrant(ReplyObjects(r.body), (*signed_grants)[k], sent[i])
                       : Result<VerifiedGrant>(signed_grants.status());
      if (!grant.ok()) {
        // Not from the ledger (or not for this request): never run it. If the
        // ledger did grant the lease, it runs out and the job is offered again.
        Log("REFUSED a grant for job " + Short(hex) +
            " that the ledger did not sign: " + grant.status().message());
        Settle(m, kSettleUnverifiedGrant);
        continue;
      }
      Settle(m, OfferSettlement{OfferSettlement::Verb::kAck, 0, false});
      auto job = std::make_shared<Job>();
      job->hex = hex;
      job->epoch = grant->lease.epoch;
      job->renewal = LeaseRenewal(grant->lease.lease_ms, grant->lease.expires_ms);
      job->grant = std::move(*grant);
      leases.push_back({hex, job->epoch, job->grant.lease.expires_ms, "", LeaseState::kRunning, 0});
      granted.push_back(std::move(job));
    }
    if (granted.empty()) return;
    // One transaction for every lease of the batch: after a crash, recovery
    // knows which leases died with this process.
    Status rec = outbox_->RecordLeases(leases, SystemNowMs());
    if (!rec.ok())
      Log("cannot record " + std::to_string(leases.size()) + " lease(s) locally: " + rec.message());
    // Renewed from now on, while waiting for a slot too (a prefetched job).
    for (auto& job : granted) renewer_->Add(job);
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& job : granted) {
        ++active_;
        running_[job->hex] = job;
        ready_.push_back(job);
      }
    }
    cv_.notify_all();
  }

  // Jobs claimed beyond the free slots (prefetch.h). Caller holds mu_.
  std::vector<PoolConsumer> consumers_;  // the fetching thread's
  size_t next_consumer_ = 0;
  int64_t next_heartbeat_ms_ = 0;

  int Prefetch() const { return PrefetchCount(opts_.concurrency, recent_runs_); }
  void RecordRunTime(int64_t ms) {
    std::lock_guard<std::mutex> l(mu_);
    recent_runs_.Record(ms);
  }

  // Acks are sent without waiting; one that is lost means a redelivery, which
  // the claim then answers (lost race or terminal), so a failure only costs time.
  void Settle(Bus::JsMessage& m, const OfferSettlement& settle) {
    Status s = settle.verb == OfferSettlement::Verb::kAck    ? m.Ack()
               : settle.verb == OfferSettlement::Verb::kTerm ? m.Term()
                                                             : m.Nak(settle.delay_ms);
    if (!s.ok()) Log("settling a job offer failed (it is redelivered later): " + s.message());
  }

  // ---- running (one runner thread per concurrent job) ----

  // Runner `n` runs job after job in its slot (runner_slot.h), <state>/jobs/slot-<n>.
  void RunnerLoop(int n) {
    const std::string slot = opts_.state_dir + "/jobs/slot-" + std::to_string(n);
    ResetSlot(slot);
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return !ready_.empty() || runners_stop_; });
        if (ready_.empty()) return;
        job = std::move(ready_.front());
        ready_.pop_front();
      }
      job->ws = slot;
      int64_t started = SystemNowMs();
      runner_->Run(job);
      renewer_->Remove(*job);
      RecordRunTime(SystemNowMs() - started);
      ResetSlot(slot);
      {
        std::lock_guard<std::mutex> l(mu_);
        running_.erase(job->hex);
        --active_;
      }
      cv_.notify_all();
    }
  }

  WorkerOptions opts_;
  std::atomic<bool>* stop_;
  std::optional<Ed25519PrivateKey> key_;
  std::vector<Ed25519PublicKey> ledger_keys_;
  std::string worker_hex_;
  RunnerIdentity identity_;  // every job's PoE runner fields
  JobHost host_;             // what every job is given (job_spec.h)

  // Finds the cgroup hierarchy for job limits and says, loudly, what this
  // worker cannot enforce (docs/worker-execution.md, "Resource limits").
  void LogJobLimits() {
    CgroupHost::RemoveStale("gatos-worker");  // of workers that were killed
    host_.cgroups = CgroupHost::Open("gatos-worker-" + std::to_string(getpid()));
    const CgroupHost& c = *host_.cgroups;
    if (c.version() == CgroupHost::Version::kNone) {
      Log("WARNING: job memory, process and CPU limits are NOT enforced: " + c.Describe());
    } else if (!c.problems().empty()) {
      Log("WARNING: job limits partly enforced: " + c.Describe());
    } else {
      Log("job limits: a cgroup per job, " + c.Describe());
    }
    if (opts_.sandbox == ExecSpec::Sandbox::kOff || !launcher_->SandboxStatus().ok()) {
      Log("WARNING: unsandboxed jobs: a disk limit bounds each file (RLIMIT_FSIZE), not what "
          "all of a job's files hold together");
    }
  }
  std::unique_ptr<Bus> bus_;
  std::unique_ptr<Outbox> outbox_;
  int64_t outbox_soft_cap_ = 0;
  bool outbox_full_logged_ = false;
  std::unique_ptr<JobLauncher> launcher_;
  std::unique_ptr<InputResolver> resolver_;
  // Made once the bus and the outbox are open; the renewer and the reporter
  // are stopped (joined) before anything above them is destroyed.
  std::optional<LedgerClient> ledger_;
  std::optional<ResultSigner> signer_;
  std::optional<Reporter> reporter_;
  std::optional<Renewer> renewer_;
  std::optional<LivePublisher> live_;
  std::optional<JobRunner> runner_;

  // Claimed jobs: mu_ guards running_, ready_, active_ and the stop flags.
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Job>> running_;
  std::deque<std::shared_ptr<Job>> ready_;  // claimed, waiting for a runner
  int active_ = 0;                          // claimed and not yet handed to the reporter
  RunTimes recent_runs_;                    // for Prefetch
  bool runners_stop_ = false;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace

int RunWorker(const WorkerOptions& options, std::atomic<bool>* stop) {
  Worker w(options, stop);
  return w.Run();
}

int PrintStatus(const std::string& state_dir, bool as_json) {
  struct stat st;
  if (::stat(state_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::cerr << "gatos-worker status: no worker state in " << state_dir << "\n";
    return 1;
  }
  auto outbox = Outbox::Open(state_dir);
  if (!outbox.ok()) {
    std::cerr << "gatos-worker status: " << outbox.status().message() << "\n";
    return 1;
  }
  auto h = (*outbox)->Health(SystemNowMs());
  if (!h.ok()) {
    std::cerr << "gatos-worker status: " << h.status().message() << "\n";
    return 1;
  }
  std::cout << (as_json ? OutboxHealthJson(*h) + "\n" : OutboxHealthText(*h));
  return 0;
}

}  // namespace gatos::worker
