#include "gatos/git/result.h"

#include <git2.h>

#include <algorithm>
#include <map>
#include <set>

#include "gatos/crypto/sshsig.h"
#include "gatos/model/blake3.h"
#include "gatos/model/encoding.h"
#include "gatos/model/result_path.h"
#include "gatos/model/trailers.h"
#include "git/git_util.h"

namespace gatos {

namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t GetU32(std::string_view s, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[pos + i]);
  return v;
}

constexpr std::string_view kBatchMagic = "GATOSOB1";

// ---- tree building ----

struct DirNode {
  std::map<std::string, DirNode> dirs;
  std::map<std::string, const ResultFile*> files;
};

// Git sorts tree entries by name, comparing a tree's name as if it ended in '/'.
struct SortKey {
  std::string key;
  std::string entry;  // "<mode> <name>\0<20-byte id>"
};

std::string WriteDir(const DirNode& dir, std::vector<GitObject>* objects) {
  std::vector<SortKey> entries;
  for (const auto& [name, sub] : dir.dirs) {
    std::string id = WriteDir(sub, objects);
    entries.push_back({name + "/", "40000 " + name + std::string(1, '\0') + RawOid(id)});
  }
  for (const auto& [name, file] : dir.files) {
    GitObject blob{ObjectType::kBlob, file->data, GitObjectId(ObjectType::kBlob, file->data)};
    std::string mode = file->executable ? "100755 " : "100644 ";
    entries.push_back({name, mode + name + std::string(1, '\0') + RawOid(blob.id)});
    objects->push_back(std::move(blob));
  }
  std::sort(entries.begin(), entries.end(),
            [](const SortKey& a, const SortKey& b) { return a.key < b.key; });
  std::string data;
  for (const auto& e : entries) data += e.entry;
  GitObject tree{ObjectType::kTree, data, GitObjectId(ObjectType::kTree, data)};
  std::string id = tree.id;
  objects->push_back(std::move(tree));
  return id;
}

}  // namespace

std::string EncodeObjectBatch(const std::vector<GitObject>& objects) {
  size_t total = kBatchMagic.size() + 4;
  for (const auto& o : objects) total += 5 + o.data.size();
  std::string out;
  out.reserve(total);
  out += kBatchMagic;
  PutU32(&out, static_cast<uint32_t>(objects.size()));
  for (const auto& o : objects) {
    out.push_back(o.type == ObjectType::kCommit ? 1 : o.type == ObjectType::kTree ? 2 : 3);
    PutU32(&out, static_cast<uint32_t>(o.data.size()));
    out += o.data;
  }
  return out;
}

Result<std::vector<GitObject>> DecodeObjectBatch(std::string_view bytes, const BatchLimits& limits) {
  if (bytes.size() < kBatchMagic.size() + 4 || bytes.substr(0, kBatchMagic.size()) != kBatchMagic) {
    return InvalidArgumentError("object batch does not start with " + std::string(kBatchMagic));
  }
  uint32_t count = GetU32(bytes, kBatchMagic.size());
  if (count > limits.max_objects) {
    return InvalidArgumentError("object batch holds " + std::to_string(count) + " objects; the limit is " +
                                std::to_string(limits.max_objects));
  }
  std::vector<GitObject> out;
  out.reserve(count);
  size_t pos = kBatchMagic.size() + 4;
  size_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - pos < 5) {
      return InvalidArgumentError("object batch is truncated in the header of object " + std::to_string(i));
    }
    uint8_t t = static_cast<uint8_t>(bytes[pos]);
    uint32_t len = GetU32(bytes, pos + 1);
    pos += 5;
    if (t < 1 || t > 3) {
      return InvalidArgumentError("object batch: object " + std::to_string(i) + " has unknown type " +
                                  std::to_string(t));
    }
    total += len;
    if (total > limits.max_bytes) {
      return InvalidArgumentError("object batch is larger than this ledger's result limit of " +
                                  std::to_string(limits.max_bytes) + " bytes");
    }
    if (bytes.size() - pos < len) {
      return InvalidArgumentError("object batch is truncated in the data of object " + std::to_string(i));
    }
    GitObject o;
    o.type = t == 1 ? ObjectType::kCommit : t == 2 ? ObjectType::kTree : ObjectType::kBlob;
    o.data = std::string(bytes.substr(pos, len));
    o.id = GitObjectId(o.type, o.data);
    pos += len;
    out.push_back(std::move(o));
  }
  if (pos != bytes.size()) {
    return InvalidArgumentError("object batch has " + std::to_string(bytes.size() - pos) +
                                " trailing bytes after its last object");
  }
  return out;
}

