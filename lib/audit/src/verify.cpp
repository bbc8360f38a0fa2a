#include "gatos/audit/verify.h"
#include "gatos/ledger/schedule_fire.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>

#include "gatos/audit/attest.h"
#include "gatos/crypto/sha256.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/ledger/state_index.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"
#include "gatos/model/trailers.h"
#include "gatos/sys/parallel.h"

namespace gatos {

namespace {

// Bounds on what an untrusted clone can make us walk.
constexpr size_t kMaxPolicyCommits = 100'000;
constexpr size_t kMaxLeaseChain = 1'000'000;
constexpr size_t kMaxLeaseMessage = 64 * 1024;

std::string Short(const std::string& id) { return id.substr(0, 12); }

std::string TimeText(int64_t unix_s) { return FormatRfc3339Millis(unix_s * 1000); }

struct PolicyEntry {
  std::string commit;
  int64_t time_s = 0;
  Policy policy;
  std::string root;  // PolicyRoot(policy)
  Status trust;      // OK when this commit and every ancestor verify
};

// The parsed trailers of a lease commit (claim, takeover or renewal).
struct LeaseCommit {
  CommitInfo info;
  std::string job_hex;
  std::string worker_hex;
  int64_t epoch = 0;
  int64_t expires_ms = 0;
  int64_t requested_at_ms = 0;
  std::string request_sig_hex;
};

bool PositiveInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18 || s[0] == '0') return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

bool NonNegativeInt(const std::string& s, int64_t* out) {
  if (s == "0") {
    *out = 0;
    return true;
  }
  return PositiveInt(s, out);
}

// Reads a lease commit's trailers. InvalidArgument says which is wrong.
Result<LeaseCommit> ReadLeaseCommit(Ledger& ledger, const std::string& id) {
  LeaseCommit lc;
  GATOS_ASSIGN_OR_RETURN(lc.info, ledger.ReadCommit(id));
  if (lc.info.message.size() > kMaxLeaseMessage) {
    return InvalidArgumentError("its message is larger than a lease commit's");
  }
  auto msg = ParseCommitMessage(lc.info.message);
  if (!msg.ok()) return InvalidArgumentError("commit message: " + msg.status().message());
  std::map<std::string, std::string> t;
  for (const char* key :
       {"Job-Id", "Worker-Id", "Lease-Epoch", "Lease-Expires", "Requested-At", "Request-Sig"}) {
    auto v = RequireUniqueTrailer(msg->trailers, key);
    if (!v.ok()) return InvalidArgumentError(v.status().message());
    t[key] = *v;
  }
  const std::string& job = t["Job-Id"];
  const std::string& worker = t["Worker-Id"];
  const std::string& sig = t["Request-Sig"];
  if (job.rfind("blake3:", 0) != 0 || !IsLowerHex(job.substr(7), 64)) {
    return InvalidArgumentError("Job-Id: expected blake3:<64 hex>");
  }
  if (worker.rfind("ed25519:", 0) != 0 || !IsLowerHex(worker.substr(8), 64)) {
    return InvalidArgumentError("Worker-Id: expected ed25519:<64 hex>");
  }
  if (!PositiveInt(t["Lease-Epoch"], &lc.epoch)) {
    return InvalidArgumentError("Lease-Epoch: \"" + t["Lease-Epoch"].substr(0, 40) +
                                "\" is not a positive integer");
  }
  auto expires = ParseRfc3339Millis(t["Lease-Expires"]);
  if (!expires.ok()) return InvalidArgumentError("Lease-Expires: " + expires.status().message());
  lc.expires_ms = *expires;
  if (!NonNegativeInt(t["Requested-At"], &lc.requested_at_ms)) {
    return InvalidArgumentError("Requested-At: expected unix milliseconds");
  }
  if (sig.rfind("ed25519:", 0) != 0 || !IsLowerHex(sig.substr(8), 128)) {
    return InvalidArgumentError("Request-Sig: expected ed25519:<128 hex>");
  }
  lc.job_hex = job.substr(7);
  lc.worker_hex = worker.substr(8);
  lc.request_sig_hex = sig.substr(8);
  return lc;
}

// "" when the commit's SSH signature (namespace git) verifies and was made
// by `key`; otherwise why not.
std::string CheckCommitSignature(const CommitInfo& c, const Ed25519PublicKey& key) {
  if (c.signature.empty()) return "it is not signed (no gpgsig header)";
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return "gpgsig: " + sig.status().message();
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return "its SSH signature does not verify: " + v.message();
  if (sig->key != key)
    return "it is signed by " + sig->key.WorkerId() + ", not by " + key.WorkerId();
  return "";
}

std::string Principal(const AllowedSigner& s) {
  return s.principals.empty() ? std::string("(no principal)") : s.principals[0];
}

}  // namespace

bool AuditReport::ok() const { return !checks.empty() && first_failure() == nullptr; }

const ResultCheck* AuditReport::first_failure() const {
  for (const auto& c : checks) {
    if (!c.ok) return &c;
  }
  return nullptr;
}

struct Auditor::State {
  Ledger* ledger;
  VerifyOptions opt;
  bool loaded = false;
  std::vector<PolicyEntry> chain;  // oldest first
  ResultCheckLimits result_limits;
  size_t max_manifest_bytes = 1 << 20;

