#include "gatos/ledger/checks.h"

#include "gatos/crypto/keys.h"
#include "gatos/crypto/sha256.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/git/git_object.h"
#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/trailers.h"

namespace gatos {

std::string RejectReasonLabel(const Status& s) {
  const std::string& m = s.message();
  if (s.code() == StatusCode::kPermissionDenied) {
    if (m.find("not signed") != std::string::npos) return "unsigned";
    if (m.find("not an allowed submitter") != std::string::npos) return "untrusted_signer";
    if (m.find("may not submit to pool") != std::string::npos) return "pool";
    return "bad_signature";
  }
  if (m.find("but the ref names job") != std::string::npos) return "wrong_job_id";
  if (m.find("Job-Id") != std::string::npos) return "missing_trailer";
  if (m.find("policy_root") != std::string::npos) return "policy_root";
  if (m.find("regular file") != std::string::npos) return "not_a_file";
  return "bad_manifest";
}

Status CheckManifestPolicy(const Manifest& m, const Policy& policy) {
  if (m.timeout_seconds > policy.settings.max_timeout_seconds) {
    return InvalidArgumentError("job.yaml: timeout: " + std::to_string(m.timeout_seconds) +
                                " s is over this ledger's ceiling of " +
                                std::to_string(policy.settings.max_timeout_seconds) + " s");
  }
  if (m.resources) {
    if (std::string over = ResourcesOverMaximum(*m.resources, policy.settings.job_maxima);
        !over.empty()) {
      return InvalidArgumentError("job.yaml: " + over +
                                  "; ask for less, or ask an operator to raise it ('gatos policy "
                                  "set max_job_...')");
    }
  }
  if (!policy.settings.input_url_prefixes.empty()) {
    GATOS_ASSIGN_OR_RETURN(std::vector<GitInput> inputs, GitInputs(m));
    for (const GitInput& in : inputs) {
      if (!GitUrlHasPrefix(in.url, policy.settings.input_url_prefixes)) {
        return PermissionDeniedError("job.yaml: inputs[" + std::to_string(in.index) + "].url: " +
                                     TruncateUtf8(in.url, 200) +
                                     " is not under this ledger's allowed input URL prefixes "
                                     "(input_url_prefixes; 'gatos policy show' lists them)");
      }
    }
  }
  if (m.policy_root && *m.policy_root != PolicyRoot(policy)) {
    return InvalidArgumentError("job.yaml: policy_root: " + *m.policy_root +
                                " does not match this ledger's policy " + PolicyRoot(policy));
  }
  return OkStatus();
}

Result<JobCommitCheck> CheckJobCommit(const ObjectLookup& lookup, const std::string& commit_id,
                                      std::string_view expected_hex, const Policy& policy,
                                      int64_t now_ms, const Ed25519PublicKey* verified_signer) {
  if (!IsLowerHex(commit_id, 40)) return InvalidArgumentError("\"" + commit_id.substr(0, 60) + "\" is not a commit id");
  auto obj = lookup(commit_id);
  if (!obj.ok()) {
    if (obj.status().code() == StatusCode::kNotFound) {
      return InvalidArgumentError("commit " + commit_id.substr(0, 12) + " was not sent");
    }
    return obj.status();
  }
  if (obj->first != ObjectType::kCommit) return InvalidArgumentError(commit_id.substr(0, 12) + " is not a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj->second, commit_id));
  auto tree = lookup(c.tree);
  if (!tree.ok() || tree->first != ObjectType::kTree) {
    return InvalidArgumentError("commit " + commit_id.substr(0, 12) + ": its tree was not sent");
  }
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree->second, c.tree));
  const TreeEntry* job_yaml = nullptr;
  for (const auto& e : entries) {
    if (e.name == "job.yaml") job_yaml = &e;
  }
  if (!job_yaml) {
    return InvalidArgumentError("commit " + commit_id.substr(0, 12) + " has no job.yaml at the top of its tree");
  }
  if (job_yaml->mode != 0100644 && job_yaml->mode != 0100755) {
    return InvalidArgumentError(
        "job.yaml must be a regular file (mode 100644 or 100755); this commit has it as " +
        std::string(job_yaml->mode == 0120000 ? "a symbolic link" : job_yaml->mode == 0160000 ? "a submodule"
                                                                                                : "a directory"));
  }
  auto blob = lookup(job_yaml->id);
  if (!blob.ok() || blob->first != ObjectType::kBlob) {
    return InvalidArgumentError("job.yaml: its blob was not sent");
  }
  if (blob->second.size() > static_cast<size_t>(policy.settings.max_manifest_bytes)) {
    return InvalidArgumentError("job.yaml is " + std::to_string(blob->second.size()) +
                                " bytes, over this ledger's limit of " +
                                std::to_string(policy.settings.max_manifest_bytes));
  }
  ManifestLimits limits;
  limits.max_bytes = static_cast<size_t>(policy.settings.max_manifest_bytes);
  GATOS_ASSIGN_OR_RETURN(Manifest m, ParseManifest(blob->second, "job.yaml", ManifestFormat::kYaml, limits));
  JobCommitCheck out;
  out.commit = commit_id;
  out.job_hex = JobIdHex(m);
  GATOS_RETURN_IF_ERROR(CheckManifestPolicy(m, policy));
  if (!expected_hex.empty() && out.job_hex != expected_hex) {
    return InvalidArgumentError("job.yaml hashes to blake3:" + out.job_hex + " but the ref names job " +
                                std::string(expected_hex.substr(0, 64)));
  }
  auto msg = ParseCommitMessage(c.message);
  std::string want = "blake3:" + out.job_hex;
  if (!msg.ok()) return InvalidArgumentError("commit message: " + msg.status().message());
  auto trailer = RequireUniqueTrailer(msg->trailers, "Job-Id");
  if (!trailer.ok() || *trailer != want) {
    return InvalidArgumentError(
        "the job commit's message must end with the trailer 'Job-Id: " + want + "'" +
        (trailer.ok() ? " (it has 'Job-Id: " + TruncateUtf8(*trailer, 80) + "')" : "") +
        "; 'gatos job id job.yaml' prints the id, and 'git commit --trailer' adds it");
  }
  size_t priorities = 0;
  for (const auto& t : msg->trailers) {
    if (t.key != kPriorityTrailer) continue;
    if (++priorities > 1) return InvalidArgumentError("the job commit has more than one Priority trailer");
    auto pr = ParsePriority(t.value);
    if (!pr.ok()) return InvalidArgumentError("the job commit's " + pr.status().message());
    out.priority = *pr;
  }
  const std::string pool = ManifestPool(m);
  out.manifest = std::move(m);
  if (c.signature.empty()) {
    if (!policy.settings.dev_mode) {
      return PermissionDeniedError(
          "the job commit is not signed; sign it with an allowed submitter key "
          "(git commit -S with gpg.format=ssh, or gatos submit --sign-key KEY)");
    }
    return out;
  }
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) {
    return PermissionDeniedError("the job commit's signature is not an SSH signature: " + sig.status().message());
  }
  if (!verified_signer || *verified_signer != sig->key) {
    Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
    if (!v.ok()) return PermissionDeniedError("the job commit's signature does not verify: " + v.message());
  }
  const AllowedSigner* who = policy.submitters.FindKey(sig->key, kSignerNamespaceGit, now_ms / 1000);
  if (!who) {
    if (policy.settings.dev_mode) return out;
    return PermissionDeniedError("the job commit is signed by " + sig->key.WorkerId() +
                                 ", which is not an allowed submitter of this ledger "
                                 "(gatos policy allow-submitter adds one)");
  }
  out.signer = who->principals.empty() ? sig->key.WorkerId() : who->principals[0];
  out.signer_key_hex = sig->key.Hex();
  if (!KeyMayUsePool(policy.settings.scheduling.submitter_pools, out.signer_key_hex, pool)) {
    return PermissionDeniedError("refused: submitter " + sig->key.WorkerId() + " may not submit to pool " + pool +
                                 " (gatos policy allow-submitter KEY --pools ...)");
  }
  return out;
}

