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
#include <vector>

#include "gatos/exec/input_credentials.h"
#include "gatos/model/status.h"

namespace gatos {

struct LsRemoteOptions {
  std::string git_program = "git";
  std::string home;  // the child's HOME (absolute; created 0700 when missing)
  InputCredentials credentials;
  int64_t timeout_ms = 60'000;
  // As a worker's inputs (inputs.h, local_input.h): local repositories
  // (absolute paths, file:// URLs) are read only under these canonical
  // directories (empty: none), never at a forbidden path (the ledger's
  // own directory) nor through a symlink, gitfile or alternates; a network
  // URL whose host is a loopback, link-local or unspecified address is
  // refused unless it starts with one of `local_network_url_prefixes`, and
  // an http(s) one is read from the addresses just checked (no DNS
  // rebinding between the check and git's connection).
  std::vector<std::string> local_roots;
  std::vector<std::string> forbidden_roots;
  std::vector<std::string> local_network_url_prefixes;
};

// Every ref of `url` and its commit (annotated tags peeled). Refused before
// running git (PermissionDenied, InvalidArgument): a url GitUrlProblem
// refuses, and one the rules above do not let gatosd read. Errors: NotFound (repository),
// PermissionDenied (authentication), DeadlineExceeded, Unavailable.
Result<std::map<std::string, std::string>> LsRemote(const LsRemoteOptions& options,
                                                    const std::string& url);

}  // namespace gatos

#endif  // GATOS_EXEC_LS_REMOTE_H_