  Status Load();
  // The policy in force at `time_s` (see verify.h); `*before_all` is set when
  // `time_s` precedes every policy commit and the oldest one is returned.
  const PolicyEntry& At(int64_t time_s, bool* before_all = nullptr) const;
  std::string Describe(const PolicyEntry& e) const {
    return "policy " + Short(e.commit) + " (" + TimeText(e.time_s) + ")";
  }
  Result<AuditReport> Verify(const std::string& job_hex);
  // The log head, signed by a ledger key of the policy chain, and the state
  // index in its tree: the ledger's statement of every job's record, which
  // vouches for the (unsigned) lease commits it names.
  bool head_loaded = false;
  std::string head_problem;  // why the head vouches for nothing
  std::string head_id;
  std::optional<StateIndex> head_index;
  // "" when the lease commit `commit` is signed by `key` (a ledger written
  // before lease commits were unsigned) or, unsigned, is named by job
  // `job_hex`'s record in the signed log head (its claim, a worker's latest
  // claim, or its lease); otherwise why not.
  std::string LeaseProblem(const CommitInfo& commit, const std::string& job_hex,
                           const Ed25519PublicKey& key);
  void LoadHead();
  // `git_inputs`: the manifest's, or nullptr when it did not parse.
  void CheckResult(AuditReport* rep, const CommitInfo& job,
                   const std::vector<GitInput>* git_inputs);
  void CheckInputs(AuditReport* rep, const Poe& poe, const std::vector<GitInput>& git_inputs);
  void CheckProvenance(AuditReport* rep, const ParsedResult& p, const ResultTreeData& tree,
                       bool signature_verified);
};

Status Auditor::State::Load() {
  if (loaded) return OkStatus();
  GATOS_ASSIGN_OR_RETURN(std::string tip, ledger->ResolveRef(kPolicyRef));
  if (tip.empty()) {
    return NotFoundError(ledger->path() + " has no " + std::string(kPolicyRef) +
                         "; is it a gatos ledger? A plain 'git clone' does not copy refs/gatos/*: "
                         "use 'git clone --mirror LEDGER' or "
                         "'git fetch LEDGER \"refs/gatos/*:refs/gatos/*\"'");
  }
  std::vector<CommitInfo> commits;
  for (std::string id = tip; !id.empty();) {
    if (commits.size() >= kMaxPolicyCommits) {
      return DataLossError(std::string(kPolicyRef) + " has more than " +
                           std::to_string(kMaxPolicyCommits) + " commits");
    }
    auto c = ledger->ReadCommit(id);
    if (!c.ok()) {
      return DataLossError("policy commit " + id + " cannot be read (" + c.status().message() +
                           "); is the clone complete?");
    }
    id = c->parents.empty() ? "" : c->parents[0];
    commits.push_back(std::move(*c));
  }
  std::reverse(commits.begin(), commits.end());
  Status broken;  // the first failure; every later commit inherits it
  std::optional<Ed25519PublicKey> signer = opt.ledger_key;
  for (const CommitInfo& c : commits) {
    PolicyEntry e;
    e.commit = c.id;
    e.time_s = c.time_s;
    auto p = ledger->ReadPolicyAt(c.id);
    if (p.ok()) {
      e.policy = std::move(*p);
      e.root = PolicyRoot(e.policy);
      result_limits.max_file_bytes =
          std::max(result_limits.max_file_bytes,
                   static_cast<size_t>(std::max<int64_t>(0, e.policy.settings.max_result_bytes)));
      max_manifest_bytes =
          std::max(max_manifest_bytes,
                   static_cast<size_t>(std::max<int64_t>(0, e.policy.settings.max_manifest_bytes)));
    }
    if (broken.ok()) {
      if (!p.ok()) {
        broken = DataLossError("policy commit " + Short(c.id) +
                               " is unreadable: " + p.status().message());
      } else {
        bool root = &c == &commits.front();
        if (root && opt.ledger_key && e.policy.ledger_key != *opt.ledger_key) {
          broken = PermissionDeniedError("the first policy commit " + Short(c.id) +
                                         " names ledger key " + e.policy.ledger_key.WorkerId() +
                                         ", not the pinned key " + opt.ledger_key->WorkerId());
        } else {
          Ed25519PublicKey want = signer ? *signer : e.policy.ledger_key;
          std::string why = CheckCommitSignature(c, want);
          if (!why.empty()) {
            broken = PermissionDeniedError(
                "policy commit " + Short(c.id) + " is not signed by the ledger key " +
                want.WorkerId() +
                (root ? (opt.ledger_key ? " (pinned)" : " (its own ledger.pub)")
                      : " of its parent policy") +
                ": " + why);
          }
        }
        signer = e.policy.ledger_key;  // a rotation is signed by the previous key
      }
    }
    e.trust = broken;
    chain.push_back(std::move(e));
  }
  loaded = true;
  return OkStatus();
}

void Auditor::State::LoadHead() {
  head_loaded = true;
  head_problem.clear();
  head_id.clear();
  head_index.reset();
  auto head = ledger->ResolveRef(kLogRef);
  auto log = head.ok() && !head->empty() ? ledger->ReadCommit(*head)
                                         : Result<CommitInfo>(NotFoundError("no " + std::string(kLogRef)));
  if (!log.ok()) {
    head_problem = "it is not signed, and the log head that would name it cannot be read (" +
                   log.status().message() + ")";
    return;
  }
  std::string why = "no ledger key in the policy chain";
  for (const PolicyEntry& e : chain) {
    if (!e.trust.ok()) break;
    why = CheckCommitSignature(*log, e.policy.ledger_key);
    if (why.empty()) break;
  }
  if (!why.empty()) {
    head_problem = "it is not signed, and the log head " + Short(log->id) +
                   " is not signed by a ledger key: " + why;
    return;
  }
  head_id = log->id;
  head_index.emplace(ledger);
  head_index->Reset(log->tree);
}