Result<std::string> BuildTreeObjects(const std::vector<ResultFile>& files,
                                     std::vector<GitObject>* objects) {
  DirNode root;
  std::set<std::string> seen;
  for (const ResultFile& f : files) {
    if (!seen.insert(f.path).second) return InvalidArgumentError("file \"" + f.path + "\" given twice");
    GATOS_RETURN_IF_ERROR(CheckResultPath(f.path));
    DirNode* node = &root;
    size_t pos = 0;
    while (true) {
      size_t slash = f.path.find('/', pos);
      std::string part = f.path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      if (slash == std::string::npos) {
        if (node->dirs.count(part)) {
          return InvalidArgumentError("path \"" + f.path + "\" is both a file and a directory");
        }
        node->files[part] = &f;
        break;
      }
      if (node->files.count(part)) {
        return InvalidArgumentError("path \"" + f.path + "\" is both a file and a directory");
      }
      node = &node->dirs[part];
      pos = slash + 1;
    }
  }
  std::vector<GitObject> built;
  std::string tree = WriteDir(root, &built);
  std::set<std::string> ids;  // two files with the same bytes share one blob
  for (const auto& o : *objects) ids.insert(o.id);
  for (auto& o : built) {
    if (ids.insert(o.id).second) objects->push_back(std::move(o));
  }
  return tree;
}

Result<BuiltResult> BuildResult(const ResultBuildInput& in, const Ed25519PrivateKey& worker_key) {
  if (!IsLowerHex(in.job_commit, 40) || !IsLowerHex(in.lease_commit, 40)) {
    return InvalidArgumentError("result parents must be 40-hex commit ids (job and lease commits)");
  }
  Poe poe = in.poe;
  poe.outputs.clear();
  std::vector<ResultFile> files;
  for (const ResultFile& f : in.files) {
    if (f.path == kPoeFileName) return InvalidArgumentError("a result file may not be named poe.json");
    poe.outputs.push_back({f.path, f.data.size(), Blake3Tagged(f.data)});
  }
  std::sort(poe.outputs.begin(), poe.outputs.end(),
            [](const PoeOutput& a, const PoeOutput& b) { return a.path < b.path; });
  GATOS_ASSIGN_OR_RETURN(std::string poe_json, SerializePoe(poe));
  files = in.files;
  files.push_back({kPoeFileName, poe_json, false});
  std::vector<GitObject> objects;
  GATOS_ASSIGN_OR_RETURN(std::string tree, BuildTreeObjects(files, &objects));

  auto attest = Ed25519Sign(worker_key, DssePae(kPoePayloadType, poe_json));
  CommitMessage msg;
  msg.body = "gatos: result of job " + poe.job_id.substr(7, 12) + ": " + poe.status;
  msg.trailers = {
      {"Job-Id", poe.job_id},
      {"Proof-Of-Execution", Blake3Tagged(poe_json)},
      {"Worker-Id", poe.worker_id},
      {"Attest-Program", poe.runner_program},
      {"Attest-Sig", "ed25519:" + HexEncode(attest.data(), attest.size())},
      {"Status", poe.status},
      {"Lease-Epoch", std::to_string(poe.lease_epoch)},
  };
  // The commit each git input resolved to (also in poe.json), so that
  // `git log` of the ledger says what a job read.
  for (const PoeInput& in : poe.inputs) {
    msg.trailers.push_back({"Input-Commit", std::to_string(in.index) + " " + in.commit});
  }
  GATOS_ASSIGN_OR_RETURN(GitObject commit,
                         BuildCommitObject(tree, {in.job_commit, in.lease_commit}, FormatCommitMessage(msg),
                                           in.committer_name, in.committer_email, in.time_ms, &worker_key));
  BuiltResult out;
  out.commit_id = commit.id;
  out.poe_json = std::move(poe_json);
  out.objects.push_back(std::move(commit));
  for (auto& o : objects) out.objects.push_back(std::move(o));
  return out;
}

