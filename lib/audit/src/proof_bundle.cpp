#include "gatos/audit/proof_bundle.h"

#include <deque>
#include <iterator>
#include <set>

#include "gatos/crypto/checkpoint.h"
#include "gatos/git/result.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/job_record.h"
#include "gatos/model/manifest.h"

namespace gatos {
namespace {

const std::set<std::string>& Roles() {
  static const std::set<std::string> r = {"job", "result", "head"};
  return r;
}

// Adds an object and (for trees, when `deep`) everything below it.
class ObjectCollector {
 public:
  explicit ObjectCollector(Ledger& ledger) : ledger_(ledger) {}
  Result<const GitObject*> Add(const std::string& id) {
    for (const auto& o : objects_) {
      if (o.id == id) return &o;
    }
    GATOS_ASSIGN_OR_RETURN(auto raw, ledger_.ReadRawObject(id));
    objects_.push_back(MakeObject(raw.first, std::move(raw.second)));
    return &objects_.back();
  }
  Status AddTreeDeep(const std::string& id) {
    GATOS_ASSIGN_OR_RETURN(const GitObject* t, Add(id));
    GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(t->data, id));
    for (const auto& e : entries) {
      if (e.is_tree()) {
        GATOS_RETURN_IF_ERROR(AddTreeDeep(e.id));
      } else if (e.mode != 0160000) {
        GATOS_RETURN_IF_ERROR(Add(e.id).status());
      }
    }
    return OkStatus();
  }
  std::vector<GitObject> Take() {
    return {std::make_move_iterator(objects_.begin()), std::make_move_iterator(objects_.end())};
  }

 private:
  Ledger& ledger_;
  std::deque<GitObject> objects_;
};

// The entry at or after the ledger's time `ms` whose log commit has `commit`
// as a parent: the batch that adopted or recorded it.
Result<uint64_t> FindEntry(Ledger& ledger, LogTree& tree, int64_t ms, const std::string& commit,
                           uint64_t limit) {
  GATOS_ASSIGN_OR_RETURN(uint64_t i, tree.FirstEntryAtOrAfter(ms));
  // Log-Time is the batch's time, and submitted_ms / finished_ms are that
  // time: the entry is among those with that very time; a few more are
  // looked at in case the clock stepped back.
  for (uint64_t later = 0; i < limit && later < 64; ++i) {
    GATOS_ASSIGN_OR_RETURN(auto e, tree.Entry(i));
    if (e.second != ms) ++later;
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger.ReadCommit(e.first));
    for (size_t p = 1; p < c.parents.size(); ++p) {
      if (c.parents[p] == commit) return i;
    }
  }
  return NotFoundError("no log entry names commit " + commit);
}

}  // namespace

std::string EncodeProofBundle(const ProofBundle& b) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : b.entries) {
    nlohmann::json proof = nlohmann::json::array();
    for (const auto& h : e.proof) proof.push_back(MerkleHashBase64(h));
    entries.push_back({{"role", e.role},
                       {"index", e.index},
                       {"log_commit", e.log_commit},
                       {"proof", proof}});
  }
  std::string batch = EncodeObjectBatch(b.objects);
  nlohmann::json j = {{"bundle", kProofBundleFormat},
                      {"job", "blake3:" + b.job_hex},
                      {"job_commit", b.job_commit},
                      {"result_commit", b.result_commit},
                      {"checkpoint", b.checkpoint},
                      {"entries", entries},
                      {"objects", Base64Encode(reinterpret_cast<const uint8_t*>(batch.data()), batch.size())}};
  auto text = CanonicalJson(j);
  return (text.ok() ? *text : j.dump()) + "\n";
}