std::string Auditor::State::LeaseProblem(const CommitInfo& c, const std::string& job_hex,
                                         const Ed25519PublicKey& key) {
  if (!c.signature.empty()) return CheckCommitSignature(c, key);
  if (!head_loaded) LoadHead();
  auto named = [&]() -> Result<bool> {
    if (!head_problem.empty()) return false;
    auto rec = head_index->Get(job_hex);
    if (!rec.ok()) return rec.status();
    if (!*rec) return false;
    const JobRecord& r = **rec;
    if (r.claim_commit == c.id || r.lease_commit == c.id) return true;
    for (const auto& [worker, claim] : r.claims) {
      if (claim == c.id) return true;
    }
    return false;
  };
  auto found = named();
  // An Auditor kept across calls on a live ledger (gatosd's dashboard)
  // reads the log head again when it has moved since it was read.
  if (found.ok() && !*found) {
    auto now = ledger->ResolveRef(kLogRef);
    if (now.ok() && !now->empty() && *now != head_id) {
      LoadHead();
      found = named();
    }
  }
  if (!head_problem.empty()) return head_problem;
  if (!found.ok()) return "the log head's state index: " + found.status().message();
  if (*found) return "";
  return "it is not signed, and the signed log head " + Short(head_id) +
         " does not name it in the job's record (a mirror fetched while the ledger wrote? "
         "fetch again, or run 'gatos verify --all', which replays the log)";
}

const PolicyEntry& Auditor::State::At(int64_t time_s, bool* before_all) const {
  if (before_all) *before_all = false;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (it->time_s <= time_s) return *it;
  }
  if (before_all) *before_all = true;
  return chain.front();
}

Result<AuditReport> Auditor::State::Verify(const std::string& job_hex) {
  GATOS_RETURN_IF_ERROR(Load());
  AuditReport rep;
  rep.job_hex = job_hex;
  auto add = [&rep](const char* name, bool ok, std::string detail) {
    rep.checks.push_back({name, ok, std::move(detail)});
    return ok;
  };

  // ---- the job commit ----
  std::string job_ref = JobRef(job_hex, "job");
  GATOS_ASSIGN_OR_RETURN(rep.job_commit, ledger->ResolveRef(job_ref));
  if (rep.job_commit.empty()) {
    add("job_commit", false,
        "no " + job_ref + " in this ledger (check the job id; does the clone have refs/gatos/*?)");
    return rep;
  }
  auto job = ledger->ReadCommit(rep.job_commit);
  if (!job.ok()) {
    add("job_commit", false, job_ref + " -> " + rep.job_commit + ": " + job.status().message());
    return rep;
  }
  auto yaml = ledger->ReadFileAtCommit(rep.job_commit, "job.yaml", max_manifest_bytes);
  if (!yaml.ok()) {
    add("job_commit", false,
        "job commit " + Short(rep.job_commit) +
            (yaml.status().code() == StatusCode::kNotFound
                 ? " has no job.yaml at the top of its tree"
                 : ": job.yaml: " + yaml.status().message()));
    return rep;
  }
  add("job_commit", true, "job commit " + Short(rep.job_commit) + " with job.yaml");

  ManifestLimits mlimits;
  mlimits.max_bytes = max_manifest_bytes;
  auto manifest = ParseManifest(*yaml, "job.yaml", ManifestFormat::kYaml, mlimits);
  if (!manifest.ok()) {
    add("job_id", false, "job.yaml no longer parses: " + manifest.status().message());
  } else if (std::string got = JobIdHex(*manifest); got != job_hex) {
    add("job_id", false,
        "job.yaml hashes to blake3:" + got + " but its ref names blake3:" + job_hex +
            ": the manifest was changed after the job was accepted");
  } else {
    add("job_id", true, "job.yaml recomputes to blake3:" + job_hex);
  }

  std::string want_id = "blake3:" + job_hex;
  auto msg = ParseCommitMessage(job->message);
  if (!msg.ok()) {
    add("job_trailer", false, "job commit message: " + msg.status().message());
  } else if (auto t = RequireUniqueTrailer(msg->trailers, "Job-Id"); !t.ok()) {
    add("job_trailer", false, "job commit: " + t.status().message());
  } else if (*t != want_id) {
    add("job_trailer", false,
        "the job commit's trailer is 'Job-Id: " + t->substr(0, 80) + "' but the job is " + want_id);
  } else {
    add("job_trailer", true, "Job-Id trailer matches");
  }

  bool before_all = false;
  const PolicyEntry& jp = At(job->time_s, &before_all);
  rep.policy_commit = jp.commit;
  if (!add("policy", jp.trust.ok(),
           jp.trust.ok() ? Describe(jp) + ", ledger key " + jp.policy.ledger_key.WorkerId() +
                               (before_all ? "; the job commit (" + TimeText(job->time_s) +
                                                 ") predates every policy commit, so the "
                                                 "first one is used"
                                           : "")
                         : jp.trust.message())) {
    // Without a trusted policy nothing below can be judged.
    return rep;
  }

  const Policy& policy = jp.policy;
  if (job->signature.empty()) {
    if (policy.settings.dev_mode) {
      rep.dev_mode = true;
      add("job_signature", true,
          "DEV MODE: the job commit is unsigned; " + Describe(jp) +
              " is in dev mode, which accepts unsigned jobs");
    } else {
      add("job_signature", false,
          "the job commit is not signed, and " + Describe(jp) + " is not in dev mode");
    }
  } else if (auto sig = ParseSshSignature(job->signature); !sig.ok()) {
    add("job_signature", false, "the job commit's gpgsig: " + sig.status().message());
  } else if (Status v = SshSigVerify(*sig, job->signed_data, kSignerNamespaceGit); !v.ok()) {
    add("job_signature", false, "the job commit's signature does not verify: " + v.message());
  } else if (sig->key == policy.ledger_key && IsFireMessage(job->message)) {
    // A fire: the ledger created the job for a schedule's tick; the log
    // replay (gatos verify without a job) checks it against the schedule.
    add("job_signature", true,
        "a fire of a schedule, signed by the ledger key " + sig->key.WorkerId() +
            " (the log replay checks it against the schedule in force)");
  } else if (const AllowedSigner* who =
                 policy.submitters.FindKey(sig->key, kSignerNamespaceGit, job->time_s)) {
    add("job_signature", true,
        "signed by submitter " + Principal(*who) + " (" + sig->key.WorkerId() + ")");
  } else if (policy.settings.dev_mode) {
    rep.dev_mode = true;
    add("job_signature", true,
        "DEV MODE: the job commit is signed by " + sig->key.WorkerId() + ", not a submitter of " +
            Describe(jp) + "; accepted only because it is in dev mode");
  } else {
    add("job_signature", false,
        "the job commit is signed by " + sig->key.WorkerId() + ", which is not a submitter in " +
            Describe(jp) + " (in force at " + TimeText(job->time_s) + ")");
  }

  if (manifest.ok() && manifest->policy_root) {
    const std::string& want = *manifest->policy_root;
    auto it = std::find_if(chain.begin(), chain.end(),
                           [&](const PolicyEntry& e) { return e.trust.ok() && e.root == want; });
    add("policy_root", it != chain.end(),
        it != chain.end() ? "policy_root names " + Describe(*it)
                          : "job.yaml's policy_root " + want.substr(0, 80) +
                                " is not the root of any trusted policy commit of this ledger");
  }

  // ---- the result ----
  GATOS_ASSIGN_OR_RETURN(rep.result_commit, ledger->ResolveRef(JobRef(job_hex, "result")));
  if (rep.result_commit.empty()) {
    GATOS_ASSIGN_OR_RETURN(std::string cancel, ledger->ResolveRef(JobRef(job_hex, "cancel")));
    GATOS_ASSIGN_OR_RETURN(std::string lease, ledger->ResolveRef(JobRef(job_hex, "lease")));
    rep.state = !cancel.empty() ? "aborted" : !lease.empty() ? "claimed" : "pending";
    std::string what = rep.state + (cancel.empty() ? "" : " (cancelled)") + ", no result";
    add("result_present", !opt.require_results,
        opt.require_results ? what + "; a result is required (--require-results)" : what);
    return rep;
  }
  rep.has_result = true;
  std::optional<std::vector<GitInput>> git_inputs;
  if (manifest.ok()) {
    if (auto g = GitInputs(*manifest); g.ok()) git_inputs = std::move(*g);
  }
  CheckResult(&rep, *job, git_inputs ? &*git_inputs : nullptr);
  return rep;
}

