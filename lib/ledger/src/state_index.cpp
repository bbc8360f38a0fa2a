#include "gatos/ledger/state_index.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"

namespace gatos {
namespace {

constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr size_t kMaxCachedDirs = 200'000;

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string BaseOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int Depth(const std::string& path) {
  return path.empty() ? 0 : 1 + static_cast<int>(std::count(path.begin(), path.end(), '/'));
}

std::vector<TreeEntry>::iterator Find(std::vector<TreeEntry>& v, const std::string& name) {
  return std::lower_bound(v.begin(), v.end(), name,
                          [](const TreeEntry& e, const std::string& n) { return e.name < n; });
}

const TreeEntry* FindConst(const std::vector<TreeEntry>& v, const std::string& name) {
  auto it = std::lower_bound(v.begin(), v.end(), name,
                             [](const TreeEntry& e, const std::string& n) { return e.name < n; });
  return it != v.end() && it->name == name ? &*it : nullptr;
}

void Put(std::vector<TreeEntry>& v, TreeEntry e) {
  auto it = Find(v, e.name);
  if (it != v.end() && it->name == e.name) {
    *it = std::move(e);
  } else {
    v.insert(it, std::move(e));
  }
}

void Erase(std::vector<TreeEntry>& v, const std::string& name) {
  auto it = Find(v, name);
  if (it != v.end() && it->name == name) v.erase(it);
}

const char* kStateKeys[6] = {"pending", "claimed", "succeeded", "failed", "timed-out", "aborted"};

}  // namespace

std::string EncodeIndexStats(const IndexStats& s) {
  nlohmann::json by = nlohmann::json::object();
  for (size_t i = 0; i < 6; ++i) by[kStateKeys[i]] = s.by_state[i];
  nlohmann::json j = {{"v", 1}, {"jobs", s.jobs}, {"pruned", s.pruned}, {"by_state", by}};
  auto c = CanonicalJson(j);
  return c.ok() ? *c : j.dump();
}

Result<IndexStats> DecodeIndexStats(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [] { return InvalidArgumentError("stats: not a valid stats record"); };
  if (j.is_discarded() || !j.is_object() || !j.contains("by_state") || !j["by_state"].is_object()) return bad();
  IndexStats s;
  for (const char* k : {"jobs", "pruned"}) {
    if (!j.contains(k) || !j[k].is_number_integer()) return bad();
  }
  s.jobs = j["jobs"].get<int64_t>();
  s.pruned = j["pruned"].get<int64_t>();
  for (size_t i = 0; i < 6; ++i) {
    const auto& by = j["by_state"];
    if (!by.contains(kStateKeys[i]) || !by[kStateKeys[i]].is_number_integer()) return bad();
    s.by_state[i] = by[kStateKeys[i]].get<int64_t>();
  }
  return s;
}

std::string JobIndexPath(std::string_view h) {
  std::string p = "jobs/";
  for (int i = 0; i < 4; ++i) {
    p += h[i];
    p += '/';
  }
  p.append(h.substr(4));
  return p;
}

std::string LiveIndexPath(std::string_view h) {
  std::string p = "live/";
  for (int i = 0; i < 2; ++i) {
    p += h[i];
    p += '/';
  }
  p.append(h.substr(2));
  return p;
}

void StateIndex::Reset(const std::string& root_tree) {
  root_ = root_tree;
  cache_.clear();
  pending_.clear();
}

Result<const StateIndex::Dir*> StateIndex::Load(const std::string& path) {
  auto it = cache_.find(path);
  if (it != cache_.end()) return &it->second;
  if (cache_.size() > kMaxCachedDirs) cache_.clear();
  std::string id;
  if (path.empty()) {
    id = root_;
  } else {
    GATOS_ASSIGN_OR_RETURN(const Dir* parent, Load(ParentOf(path)));
    const TreeEntry* e = FindConst(parent->entries, BaseOf(path));
    if (e && e->is_tree()) id = e->id;
  }
  Dir d;
  d.id = id;
  if (!id.empty()) {
    GATOS_ASSIGN_OR_RETURN(auto raw, ledger_->ReadRawObject(id));
    if (raw.first != ObjectType::kTree) return DataLossError("state index: " + path + " is not a tree");
    auto entries = ParseTree(raw.second, id);
    if (!entries.ok()) return DataLossError("state index: " + entries.status().message());
    d.entries = std::move(*entries);
    std::sort(d.entries.begin(), d.entries.end(),
              [](const TreeEntry& a, const TreeEntry& b) { return a.name < b.name; });
  }
  return &cache_.emplace(path, std::move(d)).first->second;
}

Result<std::optional<JobRecord>> StateIndex::ReadRecordAt(const std::string& dir, const std::string& name) {
  GATOS_ASSIGN_OR_RETURN(const Dir* d, Load(dir));
  const TreeEntry* e = FindConst(d->entries, name);
  if (!e) return std::optional<JobRecord>();
  auto blob = ledger_->ReadBlob(e->id, kMaxRecordBytes);
  if (!blob.ok()) return DataLossError("state index: record " + dir + "/" + name + ": " + blob.status().message());
  auto rec = DecodeJobRecord(*blob);
  if (!rec.ok()) return DataLossError("state index: " + dir + "/" + name + ": " + rec.status().message());
  return std::optional<JobRecord>(std::move(*rec));
}

Result<std::optional<JobRecord>> StateIndex::Get(const std::string& job_hex) {
  if (!IsLowerHex(job_hex, 64)) return InvalidArgumentError("not a job id: " + job_hex.substr(0, 80));
  std::string path = JobIndexPath(job_hex);
  return ReadRecordAt(ParentOf(path), BaseOf(path));
}

Status StateIndex::ForEachLive(const std::function<Status(const JobRecord&)>& fn) {
  GATOS_ASSIGN_OR_RETURN(const Dir* live, Load("live"));
  std::vector<std::string> a_names;
  for (const auto& e : live->entries) a_names.push_back(e.name);
  for (const auto& a : a_names) {
    GATOS_ASSIGN_OR_RETURN(const Dir* da, Load("live/" + a));
    std::vector<std::string> b_names;
    for (const auto& e : da->entries) b_names.push_back(e.name);
    for (const auto& b : b_names) {
      std::string dir = "live/" + a + "/" + b;
      GATOS_ASSIGN_OR_RETURN(const Dir* db, Load(dir));
      std::vector<std::string> names;
      for (const auto& e : db->entries) names.push_back(e.name);
      for (const auto& n : names) {
        GATOS_ASSIGN_OR_RETURN(auto rec, ReadRecordAt(dir, n));
        if (rec) GATOS_RETURN_IF_ERROR(fn(*rec));
      }
    }
  }
  return OkStatus();
}

Status StateIndex::ForEachJob(const std::string& after, const std::function<bool(const JobRecord&)>& fn) {
  // Depth-first over jobs/a/b/c/d/<rest>, skipping subtrees before `after`.
  std::function<Result<bool>(const std::string&, int, std::string)> walk =
      [&](const std::string& dir, int level, std::string prefix) -> Result<bool> {
    GATOS_ASSIGN_OR_RETURN(const Dir* d, Load(dir));
    std::vector<TreeEntry> entries = d->entries;
    for (const auto& e : entries) {
      std::string id_prefix = prefix + e.name;
      if (!after.empty()) {
        std::string cmp = after.substr(0, id_prefix.size());
        if (id_prefix < cmp) continue;
        if (level == 4 && id_prefix <= after) continue;
      }
      if (level < 4) {
        GATOS_ASSIGN_OR_RETURN(bool go, walk(dir + "/" + e.name, level + 1, id_prefix));
        if (!go) return false;
      } else {
        GATOS_ASSIGN_OR_RETURN(auto rec, ReadRecordAt(dir, e.name));
        if (rec && !fn(*rec)) return false;
      }
    }
    return true;
  };
  return walk("jobs", 0, "").status();
}

Status StateIndex::ForEachJobBlob(
    const std::function<Result<bool>(const std::string& job_hex, const std::string& blob_id)>& fn) {
  std::function<Result<bool>(const std::string&, int, const std::string&)> walk =
      [&](const std::string& dir, int level, const std::string& prefix) -> Result<bool> {
    GATOS_ASSIGN_OR_RETURN(const Dir* d, Load(dir));
    if (level == 4) {
      const std::vector<TreeEntry> entries = d->entries;  // fn may load (and evict) dirs
      for (const auto& e : entries) {
        GATOS_ASSIGN_OR_RETURN(bool go, fn(prefix + e.name, e.id));
        if (!go) return false;
      }
      return true;
    }
    std::vector<std::string> names;
    names.reserve(d->entries.size());
    for (const auto& e : d->entries) names.push_back(e.name);
    for (const auto& name : names) {
      GATOS_ASSIGN_OR_RETURN(bool go, walk(dir + "/" + name, level + 1, prefix + name));
      if (!go) return false;
    }
    return true;
  };
  return walk("jobs", 0, "").status();
}

Result<IndexStats> StateIndex::Stats() {
  GATOS_ASSIGN_OR_RETURN(const Dir* root, Load(""));
  const TreeEntry* e = FindConst(root->entries, "stats");
  if (!e) return IndexStats{};
  GATOS_ASSIGN_OR_RETURN(std::string text, ledger_->ReadBlob(e->id, 1 << 16));
  auto s = DecodeIndexStats(text);
  if (!s.ok()) return DataLossError("state index: " + s.status().message());
  return s;
}

Result<std::string> StateIndex::BatchText() {
  GATOS_ASSIGN_OR_RETURN(const Dir* root, Load(""));
  const TreeEntry* e = FindConst(root->entries, "batch");
  if (!e) return std::string();
  return ledger_->ReadBlob(e->id, 256 << 20);
}

Result<std::string> StateIndex::Build(const std::vector<Change>& changes, const std::string& batch_text,
                                      const IndexStats& stats, std::vector<GitObject>* objects) {
  pending_.clear();
  std::unordered_map<std::string, Dir> work;
  // Directories to rewrite, by depth ("" is 0, "jobs/a" is 2): a parent is
  // always one level up, so rewriting the deepest level first lets each
  // parent see its children's new ids.
  constexpr int kMaxDepth = 6;  // jobs/a/b/c/d holds the records
  std::array<std::set<std::string>, kMaxDepth + 1> dirty;
  auto dir_for = [&](const std::string& path) -> Result<Dir*> {
    auto it = work.find(path);
    if (it != work.end()) return &it->second;
    GATOS_ASSIGN_OR_RETURN(const Dir* base, Load(path));
    return &work.emplace(path, *base).first->second;
  };
  auto touch = [&](const std::string& dir) -> Status {
    const int depth = Depth(dir);
    if (depth > kMaxDepth) return InternalError("state index: path too deep: " + dir);
    dirty[static_cast<size_t>(depth)].insert(dir);
    return OkStatus();
  };
  auto set_entry = [&](const std::string& path, TreeEntry e) -> Status {
    const std::string parent = ParentOf(path);
    GATOS_ASSIGN_OR_RETURN(Dir* d, dir_for(parent));
    e.name = BaseOf(path);
    Put(d->entries, std::move(e));
    return touch(parent);
  };
  auto erase_entry = [&](const std::string& path) -> Status {
    const std::string parent = ParentOf(path);
    GATOS_ASSIGN_OR_RETURN(Dir* d, dir_for(parent));
    Erase(d->entries, BaseOf(path));
    return touch(parent);
  };
  for (const Change& c : changes) {
    objects->push_back(MakeObject(ObjectType::kBlob, EncodeJobRecord(*c.record)));
    const std::string blob = objects->back().id;
    GATOS_RETURN_IF_ERROR(set_entry(JobIndexPath(c.record->job_hex), TreeEntry{"", blob, 0100644}));
    if (c.live) {
      GATOS_RETURN_IF_ERROR(set_entry(LiveIndexPath(c.record->job_hex), TreeEntry{"", blob, 0100644}));
    } else if (c.was_live) {
      GATOS_RETURN_IF_ERROR(erase_entry(LiveIndexPath(c.record->job_hex)));
    }
  }
  objects->push_back(MakeObject(ObjectType::kBlob, batch_text));
  GATOS_RETURN_IF_ERROR(set_entry("batch", TreeEntry{"", objects->back().id, 0100644}));
  objects->push_back(MakeObject(ObjectType::kBlob, EncodeIndexStats(stats)));
  GATOS_RETURN_IF_ERROR(set_entry("stats", TreeEntry{"", objects->back().id, 0100644}));

  for (int depth = kMaxDepth; depth >= 0; --depth) {
    for (const std::string& path : dirty[static_cast<size_t>(depth)]) {
      Dir& d = work[path];
      if (d.entries.empty() && !path.empty()) {
        d.id.clear();
        GATOS_RETURN_IF_ERROR(erase_entry(path));
        continue;
      }
      GATOS_ASSIGN_OR_RETURN(std::string data, EncodeTree(d.entries));
      objects->push_back(MakeObject(ObjectType::kTree, std::move(data)));
      d.id = objects->back().id;
      if (!path.empty()) GATOS_RETURN_IF_ERROR(set_entry(path, TreeEntry{"", d.id, 040000}));
    }
  }
  pending_ = std::move(work);
  pending_root_ = pending_[""].id;
  return pending_root_;
}

void StateIndex::Commit(const std::string& new_root) {
  for (auto& [path, d] : pending_) cache_[path] = std::move(d);
  pending_.clear();
  root_ = new_root;
}

}  // namespace gatos
