#include "gatos/git/grant.h"

#include <map>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/model/encoding.h"
#include "gatos/model/refs.h"

namespace gatos {
namespace {

using Objects = std::map<std::string, GitObject>;

Result<Objects> DecodeObjects(std::string_view b64) {
  auto raw = Base64Decode(b64);
  if (!raw.ok()) return InvalidArgumentError("reply objects are not base64");
  BatchLimits limits;
  limits.max_bytes = 32 << 20;
  limits.max_objects = 16;
  std::string_view bytes(reinterpret_cast<const char*>(raw->data()), raw->size());
  GATOS_ASSIGN_OR_RETURN(auto list, DecodeObjectBatch(bytes, limits));
  Objects out;
  for (auto& o : list) out[o.id] = std::move(o);
  return out;
}

// A commit in `objects` signed (SSHSIG, namespace git) by one of `keys`.
Result<RawCommit> SignedCommit(const Objects& objects, const std::string& id,
                               const std::vector<Ed25519PublicKey>& keys, const char* what) {
  auto it = objects.find(id);
  if (it == objects.end() || it->second.type != ObjectType::kCommit) {
    return PermissionDeniedError(std::string(what) + " " + id.substr(0, 12) +
                                 " is not in the reply");
  }
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(it->second.data, id));
  if (c.signature.empty()) return PermissionDeniedError(std::string(what) + " is not signed");
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return PermissionDeniedError(std::string(what) + ": " + sig.status().message());
  bool known = false;
  for (const auto& k : keys) known = known || k == sig->key;
  if (!known) {
    return PermissionDeniedError(std::string(what) + " is signed by " + sig->key.WorkerId() +
                                 ", which is not the ledger's key (--ledger-key)");
  }
  Status v = SshSigVerify(*sig, c.signed_data, "git");
  if (!v.ok())
    return PermissionDeniedError(std::string(what) + ": signature does not verify: " + v.message());
  return c;
}

Status MatchesRequest(const LeaseCommitInfo& l, const LeaseRequest& sent) {
  if (l.job_hex != sent.job_hex || l.worker_hex != sent.worker_hex || l.epoch != sent.epoch) {
    return PermissionDeniedError("the lease commit names job " + l.job_hex.substr(0, 12) +
                                 ", worker " + l.worker_hex.substr(0, 12) + " at epoch " +
                                 std::to_string(l.epoch) + ": not what this worker asked for");
  }
  if (l.request_sig_hex != sent.sig_hex || l.requested_at_ms != sent.requested_at_ms) {
    return PermissionDeniedError("the lease commit answers another request (a replayed reply?)");
  }
  return OkStatus();
}

// The lease commit the signed grant names, read from the reply's objects
// (whose ids are recomputed from their bytes), and matched against the
// grant and the request just sent.
Result<RawCommit> GrantedLease(const Objects& objects, const rpc::Grant& grant,
                               const LeaseRequest& sent, LeaseCommitInfo* info) {
  if (grant.job_hex != sent.job_hex) {
    return PermissionDeniedError("the signed grant is for job " + grant.job_hex.substr(0, 12) +
                                 ", not the job this worker asked for");
  }
  auto it = objects.find(grant.lease_commit);
  if (it == objects.end() || it->second.type != ObjectType::kCommit) {
    return PermissionDeniedError("lease commit " + grant.lease_commit.substr(0, 12) +
                                 " is not in the reply");
  }
  GATOS_ASSIGN_OR_RETURN(RawCommit lease, ParseRawCommit(it->second.data, grant.lease_commit));
  auto parsed = ParseLeaseCommitMessage(lease.message);
  if (!parsed.ok()) return PermissionDeniedError("lease commit: " + parsed.status().message());
  *info = *parsed;
  GATOS_RETURN_IF_ERROR(MatchesRequest(*info, sent));
  if (info->epoch != grant.epoch || info->expires_ms != grant.expires_ms ||
      lease.parents.empty() || lease.parents[0] != grant.job_commit) {
    return PermissionDeniedError(
        "the lease commit's epoch, expiry or job commit is not what the ledger signed");
  }
  if (lease.tree != kEmptyTreeId) {
    return PermissionDeniedError("lease commit is not shaped like one (tree, parents)");
  }
  return lease;
}

}  // namespace

Result<std::vector<rpc::Grant>> VerifyReplyGrants(const std::vector<const nlohmann::json*>& replies,
                                                  const std::vector<Ed25519PublicKey>& keys) {
  if (replies.empty()) return std::vector<rpc::Grant>();
  std::vector<rpc::Grant> grants;
  grants.reserve(replies.size());
  std::string sig_hex;
  for (const nlohmann::json* r : replies) {
    auto g = rpc::ParseGrantFields(*r);
    if (!g.ok()) return PermissionDeniedError("a grant of the reply: " + g.status().message());
    grants.push_back(std::move(*g));
    auto s = r->find(rpc::kGrantSigField);
    if (s == r->end() || !s->is_string()) {
      return PermissionDeniedError("the reply carries no ledger signature of its grants");
    }
    if (sig_hex.empty()) sig_hex = s->get<std::string>();
    if (s->get<std::string>() != sig_hex) {
      return PermissionDeniedError("the grants of one reply carry different signatures");
    }
  }
  auto sig = HexDecode(sig_hex);
  if (!sig.ok() || sig->size() != 64) {
    return PermissionDeniedError("the reply's grant signature is not 64 bytes of hex");
  }
  const std::string payload = rpc::GrantsPayload(grants);
  for (const auto& k : keys) {
    if (Ed25519Verify(k, payload, sig->data()).ok()) return grants;
  }
  return PermissionDeniedError(
      "the reply's grant signature does not verify for the ledger's key (--ledger-key)");
}

