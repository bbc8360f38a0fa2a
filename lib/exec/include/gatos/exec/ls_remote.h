// `git ls-remote` of a watched repository for gatosd's triggers
// (docs/scheduling.md, "Triggers"), with the workers' credential rules
// (git_command.h, input_credentials.h): the same credentials file format,
// matched by URL prefix. An error is a summary in a fixed vocabulary
// (ClassifyGitFetchError, GitFailureKind); git's own output is never
// passed on (it may echo a URL or a server's message).
//
// Thread-safety: LsRemote may be called from any thread.
#ifndef GATOS_EXEC_LS_REMOTE_H_
#define GATOS_EXEC_LS_REMOTE_H_

#include <cstdint>
#include <map>
#include <string>

#include "gatos/exec/input_credentials.h"
#include "gatos/model/status.h"

namespace gatos {

struct LsRemoteOptions {
  std::string git_program = "git";
  std::string home;  // the child's HOME (absolute; created 0700 when missing)
  InputCredentials credentials;
  int64_t timeout_ms = 60'000;
};

// Every ref of `url` and its commit (annotated tags peeled). Refused before
// running git: a url GitUrlProblem refuses. Errors: NotFound (repository),
// PermissionDenied (authentication), DeadlineExceeded, Unavailable.
Result<std::map<std::string, std::string>> LsRemote(const LsRemoteOptions& options,
                                                    const std::string& url);

}  // namespace gatos

#endif  // GATOS_EXEC_LS_REMOTE_H_
