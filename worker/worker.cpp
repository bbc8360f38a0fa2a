#include "worker.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <cstdio>
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

#include "gatos/attest.h"
#include "gatos/blake3.h"
#include "gatos/bus.h"
#include "gatos/canonical_json.h"
#include "gatos/encoding.h"
#include "gatos/exec.h"
#include "gatos/clock.h"
#include "gatos/grant.h"
#include "gatos/log.h"
#include "gatos/signed_request.h"
#include "gatos/keys.h"
#include "gatos/manifest.h"
#include "gatos/outbox.h"
#include "gatos/result.h"
#include "gatos/rpc.h"
#include "gatos/job_stream.h"

namespace gatos::worker {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr char kVersion[] = "gatos-worker 0.1.0";

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

std::string Platform() {
  struct utsname u;
  if (uname(&u) != 0) return "linux";
  return std::string("linux-") + u.machine;
}

// Result of one RPC call, with transport failures folded into kRetry so the
// caller branches on the three classes only (PROTOCOL section 4).
struct Reply {
  TransitionError error = TransitionError::kNone;
  std::string message;
  json body;
  bool ok() const { return error == TransitionError::kNone; }
};

struct RunningJob {
  std::string job_hex;
  int64_t epoch = 0;
  VerifiedGrant grant;  // checked against the ledger key before anything ran
  std::atomic<bool> cancel{false};
  std::mutex mu;
  Execution* exec = nullptr;  // guarded by mu
  std::condition_variable cv;
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
    program_hash_ = TaggedDigest(*program);

    std::error_code ec;
    fs::create_directories(opts_.state_dir + "/jobs", ec);
    if (ec) return Fail("--state-dir " + opts_.state_dir + ": " + ec.message());
    scan_state_ = fs::absolute(opts_.state_dir + "/scan", ec).lexically_normal().string();
    fs::create_directories(scan_state_, ec);
    self_dir_ = fs::canonical("/proc/self/exe", ec).parent_path().string();
    for (const auto& b : opts_.ro_binds) {
      if (b.empty() || b[0] != '/' || !fs::exists(b, ec)) return Fail("--ro-bind " + b + ": not an existing absolute path");
    }
    OutboxOptions oo;
    OutboxKeepSetting keep = ResolveOutboxKeep(std::getenv("GATOS_OUTBOX_KEEP"), nullptr);
    for (const auto& w : keep.warnings) Log("warning: " + w);
    oo.keep_delivered = keep.keep;
    oo.prune_enabled = keep.enabled;
    auto outbox = Outbox::Open(opts_.state_dir, oo);
    if (!outbox.ok()) return Fail(outbox.status().message());
    outbox_ = std::move(*outbox);

    if (opts_.sandbox != ExecSpec::Sandbox::kOff) {
      Status probe = ProbeSandbox();
      if (!probe.ok()) {
        if (opts_.sandbox == ExecSpec::Sandbox::kRequire) return Fail("--sandbox require: " + probe.message());
        Log("WARNING: jobs run UNSANDBOXED on this host: " + probe.message());
      } else {
        Log("jobs run in a bubblewrap sandbox");
      }
    } else {
      Log("WARNING: jobs run UNSANDBOXED (--sandbox off)");
    }

    BusOptions bo;
    bo.url = opts_.nats_url;
    bo.name = "gatos-worker " + opts_.name;
    auto bus = Bus::Connect(bo);
    if (!bus.ok()) return Fail(bus.status().message() + " (is nats-server running?)");
    bus_ = std::move(*bus);

    Recover();
    // Drain before new work: results finished before a crash go out first.
    DrainOnce();

    auto cancel_sub = bus_->Subscribe(std::string(rpc::kCancelEventPrefix) + "*", [this](Message m) {
      std::string hex = m.subject.substr(std::strlen(rpc::kCancelEventPrefix));
      {
        std::lock_guard<std::mutex> l(running_mu_);
        if (!running_.count(hex)) return;
      }
      // Anyone on the bus can publish here: only a cancel commit the ledger
      // signed stops a job.
      auto verified = VerifyCancelNotice(m.data, ledger_keys_, hex);
      if (!verified.ok()) {
        Log("ignored an unverified cancel notice for job " + Short(hex) + ": " + verified.status().message());
        return;
      }
      std::lock_guard<std::mutex> l(running_mu_);
      auto it = running_.find(hex);
      if (it == running_.end()) return;
      it->second->cancel = true;
      it->second->cv.notify_all();
    });
    if (!cancel_sub.ok()) return Fail(cancel_sub.status().message());