std::string ReplyObjects(const nlohmann::json& reply) {
  if (!reply.is_object()) return "";
  auto it = reply.find("objects");
  return it != reply.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<VerifiedGrant> VerifyGrant(std::string_view objects_b64, const rpc::Grant& grant,
                                  const LeaseRequest& sent) {
  GATOS_ASSIGN_OR_RETURN(Objects objects, DecodeObjects(objects_b64));
  LeaseCommitInfo info;
  GATOS_ASSIGN_OR_RETURN(RawCommit lease, GrantedLease(objects, grant, sent, &info));
  if (info.kind == "renew") return PermissionDeniedError("a renewal is not a grant");
  VerifiedGrant g;
  g.lease_commit = grant.lease_commit;
  g.lease = info;
  g.job_commit = lease.parents[0];
  auto jc = objects.find(g.job_commit);
  if (jc == objects.end() || jc->second.type != ObjectType::kCommit) {
    return PermissionDeniedError("the job commit is not in the reply");
  }
  GATOS_ASSIGN_OR_RETURN(RawCommit job, ParseRawCommit(jc->second.data, g.job_commit));
  if (!job.signature.empty()) {
    if (auto sig = ParseSshSignature(job.signature); sig.ok()) g.submitter_hex = sig->key.Hex();
  }
  auto tree = objects.find(job.tree);
  if (tree == objects.end() || tree->second.type != ObjectType::kTree) {
    return PermissionDeniedError("the job's tree is not in the reply");
  }
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree->second.data, job.tree));
  for (const auto& e : entries) {
    if (e.name != "job.yaml") continue;
    if (e.mode != 0100644 && e.mode != 0100755)
      return PermissionDeniedError("job.yaml is not a regular file");
    auto blob = objects.find(e.id);
    if (blob == objects.end() || blob->second.type != ObjectType::kBlob) {
      return PermissionDeniedError("job.yaml is not in the reply");
    }
    auto m = ParseManifest(blob->second.data, "job.yaml");
    if (!m.ok()) return PermissionDeniedError("job.yaml does not parse: " + m.status().message());
    std::string canonical = CanonicalManifest(*m);
    const std::string hex = JobIdHexOfCanonical(canonical);
    if (hex != sent.job_hex) {
      return PermissionDeniedError("job.yaml hashes to blake3:" + hex +
                                   ", not to the job this worker claimed");
    }
    g.job_yaml = blob->second.data;
    g.manifest = std::move(*m);
    g.canonical = std::move(canonical);
    return g;
  }
  return PermissionDeniedError("the job's tree has no job.yaml");
}

Result<VerifiedGrant> VerifyRenewal(std::string_view objects_b64, const rpc::Grant& grant,
                                    const std::vector<Ed25519PublicKey>& keys,
                                    const LeaseRequest& sent) {
  GATOS_ASSIGN_OR_RETURN(Objects objects, DecodeObjects(objects_b64));
  LeaseCommitInfo info;
  GATOS_ASSIGN_OR_RETURN(RawCommit lease, GrantedLease(objects, grant, sent, &info));
  if (info.kind != "renew")
    return PermissionDeniedError("the reply's lease commit is not a renewal");
  VerifiedGrant g;
  g.lease_commit = grant.lease_commit;
  g.lease = info;
  g.job_commit = lease.parents[0];
  for (const auto& [id, o] : objects) {
    if (id == grant.lease_commit || o.type != ObjectType::kCommit) continue;
    auto c = SignedCommit(objects, id, keys, "cancel commit");
    if (!c.ok()) continue;
    auto u = ParseUserRequestCommitMessage(c->message);
    if (u.ok() && !u->retry && u->job_hex == sent.job_hex) g.cancel_commit = id;
  }
  return g;
}

Result<std::string> VerifyCancelNotice(std::string_view data,
                                       const std::vector<Ed25519PublicKey>& keys,
                                       const std::string& job_hex) {
  if (data.size() > (1 << 20)) return InvalidArgumentError("cancel notice too large");
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("objects") || !j["objects"].is_string()) {
    return InvalidArgumentError("cancel notice is not {job, objects}");
  }
  GATOS_ASSIGN_OR_RETURN(Objects objects, DecodeObjects(j["objects"].get<std::string>()));
  for (const auto& [id, o] : objects) {
    if (o.type != ObjectType::kCommit) continue;
    GATOS_ASSIGN_OR_RETURN(RawCommit c, SignedCommit(objects, id, keys, "cancel commit"));
    auto u = ParseUserRequestCommitMessage(c.message);
    if (u.ok() && !u->retry && u->job_hex == job_hex) return id;
  }
  return PermissionDeniedError("the cancel notice holds no ledger-signed cancel of job " +
                               job_hex.substr(0, 12));
}

Result<std::vector<Ed25519PublicKey>> ParseLedgerKeys(std::string_view text) {
  std::vector<Ed25519PublicKey> keys;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos || line[start] == '#') continue;
    auto k = ParseOpenSshPublicKey(line);
    if (!k.ok())
      return InvalidArgumentError("line " + std::to_string(line_no) + ": " + k.status().message());
    keys.push_back(*k);
  }
  if (keys.empty()) return InvalidArgumentError("no ledger key in the file");
  return keys;
}

}  // namespace gatos
