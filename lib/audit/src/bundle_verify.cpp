// VerifyProofBundle: the offline check of one job's proof bundle.
#include <map>

#include "gatos/audit/proof_bundle.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/git/result.h"
#include "gatos/model/job_record.h"
#include "gatos/model/log_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"

namespace gatos {
namespace {

std::string Short(const std::string& id) { return id.substr(0, 12); }

class Verifier {
 public:
  Verifier(const ProofBundle& b, const BundleVerifyOptions& o, BundleReport* r) : b_(b), o_(o), r_(r) {
    for (const auto& obj : b.objects) by_id_.emplace(obj.id, &obj);
  }

  void Run() {
    r_->job_hex = b_.job_hex;
    if (!CheckCheckpoint()) return;
    for (const char* role : {"job", "result", "head"}) {
      if (!CheckEntry(role)) return;
    }
    if (!CheckRecord()) return;
    if (!CheckJob()) return;
    CheckResult();
  }

 private:
  bool Add(std::string name, bool ok, std::string detail) {
    r_->checks.push_back({std::move(name), ok, std::move(detail)});
    return ok;
  }
  const GitObject* Object(const std::string& id, ObjectType type) {
    auto it = by_id_.find(id);
    return it == by_id_.end() || it->second->type != type ? nullptr : it->second;
  }

  bool CheckCheckpoint() {
    NoteVerifierKey lk;
    lk.key = o_.ledger_key;
    auto opened = OpenCheckpoint(b_.checkpoint, lk, o_.witnesses);
    if (!opened.ok()) return Add("checkpoint", false, opened.status().message());
    cp_ = opened->checkpoint;
    r_->tree_size = cp_.size;
    r_->origin = cp_.origin;
    if (cp_.origin.rfind("gatos/ledger/", 0) != 0 || cp_.size == 0) {
      return Add("checkpoint", false, "origin \"" + cp_.origin + "\" is not a gatos ledger, or the tree is empty");
    }
    Add("checkpoint", true,
        "signed by the ledger key: " + cp_.origin + ", " + std::to_string(cp_.size) + " log entries");
    for (const auto& c : opened->cosigners) r_->cosigners.push_back(c.name);
    std::string names;
    for (const auto& c : r_->cosigners) names += (names.empty() ? "" : ", ") + c;
    return Add("witness_quorum", r_->cosigners.size() >= o_.min_witnesses,
               std::to_string(r_->cosigners.size()) + " of the given witnesses cosigned" +
                   (names.empty() ? "" : " (" + names + ")") + "; " + std::to_string(o_.min_witnesses) +
                   " required");
  }

  bool CheckEntry(const std::string& role) {
    const ProofBundleEntry* e = nullptr;
    for (const auto& x : b_.entries) {
      if (x.role == role) e = &x;
    }
    std::string incl = "inclusion_" + role, entry = "log_entry_" + role;
    if (!e) return Add(incl, false, "the bundle has no " + role + " entry");
    const GitObject* c = Object(e->log_commit, ObjectType::kCommit);
    if (!c) return Add(incl, false, "log commit " + Short(e->log_commit) + " is not in the bundle");
    Status v = VerifyMerkleInclusion(e->index, cp_.size, MerkleLeafHash(c->data), e->proof, cp_.root);
    if (!v.ok()) return Add(incl, false, "log entry " + std::to_string(e->index) + ": " + v.message());
    Add(incl, true, "log commit " + Short(e->log_commit) + " is entry " + std::to_string(e->index) +
                        " under the signed root");
    auto raw = ParseRawCommit(c->data, c->id);
    if (!raw.ok()) return Add(entry, false, raw.status().message());
    auto info = ParseLogMessage(raw->message);
    if (!info.ok()) return Add(entry, false, "log commit " + Short(c->id) + ": " + info.status().message());
    if (info->seq != static_cast<int64_t>(e->index) + 1) {
      return Add(entry, false, "log commit " + Short(c->id) + " has Log-Seq " + std::to_string(info->seq) +
                                   ", not entry " + std::to_string(e->index) + " + 1");
    }
    auto sig = ParseSshSignature(raw->signature);
    if (!sig.ok() || sig->key != o_.ledger_key) {
      return Add(entry, false, "log commit " + Short(c->id) + " is not signed by the ledger key");
    }
    if (Status s = SshSigVerify(*sig, raw->signed_data, kSignerNamespaceGit); !s.ok()) {
      return Add(entry, false, "log commit " + Short(c->id) + ": " + s.message());
    }
    if (role == "head") {
      if (e->index + 1 != cp_.size) {
        return Add(entry, false, "the head entry is " + std::to_string(e->index) + ", not the checkpoint's last (" +
                                     std::to_string(cp_.size - 1) + ")");
      }
      head_tree_ = raw->tree;
      return Add(entry, true, "log " + std::to_string(info->seq) + ", the checkpoint's last entry");
    }
    const std::string& want = role == "job" ? b_.job_commit : b_.result_commit;
    bool named = false;
    for (size_t i = 1; i < raw->parents.size(); ++i) named = named || raw->parents[i] == want;
    if (!named) {
      return Add(entry, false, "log commit " + Short(c->id) + " does not record the " + role + " commit " + Short(want));
    }
    return Add(entry, true, "log " + std::to_string(info->seq) + " records the " + role + " commit " + Short(want));
  }

