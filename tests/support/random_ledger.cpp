#include "random_ledger.h"

#include <memory>
#include <optional>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/allowed_signers.h"
#include "gatos/model/blake3.h"
#include "gatos/model/manifest.h"
#include "gatos/model/time_format.h"

namespace gatos::testing {

uint64_t SeededChoices::Next(uint64_t bound) {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (z ^ (z >> 31)) % bound;
}

uint64_t ByteChoices::Next(uint64_t bound) {
  if (Exhausted()) return 0;
  const uint64_t v = static_cast<uint8_t>(bytes_[pos_]) | (static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + 1])) << 8);
  pos_ += 2;
  return v % bound;
}

namespace {

struct Job {
  std::string hex, commit, yaml;
  std::vector<GitObject> objects;
};

class Run {
 public:
  Run(ChoiceSource& choose, const std::string& dir, RandomLedgerRun* out)
      : choose_(choose), path_(dir + "/ledger.git"), out_(out) {}

  bool Setup() {
    if (Status s = Ledger::InitRepository(path_); !s.ok()) return Error("init: " + s.message());
    for (const char* name : {"w1", "w2", "w3"}) workers_.push_back(*GenerateEd25519Key(name));
    Policy p;
    p.settings.lease_ms = 1000;
    p.settings.result_grace_ms = 300;
    p.settings.max_attempts = 3;
    p.settings.retry_base_ms = 200;
    p.settings.retry_factor = 2;
    p.settings.retry_max_ms = 1000;
    p.settings.retry_jitter_pct = 50;
    p.settings.retention_ms = 3000;
    p.ledger_key = ledger_key_.public_key();
    p.submitters_text = "alice " + submitter_.public_key().ToOpenSsh() + "\n";
    p.submitters = *ParseAllowedSigners(p.submitters_text, "submitters");
    SetWorkers(&p, true);
    if (Status s = LedgerWriter::Initialize(path_, p, ledger_key_, now_); !s.ok()) {
      return Error("initialize: " + s.message());
    }
    return OpenWriter(false);
  }

  // `old_form`: lease commits signed one by one, as ledgers were written
  // before grants were signed per reply.
  bool OpenWriter(bool old_form) {
    writer_.reset();
    WriterOptions o;
    o.clock = [this] { return now_; };
    o.fsync = false;
    o.sign_lease_commits = old_form;
    auto w = LedgerWriter::Open(path_, ledger_key_, o);
    if (!w.ok()) return Error("open: " + w.status().message());
    writer_ = std::move(*w);
    return true;
  }

  void Step() {
    switch (choose_.Next(12)) {
      case 0: case 1: Submit(); break;
      case 2: case 3: Claim(); break;
      case 4: Renew(); break;
      case 5: case 6: Result(); break;
      case 7: User(false); break;
      case 8: User(true); break;
      case 9: Timer(); break;
      case 10: ToggleWorker(); break;
      default: Tick(); break;
    }
  }

  bool Finish() {
    writer_.reset();  // views written, WAL checkpointed
    auto ledger = Ledger::Open(path_);
    if (!ledger.ok()) return Error("reopen: " + ledger.status().message());
    auto report = AuditLog(**ledger, {});
    if (!report.ok()) return Error("audit: " + report.status().message());
    out_->audit = std::move(*report);
    return true;
  }

 private:
  bool Error(std::string why) {
    out_->error = std::move(why);
    return false;
  }

  void SetWorkers(Policy* p, bool with_w3) {
    p->workers_text = "w1 " + workers_[0].public_key().ToOpenSsh() + "\nw2 " + workers_[1].public_key().ToOpenSsh() + "\n";
    if (with_w3) p->workers_text += "w3 " + workers_[2].public_key().ToOpenSsh() + "\n";
    p->workers = *ParseAllowedSigners(p->workers_text, "workers");
    w3_allowed_ = with_w3;
  }

  OpResult Apply(Op op) {
    std::vector<Op> ops;
    ops.push_back(std::move(op));
    OpResult r = writer_->Apply(ops)[0];
    Count(r.outcome);
    return r;
  }

  void Count(const Decision& o) {
    if (o.ok()) {
      ++out_->accepted;
    } else {
      ++out_->refused;
      ++out_->refusals[std::string(TransitionErrorName(o.error))];
    }
  }