    std::unique_ptr<Bus::PullConsumer> consumer;
    for (int attempt = 0; !*stop_; ++attempt) {
      auto c = bus_->PullSubscribe(rpc::WorkerConsumerConfig());
      if (c.ok()) {
        consumer = std::move(*c);
        break;
      }
      if (attempt == 0) Log("waiting for the job stream (is gatosd serve running?): " + c.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    std::thread delivery([this] { DeliveryLoop(); });
    Log("worker ed25519:" + worker_hex_ + " ready (concurrency " + std::to_string(opts_.concurrency) + ")");

    while (!*stop_ && consumer) {
      int free_slots;
      {
        std::unique_lock<std::mutex> l(running_mu_);
        slots_cv_.wait_for(l, std::chrono::milliseconds(200),
                           [&] { return active_ < opts_.concurrency || *stop_; });
        free_slots = opts_.concurrency - active_;
      }
      if (free_slots <= 0 || *stop_) continue;
      auto msgs = consumer->Fetch(free_slots, 250);
      if (!msgs.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      for (auto& m : *msgs) HandlePending(*m);
    }

    // Shutdown: no new jobs; running ones get a grace period, then stop
    // (their leases run out and another worker takes them over).
    Log("stopping: waiting for " + std::to_string(Active()) + " running job(s)");
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Active() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      std::lock_guard<std::mutex> l(running_mu_);
      for (auto& [hex, job] : running_) {
        shutting_down_ = true;
        std::lock_guard<std::mutex> jl(job->mu);
        if (job->exec) job->exec->Stop();
        job->cv.notify_all();
      }
      shutting_down_ = true;
    }
    while (Active() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    delivery_stop_ = true;
    delivery_cv_.notify_all();
    delivery.join();
    Log("stopped");
    return 0;
  }

 private:
  int Fail(const std::string& m) {
    std::cerr << "gatos-worker: " << m << "\n";
    return 1;
  }

  int Active() {
    std::lock_guard<std::mutex> l(running_mu_);
    return active_;
  }

  Reply Call(const char* subject, const std::string& data, int timeout_ms) {
    Reply r;
    auto m = bus_->Request(subject, data, timeout_ms);
    if (!m.ok()) {
      r.error = TransitionError::kRetry;
      r.message = m.status().message();
      return r;
    }
    rpc::ReplyError err;
    auto body = rpc::ParseReply(m->data, subject, &err);
    r.error = err.error;
    r.message = err.message;
    if (body.ok()) r.body = std::move(*body);
    return r;
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
      (void)outbox_->FinishLease(l.job_hex, l.epoch, LeaseState::kAbandoned, SystemNowMs());
      std::error_code ec;
      if (!l.workspace.empty()) fs::remove_all(l.workspace, ec);
    }
  }

  void HandlePending(Bus::JsMessage& m) {
    auto pending = rpc::DecodePending(m.data());
    if (!pending.ok()) {
      Log("dropping a malformed pending message (sequence " + std::to_string(m.stream_sequence()) + "): " +
          pending.status().message());
      (void)m.Term();  // never redelivered: it can never be claimed
      return;
    }
    const std::string job = pending->job_hex;
    LeaseRequest sent = SignLeaseRequest(*key_, job, pending->epoch, SystemNowMs(), false);
    Reply r = Call(rpc::kClaim, rpc::Dump(rpc::LeaseRequestJson(sent)), 5000);
    if (!r.ok()) {
      switch (r.error) {
        case TransitionError::kLostRace:
        case TransitionError::kTerminal:
        case TransitionError::kCancelled:
          (void)m.Ack();  // normal: someone else has it, or it is over
          return;
        case TransitionError::kUnauthorized:
          Log("claim of job " + Short(job) + " refused: " + r.message);
          (void)m.Nak(5000);
          return;
        case TransitionError::kInvalid:
        case TransitionError::kInternal:
          Log("claim of job " + Short(job) + " refused: " + r.message);
          (void)m.Term();
          return;
        default:
          (void)m.Nak(500);
          return;
      }
    }
    auto grant = VerifyGrant(r.body.value("objects", ""), r.body.value("lease_commit", ""), ledger_keys_, sent);
    if (!grant.ok()) {
      // Not from the ledger (or not for this request): never run it. If the
      // ledger did grant the lease, it runs out and the job is offered again.
      Log("REFUSED a grant for job " + Short(job) + " that the ledger did not sign: " + grant.status().message());
      (void)m.Nak(5000);
      return;
    }
    (void)m.Ack();
    auto job_state = std::make_shared<RunningJob>();
    job_state->job_hex = job;
    job_state->epoch = grant->lease.epoch;
    job_state->grant = std::move(*grant);
    {
      std::lock_guard<std::mutex> l(running_mu_);
      ++active_;
      running_[job] = job_state;
    }
    std::thread([this, job_state] {
      RunJob(*job_state);
      std::lock_guard<std::mutex> l(running_mu_);
      running_.erase(job_state->job_hex);
      --active_;
      slots_cv_.notify_all();
    }).detach();
  }

  void RunJob(RunningJob& job) {
    const std::string& hex = job.job_hex;
    int64_t epoch = job.epoch;
    const LeaseCommitInfo& lease = job.grant.lease;
    int64_t expires_ms = lease.expires_ms;
    int64_t lease_ms = lease.lease_ms;
    std::string ws = opts_.state_dir + "/jobs/" + hex + "-e" + std::to_string(epoch);
    Log("claimed job " + Short(hex) + " (epoch " + std::to_string(epoch) + ")");
    (void)outbox_->RecordLease(hex, epoch, expires_ms, ws, SystemNowMs());

    Poe poe;
    poe.job_id = "blake3:" + hex;
    poe.worker_id = key_->public_key().WorkerId();
    poe.lease_epoch = epoch;
    poe.runner_program = program_hash_;
    poe.runner_version = kVersion;
    poe.runner_platform = Platform();
    poe.stdout_cap = lease.output_cap_bytes;
    poe.started_at = FormatRfc3339Millis(SystemNowMs());
    std::vector<ResultFile> files;
    bool stale = false;

    auto manifest = ParseManifest(job.grant.job_yaml, "job.yaml");
    std::unique_ptr<Execution> exec;
    if (!manifest.ok()) {
      poe.status = "failed";  // Permanent: the ledger accepted it, but this worker cannot parse it
      poe.reason = "job.yaml does not parse on this worker: " + manifest.status().message();
    } else {
      ExecSpec spec;
      spec.argv = manifest->command;
      spec.argv.insert(spec.argv.end(), manifest->args.begin(), manifest->args.end());
      spec.env = manifest->env.value_or(std::map<std::string, std::string>{});
      // Programs shipped with the worker (gatos-scan) are found by name;
      // a manifest that sets PATH decides for itself.
      if (!spec.env.count("PATH")) spec.env["PATH"] = self_dir_ + ":/usr/local/bin:/usr/bin:/bin";
      spec.ro_binds = opts_.ro_binds;
      spec.ro_binds.push_back(self_dir_);
      // The scanner's mirrors and done-ledger persist across jobs on this worker.
      spec.rw_binds = {scan_state_};
      spec.workspace = ws + "/work";
      spec.cwd = manifest->cwd.value_or("");
      spec.output_dir = ws + "/out";
      spec.timeout_ms = manifest->timeout_seconds * 1000;
      spec.kill_grace_ms = opts_.kill_grace_ms;
      spec.output_cap_bytes = static_cast<size_t>(poe.stdout_cap);
      spec.sandbox = opts_.sandbox;
      spec.allow_network = lease.allow_network;
      spec.extra_env = {{"GATOS_JOB_ID", "blake3:" + hex},
                        {"GATOS_LEASE_EPOCH", std::to_string(epoch)},
                        {"GATOS_STATE_DIR", scan_state_}};
      std::error_code ec;
      fs::create_directories(spec.workspace, ec);
      auto started = Execution::Start(spec);
      if (!started.ok()) {
        poe.status = "failed";  // Permanent: the command cannot start
        poe.reason = started.status().message();
      } else {
        exec = std::move(*started);
        {
          std::lock_guard<std::mutex> l(job.mu);
          job.exec = exec.get();
        }
        stale = Supervise(job, *exec, expires_ms, lease_ms, &poe, &files);
        std::lock_guard<std::mutex> l(job.mu);
        job.exec = nullptr;
      }
    }
    poe.finished_at = FormatRfc3339Millis(SystemNowMs());
    if (stale || (shutting_down_ && poe.status.empty())) {
      // StaleOwner: stop at once, discard, write nothing.
      Log(stale && !shutting_down_ ? "job " + Short(hex) + ": lease lost (stale owner); its run was discarded"
                : "job " + Short(hex) + ": stopped by shutdown; its lease will run out");
      (void)outbox_->FinishLease(hex, epoch, LeaseState::kAbandoned, SystemNowMs());
      std::error_code ec;
      fs::remove_all(ws, ec);
      return;
    }
    if (files.empty()) files = {{"stdout", ""}, {"stderr", ""}};
    Report(job, std::move(poe), std::move(files), ws,
           manifest.ok() ? CanonicalManifest(*manifest) : std::string());
  }

  // Waits for the job while renewing its lease. Returns true when the lease
  // was lost (the job was stopped and must not be reported).
  bool Supervise(RunningJob& job, Execution& exec, int64_t expires_ms, int64_t lease_ms, Poe* poe,
                 std::vector<ResultFile>* files) {
    std::atomic<bool> done{false};
    Result<ExecResult> result = InternalError("not finished");
    std::thread waiter([&] {
      result = exec.Wait();
      done = true;
      job.cv.notify_all();
    });
    bool stale = false;
    int64_t renew_every = std::max<int64_t>(lease_ms / 3, 50);
    int64_t next_renew = SystemNowMs() + renew_every;
    int failures = 0;
    std::mt19937 rng(std::random_device{}());
    bool stop_sent = false;
    while (!done) {
      {
        std::unique_lock<std::mutex> l(job.mu);
        int64_t wait = std::max<int64_t>(0, next_renew - SystemNowMs());
        job.cv.wait_for(l, std::chrono::milliseconds(wait),
                        [&] { return done.load() || (job.cancel.load() && !stop_sent); });
      }
      if (done) break;
      if (job.cancel && !stop_sent) {
        Log("job " + Short(job.job_hex) + ": cancel requested; stopping it");
        exec.Stop();
        stop_sent = true;
        continue;
      }
      if (SystemNowMs() < next_renew) continue;
      LeaseRequest sent = SignLeaseRequest(*key_, job.job_hex, job.epoch, SystemNowMs(), true);
      Reply r = Call(rpc::kRenew, rpc::Dump(rpc::LeaseRequestJson(sent)), 5000);
      if (r.ok()) {
        auto renewed = VerifyRenewal(r.body.value("objects", ""), r.body.value("lease_commit", ""), ledger_keys_, sent);
        if (!renewed.ok()) {
          // An answer the ledger did not sign counts as no answer.
          Log("job " + Short(job.job_hex) + ": ignored an unverified renew reply: " + renewed.status().message());
          r.error = TransitionError::kRetry;
          r.message = "unverified renew reply";
        } else {
          failures = 0;
          expires_ms = renewed->lease.expires_ms;
          Status rec = outbox_->UpdateLeaseExpiry(job.job_hex, job.epoch, expires_ms, SystemNowMs());
          if (!rec.ok()) Log("job " + Short(job.job_hex) + ": cannot record the renewed lease: " + rec.message());
          if (!renewed->cancel_commit.empty()) job.cancel = true;
          next_renew = SystemNowMs() + renew_every;
          continue;
        }
      }
      if (r.error == TransitionError::kRetry) {
        // Retryable: back off with jitter, but never past our lease.
        ++failures;
        int64_t backoff = std::min<int64_t>(renew_every, 100LL << std::min(failures, 6));
        backoff = backoff / 2 + static_cast<int64_t>(rng() % static_cast<uint32_t>(backoff / 2 + 1));
        next_renew = SystemNowMs() + backoff;
        if (SystemNowMs() < expires_ms) continue;
        Log("job " + Short(job.job_hex) + ": lease expired while the ledger was unreachable (" + r.message + ")");
      } else {
        Log("job " + Short(job.job_hex) + ": renew refused: " + r.message);
      }
      // StaleOwner (or terminal, or expired): stop at once.
      stale = true;
      exec.Stop();
      break;
    }
    waiter.join();
    if (stale) return true;
    if (!result.ok()) {
      poe->status = "failed";
      poe->reason = "supervising the job failed: " + result.status().message();
      return false;
    }
    const ExecResult& x = *result;
    poe->exit_code = x.exit_code ? std::optional<int64_t>(*x.exit_code) : std::nullopt;
    poe->signal = x.signal ? std::optional<int64_t>(*x.signal) : std::nullopt;
    poe->timed_out = x.timed_out;
    poe->stdout_truncated = x.stdout_truncated;
    poe->stderr_truncated = x.stderr_truncated;
    poe->started_at = FormatRfc3339Millis(x.started_ms);
    poe->finished_at = FormatRfc3339Millis(x.finished_ms);
    if (x.stopped && job.cancel) {
      poe->status = "aborted";
      poe->reason = "cancelled by the ledger";
    } else if (x.stopped) {
      return true;  // stopped by shutdown: not reported
    } else if (x.timed_out) {
      poe->status = "timed-out";
    } else if (x.exit_code && *x.exit_code == 0) {
      poe->status = "succeeded";
    } else {
      poe->status = "failed";
    }
    files->push_back({"stdout", x.stdout_data, false});
    files->push_back({"stderr", x.stderr_data, false});
    return false;
  }

  // Adds outputs/<rel> for each regular file the job left in its output dir.
  std::string CollectOutputs(const std::string& out_dir, size_t budget, std::vector<ResultFile>* files) {
    std::error_code ec;
    if (!fs::exists(out_dir, ec)) return "";
    size_t total = 0;
    std::vector<std::pair<std::string, std::string>> found;
    for (auto it = fs::recursive_directory_iterator(out_dir, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
      std::string rel = fs::relative(it->path(), out_dir, ec).generic_string();
      uintmax_t size = it->file_size(ec);
      total += size;
      if (total > budget) {
        return "outputs exceed this ledger's result limit of " + std::to_string(budget) +
               " bytes; no output file was kept";
      }
      std::ifstream in(it->path(), std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      found.emplace_back("outputs/" + rel, ss.str());
    }
    for (auto& [p, d] : found) files->push_back({p, std::move(d), false});
    return "";
  }

  void Report(RunningJob& job, Poe poe, std::vector<ResultFile> files, const std::string& ws,
              const std::string& manifest_json) {
    const std::string& hex = job.job_hex;
    int64_t max_result = job.grant.lease.max_result_bytes;
    size_t used = 0;
    for (const auto& f : files) used += f.data.size();
    size_t budget = static_cast<size_t>(max_result) > used + 65536 ? static_cast<size_t>(max_result) - used - 65536 : 0;
    std::string too_big = CollectOutputs(ws + "/out", budget, &files);
    if (!too_big.empty()) {
      files.erase(std::remove_if(files.begin(), files.end(),
                                 [](const ResultFile& f) { return f.path.rfind("outputs/", 0) == 0; }),
                  files.end());
      if (poe.status == "succeeded") poe.status = "failed";
      poe.reason = too_big;
    }
    if (!manifest_json.empty()) {
      // An in-toto Statement (SLSA provenance) over the final files, signed by
      // this worker; poe.json then lists and hashes it like every file.
      ProvenanceInput p;
      p.manifest_json = manifest_json;
      p.job_id = poe.job_id;
      p.job_commit = job.grant.job_commit;
      p.worker_id = poe.worker_id;
      p.lease_epoch = job.epoch;
      p.runner_program = poe.runner_program;
      p.runner_version = poe.runner_version;
      p.runner_platform = poe.runner_platform;
      p.started_at = poe.started_at;
      p.finished_at = poe.finished_at;
      p.subjects = SubjectsForFiles(files);
      auto envelope = BuildProvenanceEnvelope(p, *key_);
      if (envelope.ok()) {
        files.push_back({kProvenanceFileName, *envelope, false});
      } else {
        Log("job " + Short(hex) + ": no provenance attestation: " + envelope.status().message());
      }
    }
    ResultBuildInput in;
    in.job_commit = job.grant.job_commit;
    in.lease_commit = job.grant.lease_commit;
    in.poe = std::move(poe);
    in.files = std::move(files);
    in.committer_name = "gatos worker " + opts_.name;
    in.time_ms = SystemNowMs();
    auto built = BuildResult(in, *key_);
    std::error_code ec;
    if (!built.ok()) {
      Log("job " + Short(hex) + ": cannot build its result: " + built.status().message());
      (void)outbox_->FinishLease(hex, job.epoch, LeaseState::kAbandoned, SystemNowMs());
      fs::remove_all(ws, ec);
      return;
    }
    json header = {{"commit", built->commit_id}};
    std::string frame = rpc::EncodeFrame(header, EncodeObjectBatch(built->objects));
    // Durable before it is sent: a crash from here on delivers it on restart.
    auto id = outbox_->Enqueue(hex, job.epoch, built->commit_id, frame, SystemNowMs());
    if (!id.ok()) {
      Log("job " + Short(hex) + ": cannot write the outbox: " + id.status().message());
      return;
    }
    (void)outbox_->FinishLease(hex, job.epoch, LeaseState::kReporting, SystemNowMs());
    fs::remove_all(ws, ec);
    Log("job " + Short(hex) + " " + in.poe.status + " (result " + Short(built->commit_id) + ")");
    if (fault_ == "crash-after-enqueue") {
      Log("GATOS_WORKER_FAULT=crash-after-enqueue: killing myself before delivery");
      raise(SIGKILL);
    }
    auto item = outbox_->Get(*id);
    if (item.ok()) Deliver(*item);
  }

  void Deliver(const OutboxItem& item) {
    if (item.state != OutboxItemState::kPending) return;
    Reply r = Call(rpc::kResult, item.payload, 10000);
    int64_t now = SystemNowMs();
    if (r.ok()) {
      (void)outbox_->MarkDelivered(item.id, now);
      (void)outbox_->FinishLease(item.job_hex, item.epoch, LeaseState::kDone, now);
      return;
    }
    bool retryable = r.error == TransitionError::kRetry;
    auto state = outbox_->MarkFailed(item.id, std::string(TransitionErrorName(r.error)) + ": " + r.message, now,
                                     retryable);
    if (!retryable) {
      (void)outbox_->FinishLease(item.job_hex, item.epoch, LeaseState::kAbandoned, now);
      Log("result of job " + Short(item.job_hex) + " refused by the ledger (" +
          std::string(TransitionErrorName(r.error)) + "): " + r.message);
    } else if (state.ok() && *state == OutboxItemState::kDead) {
      Log("result of job " + Short(item.job_hex) + " dead-lettered after repeated failures: " + r.message);
    }
  }

  void DrainOnce() {
    auto due = outbox_->Due(SystemNowMs(), 1000);
    if (!due.ok()) {
      Log("cannot read the outbox: " + due.status().message());
      return;
    }
    if (!due->empty()) Log("delivering " + std::to_string(due->size()) + " result(s) from the outbox");
    for (const auto& item : *due) Deliver(item);
    (void)outbox_->Prune();
  }

  void DeliveryLoop() {
    while (!delivery_stop_) {
      {
        std::unique_lock<std::mutex> l(delivery_mu_);
        delivery_cv_.wait_for(l, std::chrono::milliseconds(500), [&] { return delivery_stop_.load(); });
      }
      auto due = outbox_->Due(SystemNowMs(), 64);
      if (!due.ok() || due->empty()) continue;
      for (const auto& item : *due) Deliver(item);
      (void)outbox_->Prune();
    }
  }

  WorkerOptions opts_;
  std::atomic<bool>* stop_;
  std::optional<Ed25519PrivateKey> key_;
  std::vector<Ed25519PublicKey> ledger_keys_;
  std::string worker_hex_;
  std::string program_hash_;
  std::string self_dir_;
  std::string scan_state_;
  std::unique_ptr<Bus> bus_;
  std::unique_ptr<Outbox> outbox_;
  std::mutex running_mu_;
  std::condition_variable slots_cv_;
  std::map<std::string, std::shared_ptr<RunningJob>> running_;
  int active_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::mutex delivery_mu_;
  std::condition_variable delivery_cv_;
  std::atomic<bool> delivery_stop_{false};
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
