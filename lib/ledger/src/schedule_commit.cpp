#include "gatos/ledger/schedule_commit.h"

#include "gatos/crypto/sshsig.h"
#include "gatos/model/encoding.h"
#include "gatos/model/rpc.h"
#include "gatos/model/public_key.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/trailers.h"
#include "gatos/model/transition.h"

namespace gatos {
namespace {

constexpr char kName[] = "gatos schedule";
constexpr char kEmail[] = "schedule@gatos.invalid";

bool KnownState(std::string_view s) { return s == "active" || s == "paused" || s == "removed"; }

}  // namespace

Result<std::vector<GitObject>> BuildScheduleCommit(const ScheduleSpec& spec, std::string_view state,
                                                   const std::string& parent, const Ed25519PrivateKey& key,
                                                   int64_t time_ms) {
  std::vector<GitObject> objects;
  GATOS_ASSIGN_OR_RETURN(std::string tree, BuildTreeObjects({{"schedule.yaml", EncodeSchedule(spec), false}}, &objects));
  CommitMessage msg;
  msg.body = "gatos: schedule " + spec.name + " " + std::string(state);
  msg.trailers = {{kScheduleNameTrailer, spec.name}, {kScheduleStateTrailer, std::string(state)}};
  std::vector<std::string> parents;
  if (!parent.empty()) parents.push_back(parent);
  GATOS_ASSIGN_OR_RETURN(GitObject c, BuildCommitObject(tree, parents, FormatCommitMessage(msg), kName, kEmail,
                                                        time_ms, &key));
  objects.insert(objects.begin(), std::move(c));
  return objects;
}

Result<ScheduleCommit> CheckScheduleCommit(const ObjectLookup& lookup, const std::string& commit_id) {
  const std::string id = commit_id.substr(0, 12);
  if (!IsLowerHex(commit_id, 40)) return InvalidArgumentError("a schedule is a commit id (40 hex)");
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(commit_id));
  if (obj.first != ObjectType::kCommit) return InvalidArgumentError("schedule " + id + " is not a commit");
  if (obj.second.size() > 64 * 1024) return InvalidArgumentError("schedule commit " + id + " is too large");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj.second, commit_id));
  if (c.parents.size() > 1) return InvalidArgumentError("schedule commit " + id + " has more than one parent");
  ScheduleCommit out;
  out.commit = commit_id;
  out.parent = c.parents.empty() ? "" : c.parents[0];
  out.time_ms = c.commit_time_s * 1000;
  GATOS_ASSIGN_OR_RETURN(auto tree, lookup(c.tree));
  if (tree.first != ObjectType::kTree) return InvalidArgumentError("schedule " + id + ": its tree is not a tree");
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree.second, c.tree));
  const TreeEntry* file = nullptr;
  for (const auto& e : entries) {
    if (e.name == "schedule.yaml") file = &e;
  }
  if (!file || file->mode != 0100644) {
    return InvalidArgumentError("schedule " + id + ": no schedule.yaml (a regular file) at the top of its tree");
  }
  GATOS_ASSIGN_OR_RETURN(auto blob, lookup(file->id));
  if (blob.first != ObjectType::kBlob) return InvalidArgumentError("schedule " + id + ": schedule.yaml is not a blob");
  GATOS_ASSIGN_OR_RETURN(out.spec, ParseSchedule(blob.second, "schedule.yaml"));
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(c.message));
  GATOS_ASSIGN_OR_RETURN(std::string name, RequireUniqueTrailer(m.trailers, kScheduleNameTrailer));
  GATOS_ASSIGN_OR_RETURN(out.state, RequireUniqueTrailer(m.trailers, kScheduleStateTrailer));
  if (name != out.spec.name) {
    return InvalidArgumentError("schedule " + id + ": Schedule-Name " + name.substr(0, 64) +
                                " is not the name in schedule.yaml (" + out.spec.name + ")");
  }
  if (!KnownState(out.state)) {
    return InvalidArgumentError("schedule " + id + ": Schedule-State must be active, paused or removed");
  }
  if (c.signature.empty()) {
    return PermissionDeniedError("schedule " + id + " is not signed; sign it with an allowed submitter key");
  }
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return PermissionDeniedError("schedule " + id + ": gpgsig: " + sig.status().message());
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return PermissionDeniedError("schedule " + id + ": its signature does not verify: " + v.message());
  out.signer_hex = sig->key.Hex();
  return out;
}