  std::optional<JobRecord> Record(const std::string& hex) {
    auto r = writer_->Find(hex);
    return r.ok() ? *r : std::nullopt;
  }

  const Job* AnyJob() { return jobs_.empty() ? nullptr : &jobs_[choose_.Next(jobs_.size())]; }
  const Ed25519PrivateKey& AnyWorker() { return workers_[choose_.Next(workers_.size())]; }
  const Ed25519PrivateKey* WorkerOf(const std::string& hex) {
    for (const auto& w : workers_) {
      if (w.public_key().Hex() == hex) return &w;
    }
    return nullptr;
  }

  void Submit() {
    // A new job, or (sometimes) one submitted before: the same job.
    if (!jobs_.empty() && choose_.Next(4) == 0) {
      const Job& j = *AnyJob();
      auto check = CheckJobCommit(BatchLookup(&j.objects, nullptr), j.commit, "", writer_->policy(), now_);
      if (check.ok()) Apply(SubmitOp{*check, j.objects});
      return;
    }
    Job j;
    j.yaml = "command: [\"/bin/echo\", \"job-" + std::to_string(jobs_.size()) + "\"]\ntimeout: 30\n";
    auto m = ParseManifest(j.yaml, "job.yaml");
    if (!m.ok()) return;
    j.hex = JobIdHex(*m);
    auto tree = BuildTreeObjects({{"job.yaml", j.yaml, false}}, &j.objects);
    auto c = BuildCommitObject(*tree, {}, "a job\n\nJob-Id: blake3:" + j.hex + "\n", "Alice", "alice@example.com",
                               now_, &submitter_);
    if (!c.ok()) return;
    j.commit = c->id;
    j.objects.insert(j.objects.begin(), *c);
    auto check = CheckJobCommit(BatchLookup(&j.objects, nullptr), j.commit, "", writer_->policy(), now_);
    if (!check.ok()) return;
    if (Apply(SubmitOp{*check, j.objects}).outcome.ok()) jobs_.push_back(std::move(j));
  }

  void Lease(const std::string& hex, const Ed25519PrivateKey& w, int64_t epoch, bool renew) {
    LeaseRequest req = SignLeaseRequest(w, hex, epoch, now_, renew);
    Decision v = VerifyLeaseRequest(req, writer_->policy(), now_);
    if (!v.ok()) {
      Count(v);
      return;
    }
    OpResult r = Apply(LeaseOp{req});
    if (r.outcome.ok() && !r.grant.empty()) {
      ++(r.grant.front().data.find("\ngpgsig ") != std::string::npos ? out_->signed_leases : out_->unsigned_leases);
    }
  }

  void Claim() {
    const Job* j = AnyJob();
    if (!j) return;
    auto rec = Record(j->hex);
    const int64_t epoch = (rec ? rec->epoch : 0) + 1 - (choose_.Next(6) == 0 ? 1 : 0);
    Lease(j->hex, AnyWorker(), epoch, false);
  }

  void Renew() {
    const Job* j = AnyJob();
    if (!j) return;
    auto rec = Record(j->hex);
    if (!rec) return;
    const Ed25519PrivateKey* holder = WorkerOf(rec->worker_hex);
    const Ed25519PrivateKey& w = holder && choose_.Next(5) != 0 ? *holder : AnyWorker();
    now_ += 1;  // a renewal must be newer than the last request of its lease
    Lease(j->hex, w, rec->epoch, true);
  }

