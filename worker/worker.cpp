#include "worker.h"

#include <sched.h>
#include <signal.h>
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
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "gatos/blake3.h"
#include "gatos/bus.h"
#include "gatos/bus_identity.h"
#include "gatos/clock.h"
#include "gatos/dir_layout.h"
#include "gatos/encoding.h"
#include "gatos/exec.h"
#include "gatos/file.h"
#include "gatos/grant.h"
#include "gatos/input_credentials.h"
#include "gatos/inputs.h"
#include "gatos/job_stream.h"
#include "gatos/keys.h"
#include "gatos/local_input.h"
#include "gatos/log.h"
#include "gatos/manifest.h"
#include "gatos/outbox.h"
#include "gatos/result.h"
#include "gatos/rpc.h"
#include "gatos/signed_request.h"
#include "gatos/worker/concurrency.h"
#include "gatos/worker/delivery.h"
#include "gatos/worker/job_spec.h"
#include "gatos/worker/lease_renewal.h"
#include "gatos/worker/offer_settlement.h"
#include "gatos/worker/poe_assembly.h"
#include "gatos/worker/prefetch.h"
#include "gatos/worker/result_assembly.h"
#include "gatos/worker/rpc_reply.h"
#include "gatos/worker/stop_decision.h"

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

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

std::string Platform() {
  struct utsname u;
  if (uname(&u) != 0) return "linux";
  return std::string("linux-") + u.machine;
}

// One claimed job, from its verified grant until its result is handed to
// the reporter. The runner thread owns it; `mu` guards `exec`, which the
// renewer and the cancel handler use to stop it.
struct Job {
  std::string hex;
  int64_t epoch = 0;
  VerifiedGrant grant;  // checked against the ledger key before anything ran
  std::string ws;       // the runner slot's directory: work/ (HOME) and out/
  std::atomic<bool> cancel{false};
  std::atomic<bool> stale{false};  // the lease was lost: stop, report nothing
  std::atomic<bool> halt{false};   // any Stop(): ends an input fetch too
  std::mutex mu;
  Execution* exec = nullptr;  // guarded by mu; set while the command runs
  LeaseRenewal renewal;  // the renewer's (guarded by the renewer's mutex)

  void Stop() {
    halt = true;
    std::lock_guard<std::mutex> l(mu);
    if (exec) exec->Stop();
  }
};

