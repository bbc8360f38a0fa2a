#include "gatos/job_plane.h"

#include "gatos/encoding.h"
#include "gatos/sha256.h"
#include "gatos/sshsig.h"
#include "gatos/trailers.h"

namespace gatos {

namespace {
constexpr char kLedgerName[] = "gatos ledger";
constexpr char kLedgerEmail[] = "ledger@gatos.invalid";
}  // namespace

Outcome Outcome::FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return {};
    case StatusCode::kAborted:
    case StatusCode::kUnavailable: return Error(TransitionError::kRetry, s.message());
    case StatusCode::kPermissionDenied: return Error(TransitionError::kUnauthorized, s.message());
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound: return Error(TransitionError::kInvalid, s.message());
    default: return Error(TransitionError::kRetry, s.message());
  }
}

JobPlane::JobPlane(Ledger* ledger, Ed25519PrivateKey ledger_key, ClockFn clock)
    : ledger_(ledger), ledger_key_(std::move(ledger_key)), clock_(std::move(clock)) {}

Status JobPlane::LoadPolicy() {
  GATOS_ASSIGN_OR_RETURN(policy_, ledger_->ReadPolicy());
  if (policy_.ledger_key != ledger_key_.public_key()) {
    return PermissionDeniedError("the ledger key does not match ledger.pub in " +
                                 std::string(kPolicyRef) + " (wrong --ledger-key?)");
  }
  return OkStatus();
}

Result<JobCommitCheck> JobPlane::CheckJobCommit(Ledger& view, const std::string& commit_id,
                                                std::string_view expected_hex) const {
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, view.ReadCommit(commit_id));
  auto yaml = view.ReadFileAtCommit(commit_id, "job.yaml",
                                    static_cast<size_t>(policy_.settings.max_manifest_bytes));
  if (!yaml.ok()) {
    if (yaml.status().code() == StatusCode::kNotFound) {
      return InvalidArgumentError("commit " + commit_id.substr(0, 12) +
                                  " has no job.yaml at the top of its tree");
    }
    return InvalidArgumentError("job.yaml: " + yaml.status().message());
  }
  ManifestLimits limits;
  limits.max_bytes = static_cast<size_t>(policy_.settings.max_manifest_bytes);
  GATOS_ASSIGN_OR_RETURN(Manifest m, ParseManifest(*yaml, "job.yaml", ManifestFormat::kYaml, limits));
  JobCommitCheck out;
  out.job_hex = JobIdHex(m);
  if (m.timeout_seconds > policy_.settings.max_timeout_seconds) {
    return InvalidArgumentError("job.yaml: timeout: " + std::to_string(m.timeout_seconds) +
                                " s is over this ledger's ceiling of " +
                                std::to_string(policy_.settings.max_timeout_seconds) + " s");
  }
  if (m.policy_root && *m.policy_root != PolicyRoot(policy_)) {
    return InvalidArgumentError("job.yaml: policy_root: " + *m.policy_root +
                                " does not match this ledger's policy " + PolicyRoot(policy_));
  }
  if (!expected_hex.empty() && out.job_hex != expected_hex) {
    return InvalidArgumentError("job.yaml hashes to blake3:" + out.job_hex +
                                " but the ref names job " + std::string(expected_hex));
  }
  auto msg = ParseCommitMessage(c.message);
  std::string want = "blake3:" + out.job_hex;
  if (!msg.ok()) return InvalidArgumentError("commit message: " + msg.status().message());
  auto trailer = RequireUniqueTrailer(msg->trailers, "Job-Id");
  if (!trailer.ok() || *trailer != want) {
    return InvalidArgumentError(
        "the job commit's message must end with the trailer 'Job-Id: " + want + "'" +
        (trailer.ok() ? " (it has 'Job-Id: " + *trailer + "')" : "") +
        "; 'gatos job id job.yaml' prints the id, and 'git commit --trailer' adds it");
  }
  if (c.signature.empty()) {
    if (!policy_.settings.dev_mode) {
      return PermissionDeniedError(
          "the job commit is not signed; sign it with an allowed submitter key "
          "(git commit -S with gpg.format=ssh, or gatos submit --sign-key KEY)");
    }
    out.manifest = std::move(m);
    return out;
  }
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) {
    return PermissionDeniedError("the job commit's signature is not an SSH signature: " +
                                 sig.status().message());
  }
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return PermissionDeniedError("the job commit's signature does not verify: " + v.message());
  const AllowedSigner* who =
      policy_.submitters.FindKey(sig->key, kSignerNamespaceGit, clock_() / 1000);
  if (!who) {
    if (policy_.settings.dev_mode) {
      out.manifest = std::move(m);
      return out;
    }
    return PermissionDeniedError("the job commit is signed by " + sig->key.WorkerId() +
                                 ", which is not an allowed submitter of this ledger "
                                 "(gatos policy allow-submitter adds one)");
  }
  out.signer = who->principals.empty() ? sig->key.WorkerId() : who->principals[0];
  out.manifest = std::move(m);
  return out;
}