Result<ProofBundle> ParseProofBundle(std::string_view text) {
  if (text.size() > kMaxProofBundleBytes) return InvalidArgumentError("bundle: larger than 8 MiB");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("bundle: not JSON: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgumentError("bundle: not a JSON object");
  static const std::set<std::string> kKeys = {"bundle", "job", "job_commit", "result_commit",
                                              "checkpoint", "entries", "objects"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKeys.count(it.key())) return InvalidArgumentError("bundle: unknown field \"" + TruncateUtf8(it.key(), 40) + "\"");
  }
  for (const auto& k : kKeys) {
    if (!j.contains(k)) return InvalidArgumentError("bundle: no \"" + k + "\"");
    if (k != "entries" && !j[k].is_string()) return InvalidArgumentError("bundle: \"" + k + "\" is not a string");
  }
  if (j["bundle"] != kProofBundleFormat) {
    return InvalidArgumentError("bundle: format \"" + TruncateUtf8(j["bundle"].get<std::string>(), 40) +
                                "\" is not " + kProofBundleFormat);
  }
  ProofBundle b;
  std::string job = j["job"].get<std::string>();
  if (job.rfind("blake3:", 0) != 0 || !IsJobIdHex(job.substr(7))) return InvalidArgumentError("bundle: bad job id");
  b.job_hex = job.substr(7);
  b.job_commit = j["job_commit"].get<std::string>();
  b.result_commit = j["result_commit"].get<std::string>();
  if (!IsLowerHex(b.job_commit, 40) || !IsLowerHex(b.result_commit, 40)) {
    return InvalidArgumentError("bundle: job_commit and result_commit must be 40 hex");
  }
  b.checkpoint = j["checkpoint"].get<std::string>();
  if (!j["entries"].is_array() || j["entries"].size() > 8) return InvalidArgumentError("bundle: bad entries");
  std::set<std::string> seen;
  for (const auto& e : j["entries"]) {
    if (!e.is_object() || e.size() != 4 || !e.contains("role") || !e["role"].is_string() || !e.contains("index") ||
        !e["index"].is_number_unsigned() || !e.contains("log_commit") || !e["log_commit"].is_string() ||
        !e.contains("proof") || !e["proof"].is_array() || e["proof"].size() > 64) {
      return InvalidArgumentError("bundle: an entry is not {role, index, log_commit, proof}");
    }
    ProofBundleEntry pe;
    pe.role = e["role"].get<std::string>();
    if (!Roles().count(pe.role) || !seen.insert(pe.role).second) {
      return InvalidArgumentError("bundle: entry role \"" + TruncateUtf8(pe.role, 20) + "\" unknown or repeated");
    }
    pe.index = e["index"].get<uint64_t>();
    pe.log_commit = e["log_commit"].get<std::string>();
    if (!IsLowerHex(pe.log_commit, 40)) return InvalidArgumentError("bundle: entry log_commit must be 40 hex");
    for (const auto& h : e["proof"]) {
      if (!h.is_string()) return InvalidArgumentError("bundle: a proof hash is not a string");
      GATOS_ASSIGN_OR_RETURN(MerkleHash mh, ParseMerkleHashBase64(h.get<std::string>()));
      pe.proof.push_back(mh);
    }
    b.entries.push_back(std::move(pe));
  }
  auto raw = Base64Decode(j["objects"].get<std::string>());
  if (!raw.ok()) return InvalidArgumentError("bundle: objects: " + raw.status().message());
  BatchLimits limits;
  limits.max_bytes = kMaxProofBundleBytes;
  GATOS_ASSIGN_OR_RETURN(b.objects,
                         DecodeObjectBatch(std::string_view(reinterpret_cast<const char*>(raw->data()), raw->size()),
                                           limits));
  return b;
}

