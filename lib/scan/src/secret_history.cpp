#include "secret_history.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <unordered_set>

#include "git/git_util.h"

namespace gatos::scan {
namespace {

struct OidHash {
  size_t operator()(const git_oid& o) const {
    size_t h;
    std::memcpy(&h, o.id, sizeof h);
    return h;
  }
};
struct OidEq {
  bool operator()(const git_oid& a, const git_oid& b) const { return git_oid_equal(&a, &b); }
};
using OidSet = std::unordered_set<git_oid, OidHash, OidEq>;

// Walks the tree `root` (iteratively: a hostile repository can nest deeply),
// adding to `found` each blob of `wanted`; stops once all were found. Trees
// in `seen` are skipped (shared between tips).
Status WalkTree(git_repository* repo, const git_oid& root, const OidSet& wanted, OidSet* seen,
                OidSet* found) {
  std::vector<git_oid> stack{root};
  while (!stack.empty() && found->size() < wanted.size()) {
    const git_oid id = stack.back();
    stack.pop_back();
    git_tree* raw = nullptr;
    if (int rc = git_tree_lookup(&raw, repo, &id); rc != 0) {
      return git::GitError(rc, "reading tree " + git::OidHex(id) + " of a scanned tip");
    }
    git::TreePtr tree(raw);
    const size_t n = git_tree_entrycount(tree.get());
    for (size_t i = 0; i < n; ++i) {
      const git_tree_entry* e = git_tree_entry_byindex(tree.get(), i);
      const git_oid* oid = git_tree_entry_id(e);
      const git_object_t type = git_tree_entry_type(e);
      if (type == GIT_OBJECT_BLOB) {
        if (wanted.count(*oid)) found->insert(*oid);
      } else if (type == GIT_OBJECT_TREE && seen->insert(*oid).second) {
        stack.push_back(*oid);
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status AnnotateSecretHistory(git_repository* repo, const std::vector<git_oid>& tips,
                             std::vector<ListedFinding>* findings) {
  if (findings->empty()) return OkStatus();
  std::map<std::string, int64_t> times;
  OidSet wanted;
  for (const ListedFinding& f : *findings) {
    times.emplace(f.commit, 0);
    Result<git_oid> blob = git::ParseOid(f.blob);
    if (blob.ok()) wanted.insert(*blob);
  }
  struct Known {
    int64_t time;
    git_oid id;
    std::string hex;
  };
  std::vector<Known> known;
  for (auto& [hex, time] : times) {
    Result<git_oid> id = git::ParseOid(hex);
    git_commit* c = nullptr;
    if (!id.ok() || git_commit_lookup(&c, repo, &*id) != 0) {
      git_error_clear();
      continue;  // gone from the mirror: time unknown
    }
    git::CommitPtr commit(c);
    time = static_cast<int64_t>(git_commit_time(commit.get()));
    known.push_back({time, *id, hex});
  }
  // By time; within one time, an ancestor before its descendants (insertion
  // sort: runs of equal times are short, and ancestry is not a total order).
  std::stable_sort(known.begin(), known.end(),
                   [](const Known& a, const Known& b) { return a.time < b.time; });
  for (size_t i = 1; i < known.size(); ++i) {
    for (size_t j = i; j > 0 && known[j - 1].time == known[j].time; --j) {
      const int rc = git_graph_descendant_of(repo, &known[j - 1].id, &known[j].id);
      git_error_clear();
      if (rc != 1) break;  // [j-1] does not descend from [j]: order kept
      std::swap(known[j - 1], known[j]);
    }
  }
  std::map<std::string, int64_t> ranks;
  for (size_t i = 0; i < known.size(); ++i) ranks[known[i].hex] = static_cast<int64_t>(i);
  OidSet seen;
  OidSet found;
  Status status = OkStatus();
  for (const git_oid& tip : tips) {
    if (found.size() == wanted.size()) break;
    git_commit* c = nullptr;
    if (int rc = git_commit_lookup(&c, repo, &tip); rc != 0) {
      status = git::GitError(rc, "reading tip commit " + git::OidHex(tip));
      break;
    }
    git::CommitPtr commit(c);
    const git_oid* root = git_commit_tree_id(commit.get());
    if (!seen.insert(*root).second) continue;
    status = WalkTree(repo, *root, wanted, &seen, &found);
    if (!status.ok()) break;
  }
  for (ListedFinding& f : *findings) {
    f.commit_time = times[f.commit];
    auto rank = ranks.find(f.commit);
    f.commit_rank = rank == ranks.end() ? -1 : rank->second;
    Result<git_oid> blob = git::ParseOid(f.blob);
    f.at_tip = blob.ok() && found.count(*blob) > 0;
  }
  return status;
}

}  // namespace gatos::scan