  void Result() {
    const Job* j = AnyJob();
    if (!j) return;
    auto rec = Record(j->hex);
    if (!rec || rec->claim_commit.empty()) return;
    const Ed25519PrivateKey* holder = WorkerOf(rec->worker_hex);
    const Ed25519PrivateKey* w = holder && choose_.Next(6) != 0 ? holder : &AnyWorker();
    if (!holder) {
      // No current holder: a stale owner reports, by the last claim's worker.
      for (const auto& [worker, claim] : rec->claims) {
        if (claim == rec->claim_commit) w = WorkerOf(worker);
      }
      if (!w) return;
    }
    ResultBuildInput in;
    in.job_commit = j->commit;
    in.lease_commit = rec->claim_commit;
    in.poe.job_id = "blake3:" + j->hex;
    in.poe.worker_id = w->public_key().WorkerId();
    in.poe.lease_epoch = rec->epoch - (choose_.Next(8) == 0 ? 1 : 0);
    in.poe.runner_program = Blake3Tagged("gatos-worker random-ledger");
    in.poe.runner_version = "0.1.0";
    in.poe.runner_platform = "linux-x86_64";
    switch (choose_.Next(6)) {
      case 0: in.poe.status = "succeeded"; in.poe.exit_code = 0; break;
      case 1: in.poe.status = "failed"; in.poe.exit_code = 3; break;
      case 2: in.poe.status = "failed"; in.poe.reason = "its job.yaml does not parse on this worker"; break;
      case 3:
        in.poe.status = "failed";
        in.poe.reason = "input 0: the repository could not be fetched";
        in.poe.transient = true;
        break;
      case 4: in.poe.status = "timed-out"; in.poe.signal = 9; in.poe.timed_out = true; break;
      default: in.poe.status = "aborted"; in.poe.reason = "cancelled by the ledger before it started"; break;
    }
    in.poe.stdout_cap = 1 << 20;
    in.poe.started_at = FormatRfc3339Millis(now_ - 5);
    in.poe.finished_at = FormatRfc3339Millis(now_);
    in.files = {{"stdout", "out " + std::to_string(results_++) + "\n"}, {"stderr", ""}};
    in.time_ms = now_;
    auto built = BuildResult(in, *w);
    if (!built.ok()) return;
    ParsedResult parsed;
    Decision o = CheckResultContent(BatchLookup(&built->objects, nullptr), built->commit_id, writer_->policy(), &parsed);
    if (!o.ok()) {
      Count(o);
      return;
    }
    Apply(ResultOp{parsed, built->objects});
  }

  void User(bool retry) {
    const Job* j = AnyJob();
    if (!j) return;
    auto rec = Record(j->hex);
    const int64_t attempt = (rec ? rec->attempt : 1) + 1 + (choose_.Next(6) == 0 ? 1 : 0);
    // The submitter, or a worker's key (which may not control the job).
    const Ed25519PrivateKey& who = choose_.Next(5) == 0 ? AnyWorker() : submitter_;
    UserRequest u = SignUserRequest(who, j->hex, retry, retry ? attempt : 0, now_);
    Apply(UserOp{retry, u.job_hex, u.requester_hex, u.attempt, u.requested_at_ms, u.sig_hex});
  }

  void Timer() {
    const Job* j = AnyJob();
    if (!j) return;
    if (choose_.Next(2) == 0) {
      Apply(AbortOp{j->hex});
    } else {
      Apply(PruneOp{j->hex});
    }
  }

  void ToggleWorker() {
    Policy p = writer_->policy();
    SetWorkers(&p, !w3_allowed_);
    Apply(PolicyOp{p, w3_allowed_ ? "gatos: allow w3 again\n" : "gatos: revoke w3\n", std::nullopt});
  }

  void Tick() { now_ += choose_.Next(4) == 0 ? 3500 : static_cast<int64_t>(choose_.Next(1500)); }

  ChoiceSource& choose_;
  std::string path_;
  RandomLedgerRun* out_;
  int64_t now_ = 1'800'000'000'000;
  Ed25519PrivateKey ledger_key_ = *GenerateEd25519Key("ledger");
  Ed25519PrivateKey submitter_ = *GenerateEd25519Key("alice");
  std::vector<Ed25519PrivateKey> workers_;
  bool w3_allowed_ = true;
  std::unique_ptr<LedgerWriter> writer_;
  std::vector<Job> jobs_;
  int results_ = 0;
};

}  // namespace

RandomLedgerRun RunRandomLedger(ChoiceSource& choose, int max_steps, const std::string& dir,
                                int old_form_steps) {
  RandomLedgerRun out;
  Run run(choose, dir, &out);
  if (!run.Setup()) return out;
  if (old_form_steps > 0 && !run.OpenWriter(true)) return out;
  for (; out.steps < max_steps && !choose.Exhausted(); ++out.steps) {
    if (old_form_steps > 0 && out.steps == old_form_steps && !run.OpenWriter(false)) return out;
    run.Step();
  }
  if (!run.Finish()) return out;
  for (const auto& [kind, n] : out.audit.by_kind) out.logged[kind] = static_cast<int>(n);
  return out;
}

}  // namespace gatos::testing