ObjectLookup BatchLookup(const std::vector<GitObject>* batch, ObjectLookup fallback) {
  auto index = std::make_shared<std::map<std::string, const GitObject*>>();
  for (const auto& o : *batch) (*index)[o.id] = &o;
  return [index, fallback](const std::string& id) -> Result<std::pair<ObjectType, std::string>> {
    auto it = index->find(id);
    if (it != index->end()) return std::make_pair(it->second->type, it->second->data);
    if (fallback) return fallback(id);
    return NotFoundError("object " + id + " is not in the batch");
  };
}

ObjectLookup LedgerLookup(Ledger* ledger) {
  return [ledger](const std::string& id) { return ledger->ReadRawObject(id); };
}

bool ResultReport::ok() const { return !checks.empty() && first_failure() == nullptr; }

const ResultCheck* ResultReport::first_failure() const {
  for (const auto& c : checks) {
    if (!c.ok) return &c;
  }
  return nullptr;
}

namespace {

// Walks the tree into path -> (size, hash), refusing what a result tree never holds.
Status CollectTree(const ObjectLookup& lookup, const std::string& tree_id, const std::string& prefix,
                   size_t depth, const ResultCheckLimits& limits, ResultTreeData* files) {
  if (depth > limits.max_depth) return InvalidArgumentError("result tree is nested deeper than " + std::to_string(limits.max_depth));
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(tree_id));
  if (obj.first != ObjectType::kTree) return InvalidArgumentError("object " + tree_id + " is not a tree");
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(obj.second, tree_id));
  for (const auto& e : entries) {
    std::string path = prefix + e.name;
    if (e.mode == 040000) {
      GATOS_RETURN_IF_ERROR(CollectTree(lookup, e.id, path + "/", depth + 1, limits, files));
      continue;
    }
    if (e.mode != 0100644 && e.mode != 0100755) {
      return InvalidArgumentError("result tree entry \"" + path + "\" has mode " +
                                  std::to_string(e.mode) + " (only files and directories belong there)");
    }
    if (files->size() >= limits.max_files) return InvalidArgumentError("result tree has more than " + std::to_string(limits.max_files) + " files");
    GATOS_ASSIGN_OR_RETURN(auto blob, lookup(e.id));
    if (blob.first != ObjectType::kBlob) return InvalidArgumentError("tree entry \"" + path + "\" is not a blob");
    if (blob.second.size() > limits.max_file_bytes) {
      return InvalidArgumentError("result file \"" + path + "\" is larger than " + std::to_string(limits.max_file_bytes) + " bytes");
    }
    (*files)[path] = {e.id, std::move(blob.second)};
  }
  return OkStatus();
}

bool TaggedHex(std::string_view s, std::string_view tag) {
  return s.substr(0, tag.size()) == tag && IsLowerHex(s.substr(tag.size()), 64);
}

}  // namespace