  bool CheckRecord() {
    std::vector<std::string> path = {"jobs",
                                     b_.job_hex.substr(0, 1),
                                     b_.job_hex.substr(1, 1),
                                     b_.job_hex.substr(2, 1),
                                     b_.job_hex.substr(3, 1),
                                     b_.job_hex.substr(4)};
    std::string cur = head_tree_;
    for (size_t i = 0; i < path.size(); ++i) {
      const GitObject* t = Object(cur, ObjectType::kTree);
      if (!t) return Add("job_record", false, "state index tree " + Short(cur) + " is not in the bundle");
      auto entries = ParseTree(t->data, cur);
      if (!entries.ok()) return Add("job_record", false, entries.status().message());
      std::string next;
      for (const auto& e : *entries) {
        if (e.name == path[i] && e.is_tree() == (i + 1 < path.size())) next = e.id;
      }
      if (next.empty()) return Add("job_record", false, "the head's state index has no record of this job");
      cur = next;
    }
    const GitObject* blob = Object(cur, ObjectType::kBlob);
    if (!blob) return Add("job_record", false, "the job's record is not in the bundle");
    auto rec = DecodeJobRecord(blob->data);
    if (!rec.ok()) return Add("job_record", false, rec.status().message());
    if (rec->job_hex != b_.job_hex || rec->job_commit != b_.job_commit) {
      return Add("job_record", false, "the record names job commit " + Short(rec->job_commit) + ", not " +
                                          Short(b_.job_commit));
    }
    if (rec->result_commit != b_.result_commit) {
      return Add("job_record", false,
                 "the ledger's state names result " + (rec->result_commit.empty() ? std::string("none") : Short(rec->result_commit)) +
                     " as final, not " + Short(b_.result_commit));
    }
    return Add("job_record", true, "the signed state names this job commit and this result as final");
  }

  bool CheckJob() {
    const GitObject* jc = Object(b_.job_commit, ObjectType::kCommit);
    if (!jc) return Add("job_id", false, "job commit " + Short(b_.job_commit) + " is not in the bundle");
    auto raw = ParseRawCommit(jc->data, jc->id);
    if (!raw.ok()) return Add("job_id", false, raw.status().message());
    const GitObject* tree = Object(raw->tree, ObjectType::kTree);
    if (!tree) return Add("job_id", false, "the job commit's tree is not in the bundle");
    auto entries = ParseTree(tree->data, tree->id);
    if (!entries.ok()) return Add("job_id", false, entries.status().message());
    const GitObject* yaml = nullptr;
    for (const auto& e : *entries) {
      if (e.name == "job.yaml" && !e.is_tree()) yaml = Object(e.id, ObjectType::kBlob);
    }
    if (!yaml) return Add("job_id", false, "job.yaml is not in the bundle");
    auto manifest = ParseManifest(yaml->data, "job.yaml", ManifestFormat::kYaml, {});
    if (!manifest.ok()) return Add("job_id", false, "job.yaml does not parse: " + manifest.status().message());
    std::string got = JobIdHex(*manifest);
    if (got != b_.job_hex) {
      return Add("job_id", false, "job.yaml hashes to blake3:" + got + ", not the bundle's job");
    }
    return Add("job_id", true, "job.yaml recomputes to blake3:" + b_.job_hex);
  }

  void CheckResult() {
    std::vector<GitObject> objects(b_.objects.begin(), b_.objects.end());
    ResultReport rr = CheckResultCommit(BatchLookup(&objects, {}), b_.result_commit);
    for (const auto& c : rr.checks) {
      if (!Add(c.name, c.ok, c.detail)) return;
    }
    if (!rr.ok()) return;
    r_->result_status = rr.parsed.status;
    r_->worker_id = "ed25519:" + rr.parsed.worker_hex;
    if (!Add("result_job_id", rr.parsed.job_hex == b_.job_hex, "the result's Job-Id is blake3:" + rr.parsed.job_hex)) return;
    Add("result_parent_job", !rr.parsed.parents.empty() && rr.parsed.parents[0] == b_.job_commit,
        "the result's first parent is the job commit");
  }

  const ProofBundle& b_;
  const BundleVerifyOptions& o_;
  BundleReport* r_;
  std::map<std::string, const GitObject*> by_id_;
  Checkpoint cp_;
  std::string head_tree_;
};

}  // namespace

bool BundleReport::ok() const { return !checks.empty() && first_failure() == nullptr; }

const BundleCheck* BundleReport::first_failure() const {
  for (const auto& c : checks) {
    if (!c.ok) return &c;
  }
  return nullptr;
}

BundleReport VerifyProofBundle(const ProofBundle& b, const BundleVerifyOptions& options) {
  BundleReport r;
  Verifier(b, options, &r).Run();
  return r;
}

nlohmann::json BundleReportToJson(const BundleReport& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) checks.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
  const BundleCheck* f = r.first_failure();
  return {{"ok", r.ok()},
          {"job_id", "blake3:" + r.job_hex},
          {"status", r.result_status},
          {"worker_id", r.worker_id},
          {"origin", r.origin},
          {"tree_size", r.tree_size},
          {"cosigners", r.cosigners},
          {"failure", f ? nlohmann::json{{"check", f->name}, {"detail", f->detail}} : nlohmann::json(nullptr)},
          {"checks", checks}};
}

}  // namespace gatos