Decision ScheduleChangeDecision(const std::optional<ScheduleCommit>& current, const ScheduleCommit& next,
                                const Policy& policy, int64_t now_ms) {
  auto fail = [](TransitionError e, std::string m) { return Decision{e, std::move(m)}; };
  auto key = ParseWorkerId("ed25519:" + next.signer_hex);
  const bool submitter =
      key.ok() && policy.submitters.FindKey(*key, kSignerNamespaceGit, now_ms / 1000) != nullptr;
  if (!submitter && !MayControlJob(next.signer_hex, "", policy, now_ms)) {
    return fail(TransitionError::kUnauthorized, "schedule " + next.spec.name + " is signed by ed25519:" +
                                                    next.signer_hex +
                                                    ", which is not an allowed submitter of this ledger");
  }
  const std::string pool = ManifestPool(next.spec.job);
  if (!KeyMayUsePool(policy.settings.scheduling.submitter_pools, next.signer_hex, pool)) {
    return fail(TransitionError::kUnauthorized,
                "submitter ed25519:" + next.signer_hex + " may not submit to pool " + pool);
  }
  if (!current) {
    if (!next.parent.empty()) {
      return fail(TransitionError::kInvalid, "schedule " + next.spec.name + " does not exist; its first commit has no parent");
    }
    if (next.state == "removed") return fail(TransitionError::kInvalid, "schedule " + next.spec.name + " does not exist");
    return {};
  }
  if (current->state == "removed") {
    return fail(TransitionError::kInvalid, "schedule " + next.spec.name + " was removed; choose another name");
  }
  if (next.parent != current->commit) {
    return fail(TransitionError::kLostRace, "schedule " + next.spec.name + " is at " + current->commit.substr(0, 12) +
                                                ", not at the parent " + next.parent.substr(0, 12) +
                                                " of this change; read it again");
  }
  if (!MayControlJob(next.signer_hex, current->signer_hex, policy, now_ms)) {
    return fail(TransitionError::kUnauthorized,
                "key ed25519:" + next.signer_hex + " may not change schedule " + next.spec.name +
                    ": only its signer, an operator or the ledger key may");
  }
  return {};
}

Result<ScheduleFrame> DecodeScheduleFrame(std::string_view data) {
  nlohmann::json header;
  std::string_view batch;
  Status s = rpc::DecodeFrame(data, rpc::kMaxJsonRequest, &header, &batch);
  if (!s.ok()) return InvalidArgumentError("schedule frame: " + s.message());
  auto commit = rpc::StringField(header, "commit");
  if (!commit.ok() || !IsLowerHex(*commit, 40)) {
    return InvalidArgumentError("schedule header: commit must be a 40-hex id");
  }
  BatchLimits limits;
  limits.max_bytes = kMaxScheduleBatchBytes;
  limits.max_objects = kMaxScheduleObjects;
  GATOS_ASSIGN_OR_RETURN(std::vector<GitObject> objects, DecodeObjectBatch(batch, limits));
  if (objects.empty() || objects.front().id != *commit || objects.front().type != ObjectType::kCommit) {
    return InvalidArgumentError("the schedule batch must start with commit " + *commit);
  }
  GATOS_ASSIGN_OR_RETURN(ScheduleCommit sc, CheckScheduleCommit(BatchLookup(&objects, nullptr), *commit));
  return ScheduleFrame{std::move(objects), std::move(sc)};
}

}  // namespace gatos