Outcome JobPlane::AdoptJob(const std::string& commit_id, std::string* job_hex, bool* existing) {
  *existing = false;
  auto check = CheckJobCommit(*ledger_, commit_id, "");
  if (!check.ok()) return Outcome::FromStatus(check.status());
  *job_hex = check->job_hex;
  return AdoptCheckedJob(commit_id, *check, existing);
}

Outcome JobPlane::AdoptCheckedJob(const std::string& commit_id, const JobCommitCheck& check,
                                  bool* existing) {
  *existing = false;
  std::string ref = JobRef(check.job_hex, "job");
  auto current = ledger_->ResolveRef(ref);
  if (!current.ok()) return Outcome::FromStatus(current.status());
  if (!current->empty()) {
    *existing = true;
    return {};
  }
  Status s = ledger_->UpdateRefs({{ref, "", commit_id}}, "gatos: submit");
  if (s.code() == StatusCode::kAborted) {
    // Someone adopted the same job between our read and our CAS.
    *existing = true;
    return {};
  }
  return Outcome::FromStatus(s);
}

Outcome JobPlane::VerifyWorkerRequest(const LeaseRequest& req, const std::string& payload) const {
  auto key = ParseWorkerId("ed25519:" + req.worker_hex);
  if (!key.ok()) return Outcome::Error(TransitionError::kInvalid, "worker id: " + key.status().message());
  if (!IsJobIdHex(req.job_hex)) {
    return Outcome::Error(TransitionError::kInvalid, "job id \"" + req.job_hex.substr(0, 80) +
                                                         "\" is not 64 lowercase hex");
  }
  int64_t now = clock_();
  if (req.requested_at_ms < now - rpc::kMaxRequestSkewMs || req.requested_at_ms > now + rpc::kMaxRequestSkewMs) {
    return Outcome::Error(TransitionError::kUnauthorized,
                          "request time " + FormatRfc3339Millis(req.requested_at_ms) +
                              " is more than 60 s from the ledger's clock (" +
                              FormatRfc3339Millis(now) + "); check the worker's clock");
  }
  auto sig = HexDecode(req.sig_hex);
  if (!sig.ok() || sig->size() != 64) {
    return Outcome::Error(TransitionError::kUnauthorized, "request signature is not 128 hex characters");
  }
  if (!Ed25519Verify(*key, payload, sig->data()).ok()) {
    return Outcome::Error(TransitionError::kUnauthorized,
                          "request signature does not verify for worker " + req.worker_hex.substr(0, 16));
  }
  if (!policy_.workers.FindKey(*key, kSignerNamespaceGit, now / 1000)) {
    return Outcome::Error(TransitionError::kUnauthorized,
                          "worker " + key->WorkerId() +
                              " is not allowed by this ledger's policy (gatos policy allow-worker)");
  }
  return {};
}

Result<std::string> JobPlane::WriteLeaseCommit(const JobSnapshot& snap, const LeaseRequest& req,
                                               int64_t epoch, int64_t expires_ms,
                                               const std::string& parent_lease, const char* kind) {
  CommitMessage msg;
  msg.body = std::string("gatos: ") + kind + " job " + snap.job_hex.substr(0, 12) + " by worker " +
             req.worker_hex.substr(0, 12) + " (epoch " + std::to_string(epoch) + ")";
  msg.trailers = {
      {"Job-Id", "blake3:" + snap.job_hex},
      {"Worker-Id", "ed25519:" + req.worker_hex},
      {"Lease-Epoch", std::to_string(epoch)},
      {"Lease-Expires", FormatRfc3339Millis(expires_ms)},
      {"Requested-At", std::to_string(req.requested_at_ms)},
      {"Request-Sig", "ed25519:" + req.sig_hex},
  };
  std::vector<std::string> parents = {snap.job_commit};
  if (!parent_lease.empty()) parents.push_back(parent_lease);
  return ledger_->WriteCommit(kEmptyTreeId, parents, FormatCommitMessage(msg), &ledger_key_,
                              kLedgerName, kLedgerEmail, clock_());
}

