#include "gatos/exec/ls_remote.h"

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <filesystem>

#include "gatos/exec/git_command.h"
#include "gatos/exec/inputs.h"
#include "gatos/exec/local_input.h"
#include "gatos/model/git_input.h"
#include "gatos/model/trigger.h"
#include "gatos/sys/process.h"

namespace gatos {

Result<std::map<std::string, std::string>> LsRemote(const LsRemoteOptions& o,
                                                    const std::string& url) {
  if (std::string p = GitUrlProblem(url); !p.empty()) return InvalidArgumentError("url: " + p);
  if (o.home.empty() || o.home[0] != '/')
    return InvalidArgumentError("ls-remote needs an absolute HOME directory");
  std::error_code ec;
  std::filesystem::create_directories(o.home, ec);
  if (ec) return UnavailableError("cannot create " + o.home + ": " + ec.message());
  ::chmod(o.home.c_str(), 0700);
  std::string source = url;
  std::vector<std::string> network_config;  // "-c", "name=value"
  std::string local;
  if (IsLocalGitUrl(url, &local)) {
    // A submitter names the URL: gatosd reads only the local repositories
    // an operator put under --watch-local, by a worker's rules.
    const std::string refused =
        "refused: local repositories are watched only under gatosd serve --watch-local directories";
    if (o.local_roots.empty()) return PermissionDeniedError(refused + " (none given)");
    auto dir = OpenLocalGitDir(local, {o.local_roots, o.forbidden_roots});
    if (!dir.ok()) {
      if (dir.status().message().find("--local-inputs") != std::string::npos) return PermissionDeniedError(refused);
      return dir.status();
    }
    source = dir->canonical;
  } else if (!GitUrlHasPrefix(url, o.local_network_url_prefixes)) {
    const std::optional<GitUrlEndpoint> endpoint = GitUrlEndpointOf(url);
    if (!endpoint) return InvalidArgumentError("not a repository URL gatosd can read");
    auto addresses = CheckInputEndpoint(*endpoint);
    if (!addresses.ok()) {
      if (addresses.status().code() == StatusCode::kPermissionDenied) {
        return PermissionDeniedError(
            "refused: the repository's host is a loopback or link-local address of gatosd's host (an operator "
            "may allow a URL prefix with gatosd serve --watch-allow-url)");
      }
      return addresses.status();
    }
    network_config = PinnedAddressConfig(*endpoint, *addresses);
  }
  const InputCredential* cred = o.credentials.Match(url);
  GitCommand cmd = InputGitCommand(o.git_program, o.home, cred);
  cmd.argv.insert(cmd.argv.end(), network_config.begin(), network_config.end());
  cmd.argv.insert(cmd.argv.end(), {"ls-remote", "--", source});
  SpawnOptions so;
  so.env = cmd.env;
  so.new_process_group = true;
  so.parent_death_signal = SIGKILL;
  auto r = RunAndCapture(cmd.argv, so, {}, std::chrono::milliseconds(o.timeout_ms));
  if (!r.ok()) return UnavailableError("cannot run git ls-remote: " + r.status().message());
  if (r->timed_out)
    return DeadlineExceededError("git ls-remote took longer than " +
                                 std::to_string(o.timeout_ms / 1000) + " s");
  if (!r->status.ok()) {
    Status s = ClassifyGitFetchError(r->err, cred != nullptr);
    if (s.code() == StatusCode::kUnavailable) {
      return UnavailableError("git ls-remote failed (" + GitFailureKind(r->err) +
                              "; will be retried)");
    }
    if (s.code() == StatusCode::kPermissionDenied) {
      // The same classes as a worker's fetch, in gatosd's words.
      if (s.message().find("host key") != std::string::npos) {
        return PermissionDeniedError(
            "authentication refused: the server's SSH host key is not known or does not "
            "match (known_hosts of this URL's --input-credentials entry)");
      }
      return PermissionDeniedError(
          cred ? "authentication refused by the server with gatosd's --input-credentials "
                 "entry for this URL (check the token or key it names)"
               : "authentication refused: the server requires credentials and gatosd has "
                 "none for this URL (add an entry to gatosd serve --input-credentials FILE)");
    }
    return s;
  }
  auto refs = ParseLsRemote(r->out);
  if (!refs.ok()) return UnavailableError("git ls-remote: " + refs.status().message());
  return refs;
}

}  // namespace gatos