void Auditor::State::CheckInputs(AuditReport* rep, const Poe& poe,
                                 const std::vector<GitInput>& git_inputs) {
  rep->inputs = poe.inputs;
  if (git_inputs.empty() && poe.inputs.empty()) return;
  std::string problem;
  size_t next = 0;  // both lists are in index order
  for (const PoeInput& got : poe.inputs) {
    while (next < git_inputs.size() && git_inputs[next].index < static_cast<size_t>(got.index)) {
      ++next;
    }
    const GitInput* want =
        next < git_inputs.size() && git_inputs[next].index == static_cast<size_t>(got.index)
            ? &git_inputs[next]
            : nullptr;
    const std::string where = "poe.json inputs[" + std::to_string(got.index) + "]";
    if (!want) {
      problem = where + " is not a git input of job.yaml";
    } else if (got.url != want->url || got.ref != want->ref.value_or("")) {
      problem = where + " names " + got.url.substr(0, 200) + " " + got.ref.substr(0, 80) +
                ", but job.yaml's input is " + want->url.substr(0, 200) + " " +
                want->ref.value_or("").substr(0, 80);
    } else if (want->commit && got.commit != *want->commit) {
      problem = where + " was commit " + got.commit + ", but job.yaml pins " + *want->commit;
    }
    if (!problem.empty()) break;
  }
  // A job that ran (it has an exit code or signal) was shown every input.
  const bool ran = poe.exit_code || poe.signal;
  if (problem.empty() && ran && poe.inputs.size() != git_inputs.size()) {
    problem = "the job ran but poe.json records " + std::to_string(poe.inputs.size()) + " of " +
              std::to_string(git_inputs.size()) + " git inputs";
  }
  std::string summary;
  for (const PoeInput& in : poe.inputs) {
    summary += (summary.empty() ? "" : ", ") + in.url.substr(0, 200) + " at " + in.commit;
  }
  rep->checks.push_back({"inputs", problem.empty(),
                         problem.empty() ? (summary.empty() ? "no input was resolved (" +
                                                                  poe.reason.substr(0, 200) + ")"
                                                            : "the job read " + summary)
                                         : problem});
}