Result<ProofBundle> BuildProofBundle(Ledger& ledger, LogTree& tree, const std::string& job_hex,
                                     const std::string& checkpoint) {
  if (!IsJobIdHex(job_hex)) return InvalidArgumentError("not a job id: " + TruncateUtf8(job_hex, 80));
  GATOS_ASSIGN_OR_RETURN(Note note, ParseNote(checkpoint));
  GATOS_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpointText(note.text));
  if (cp.size == 0 || cp.size > tree.size()) {
    return DataLossError("the checkpoint is of " + std::to_string(cp.size) + " entries; this ledger's tree has " +
                         std::to_string(tree.size()));
  }
  GATOS_ASSIGN_OR_RETURN(MerkleHash root, tree.Root(cp.size));
  if (root != cp.root) {
    return DataLossError("the checkpoint's root is not this ledger's tree root at size " + std::to_string(cp.size));
  }
  ProofBundle b;
  b.job_hex = job_hex;
  b.checkpoint = checkpoint;
  ObjectCollector objs(ledger);

  // The head entry and the job's record in its state index.
  GATOS_ASSIGN_OR_RETURN(auto head, tree.Entry(cp.size - 1));
  GATOS_ASSIGN_OR_RETURN(const GitObject* head_obj, objs.Add(head.first));
  GATOS_ASSIGN_OR_RETURN(RawCommit head_commit, ParseRawCommit(head_obj->data, head.first));
  std::vector<std::string> path = {"jobs", job_hex.substr(0, 1), job_hex.substr(1, 1), job_hex.substr(2, 1),
                                   job_hex.substr(3, 1), job_hex.substr(4)};
  std::string cur = head_commit.tree;
  for (size_t i = 0; i < path.size(); ++i) {
    GATOS_ASSIGN_OR_RETURN(const GitObject* t, objs.Add(cur));
    GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(t->data, cur));
    std::string next;
    for (const auto& e : entries) {
      if (e.name == path[i]) next = e.id;
    }
    if (next.empty()) {
      return NotFoundError("job blake3:" + job_hex + " is not in the ledger's state at log sequence " +
                           std::to_string(cp.size));
    }
    cur = next;
  }
  GATOS_ASSIGN_OR_RETURN(const GitObject* rec_obj, objs.Add(cur));
  GATOS_ASSIGN_OR_RETURN(JobRecord rec, DecodeJobRecord(rec_obj->data));
  if (rec.result_commit.empty()) {
    return FailedPreconditionError("job blake3:" + job_hex + " has no final result at log sequence " +
                                   std::to_string(cp.size) + " (state " +
                                   std::string(JobStateName(RecordedState(rec))) + ")");
  }
  b.job_commit = rec.job_commit;
  b.result_commit = rec.result_commit;

  // The job and the result, with what checking them needs.
  GATOS_ASSIGN_OR_RETURN(const GitObject* job_obj, objs.Add(rec.job_commit));
  GATOS_ASSIGN_OR_RETURN(RawCommit job_commit, ParseRawCommit(job_obj->data, rec.job_commit));
  GATOS_ASSIGN_OR_RETURN(const GitObject* job_tree, objs.Add(job_commit.tree));
  GATOS_ASSIGN_OR_RETURN(auto job_entries, ParseTree(job_tree->data, job_commit.tree));
  for (const auto& e : job_entries) {
    if (e.name == "job.yaml" && !e.is_tree()) GATOS_RETURN_IF_ERROR(objs.Add(e.id).status());
  }
  GATOS_ASSIGN_OR_RETURN(const GitObject* res_obj, objs.Add(rec.result_commit));
  GATOS_ASSIGN_OR_RETURN(RawCommit res_commit, ParseRawCommit(res_obj->data, rec.result_commit));
  GATOS_RETURN_IF_ERROR(objs.AddTreeDeep(res_commit.tree));

  // Their log entries and inclusion proofs.
  GATOS_ASSIGN_OR_RETURN(uint64_t job_idx, FindEntry(ledger, tree, rec.submitted_ms, rec.job_commit, cp.size));
  GATOS_ASSIGN_OR_RETURN(uint64_t res_idx, FindEntry(ledger, tree, rec.finished_ms, rec.result_commit, cp.size));
  for (auto [role, idx] : {std::pair<const char*, uint64_t>{"job", job_idx}, {"result", res_idx},
                           {"head", cp.size - 1}}) {
    ProofBundleEntry e;
    e.role = role;
    e.index = idx;
    GATOS_ASSIGN_OR_RETURN(auto ent, tree.Entry(idx));
    e.log_commit = ent.first;
    GATOS_RETURN_IF_ERROR(objs.Add(e.log_commit).status());
    GATOS_ASSIGN_OR_RETURN(e.proof, tree.InclusionProof(idx, cp.size));
    b.entries.push_back(std::move(e));
  }
  b.objects = objs.Take();
  return b;
}

}  // namespace gatos
