// The worker's credentials for fetching git inputs (docs/inputs.md): a YAML
// file named by `gatos-worker run --credentials FILE`, one entry per URL
// prefix, each naming a file that holds the secret. The secret itself never
// appears in this file, in memory structures built from it, in an error
// message or in a job's environment: the worker hands git the *path* (an
// SSH key for ssh, a one-line token for https), git reads it, and the job
// only ever sees the fetched repository.
//
//   credentials:
//     - prefix: https://git.example.com/team       # matches .../team and .../team/*
//       token_file: /etc/gatos/tokens/team         # HTTP basic auth: username + the token
//       username: x-access-token                   # optional; default "git"
//     - prefix: ssh://git.example.com
//       ssh_key: /etc/gatos/keys/deploy_ed25519    # OpenSSH private key (no passphrase)
//       known_hosts: /etc/gatos/known_hosts        # optional; default: OpenSSH's own files
//
// Matching: an input's url is reduced to its key (GitUrlKey: lowercase
// scheme and host, no user, no ".git"; scp-like user@host:path is
// ssh://host/path) and matched against each prefix (same reduction) on a
// path boundary; the longest prefix wins.
//
// Parsing is strict: unknown keys, duplicate prefixes, a token entry with SSH
// fields (or the reverse), relative paths, prefixes with credentials, query
// strings or no host, and a token over plain http to a host that is not
// loopback are errors, "SOURCE:LINE:COL: FIELD: what" (all of them, one per
// line).
//
// Thread-safety: InputCredentials is an immutable value once built; the
// functions are pure except LoadInputCredentialsFile (reads files).
#ifndef GATOS_INPUT_CREDENTIALS_H_
#define GATOS_INPUT_CREDENTIALS_H_

#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr size_t kMaxCredentialsFileBytes = 1 << 20;
inline constexpr size_t kMaxCredentialEntries = 1000;
inline constexpr size_t kMaxTokenBytes = 4096;

struct InputCredential {
  std::string prefix;  // reduced form, e.g. "https://git.example.com/team"
  int line = 0;        // where it is written, for messages
  // HTTP(S): basic auth with `username` and the one line in `token_file`.
  std::string token_file;
  std::string username;  // "git" when not given
  // SSH: the private key and, optionally, the known-hosts file.
  std::string ssh_key;
  std::string known_hosts;

  bool is_token() const { return !token_file.empty(); }
};

class InputCredentials {
 public:
  InputCredentials() = default;

  // The entry for `url` (any spelling GitUrlProblem accepts), or nullptr.
  const InputCredential* Match(std::string_view url) const;
  const std::vector<InputCredential>& entries() const { return entries_; }
  // Advice that does not stop the worker (e.g. a world-readable token file).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend Result<InputCredentials> ParseInputCredentials(std::string_view, std::string_view);
  friend Result<InputCredentials> LoadInputCredentialsFile(const std::string&);
  std::vector<InputCredential> entries_;
  std::vector<std::string> warnings_;
};

// Parses the YAML text; no file is touched. InvalidArgument with every
// problem, one per line, prefixed with `source_name`.
Result<InputCredentials> ParseInputCredentials(std::string_view text, std::string_view source_name);

// Reads and parses `path`, then checks the files it names: each exists and is
// a regular file the worker can read; a token file holds exactly one line of
// 1..4096 printable ASCII characters (checked, never copied into a message).
// A token or key file that group or others can read adds a warning.
// NotFound / PermissionDenied for `path` itself, InvalidArgument otherwise.
Result<InputCredentials> LoadInputCredentialsFile(const std::string& path);

// The reduced form of a credentials prefix, or "" when it is not one (see
// above); `problem` receives why.
std::string ReduceCredentialPrefix(std::string_view prefix, std::string* problem);

}  // namespace gatos

#endif  // GATOS_INPUT_CREDENTIALS_H_