void Auditor::State::CheckResult(AuditReport* rep, const CommitInfo& job,
                                 const std::vector<GitInput>* git_inputs) {
  auto add = [rep](const char* name, bool ok, std::string detail) {
    rep->checks.push_back({name, ok, std::move(detail)});
    return ok;
  };
  const std::string& job_hex = rep->job_hex;
  ResultTreeData tree;
  const bool verified = opt.replay_verified && opt.replay_verified->results.count(rep->result_commit);
  ResultReport rr = CheckResultCommit(LedgerLookup(ledger), rep->result_commit, result_limits, &tree, verified);
  bool have_trailers = false;
  for (auto& c : rr.checks) {
    if (c.name == "trailers" && c.ok) have_trailers = true;
    rep->checks.push_back(std::move(c));
  }
  if (!have_trailers) return;  // nothing below can be read reliably
  const ParsedResult& p = rr.parsed;
  rep->state = p.status;
  rep->worker_id = "ed25519:" + p.worker_hex;
  rep->claim_commit = p.parents[1];

  add("result_job_id", p.job_hex == job_hex,
      p.job_hex == job_hex ? "the result names this job"
                           : "the result's Job-Id is blake3:" + p.job_hex +
                                 ", but it sits at the result ref of blake3:" + job_hex);
  add("result_parent_job", p.parents[0] == rep->job_commit,
      p.parents[0] == rep->job_commit ? "first parent is the job commit"
                                      : "the result's first parent " + Short(p.parents[0]) +
                                            " is not this job's commit " + Short(rep->job_commit));

  // The claim commit is read before the worker check only for its time.
  auto claim = ReadLeaseCommit(*ledger, p.parents[1]);
  int64_t worker_time =
      claim.ok() ? std::max(p.commit_time_s, claim->info.time_s) : p.commit_time_s;

  // ---- worker_allowed ----
  {
    const PolicyEntry& wp = At(worker_time);
    auto key = ParseWorkerId(rep->worker_id);
    std::string detail;
    bool ok = false;
    if (!key.ok()) {
      detail = "Worker-Id: " + key.status().message();
    } else if (!wp.trust.ok()) {
      detail = wp.trust.message();
    } else {
      const AllowedSigner* by_policy =
          opt.trust_policy_workers
              ? wp.policy.workers.FindKey(*key, kSignerNamespaceGit, worker_time)
              : nullptr;
      const AllowedSigner* by_extra =
          opt.extra_workers ? opt.extra_workers->FindKey(*key, kSignerNamespaceGit, worker_time)
                            : nullptr;
      if (by_policy) {
        ok = true;
        detail = "worker " + Principal(*by_policy) + " is allowed by " + Describe(wp);
      } else if (by_extra) {
        ok = true;
        detail = "worker " + Principal(*by_extra) + " is allowed by --allowed-signers line " +
                 std::to_string(by_extra->line);
      } else {
        detail = "worker " + rep->worker_id + " is not allowed by " +
                 (opt.trust_policy_workers ? "the workers of " + Describe(wp) + " (in force at " +
                                                 TimeText(worker_time) + ")"
                                           : std::string("")) +
                 (opt.trust_policy_workers && opt.extra_workers ? " nor by " : "") +
                 (opt.extra_workers ? "--allowed-signers" : "");
      }
    }
    add("worker_allowed", ok, detail);
  }

  // ---- the claim commit (second parent) ----
  if (!claim.ok()) {
    add("claim_commit", false,
        "the result's second parent " + Short(p.parents[1]) +
            " is not a lease commit of this ledger: " + claim.status().message());
    return;
  }
  const LeaseCommit& lc = *claim;
  std::string shape;
  if (lc.info.tree != kEmptyTreeId) {
    shape = "it has a non-empty tree";
  } else if (lc.job_hex != job_hex) {
    shape = "it is a lease of job blake3:" + lc.job_hex + ", not of this job";
  } else if (lc.info.parents.empty() || lc.info.parents[0] != rep->job_commit) {
    shape = "its first parent is not this job's commit";
  } else if (lc.info.parents.size() == 1 && lc.epoch != 1) {
    shape = "a first claim (one parent) must open epoch 1; it says " + std::to_string(lc.epoch);
  } else if (lc.info.parents.size() > 2) {
    shape = "it has " + std::to_string(lc.info.parents.size()) + " parents";
  } else if (lc.info.parents.size() == 2) {
    auto prev = ReadLeaseCommit(*ledger, lc.info.parents[1]);
    if (!prev.ok()) {
      shape = "its previous lease " + Short(lc.info.parents[1]) +
              " is not a lease commit: " + prev.status().message();
    } else if (prev->epoch == lc.epoch) {
      shape = "it is a renewal of epoch " + std::to_string(lc.epoch) +
              ", not the claim that opened it (the ledger names the claim commit, "
              "claims/<worker>, as the second parent)";
    } else if (prev->epoch + 1 != lc.epoch) {
      shape = "it jumps from epoch " + std::to_string(prev->epoch) + " to " +
              std::to_string(lc.epoch) + "; a takeover opens the next epoch";
    }
  }
  bool takeover = lc.info.parents.size() == 2;
  if (!add("claim_commit", shape.empty(),
           shape.empty() ? std::string(takeover ? "takeover" : "claim") + " commit " +
                               Short(lc.info.id) + " opened epoch " + std::to_string(lc.epoch)
                         : "the result's second parent " + Short(lc.info.id) + ": " + shape)) {
    return;
  }

  const PolicyEntry& lp = At(lc.info.time_s);
  std::string why =
      lp.trust.ok() ? LeaseProblem(lc.info, job_hex, lp.policy.ledger_key) : lp.trust.message();
  add("claim_signature", why.empty(),
      why.empty() ? (lc.info.signature.empty()
                         ? "named by the signed log head " + Short(head_id)
                         : "signed by the ledger key of " + Describe(lp))
                  : "claim commit " + Short(lc.info.id) + ": " + why);

  {
    std::string detail;
    auto key = ParseWorkerId("ed25519:" + lc.worker_hex);
    auto sig = HexDecode(lc.request_sig_hex);
    int64_t skew = lc.requested_at_ms - lc.info.time_s * 1000;
    if (!key.ok() || !sig.ok() || sig->size() != 64) {
      detail = "Worker-Id or Request-Sig is malformed";
    } else if (!Ed25519Verify(
                    *key, rpc::ClaimPayload(job_hex, lc.worker_hex, lc.epoch, lc.requested_at_ms),
                    sig->data())
                    .ok()) {
      detail = "Request-Sig does not verify for worker ed25519:" + lc.worker_hex +
               " over the claim request of job " + Short(job_hex) + " at " +
               std::to_string(lc.requested_at_ms);
    } else if (skew < -rpc::kMaxRequestSkewMs || skew >= rpc::kMaxRequestSkewMs + 1000) {
      detail = "Requested-At " + FormatRfc3339Millis(lc.requested_at_ms) +
               " is more than 60 s from the commit time " + TimeText(lc.info.time_s);
    }
    add("claim_request_sig", detail.empty(),
        detail.empty() ? "the worker's signed claim request verifies" : detail);
  }

  bool same = lc.worker_hex == p.worker_hex && lc.epoch == p.epoch;
  add("claim_matches_result", same,
      same ? "claim is by the result's worker at its epoch"
           : "the claim commit " + Short(lc.info.id) + " is worker ed25519:" +
                 lc.worker_hex.substr(0, 16) + "… at epoch " + std::to_string(lc.epoch) +
                 "; the result is worker ed25519:" + p.worker_hex.substr(0, 16) + "… at epoch " +
                 std::to_string(p.epoch));

  auto claim_ref = ledger->ResolveRef(ClaimRef(job_hex, p.worker_hex));
  bool ref_ok = claim_ref.ok() && *claim_ref == lc.info.id;
  add("claim_ref", ref_ok,
      ref_ok ? "claims/" + p.worker_hex.substr(0, 16) + "… names the claim commit"
             : "refs/gatos/jobs/" + Short(job_hex) + "…/claims/" + p.worker_hex.substr(0, 16) +
                   "… is " +
                   (claim_ref.ok() ? (claim_ref->empty() ? "absent" : Short(*claim_ref))
                                   : claim_ref.status().message()) +
                   ", not the result's claim commit " + Short(lc.info.id));

  // ---- lease_current: fencing, as the ledger applied it at acceptance ----
  {
    std::string detail;
    auto tip_id = ledger->ResolveRef(JobRef(job_hex, "lease"));
    if (!tip_id.ok() || tip_id->empty()) {
      detail =
          "the job has a result but no lease ref (the ledger keeps it after a result; "
          "was it deleted, or is the clone missing refs/gatos/*?)";
    } else {
      auto tip = ReadLeaseCommit(*ledger, *tip_id);
      if (!tip.ok()) {
        detail = "the lease ref's commit " + Short(*tip_id) +
                 " is not a lease commit: " + tip.status().message();
      } else if (tip->worker_hex != p.worker_hex || tip->epoch != p.epoch) {
        detail = "stale result: the job's lease is at epoch " + std::to_string(tip->epoch) +
                 ", held by ed25519:" + tip->worker_hex.substr(0, 16) + "… (lease commit " +
                 Short(tip->info.id) + "), but the result is from epoch " +
                 std::to_string(p.epoch) + " of ed25519:" + p.worker_hex.substr(0, 16) +
                 "…; the ledger refuses a stale holder's result";
      } else if (tip->info.id != lc.info.id) {
        const PolicyEntry& tp = At(tip->info.time_s);
        std::string tip_sig = tp.trust.ok() ? LeaseProblem(tip->info, job_hex, tp.policy.ledger_key)
                                            : tp.trust.message();
        if (!tip_sig.empty()) {
          detail = "lease commit " + Short(tip->info.id) + ": " + tip_sig;
        } else {
          // Renewals chain back to the claim through their second parents.
          std::string cur = tip->info.id;
          std::vector<std::string> parents = tip->info.parents;
          size_t steps = 0;
          while (detail.empty() && cur != lc.info.id) {
            if (++steps > kMaxLeaseChain || parents.size() != 2 || parents[0] != rep->job_commit) {
              detail = "the lease ref's chain of renewals does not reach the claim commit " +
                       Short(lc.info.id) + " (stopped at " + Short(cur) + ")";
              break;
            }
            cur = parents[1];
            if (cur == lc.info.id) break;
            auto step = ReadLeaseCommit(*ledger, cur);
            if (!step.ok() || step->epoch != p.epoch || step->worker_hex != p.worker_hex) {
              detail = "the lease ref's chain of renewals leaves epoch " + std::to_string(p.epoch) +
                       " at " + Short(cur) + " before reaching the claim commit " +
                       Short(lc.info.id);
              break;
            }
            parents = step->info.parents;
          }
        }
      }
    }
    add("lease_current", detail.empty(),
        detail.empty() ? "the lease ref is the result's epoch " + std::to_string(p.epoch) : detail);
  }

  // ---- attest_program ----
  if (opt.trusted_programs) {
    bool ok = opt.trusted_programs->count(p.attest_program) > 0;
    add("attest_program", ok,
        ok ? "worker binary " + p.attest_program + " is trusted"
           : "Attest-Program " + p.attest_program + " is not in the trusted programs list");
  } else {
    add("attest_program", true, "not checked (no trusted programs list given)");
  }

  if (git_inputs) CheckInputs(rep, p.poe, *git_inputs);
  CheckProvenance(rep, p, tree, verified);
}