namespace {

Decision CheckFresh(int64_t requested_at_ms, int64_t now_ms, const char* what) {
  if (requested_at_ms < now_ms - rpc::kMaxRequestSkewMs || requested_at_ms > now_ms + rpc::kMaxRequestSkewMs) {
    return Decision::Error(TransitionError::kUnauthorized,
                          std::string(what) + " time " + FormatRfc3339Millis(requested_at_ms) +
                              " is more than 60 s from the ledger's clock (" + FormatRfc3339Millis(now_ms) +
                              "); check this host's clock");
  }
  return {};
}

Decision CheckSig(std::string_view key_hex, std::string_view payload, std::string_view sig_hex,
                 const char* what, Ed25519PublicKey* key_out) {
  auto key = ParseWorkerId("ed25519:" + std::string(key_hex.substr(0, 64)));
  if (key_hex.size() != 64 || !key.ok()) {
    return Decision::Error(TransitionError::kInvalid, std::string(what) + ": the key is not 64 lowercase hex");
  }
  auto sig = HexDecode(sig_hex);
  if (!sig.ok() || sig->size() != 64) {
    return Decision::Error(TransitionError::kUnauthorized, std::string(what) + " signature is not 128 hex characters");
  }
  if (!Ed25519Verify(*key, payload, sig->data()).ok()) {
    return Decision::Error(TransitionError::kUnauthorized,
                          std::string(what) + " signature does not verify for key " + std::string(key_hex.substr(0, 16)));
  }
  if (key_out) *key_out = *key;
  return {};
}

}  // namespace