ResultReport CheckResultCommit(const ObjectLookup& lookup, const std::string& commit_id,
                               const ResultCheckLimits& limits, ResultTreeData* tree_out,
                               bool signatures_verified) {
  ResultReport r;
  ParsedResult& p = r.parsed;
  p.commit_id = commit_id;
  auto add = [&](const std::string& name, bool ok, std::string detail) {
    r.checks.push_back({name, ok, std::move(detail)});
    return ok;
  };

  // 1. The commit object and its shape.
  auto obj = lookup(commit_id);
  if (!obj.ok() || obj->first != ObjectType::kCommit) {
    add("commit", false, obj.ok() ? "object " + commit_id + " is a " + ObjectTypeName(obj->first) + ", not a commit"
                                  : obj.status().message());
    return r;
  }
  auto raw = ParseRawCommit(obj->second, commit_id);
  if (!raw.ok()) {
    add("commit", false, raw.status().message());
    return r;
  }
  p.tree = raw->tree;
  p.parents = raw->parents;
  p.commit_time_s = raw->commit_time_s;
  if (!add("commit", raw->parents.size() == 2,
           raw->parents.size() == 2 ? "commit with parents [job, lease]"
                                    : "a result commit has exactly 2 parents (job commit, lease commit); this one has " +
                                          std::to_string(raw->parents.size()))) {
    return r;
  }

  // 2. Trailers: each exactly once and well-formed.
  auto msg = ParseCommitMessage(raw->message);
  if (!msg.ok()) {
    add("trailers", false, "commit message: " + msg.status().message());
    return r;
  }
  std::map<std::string, std::string> t;
  std::string trailer_error;
  for (const char* key : {"Job-Id", "Proof-Of-Execution", "Worker-Id", "Attest-Program", "Attest-Sig",
                          "Status", "Lease-Epoch"}) {
    auto v = RequireUniqueTrailer(msg->trailers, key);
    if (!v.ok()) {
      trailer_error = v.status().message();
      break;
    }
    t[key] = *v;
  }
  if (trailer_error.empty()) {
    if (!TaggedHex(t["Job-Id"], "blake3:")) trailer_error = "Job-Id: expected blake3:<64 hex>";
    else if (!TaggedHex(t["Proof-Of-Execution"], "blake3:")) trailer_error = "Proof-Of-Execution: expected blake3:<64 hex>";
    else if (!TaggedHex(t["Worker-Id"], "ed25519:")) trailer_error = "Worker-Id: expected ed25519:<64 hex>";
    else if (!TaggedHex(t["Attest-Program"], "blake3:")) trailer_error = "Attest-Program: expected blake3:<64 hex>";
    else if (t["Attest-Sig"].rfind("ed25519:", 0) != 0 || !IsLowerHex(t["Attest-Sig"].substr(8), 128)) trailer_error = "Attest-Sig: expected ed25519:<128 hex>";
    else if (!IsResultStatus(t["Status"])) trailer_error = "Status: \"" + t["Status"].substr(0, 40) + "\" is not succeeded, failed, timed-out or aborted";
    else {
      const std::string& e = t["Lease-Epoch"];
      bool digits = !e.empty() && e.size() < 19 && e[0] != '0' &&
                    std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) trailer_error = "Lease-Epoch: \"" + e.substr(0, 40) + "\" is not a positive integer";
    }
  }
  if (!add("trailers", trailer_error.empty(), trailer_error.empty() ? "all 7 trailers present once" : trailer_error)) {
    return r;
  }
  p.job_hex = t["Job-Id"].substr(7);
  p.worker_hex = t["Worker-Id"].substr(8);
  p.epoch = std::strtoll(t["Lease-Epoch"].c_str(), nullptr, 10);
  p.status = t["Status"];
  p.attest_program = t["Attest-Program"];
  p.attest_sig_hex = t["Attest-Sig"].substr(8);

  // 3. The tree.
  ResultTreeData local;
  ResultTreeData& files = tree_out ? *tree_out : local;
  files.clear();
  Status walked = CollectTree(lookup, raw->tree, "", 0, limits, &files);
  if (!add("tree", walked.ok(), walked.ok() ? "tree readable" : walked.message())) return r;
  auto poe_it = files.find(kPoeFileName);
  if (!add("poe_present", poe_it != files.end(),
           poe_it != files.end() ? "poe.json present" : "the result tree has no poe.json at its top")) {
    return r;
  }
  p.poe_json = poe_it->second.data;
  p.tree_files.reserve(files.size() - 1);
  for (const auto& [path, blob] : files) {
    if (path != kPoeFileName) p.tree_files.push_back({path, blob.data.size(), Blake3Tagged(blob.data)});
  }

  // 4. poe.json: canonical, hash matches the trailer, fields agree.
  auto poe = ParsePoe(p.poe_json);
  if (!add("poe_canonical", poe.ok(), poe.ok() ? "poe.json is canonical JSON of a valid PoE" : poe.status().message())) {
    return r;
  }
  p.poe = *poe;
  std::string poe_hash = Blake3Tagged(p.poe_json);
  add("poe_hash", poe_hash == t["Proof-Of-Execution"],
      poe_hash == t["Proof-Of-Execution"] ? "Proof-Of-Execution matches poe.json"
                                          : "Proof-Of-Execution is " + t["Proof-Of-Execution"] +
                                                " but poe.json hashes to " + poe_hash);
  std::string mismatch;
  if (p.poe.job_id != t["Job-Id"]) mismatch = "poe.json job_id " + p.poe.job_id + " differs from Job-Id";
  else if (p.poe.worker_id != t["Worker-Id"]) mismatch = "poe.json worker_id differs from Worker-Id";
  else if (p.poe.lease_epoch != p.epoch) mismatch = "poe.json lease_epoch " + std::to_string(p.poe.lease_epoch) + " differs from Lease-Epoch " + t["Lease-Epoch"];
  else if (p.poe.status != p.status) mismatch = "poe.json status " + p.poe.status + " differs from Status " + p.status;
  else if (p.poe.runner_program != p.attest_program) mismatch = "poe.json runner.program differs from Attest-Program";
  else {
    // Input-Commit trailers, when present, say exactly what poe.json's inputs say.
    std::vector<std::string> said, listed;
    for (const Trailer& tr : msg->trailers) {
      if (tr.key == "Input-Commit") said.push_back(tr.value);
    }
    for (const PoeInput& in : p.poe.inputs) listed.push_back(std::to_string(in.index) + " " + in.commit);
    if (!said.empty() && said != listed) mismatch = "the Input-Commit trailers differ from poe.json inputs";
  }
  add("poe_matches_trailers", mismatch.empty(), mismatch.empty() ? "poe.json agrees with the trailers" : mismatch);

  // 5. Tree files == PoE outputs.
  std::string diff;
  {
    size_t i = 0, j = 0;
    const auto& a = p.tree_files;
    const auto& b = p.poe.outputs;
    while (diff.empty() && (i < a.size() || j < b.size())) {
      if (j == b.size() || (i < a.size() && a[i].path < b[j].path)) {
        diff = "file \"" + a[i].path + "\" is in the tree but not in poe.json outputs";
      } else if (i == a.size() || b[j].path < a[i].path) {
        diff = "poe.json lists \"" + b[j].path + "\" but the tree has no such file";
      } else if (a[i].size != b[j].size) {
        diff = "\"" + a[i].path + "\" has " + std::to_string(a[i].size) + " bytes; poe.json says " + std::to_string(b[j].size);
      } else if (a[i].hash != b[j].hash) {
        diff = "\"" + a[i].path + "\" hashes to " + a[i].hash + "; poe.json says " + b[j].hash;
      } else {
        ++i;
        ++j;
      }
    }
  }
  add("tree_matches_outputs", diff.empty(), diff.empty() ? std::to_string(p.tree_files.size()) + " files match poe.json outputs" : diff);

  // 6. Attest-Sig over DSSE PAE(poe.json) by Worker-Id.
  auto worker = ParseWorkerId(t["Worker-Id"]);
  auto sig = HexDecode(p.attest_sig_hex);
  bool attest_ok = worker.ok() && sig.ok() && sig->size() == 64 &&
                   (signatures_verified || Ed25519Verify(*worker, DssePae(kPoePayloadType, p.poe_json), sig->data()).ok());
  add("attest_sig", attest_ok, attest_ok ? "Attest-Sig verifies for Worker-Id" : "Attest-Sig does not verify over poe.json for " + t["Worker-Id"]);

  // 7. The commit's SSH signature, by the same key.
  std::string sig_error;
  if (raw->signature.empty()) {
    sig_error = "the result commit is not signed (no gpgsig header)";
  } else {
    auto ssh = ParseSshSignature(raw->signature);
    if (!ssh.ok()) sig_error = "gpgsig: " + ssh.status().message();
    else if (Status v = signatures_verified ? OkStatus() : SshSigVerify(*ssh, raw->signed_data, "git"); !v.ok()) sig_error = "commit signature: " + v.message();
    else if (!worker.ok() || ssh->key != *worker) sig_error = "the commit is signed by " + ssh->key.WorkerId() + ", not by Worker-Id";
  }
  add("commit_signature", sig_error.empty(), sig_error.empty() ? "SSH commit signature by Worker-Id verifies" : sig_error);
  return r;
}

}  // namespace gatos