void Auditor::State::CheckProvenance(AuditReport* rep, const ParsedResult& p, const ResultTreeData& tree,
                                     bool signature_verified) {
  bool present = false;
  rep->checks.push_back(CheckResultProvenance(*ledger, p, rep->job_commit, result_limits.max_file_bytes,
                                              opt.require_provenance, &present, &tree, signature_verified));
  rep->has_provenance = present;
}

namespace {

// A file of the result tree `p`: from `tree` when given (read by
// CheckResultCommit), else from the repository; the same errors either way.
Result<std::string> ResultFileBytes(Ledger& ledger, const ParsedResult& p, const ResultTreeData* tree,
                                    const std::string& path, size_t max_bytes) {
  if (!tree) return ledger.ReadFileAtCommit(p.commit_id, path, max_bytes);
  auto it = tree->find(path);
  if (it == tree->end()) return NotFoundError(path + " not found in commit " + p.commit_id);
  if (it->second.data.size() > max_bytes) {
    return InvalidArgumentError("blob " + it->second.id + " is " + std::to_string(it->second.data.size()) +
                                " bytes, over the limit of " + std::to_string(max_bytes));
  }
  return it->second.data;
}

}  // namespace

ResultCheck CheckResultProvenance(Ledger& ledger_ref, const ParsedResult& p,
                                  const std::string& job_commit, size_t max_file_bytes,
                                  bool require, bool* present_out, const ResultTreeData* tree,
                                  bool signature_verified) {
  Ledger* ledger = &ledger_ref;
  ResultCheck out{"provenance", false, ""};
  auto add = [&out](bool ok, std::string detail) {
    out.ok = ok;
    out.detail = std::move(detail);
  };
  const std::string job_hex = p.job_hex;
  const std::string worker_id = "ed25519:" + p.worker_hex;
  *present_out = false;
  bool present = std::any_of(p.tree_files.begin(), p.tree_files.end(),
                             [](const PoeOutput& o) { return o.path == kProvenanceFileName; });
  if (!present) {
    add(!require, std::string("no ") + kProvenanceFileName + " in the result" +
                      (require ? "; provenance is required (--require-provenance)" : ""));
    return out;
  }
  *present_out = true;
  auto bytes = ResultFileBytes(*ledger, p, tree, kProvenanceFileName, kMaxEnvelopeBytes);
  if (!bytes.ok()) {
    add(false, std::string(kProvenanceFileName) + ": " + bytes.status().message());
    return out;
  }
  auto key = ParseWorkerId(worker_id);
  if (!key.ok()) {
    add(false, "Worker-Id: " + key.status().message());
    return out;
  }
  auto st = VerifyProvenanceEnvelope(*bytes, *key, signature_verified);
  if (!st.ok()) {
    add(false, std::string(kProvenanceFileName) + ": " + st.status().message());
    return out;
  }
  const Poe& poe = p.poe;
  std::string diff;
  auto differs = [&diff](const char* field, const std::string& got, const std::string& want) {
    if (diff.empty() && got != want) {
      diff = std::string(field) + " is \"" + got.substr(0, 80) + "\" but the result's is \"" +
             want.substr(0, 80) + "\"";
    }
  };
  differs("job_id", st->job_id, "blake3:" + job_hex);
  differs("builder.id", st->worker_id, worker_id);
  differs("lease_epoch", std::to_string(st->lease_epoch), std::to_string(p.epoch));
  differs("runner.program", st->runner_program, p.attest_program);
  differs("runner.version", st->runner_version, poe.runner_version);
  differs("runner.platform", st->runner_platform, poe.runner_platform);
  differs("startedOn", st->started_at, poe.started_at);
  differs("finishedOn", st->finished_at, poe.finished_at);
  if (!st->job_commit.empty()) differs("job commit", st->job_commit, job_commit);
  if (diff.empty() && st->inputs != poe.inputs) {
    diff = "its resolvedDependencies name " + std::to_string(st->inputs.size()) +
           " input commit(s) that differ from poe.json's " + std::to_string(poe.inputs.size());
  }
  // Subjects: every tree file but poe.json and the envelope, same digests.
  std::vector<const PoeOutput*> files;
  for (const PoeOutput& o : p.tree_files) {
    if (o.path != kProvenanceFileName) files.push_back(&o);
  }
  if (diff.empty()) {
    size_t i = 0, j = 0;
    const auto& subs = st->subjects;
    while (diff.empty() && (i < files.size() || j < subs.size())) {
      if (j == subs.size() || (i < files.size() && files[i]->path < subs[j].path)) {
        diff = "result file \"" + files[i]->path + "\" is not a subject of the statement";
      } else if (i == files.size() || subs[j].path < files[i]->path) {
        diff = "subject \"" + subs[j].path.substr(0, 200) + "\" is not a file of the result";
      } else if ("blake3:" + subs[j].blake3_hex != files[i]->hash) {
        diff = "subject \"" + subs[j].path + "\" has blake3 " + subs[j].blake3_hex +
               " but the file hashes to " + files[i]->hash.substr(7);
      } else {
        auto data = ResultFileBytes(*ledger, p, tree, files[i]->path, max_file_bytes);
        if (!data.ok()) {
          diff = "\"" + files[i]->path + "\": " + data.status().message();
        } else if (std::string sha = Sha256Hex(*data); sha != subs[j].sha256_hex) {  // BLAKE3: compared above
          diff = "subject \"" + subs[j].path + "\" has sha256 " + subs[j].sha256_hex +
                 " but the file hashes to " + sha;
        }
        ++i;
        ++j;
      }
    }
  }
  if (!diff.empty()) {
    add(false, std::string(kProvenanceFileName) + ": " + diff);
    return out;
  }
  add(true, "in-toto statement signed by Worker-Id; " + std::to_string(files.size()) +
                " subjects match the result's files");
  return out;
}