Outcome JobPlane::Claim(const LeaseRequest& req, LeaseGrant* grant) {
  Outcome v = VerifyWorkerRequest(req, rpc::ClaimPayload(req.job_hex, req.worker_hex, req.requested_at_ms));
  if (!v.ok()) return v;
  auto snap = ledger_->ReadJob(req.job_hex);
  if (!snap.ok()) return Outcome::FromStatus(snap.status());
  int64_t now = clock_();
  ClaimDecision d;
  Decision dec = DecideClaim(*snap, req.worker_hex, now, &d);
  if (!dec.ok()) return Outcome::Error(dec.error, dec.message);
  int64_t expires = now + policy_.settings.lease_ms;
  auto commit = WriteLeaseCommit(*snap, req, d.epoch, expires, d.expected_lease,
                                 d.takeover ? "takeover" : "claim");
  if (!commit.ok()) return Outcome::FromStatus(commit.status());
  std::string claim_ref = ClaimRef(req.job_hex, req.worker_hex);
  auto old_claim = ledger_->ResolveRef(claim_ref);
  if (!old_claim.ok()) return Outcome::FromStatus(old_claim.status());
  Status s = ledger_->UpdateRefs({{JobRef(req.job_hex, "lease"), d.expected_lease, *commit},
                                  {claim_ref, *old_claim, *commit}},
                                 "gatos: claim");
  if (s.code() == StatusCode::kAborted) {
    return Outcome::Error(TransitionError::kLostRace, "job " + req.job_hex + " was claimed concurrently");
  }
  if (!s.ok()) return Outcome::FromStatus(s);
  *grant = LeaseGrant{*commit, d.epoch, expires, snap->job_commit};
  return {};
}

Outcome JobPlane::Renew(const LeaseRequest& req, LeaseGrant* grant) {
  Outcome v = VerifyWorkerRequest(
      req, rpc::RenewPayload(req.job_hex, req.worker_hex, req.epoch, req.requested_at_ms));
  if (!v.ok()) return v;
  auto snap = ledger_->ReadJob(req.job_hex);
  if (!snap.ok()) return Outcome::FromStatus(snap.status());
  int64_t now = clock_();
  Decision dec = DecideRenew(*snap, req.worker_hex, req.epoch, now);
  if (!dec.ok()) return Outcome::Error(dec.error, dec.message);
  int64_t expires = now + policy_.settings.lease_ms;
  auto commit = WriteLeaseCommit(*snap, req, req.epoch, expires, snap->lease->commit, "renew");
  if (!commit.ok()) return Outcome::FromStatus(commit.status());
  Status s = ledger_->UpdateRefs({{JobRef(req.job_hex, "lease"), snap->lease->commit, *commit}},
                                 "gatos: renew");
  if (s.code() == StatusCode::kAborted) {
    // The lease moved under us: a takeover or a result. Re-decide on fresh refs.
    return Outcome::Error(TransitionError::kStaleOwner, "lease of job " + req.job_hex + " moved during renew");
  }
  if (!s.ok()) return Outcome::FromStatus(s);
  *grant = LeaseGrant{*commit, req.epoch, expires, snap->job_commit};
  return {};
}

Outcome JobPlane::Cancel(std::string_view job_hex, std::string_view requester_hex, bool* already) {
  auto snap = ledger_->ReadJob(job_hex);
  if (!snap.ok()) return Outcome::FromStatus(snap.status());
  Decision dec = DecideCancel(*snap, already);
  if (!dec.ok()) return Outcome::Error(dec.error, dec.message);
  if (*already) return {};
  CommitMessage msg;
  msg.body = "gatos: cancel job " + std::string(job_hex.substr(0, 12));
  msg.trailers = {{"Job-Id", "blake3:" + std::string(job_hex)},
                  {"Cancelled-By", "ed25519:" + std::string(requester_hex)},
                  {"Cancelled-At", FormatRfc3339Millis(clock_())}};
  auto commit = ledger_->WriteCommit(kEmptyTreeId, {snap->job_commit}, FormatCommitMessage(msg),
                                     &ledger_key_, kLedgerName, kLedgerEmail, clock_());
  if (!commit.ok()) return Outcome::FromStatus(commit.status());
  Status s = ledger_->UpdateRefs({{JobRef(job_hex, "cancel"), "", *commit}}, "gatos: cancel");
  if (s.code() == StatusCode::kAborted) {
    *already = true;
    return {};
  }
  return Outcome::FromStatus(s);
}