Decision VerifyLeaseRequest(const LeaseRequest& req, const Policy& policy, int64_t now_ms) {
  if (!IsLowerHex(req.job_hex, 64)) {
    return Decision::Error(TransitionError::kInvalid,
                          "job id \"" + TruncateUtf8(req.job_hex, 80) + "\" is not 64 lowercase hex");
  }
  if (req.epoch < 1) return Decision::Error(TransitionError::kInvalid, "epoch must be at least 1");
  const char* what = req.renew ? "renew request" : "claim request";
  Decision fresh = CheckFresh(req.requested_at_ms, now_ms, what);
  if (!fresh.ok()) return fresh;
  Ed25519PublicKey key;
  Decision s = CheckSig(req.worker_hex, LeaseRequestPayload(req), req.sig_hex, what, &key);
  if (!s.ok()) return s;
  if (!policy.workers.FindKey(key, kSignerNamespaceGit, now_ms / 1000)) {
    return Decision::Error(TransitionError::kUnauthorized,
                          "worker " + key.WorkerId() +
                              " is not allowed by this ledger's policy (gatos policy allow-worker)");
  }
  return {};
}

Decision VerifyUserRequest(std::string_view requester_hex, std::string_view payload, int64_t requested_at_ms,
                          std::string_view sig_hex, int64_t now_ms) {
  Decision fresh = CheckFresh(requested_at_ms, now_ms, "request");
  if (!fresh.ok()) return fresh;
  return CheckSig(requester_hex, payload, sig_hex, "request", nullptr);
}

Decision CheckResultContent(const ObjectLookup& lookup, const std::string& commit_id, const Policy& policy,
                           ParsedResult* parsed, const std::string& expected_job_hex) {
  ResultCheckLimits limits;
  limits.max_file_bytes = static_cast<size_t>(policy.settings.max_result_bytes);
  ResultReport report = CheckResultCommit(lookup, commit_id, limits);
  if (const ResultCheck* bad = report.first_failure()) {
    TransitionError e = bad->name == "attest_sig" || bad->name == "commit_signature" ? TransitionError::kUnauthorized
                                                                                     : TransitionError::kInvalid;
    return Decision::Error(e, "result " + commit_id.substr(0, 12) + " refused: " + bad->name + ": " +
                                 TruncateUtf8(bad->detail, 400));
  }
  if (!expected_job_hex.empty() && report.parsed.job_hex != expected_job_hex) {
    return Decision::Error(TransitionError::kInvalid, "the result is of job blake3:" + report.parsed.job_hex +
                                                          ", not of the job its ref names");
  }
  *parsed = std::move(report.parsed);
  return {};
}

}  // namespace gatos