Auditor::Auditor(Ledger* ledger, VerifyOptions options) : state_(std::make_unique<State>()) {
  state_->ledger = ledger;
  state_->opt = std::move(options);
}

Auditor::~Auditor() = default;

Result<AuditReport> Auditor::VerifyJob(std::string_view job) {
  std::string hex(job.rfind("blake3:", 0) == 0 ? job.substr(7) : job);
  if (!IsJobIdHex(hex)) {
    return InvalidArgumentError("\"" + std::string(job.substr(0, 80)) +
                                "\" is not a job id; expected blake3:<64 lowercase hex> or the "
                                "64 hex alone ('gatos ls' lists the jobs)");
  }
  return state_->Verify(hex);
}

Result<AuditSummary> Auditor::VerifyAll() {
  GATOS_RETURN_IF_ERROR(state_->Load());
  std::vector<std::string> jobs;
  GATOS_RETURN_IF_ERROR(
      state_->ledger->ForEachJob([&jobs](std::string_view hex) { jobs.emplace_back(hex); }));
  std::sort(jobs.begin(), jobs.end());
  AuditSummary out;
  out.jobs.reserve(jobs.size());
  size_t threads = state_->opt.threads ? state_->opt.threads : ThreadsFor(jobs.size(), 64);
  std::vector<std::optional<Result<AuditReport>>> done(jobs.size());
  if (threads > 1) {
    // Jobs are independent: each other thread verifies its share with a
    // repository handle and an Auditor of its own; this thread takes share 0
    // (and reports progress). The reports are the ones one thread makes.
    std::atomic<size_t> finished{0};
    RunOnThreads(threads, [&](size_t t) {
      std::unique_ptr<Ledger> own;
      std::unique_ptr<Auditor> helper;
      State* st = state_.get();
      if (t > 0) {
        auto l = Ledger::Open(state_->ledger->path());
        if (!l.ok()) return;  // its share is verified below, on this thread
        own = std::move(*l);
        VerifyOptions o = state_->opt;
        o.progress = nullptr;
        helper = std::make_unique<Auditor>(own.get(), std::move(o));
        if (!helper->state_->Load().ok()) return;
        st = helper->state_.get();
      }
      for (size_t i = t; i < jobs.size(); i += threads) {
        done[i] = st->Verify(jobs[i]);
        size_t n = ++finished;
        if (t == 0 && state_->opt.progress) state_->opt.progress(n, jobs.size());
      }
    });
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string& hex = jobs[i];
    if (!done[i]) done[i] = state_->Verify(hex);
    GATOS_ASSIGN_OR_RETURN(AuditReport r, std::move(*done[i]));
    if (!r.ok()) {
      ++out.failed;
    } else if (r.has_result) {
      ++out.verified;
    } else {
      ++out.without_result;
    }
    out.jobs.push_back(std::move(r));
    if (threads <= 1 && state_->opt.progress) state_->opt.progress(out.jobs.size(), jobs.size());
  }
  return out;
}

