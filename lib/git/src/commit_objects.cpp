#include "gatos/git/commit_objects.h"

#include <set>

namespace gatos {

Result<std::vector<GitObject>> CommitObjects(const ObjectLookup& lookup, const std::string& commit,
                                             const CommitObjectLimits& limits, RawCommit* raw_out,
                                             const std::function<bool(const std::string&)>& skip) {
  std::vector<GitObject> out;
  size_t bytes = 0;
  auto add = [&](GitObject o) -> Status {
    bytes += o.data.size();
    out.push_back(std::move(o));
    if (out.size() > limits.max_objects) {
      return FailedPreconditionError("commit " + commit.substr(0, 12) + " and its tree hold more than " +
                                    std::to_string(limits.max_objects) + " objects");
    }
    if (bytes > limits.max_bytes) {
      return FailedPreconditionError("commit " + commit.substr(0, 12) + " and its tree hold more than " +
                                    std::to_string(limits.max_bytes) + " bytes");
    }
    return OkStatus();
  };
  GATOS_ASSIGN_OR_RETURN(auto c, lookup(commit));
  if (c.first != ObjectType::kCommit) return InvalidArgumentError(commit.substr(0, 12) + " is not a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit raw, ParseRawCommit(c.second, commit));
  if (!skip || !skip(commit)) GATOS_RETURN_IF_ERROR(add({ObjectType::kCommit, std::move(c.second), commit}));
  std::vector<std::string> trees = {raw.tree};
  std::set<std::string> seen;
  for (size_t i = 0; i < trees.size(); ++i) {
    const std::string id = trees[i];
    if (!seen.insert(id).second || (skip && skip(id))) continue;
    GATOS_ASSIGN_OR_RETURN(auto t, lookup(id));
    if (t.first != ObjectType::kTree) return InvalidArgumentError(id.substr(0, 12) + " is not a tree");
    GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(t.second, id));
    GATOS_RETURN_IF_ERROR(add({ObjectType::kTree, std::move(t.second), id}));
    for (const auto& e : entries) {
      if (e.is_tree()) {
        trees.push_back(e.id);
      } else if (e.mode != 0160000 && seen.insert(e.id).second && !(skip && skip(e.id))) {
        GATOS_ASSIGN_OR_RETURN(auto b, lookup(e.id));
        if (b.first != ObjectType::kBlob) return InvalidArgumentError(e.id.substr(0, 12) + " is not a blob");
        GATOS_RETURN_IF_ERROR(add({ObjectType::kBlob, std::move(b.second), e.id}));
      }
    }
  }
  if (raw_out) *raw_out = std::move(raw);
  return out;
}

}  // namespace gatos
