// How every git that reads a job's repository input runs (docs/inputs.md,
// "Credentials"): the worker's fetches and gatosd's `git ls-remote` for
// triggers use the same rules. No system or global git config, no prompt,
// no credential helper but the one for the configured token (which reads
// the token file into git's pipe: the token is in no argument, environment
// or file of ours), SSH only with the configured key and known_hosts (never
// the user's own keys or agent), only the https, http, ssh, git and file
// protocols, no redirects, no hooks.
//
// Thread-safety: pure function.
#ifndef GATOS_EXEC_GIT_COMMAND_H_
#define GATOS_EXEC_GIT_COMMAND_H_

#include <string>
#include <vector>

#include "gatos/exec/input_credentials.h"
#include "gatos/sys/process.h"

namespace gatos {

struct GitCommand {
  Environment env;                // the child's whole environment
  std::vector<std::string> argv;  // git and its -c options; append the subcommand
};

// `home` is the child's HOME (a directory of its own); `cred` the entry for
// the url (InputCredentials::Match), or nullptr.
GitCommand InputGitCommand(const std::string& git_program, const std::string& home,
                           const InputCredential* cred);

}  // namespace gatos

#endif  // GATOS_EXEC_GIT_COMMAND_H_