Result<AuditReport> VerifyJob(Ledger& ledger, std::string_view job, const VerifyOptions& options) {
  Auditor a(&ledger, options);
  return a.VerifyJob(job);
}

Result<AuditSummary> VerifyAll(Ledger& ledger, const VerifyOptions& options) {
  Auditor a(&ledger, options);
  return a.VerifyAll();
}

Result<std::set<std::string>> ParseTrustedPrograms(std::string_view text,
                                                   std::string_view source_name) {
  std::set<std::string> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    if (line.empty() || line[0] == '#') continue;
    std::string_view token = line.substr(0, line.find_first_of(" \t"));
    std::string hex(token.rfind("blake3:", 0) == 0 ? token.substr(7) : token);
    if (!IsLowerHex(hex, 64)) {
      return InvalidArgumentError(std::string(source_name) + ":" + std::to_string(line_no) +
                                  ": expected blake3:<64 lowercase hex> or b3sum output "
                                  "(\"<hex>  NAME\"), got \"" +
                                  std::string(token.substr(0, 80)) + "\"");
    }
    out.insert("blake3:" + hex);
  }
  return out;
}

nlohmann::json AuditReportToJson(const AuditReport& r) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& in : r.inputs) {
    inputs.push_back(
        {{"index", in.index}, {"url", in.url}, {"ref", in.ref}, {"commit", in.commit}});
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
  }
  return {{"job_id", "blake3:" + r.job_hex},
          {"state", r.state},
          {"ok", r.ok()},
          {"dev_mode", r.dev_mode},
          {"has_result", r.has_result},
          {"has_provenance", r.has_provenance},
          {"job_commit", r.job_commit},
          {"result_commit", r.result_commit},
          {"claim_commit", r.claim_commit},
          {"policy_commit", r.policy_commit},
          {"worker_id", r.worker_id},
          {"inputs", inputs},
          {"checks", checks}};
}

}  // namespace gatos