// A finished job's result, built and signed, on its way to the ledger.
struct Finished {
  std::shared_ptr<Job> job;  // null for a result read back from the outbox
  std::string job_hex;
  std::string commit_id;
  std::string frame;   // the result request (rpc::EncodeFrame)
  std::string status;  // the PoE status, for the log
  Poe poe;             // as reported, for a smaller failed result if this one cannot be sent
  int64_t outbox_id = 0;
};

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
      if (!keys.ok()) return Fail("--ledger-key " + opts_.ledger_key_path + ": " + keys.status().message());
      ledger_keys_ = std::move(*keys);
    }
    auto program = Blake3File("/proc/self/exe");
    if (!program.ok()) return Fail("cannot hash the worker binary: " + program.status().message());
    runner_ = {key_->public_key().WorkerId(), TaggedDigest(*program), kVersion, Platform()};

    std::error_code ec;
    // Nothing in the state (keys, mirrors of private repositories, other
    // jobs' workspaces) is ever a job's input, on this worker or another.
    fs::create_directories(opts_.state_dir, ec);
    if (Status m = MarkPrivate(opts_.state_dir); !m.ok()) return Fail("--state-dir: " + m.message());
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
      if (b.empty() || b[0] != '/' || !fs::exists(b, ec)) return Fail("--ro-bind " + b + ": not an existing absolute path");
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
        if (opts_.sandbox == ExecSpec::Sandbox::kRequire) return Fail("--sandbox require: " + sandbox.message());
        Log("WARNING: jobs run UNSANDBOXED on this host: " + sandbox.message());
      } else {
        Log(launcher_->ActiveEngine() == SandboxEngine::kNamespaces
                ? "jobs run sandboxed (namespaces set up once per slot)"
                : "jobs run in a bubblewrap sandbox");
      }
    } else {
      Log("WARNING: jobs run UNSANDBOXED (--sandbox off)");
    }

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
        return Fail("NATS refused this worker's key (" + m + "): is it in the ledger's policy (gatos policy " +
                    "allow-worker), and has nats-server reloaded its authorization?");
      }
      return Fail(m + " (is nats-server running?)");
    }
    bus_ = std::move(*bus);
    {
      auto anonymous = NatsAcceptsAnonymous(opts_.nats_url, opts_.nats_ca_file);
      if (anonymous.ok() && *anonymous) {
        Log("WARNING: NATS at " + opts_.nats_url +
            " lets anyone in without a key; this worker checks every grant and cancel against the ledger "
            "key, but anyone can read the job stream (see gatos nats-config)");
      }
    }

    Recover();
    // Drain before new work: results finished before a crash go out first.
    DeliverDue(/*all=*/true);

    auto cancel_sub = bus_->Subscribe(std::string(rpc::kCancelEventPrefix) + "*", [this](Message m) {
      std::string hex = m.subject.substr(std::strlen(rpc::kCancelEventPrefix));
      std::shared_ptr<Job> job = FindRunning(hex);
      if (!job) return;
      // Anyone on the bus can publish here: only a cancel commit the ledger
      // signed stops a job.
      auto verified = VerifyCancelNotice(m.data, ledger_keys_, hex);
      if (!verified.ok()) {
        Log("ignored an unverified cancel notice for job " + Short(hex) + ": " + verified.status().message());
        return;
      }
      Log("job " + Short(hex) + ": cancel requested; stopping it");
      job->cancel = true;
      job->Stop();  // a write to the supervisor's socket: does not block
    });
    if (!cancel_sub.ok()) return Fail(cancel_sub.status().message());

    std::unique_ptr<Bus::PullConsumer> consumer;
    for (int attempt = 0; !*stop_; ++attempt) {
      Bus::ConsumerConfig cc = rpc::WorkerConsumerConfig();
      cc.bind_only = true;  // gatosd creates it; a worker may only read from it
      auto c = bus_->PullSubscribe(cc);
      if (c.ok()) {
        consumer = std::move(*c);
        break;
      }
      if (attempt == 0) Log("waiting for the job stream (is gatosd serve running?): " + c.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    std::vector<std::thread> runners;
    for (int i = 0; i < opts_.concurrency; ++i) runners.emplace_back([this, i] { RunnerLoop(i); });
    std::thread renewer([this] { RenewLoop(); });
    std::thread reporter([this] { ReportLoop(); });
    Log("worker ed25519:" + worker_hex_ + " ready (concurrency " + std::to_string(opts_.concurrency) + ")");

    while (!*stop_ && consumer) FetchAndClaim(*consumer);

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
    {
      std::lock_guard<std::mutex> l(mu_);
      background_stop_ = true;
    }
    cv_.notify_all();
    renew_cv_.notify_all();
    report_cv_.notify_all();
    renewer.join();
    reporter.join();  // it stores and sends what the runners handed it first
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
      if (!creds.ok()) return Status(creds.status().code(), "--credentials: " + creds.status().message());
      for (const auto& w : creds->warnings()) Log("warning: --credentials: " + w);
      Log("git input credentials: " + std::to_string(creds->entries().size()) + " URL prefix(es) from " +
          opts_.credentials_path);
      io.credentials = std::move(*creds);
    }
    auto resolver = InputResolver::Create(std::move(io));
    if (!resolver.ok()) return resolver.status();
    resolver_ = std::move(*resolver);
    return OkStatus();
  }

  // Fetches the job's git inputs before it starts (the lease is renewed
  // meanwhile). Failures become the job's `failed` result: a permanent one
  // (not found, authentication refused, ref or commit missing, a refused
  // url) at once; a transient one after a few attempts with backoff, saying
  // so, so that the ledger's retry policy (PROTOCOL section 12) may run it
  // again later.
  bool ResolveInputs(const std::shared_ptr<Job>& job, const std::vector<GitInput>& inputs,
                     std::vector<ResolvedInput>* resolved, Poe* poe) {
    InputRetryPolicy policy;
    policy.deadline_ms = SystemNowMs() + std::max<int64_t>(60000, job->grant.lease.lease_ms * 4);
    if (StopBeforeItRuns(job->stale, job->cancel, shutting_down_)) job->halt = true;
    InputResolution res = resolver_->ResolveAll(inputs, policy, &job->halt, [&](const std::string& m) {
      Log("job " + Short(job->hex) + ": " + m);
    });
    *resolved = std::move(res.inputs);
    poe->inputs = PoeInputsOf(*resolved);
    if (res.status.ok()) {
      for (const ResolvedInput& r : *resolved) {
        Log("job " + Short(job->hex) + ": input " + std::to_string(r.input.index) + " at " + Short(r.commit));
      }
      return true;
    }
    if (res.status.code() == StatusCode::kAborted) return false;  // the caller sees why
    RecordInputFailure(res.status, IsTransientInputError(res.status), poe);
    Log("job " + Short(job->hex) + ": " + poe->reason);
    return false;
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

  Reply Call(const char* subject, const std::string& data, int timeout_ms) {
    auto m = bus_->Request(subject, data, timeout_ms);
    if (!m.ok()) return NoReply(m.status());
    return ReplyOf(m->data, subject);
  }

  // Sends `entries` (requests of the single form) as one batch request, or
  // as the single form when there is one; one Reply per entry, in order.
  std::vector<Reply> CallMany(const char* single, const char* batch, const std::vector<std::string>& entries,
                              int timeout_ms) {
    if (entries.size() == 1) return {Call(single, entries[0], timeout_ms)};
    auto m = bus_->Request(batch, rpc::EncodeBatch(entries), timeout_ms);
    if (!m.ok()) return std::vector<Reply>(entries.size(), NoReply(m.status()));
    return RepliesOfBatch(m->data, entries.size(), single, batch);
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
      if (!s.ok()) Log("cannot record the abandoned lease of job " + Short(l.job_hex) + ": " + s.message());
    }
  }

  // ---- fetching and claiming (the caller's thread) ----

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
      if (!outbox_full_logged_) Log("outbox holds over half its cap of undelivered results; taking no new job");
      outbox_full_logged_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    outbox_full_logged_ = false;
    // One round trip: the next offer as soon as it comes, with whatever else
    // is there up to the free slots (a plain fetch of several would wait for
    // them all).
    auto fetched = consumer.FetchAvailable(free_slots, 250);
    // Empty: nothing came, or the server refused the pull at once because
    // other workers' pulls already wait for what is there (408); a plain
    // fetch of one queues behind them instead of asking again in a loop.
    if (fetched.ok() && fetched->empty() && !*stop_) fetched = consumer.Fetch(1, 250);
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
        Log("dropping a malformed pending message (sequence " + std::to_string(m->stream_sequence()) +
            "): " + pending.status().message());
        Settle(*m, kSettleMalformedOffer);  // never redelivered: it can never be claimed
        continue;
      }
      sent.push_back(SignLeaseRequest(*key_, pending->job_hex, pending->epoch, SystemNowMs(), false));
      requests.push_back(rpc::Dump(rpc::LeaseRequestJson(sent.back())));
      offers.push_back(std::move(m));
    }
    if (requests.empty()) return;
    std::vector<Reply> replies = CallMany(rpc::kClaim, rpc::kClaimBatch, requests, 5000);
    std::vector<std::shared_ptr<Job>> granted;
    std::vector<LocalLease> leases;
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
      auto grant = VerifyGrant(r.body.value("objects", ""), r.body.value("lease_commit", ""), ledger_keys_, sent[i]);
      if (!grant.ok()) {
        // Not from the ledger (or not for this request): never run it. If the
        // ledger did grant the lease, it runs out and the job is offered again.
        Log("REFUSED a grant for job " + Short(hex) + " that the ledger did not sign: " + grant.status().message());
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
    if (!rec.ok()) Log("cannot record " + std::to_string(leases.size()) + " lease(s) locally: " + rec.message());
    // Renewed from now on, while waiting for a slot too (a prefetched job).
    for (auto& job : granted) Renewing(job, true);
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

  // A runner keeps one slot directory, <state>/jobs/slot-<n>, for job after
  // job: work/ (the job's HOME) and out/ are emptied after each job rather
  // than created and removed (on this project's VM, with ext4 without a
  // journal, every mkdir costs a scan for a free inode: a third of the
  // worker's CPU per trivial job).
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
      RunJob(job);
      Renewing(job, false);
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

  void RunJob(const std::shared_ptr<Job>& job) {
    if (DisposeOfRun(job->stale, job->cancel, false) == RunDisposition::kDiscardLeaseLost) {
      Log("job " + Short(job->hex) + ": lease lost before it started; discarded");
      Abandon(*job);
      return;
    }
    Log("claimed job " + Short(job->hex) + " (epoch " + std::to_string(job->epoch) + ")");
    Poe poe = StartPoe(runner_, job->hex, job->epoch, job->grant.lease.output_cap_bytes, SystemNowMs());
    std::vector<ResultFile> files;

    // Parsed once, by VerifyGrant (a job.yaml this worker cannot parse is no grant).
    const Manifest& manifest = job->grant.manifest;
    if (job->cancel) {
      RecordCancelled(CancelledAt::kBeforeStart, &poe);
    } else {
      std::vector<ResolvedInput> resolved;
      auto git_inputs = GitInputs(manifest);
      bool inputs_ok = true;
      if (!git_inputs.ok()) {
        // Permanent: the ledger accepted it, but this worker cannot read its inputs.
        RecordUnreadableInputs(git_inputs.status(), &poe);
        inputs_ok = false;
      } else if (!git_inputs->empty()) {
        inputs_ok = ResolveInputs(job, *git_inputs, &resolved, &poe);
        if (!inputs_ok && poe.status.empty()) {  // stopped while fetching
          switch (DisposeOfRun(job->stale, job->cancel, true)) {
            case RunDisposition::kDiscardLeaseLost:
              Log("job " + Short(job->hex) + ": lease lost while fetching its inputs; discarded");
              Abandon(*job);
              return;
            case RunDisposition::kDiscardShutdown:
              Log("job " + Short(job->hex) + ": stopped by shutdown while fetching its inputs");
              Abandon(*job);
              return;
            case RunDisposition::kReport:
              RecordCancelled(CancelledAt::kWhileFetchingInputs, &poe);
              break;
          }
        }
      }
      if (inputs_ok) RunCommand(job, resolved, &poe, &files);
      if (poe.status.empty()) return;  // abandoned (stale lease or shutdown)
    }
    FinishPoe(SystemNowMs(), &poe, &files);
    Finished f = BuildFinished(job, std::move(poe), std::move(files), job->grant.canonical, job->ws + "/out");
    {
      std::lock_guard<std::mutex> l(report_mu_);
      to_report_.push_back(std::move(f));
    }
    report_cv_.notify_one();
  }

  // Runs the job's command and fills `poe` and `files` from how it ended;
  // leaves poe->status empty when the run was abandoned (its lease was lost,
  // or the worker is shutting down).
  void RunCommand(const std::shared_ptr<Job>& job, const std::vector<ResolvedInput>& inputs, Poe* poe,
                  std::vector<ResultFile>* files) {
    JobToRun run{job->hex, job->epoch, &job->grant.manifest, &job->grant.lease, job->ws, &inputs};
    auto started = launcher_->Start(JobExecSpec(run, host_));
    if (!started.ok()) {
      RecordStartFailure(started.status(), poe);  // Permanent: the command cannot start
      return;
    }
    std::unique_ptr<Execution> exec = std::move(*started);
    {
      std::lock_guard<std::mutex> l(job->mu);
      job->exec = exec.get();
    }
    // A stop that arrived before exec was set.
    if (StopBeforeItRuns(job->stale, job->cancel, shutting_down_)) exec->Stop();
    Result<ExecResult> result = exec->Wait();
    {
      std::lock_guard<std::mutex> l(job->mu);
      job->exec = nullptr;
    }
    switch (DisposeOfRun(job->stale, job->cancel, result.ok() && result->stopped)) {
      case RunDisposition::kDiscardLeaseLost:  // StaleOwner: stop at once, discard, write nothing
        Log("job " + Short(job->hex) + ": lease lost (stale owner); its run was discarded");
        Abandon(*job);
        return;
      case RunDisposition::kDiscardShutdown:
        Log("job " + Short(job->hex) + ": stopped by shutdown; its lease will run out");
        Abandon(*job);
        return;
      case RunDisposition::kReport:
        RecordRun(result, job->cancel, poe, files);
        return;
    }
  }

  void Abandon(const Job& job) {
    Status s = outbox_->FinishLease(job.hex, job.epoch, LeaseState::kAbandoned, SystemNowMs());
    if (!s.ok()) Log("job " + Short(job.hex) + ": cannot record the abandoned lease: " + s.message());
  }

  // Empties `dir` (a real directory, not a symlink); false if anything is left.
  static bool EmptyDir(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
    std::vector<fs::path> entries;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      entries.push_back(it->path());
    }
    if (ec) return false;
    for (const auto& e : entries) {
      fs::remove_all(e, ec);  // does not follow symlinks
      if (ec) return false;
    }
    return fs::is_empty(dir, ec) && !ec;
  }

  // Leaves `slot` with empty work/ and out/ and nothing else. The job that
  // used it has no process left; whatever it left that cannot be emptied
  // (a symlink in place of a directory, a file it made unremovable) goes
  // with the whole slot directory, moved aside first.
  void ResetSlot(const std::string& slot) {
    std::error_code ec;
    bool clean = fs::is_directory(fs::symlink_status(slot, ec)) && EmptyDir(slot + "/work") &&
                 EmptyDir(slot + "/out");
    if (clean) {
      size_t n = 0;
      for (auto it = fs::directory_iterator(slot, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
      clean = !ec && n == 2;
    }
    if (clean) return;
    if (fs::exists(fs::symlink_status(slot, ec))) {
      std::string trash = slot + ".trash-" + std::to_string(SystemNowMs());
      fs::rename(slot, trash, ec);
      if (ec) {
        Log("cannot move the workspace " + slot + " aside: " + ec.message());
      } else {
        fs::remove_all(trash, ec);
        if (ec) Log("cannot remove an old workspace, " + trash + ": " + ec.message() + "; remove it by hand");
      }
    }
    fs::create_directories(slot + "/work", ec);
    fs::create_directories(slot + "/out", ec);
    if (ec) Log("cannot create the workspace " + slot + ": " + ec.message());
  }

  // Builds the result a finished job reports (result_assembly.h): a result
  // that cannot be built or would be refused for its form or size becomes a
  // `failed` one that fits. `out_dir` ("" = none) holds the job's outputs.
  Finished BuildFinished(const std::shared_ptr<Job>& job, Poe poe, std::vector<ResultFile> files,
                         const std::string& manifest_json, const std::string& out_dir) {
    ResultContext c;
    c.job_commit = job->grant.job_commit;
    c.lease_commit = job->grant.lease_commit;
    c.max_result_bytes = job->grant.lease.max_result_bytes;
    c.committer_name = "gatos worker " + opts_.name;
    c.key = &*key_;
    c.now_ms = SystemNowMs();
    AssembledResult r = AssembleResult(c, std::move(poe), std::move(files), manifest_json, out_dir);
    for (const auto& w : r.warnings) Log("job " + Short(job->hex) + ": " + w);
    if (!r.error.empty()) {  // cannot happen with empty files; never retried either way
      Log("job " + Short(job->hex) + ": cannot build even a failed result: " + r.error);
    }
    Finished f;
    f.job = job;
    f.job_hex = job->hex;
    f.status = r.poe.status;
    f.poe = std::move(r.poe);
    f.commit_id = std::move(r.commit_id);
    f.frame = std::move(r.frame);
    return f;
  }

  // ---- lease renewal (one thread for all running jobs) ----

  void Renewing(const std::shared_ptr<Job>& job, bool on) {
    {
      std::lock_guard<std::mutex> l(renew_mu_);
      if (on) {
        // From the claim until the runner is done with it (RunnerLoop);
        // a job already renewed keeps its schedule.
        if (renewing_.emplace(job->hex, job).second) job->renewal.Start(SystemNowMs());
      } else {
        renewing_.erase(job->hex);
      }
    }
    if (on) renew_cv_.notify_one();
  }

  void RenewLoop() {
    std::mt19937 rng(std::random_device{}());
    std::unique_lock<std::mutex> l(renew_mu_);
    while (!background_stop_) {
      int64_t now = SystemNowMs();
      int64_t next = now + 1000;
      std::vector<std::shared_ptr<Job>> due;
      for (auto& [hex, job] : renewing_) {
        if (job->renewal.next_ms() <= now) {
          due.push_back(job);
        } else {
          next = std::min(next, job->renewal.next_ms());
        }
      }
      if (due.empty()) {
        renew_cv_.wait_for(l, std::chrono::milliseconds(std::max<int64_t>(1, next - now)));
        continue;
      }
      l.unlock();
      for (auto& job : due) Renew(*job, rng);
      l.lock();
    }
  }

  // One renewal (lease_renewal.h); on a lost lease the job is stopped and
  // marked stale.
  void Renew(Job& job, std::mt19937& rng) {
    LeaseRequest sent = SignLeaseRequest(*key_, job.hex, job.epoch, SystemNowMs(), true);
    Reply r = Call(rpc::kRenew, rpc::Dump(rpc::LeaseRequestJson(sent)), 5000);
    if (r.ok()) {
      auto renewed = VerifyRenewal(r.body.value("objects", ""), r.body.value("lease_commit", ""), ledger_keys_, sent);
      if (!renewed.ok()) {
        // An answer the ledger did not sign counts as no answer.
        Log("job " + Short(job.hex) + ": ignored an unverified renew reply: " + renewed.status().message());
        r.error = TransitionError::kRetry;
        r.message = "unverified renew reply";
      } else {
        int64_t expires = renewed->lease.expires_ms;
        Status rec = outbox_->UpdateLeaseExpiry(job.hex, job.epoch, expires, SystemNowMs());
        if (!rec.ok()) Log("job " + Short(job.hex) + ": cannot record the renewed lease: " + rec.message());
        if (!renewed->cancel_commit.empty() && !job.cancel) {
          Log("job " + Short(job.hex) + ": cancel requested; stopping it");
          job.cancel = true;
          job.Stop();
        }
        std::lock_guard<std::mutex> l(renew_mu_);
        job.renewal.Renewed(expires, SystemNowMs());
        return;
      }
    }
    if (r.error == TransitionError::kRetry) {
      // Retryable: back off with jitter, but never past our lease.
      std::lock_guard<std::mutex> l(renew_mu_);
      if (job.renewal.Failed(SystemNowMs(), static_cast<uint32_t>(rng()))) return;
      Log("job " + Short(job.hex) + ": lease expired while the ledger was unreachable (" + r.message + ")");
    } else {
      Log("job " + Short(job.hex) + ": renew refused: " + r.message);
    }
    // StaleOwner (or terminal, or expired): stop at once.
    job.stale = true;
    job.Stop();
    std::lock_guard<std::mutex> l(renew_mu_);
    job.renewal.Lost();
  }

  // ---- reporting (one thread): group commit into the outbox, batch RPC ----

  void ReportLoop() {
    int64_t next_prune = 0;
    int64_t next_due_check = SystemNowMs() + 500;
    while (true) {
      std::vector<Finished> batch;
      {
        std::unique_lock<std::mutex> l(report_mu_);
        report_cv_.wait_for(l, std::chrono::milliseconds(std::clamp<int64_t>(next_due_check - SystemNowMs(), 1, 500)),
                            [&] { return !to_report_.empty() || background_stop_; });
        // Everything ready now goes into one transaction and one request.
        while (!to_report_.empty() && batch.size() < kMaxResultBatchEntries) {
          batch.push_back(std::move(to_report_.front()));
          to_report_.pop_front();
        }
        if (batch.empty() && background_stop_) return;
      }
      if (!batch.empty()) Report(std::move(batch));
      int64_t now = SystemNowMs();
      if (now >= next_due_check) {
        // Retries of earlier deliveries that failed (rare: read only twice a second).
        DeliverDue(false);
        next_due_check = now + 500;
      }
      if (now >= next_prune) {
        auto pruned = outbox_->Prune();
        if (!pruned.ok()) Log("cannot prune the outbox: " + pruned.status().message());
        next_prune = now + 1000;
      }
    }
  }

  void Report(std::vector<Finished> batch) {
    std::vector<Outbox::Entry> entries;
    for (Finished& f : batch) {
      if (f.frame.empty()) continue;
      entries.push_back({f.job->hex, f.job->epoch, f.commit_id, f.frame});
    }
    // Durable before it is sent: a crash from here on delivers it on restart.
    auto stored = outbox_->EnqueueResults(entries, SystemNowMs());
    if (!stored.ok()) {
      Log("cannot write " + std::to_string(entries.size()) + " result(s) to the outbox: " + stored.status().message() +
          "; their leases run out and the jobs run again");
      for (Finished& f : batch) Abandon(*f.job);
      return;
    }
    std::vector<Finished*> to_send;
    size_t k = 0;
    for (Finished& f : batch) {
      if (f.frame.empty()) {
        Abandon(*f.job);
        continue;
      }
      const Outbox::Enqueued& e = (*stored)[k++];
      f.outbox_id = e.id;
      if (e.state == OutboxItemState::kDead) {
        Log("job " + Short(f.job->hex) + ": result dead-lettered: " + e.dead_reason);
        Abandon(*f.job);
        continue;
      }
      Log("job " + Short(f.job->hex) + " " + f.status + " (result " + Short(f.commit_id) + ")");
      to_send.push_back(&f);
    }
    if (fault_ == "crash-after-enqueue") {
      Log("GATOS_WORKER_FAULT=crash-after-enqueue: killing myself before delivery");
      raise(SIGKILL);
    }
    std::vector<Finished> replacements;
    Deliver(to_send, &replacements);
    if (!replacements.empty()) Report(std::move(replacements));
  }

  // Sends results in batch requests and settles them in one outbox
  // transaction. A result that could not be sent for its size becomes a
  // dead letter; when its job is at hand (`replacements` non-null), a small
  // failed result saying why takes its place.
  void Deliver(const std::vector<Finished*>& items, std::vector<Finished>* replacements) {
    std::vector<Outbox::Delivery> settled;
    std::vector<size_t> sizes;
    for (const Finished* f : items) sizes.push_back(f->frame.size());
    for (size_t i = 0; i < items.size();) {
      const size_t start = i;
      i = NextResultBatchEnd(sizes, start);
      std::vector<std::string> frames;
      for (size_t k = start; k < i; ++k) frames.push_back(items[k]->frame);
      std::vector<Reply> replies = CallMany(rpc::kResult, rpc::kResultBatch, frames, 10000);
      for (size_t j = 0; j < replies.size(); ++j) {
        Finished& f = *items[start + j];
        const Reply& r = replies[j];
        DeliveryDecision decision = DecideDelivery(r, f.frame.size(), frames.size());
        Outbox::Delivery d;
        d.id = f.outbox_id;
        d.error_text = decision.error_text;
        switch (decision.kind) {
          case DeliveryDecision::Kind::kSendAlone:
            continue;  // the batch was too large: this one goes again on its own below
          case DeliveryDecision::Kind::kDelivered:
            d.outcome = Outbox::Delivery::Outcome::kDelivered;
            break;
          case DeliveryDecision::Kind::kRetry:
            d.outcome = Outbox::Delivery::Outcome::kRetry;
            break;
          case DeliveryDecision::Kind::kRefused:
            d.outcome = Outbox::Delivery::Outcome::kRefused;
            Log("result of job " + Short(f.job_hex) + " refused by the ledger (" +
                std::string(TransitionErrorName(r.error)) + "): " + r.message);
            break;
        }
        if (decision.replace && replacements && f.job) {
          Poe poe = UndeliverablePoe(f.poe, f.frame.size(), r.message);
          replacements->push_back(BuildFinished(f.job, std::move(poe), {{"stdout", ""}, {"stderr", ""}}, "", ""));
        }
        settled.push_back(std::move(d));
      }
      if (frames.size() > 1 && std::any_of(replies.begin(), replies.end(), [](const Reply& r) { return r.too_large; })) {
        // Too large together: send each alone.
        std::vector<Finished*> alone(items.begin() + static_cast<long>(start), items.begin() + static_cast<long>(i));
        for (Finished* f : alone) Deliver({f}, replacements);
      }
    }
    auto states = outbox_->SettleDeliveries(settled, SystemNowMs());
    if (!states.ok()) {
      // The rows stay pending: they are sent again, and the ledger answers
      // `existing` for those it already has.
      Log("cannot record " + std::to_string(settled.size()) + " delivery outcome(s): " + states.status().message());
      return;
    }
    for (size_t j = 0; j < settled.size(); ++j) {
      if ((*states)[j] == OutboxItemState::kDead && settled[j].outcome == Outbox::Delivery::Outcome::kRetry) {
        Log("result " + std::to_string(settled[j].id) + " dead-lettered after repeated failures: " +
            settled[j].error_text);
      }
    }
  }

  // Delivers the outbox's due rows (after a restart: all pending ones).
  void DeliverDue(bool all) {
    int64_t now = SystemNowMs();
    auto due = outbox_->Due(all ? INT64_MAX : now, 1000);
    if (!due.ok()) {
      Log("cannot read the outbox: " + due.status().message());
      return;
    }
    if (due->empty()) return;
    if (all) Log("delivering " + std::to_string(due->size()) + " result(s) from the outbox");
    std::vector<Finished> items(due->size());
    std::vector<Finished*> ptrs;
    for (size_t i = 0; i < due->size(); ++i) {
      items[i].frame = std::move((*due)[i].payload);
      items[i].outbox_id = (*due)[i].id;
      items[i].job_hex = (*due)[i].job_hex;
      items[i].commit_id = (*due)[i].commit_id;
      ptrs.push_back(&items[i]);
    }
    Deliver(ptrs, nullptr);
  }

  WorkerOptions opts_;
  std::atomic<bool>* stop_;
  std::optional<Ed25519PrivateKey> key_;
  std::vector<Ed25519PublicKey> ledger_keys_;
  std::string worker_hex_;
  RunnerIdentity runner_;  // every job's PoE runner fields
  JobHost host_;           // what every job is given (job_spec.h)
  std::unique_ptr<Bus> bus_;
  std::unique_ptr<Outbox> outbox_;
  int64_t outbox_soft_cap_ = 0;
  bool outbox_full_logged_ = false;
  std::unique_ptr<JobLauncher> launcher_;
  std::unique_ptr<InputResolver> resolver_;

  // Claimed jobs: mu_ guards running_, ready_, active_ and the stop flags.
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Job>> running_;
  std::deque<std::shared_ptr<Job>> ready_;  // claimed, waiting for a runner
  int active_ = 0;                          // claimed and not yet handed to the reporter
  RunTimes recent_runs_;                    // for Prefetch
  bool runners_stop_ = false;
  std::atomic<bool> background_stop_{false};
  std::atomic<bool> shutting_down_{false};

  std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  std::map<std::string, std::shared_ptr<Job>> renewing_;

  std::mutex report_mu_;
  std::condition_variable report_cv_;
  std::deque<Finished> to_report_;

  std::string fault_ = std::getenv("GATOS_WORKER_FAULT") ? std::getenv("GATOS_WORKER_FAULT") : "";
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
