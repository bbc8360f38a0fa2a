// Local repositories as job inputs, opened so that nothing in them can point
// the worker's git anywhere else (docs/inputs.md, "Local repositories";
// docs/threat-model.md).
//
// A submitter may name a repository on the worker's host (a path under one of
// its --local-inputs roots). The worker fetches it with its own git, outside
// the job's sandbox, so the repository's files must not be able to make git
// read other host files: a symlinked `packed-refs` would otherwise put the
// first line of /etc/shadow into git's error message; `objects/info/
// alternates`, a gitfile or a `.git` symlink would make git read another
// worker's private mirror. Three layers stop that:
//
//   1. The path is checked lexically against the roots first, so a refusal
//      says nothing about which host directories exist; then its canonical
//      form is checked again, and against every directory that holds gatos
//      state (private_state.h: a worker's state, a ledger, `gatos up`'s
//      directory).
//   2. The git directory is opened with openat2(RESOLVE_NO_SYMLINKS) and
//      walked from that descriptor without following anything: a symlink
//      anywhere in it, a gitfile, alternates, `commondir`, `info/grafts`, or
//      a file outside objects/ with more than one link is refused.
//   3. git then runs in a sandbox (bubblewrap) that shows it only that git
//      directory, bound from the descriptor opened in 2 (so swapping a path
//      component for a symlink after the check changes nothing), and the
//      mirror it writes: whatever the walk missed or a racing job changed
//      points at nothing.
//
// Thread-safety: free functions, safe from any thread.
#ifndef GATOS_LOCAL_INPUT_H_
#define GATOS_LOCAL_INPUT_H_

#include <string>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/sys/private_state.h"
#include "gatos/sys/process.h"

namespace gatos {

// How a local input is judged.
struct LocalInputRules {
  std::vector<std::string> roots;      // canonical --local-inputs directories
  std::vector<std::string> forbidden;  // canonical paths never inputs (own state, key)
};

// A local repository's git directory, open for a sandboxed fetch.
struct LocalGitDir {
  UniqueFd fd;            // O_PATH | O_DIRECTORY, reached without symlinks
  std::string canonical;  // the host path the fd was opened at
};

// Checks `path` (as the manifest wrote it, without file://) by the rules
// above and opens its git directory: `path` itself when it is bare, else
// `path`/.git. Codes (messages hold no host path and no file content):
//   PermissionDenied "local repositories are inputs on this worker only under
//                    its --local-inputs directories ...", "this path holds
//                    gatos state and is never an input", "refused: redirects
//                    outside the input (<what>)"
//   NotFound         "repository not found", "not a git repository"
//   InvalidArgument  too many entries to check (kMaxGitDirEntries)
Result<LocalGitDir> OpenLocalGitDir(const std::string& path, const LocalInputRules& rules);

// The walk of step 2 on an open git directory (exposed for tests and the
// fuzzer's check of the walk's decisions).
inline constexpr int kMaxGitDirEntries = 1'000'000;
Status CheckGitDirHasNoRedirects(int gitdir_fd);

}  // namespace gatos

#endif  // GATOS_LOCAL_INPUT_H_
