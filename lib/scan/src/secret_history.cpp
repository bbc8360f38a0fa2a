#include "secret_history.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "git/git_util.h"
#include "gatos/scan/git_objects.h"
#include "gatos/scan/oid_set.h"
#include "tree_walker.h"

namespace gatos::scan {
namespace {

// Walks the tree `root` (iteratively: a hostile repository can nest deeply),
// adding to `found` each blob of `wanted`; stops once all were found. Trees
// in `seen` are skipped (shared between tips).
Status WalkTree(ObjectSource* source, const git_oid& root, const OidSet& wanted, OidSet* seen,
                OidSet* found) {
  std::vector<git_oid> stack{root};
  std::shared_ptr<const std::string> data;
  while (!stack.empty() && found->size() < wanted.size()) {
    const git_oid id = stack.back();
    stack.pop_back();
    GATOS_RETURN_IF_ERROR(
        source->ReadShared(id, source->Locate(id), ObjectKind::kTree, kMaxTreeBytes, &data));
    std::string_view rest = *data;
    TreeEntry e;
    bool bad = false;
    while (NextTreeEntry(&rest, &e, &bad)) {
      if (IsBlobMode(e.mode)) {
        if (wanted.Contains(e.id)) found->Insert(e.id);
      } else if (IsTreeMode(e.mode) && seen->Insert(e.id)) {
        stack.push_back(e.id);
      }
    }
    if (bad) return DataLossError("tree " + git::OidHex(id) + " of a scanned tip is malformed");
  }
  return OkStatus();
}

}  // namespace

Status AnnotateSecretHistory(git_repository* repo, ObjectSource* source,
                             const std::vector<git_oid>& tips, std::vector<ListedFinding>* findings) {
  if (findings->empty()) return OkStatus();
  std::map<std::string, int64_t> times;
  OidSet wanted;
  for (const ListedFinding& f : *findings) {
    times.emplace(f.commit, 0);
    Result<git_oid> blob = git::ParseOid(f.blob);
    if (blob.ok()) wanted.Insert(*blob);
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
  std::shared_ptr<const std::string> raw;
  for (const git_oid& tip : tips) {
    if (found.size() == wanted.size()) break;
    status = source->ReadShared(tip, source->Locate(tip), ObjectKind::kCommit, kMaxTreeBytes, &raw);
    if (!status.ok()) break;
    git_oid root;
    if (!CommitTreeId(*raw, &root)) {
      status = DataLossError("tip commit " + git::OidHex(tip) + " does not start with its tree id");
      break;
    }
    if (!seen.Insert(root)) continue;
    status = WalkTree(source, root, wanted, &seen, &found);
    if (!status.ok()) break;
  }
  for (ListedFinding& f : *findings) {
    f.commit_time = times[f.commit];
    auto rank = ranks.find(f.commit);
    f.commit_rank = rank == ranks.end() ? -1 : rank->second;
    Result<git_oid> blob = git::ParseOid(f.blob);
    f.at_tip = blob.ok() && found.Contains(*blob);
  }
  return status;
}

}  // namespace gatos::scan