Outcome JobPlane::CheckResult(const ObjectLookup& lookup, const std::string& commit_id,
                              std::string_view expected_job_hex, JobSnapshot* snap,
                              ParsedResult* parsed) {
  ResultCheckLimits limits;
  limits.max_file_bytes = static_cast<size_t>(policy_.settings.max_result_bytes);
  ResultReport report = CheckResultCommit(lookup, commit_id, limits);
  if (const ResultCheck* bad = report.first_failure()) {
    TransitionError e = bad->name == "attest_sig" || bad->name == "commit_signature"
                            ? TransitionError::kUnauthorized
                            : TransitionError::kInvalid;
    return Outcome::Error(e, "result " + commit_id.substr(0, 12) + " refused: " + bad->name + ": " +
                                 bad->detail);
  }
  *parsed = report.parsed;
  const ParsedResult& p = report.parsed;
  if (!expected_job_hex.empty() && p.job_hex != expected_job_hex) {
    return Outcome::Error(TransitionError::kInvalid,
                          "result refused: its Job-Id is blake3:" + p.job_hex + " but it was sent for job " +
                              std::string(expected_job_hex));
  }
  auto s = ledger_->ReadJob(p.job_hex);
  if (!s.ok()) {
    if (s.status().code() == StatusCode::kNotFound) {
      return Outcome::Error(TransitionError::kInvalid, "result refused: job " + p.job_hex + " is not in this ledger");
    }
    return Outcome::FromStatus(s.status());
  }
  *snap = *s;
  if (!snap->result_commit.empty() && snap->result_commit == commit_id) return {};
  if (p.parents[0] != snap->job_commit) {
    return Outcome::Error(TransitionError::kInvalid, "result refused: its first parent " + p.parents[0].substr(0, 12) +
                                                         " is not the commit of job " + p.job_hex.substr(0, 12));
  }
  auto key = ParseWorkerId("ed25519:" + p.worker_hex);
  if (!key.ok() || !policy_.workers.FindKey(*key, kSignerNamespaceGit, clock_() / 1000)) {
    return Outcome::Error(TransitionError::kUnauthorized,
                          "result refused: worker ed25519:" + p.worker_hex +
                              " is not allowed by this ledger's policy (gatos policy allow-worker)");
  }
  Decision d = DecideResult(*snap, p.worker_hex, p.epoch, clock_(), policy_.settings.result_grace_ms);
  if (!d.ok()) return Outcome::Error(d.error, d.message);
  // Fencing: the second parent is the claim commit that opened this worker's current epoch.
  auto claim = ledger_->ResolveRef(ClaimRef(p.job_hex, p.worker_hex));
  if (!claim.ok()) return Outcome::FromStatus(claim.status());
  if (p.parents[1] != *claim) {
    return Outcome::Error(TransitionError::kStaleOwner,
                          "result refused: its second parent " + p.parents[1].substr(0, 12) +
                              " is not the claim commit of worker " + p.worker_hex.substr(0, 16) +
                              " for job " + p.job_hex.substr(0, 12));
  }
  return {};
}

Outcome JobPlane::AcceptResult(const std::vector<GitObject>& objects, const std::string& commit_id,
                               ParsedResult* accepted, bool* existing) {
  *existing = false;
  // Parents are looked up in the ledger only, never in the batch: a worker
  // cannot bring its own "claim commit".
  JobSnapshot snap;
  Outcome o = CheckResult(BatchLookup(&objects, nullptr), commit_id, "", &snap, accepted);
  if (!o.ok()) return o;
  if (snap.result_commit == commit_id) {
    *existing = true;
    return {};
  }
  for (const GitObject& obj : objects) {
    auto id = ledger_->WriteRawObject(obj.type, obj.data);
    if (!id.ok()) return Outcome::FromStatus(id.status());
  }
  std::string result_ref = JobRef(accepted->job_hex, "result");
  std::string lease_ref = JobRef(accepted->job_hex, "lease");
  Status s = ledger_->UpdateRefs({{result_ref, "", commit_id},
                                  {lease_ref, snap.lease->commit, snap.lease->commit}},
                                 "gatos: result");
  if (s.code() == StatusCode::kAborted) {
    auto again = ledger_->ResolveRef(result_ref);
    if (again.ok() && *again == commit_id) {
      *existing = true;
      return {};
    }
    return Outcome::Error(TransitionError::kStaleOwner,
                          "result refused: the lease of job " + accepted->job_hex.substr(0, 12) +
                              " moved while the result was being recorded");
  }
  return Outcome::FromStatus(s);
}

Outcome JobPlane::CheckResultPush(Ledger& view, std::string_view job_hex, const std::string& commit_id) {
  JobSnapshot snap;
  ParsedResult parsed;
  return CheckResult(LedgerLookup(&view), commit_id, job_hex, &snap, &parsed);
}

}  // namespace gatos
