// A commit with its tree and everything under it, as one list of objects:
// what a submit RPC carries for a job commit, and what a replicated
// leader's batch record carries for a commit pushed with stock git (its
// objects are in the leader's repository only).
//
// Thread-safety: a pure function of `lookup`.
#ifndef GATOS_GIT_COMMIT_OBJECTS_H_
#define GATOS_GIT_COMMIT_OBJECTS_H_

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/git/result.h"

namespace gatos {

struct CommitObjectLimits {
  size_t max_objects = std::numeric_limits<size_t>::max();
  size_t max_bytes = std::numeric_limits<size_t>::max();  // the objects' contents, summed
};

// The commit `commit` (first), its tree and every tree and blob under it,
// breadth first, each once; submodule entries are links, not objects, and
// the commit's parents are not followed. `skip(id)` (optional): true for
// an object the caller has already (neither returned nor, for a tree,
// descended into). `*raw` (optional): the parsed commit. NotFound for a
// missing object, InvalidArgument for one of the wrong type or malformed,
// FailedPrecondition (saying which limit) past `limits`.
Result<std::vector<GitObject>> CommitObjects(const ObjectLookup& lookup, const std::string& commit,
                                             const CommitObjectLimits& limits = {}, RawCommit* raw = nullptr,
                                             const std::function<bool(const std::string&)>& skip = {});

}  // namespace gatos

#endif  // GATOS_GIT_COMMIT_OBJECTS_H_
