// Repositories as declared job inputs: the `{kind: git, ...}` entries of a
// manifest's `inputs` (docs/inputs.md).
//
//   inputs:
//     - {kind: git, url: https://git.example.com/team/app, ref: main}
//     - {kind: git, url: /srv/repos/lib, commit: 3f2a...40 hex}
//     - {kind: git, url: file:///srv/repos/tool, ref: HEAD, commit: 9b1c..., nonce: "2025-11-08"}
//
// Like every input they are part of the hashed core, so a pinned `commit`
// makes the job id name exactly what the job reads. The worker fetches each
// git input before the job starts, with credentials only it holds, and shows
// the job a read-only copy (gatos/exec/inputs.h).
//
// The rules here are pure text rules, shared by the manifest parser, the CLI
// and the worker. A URL that passes them carries no credentials (no password,
// no userinfo in http(s)/git URLs, no query string), cannot be read by git as
// an option or a remote-helper command, and names a repository by an absolute
// location.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_GIT_INPUT_H_
#define GATOS_GIT_INPUT_H_

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kGitInputKind[] = "git";
// A worker fetches every git input before the job starts; a manifest cannot
// ask it for more repositories than this.
inline constexpr size_t kMaxGitInputs = 64;
inline constexpr size_t kMaxGitUrlBytes = 4096;
inline constexpr size_t kMaxGitRefBytes = 1024;
inline constexpr size_t kMaxGitNonceBytes = 256;

struct GitInput {
  size_t index = 0;  // position in the manifest's `inputs` (the job sees $GATOS_INPUT_<index>)
  std::string url;   // as written: it is hashed into the job id
  std::optional<std::string> ref;     // resolved by the worker at run time unless `commit` is set
  std::optional<std::string> commit;  // 40 (SHA-1) or 64 (SHA-256) lowercase hex
  std::optional<std::string> nonce;   // means nothing but a new job id (scheduled re-runs)
  bool operator==(const GitInput&) const = default;
};

// The fields a git input may have, for error messages.
inline constexpr std::string_view kGitInputFields = "kind, url, ref, commit, nonce";

// One problem of a git input: the field ("url", "ref", ... or "" for the
// entry as a whole) and "what is wrong; what is expected".
struct GitInputProblem {
  std::string field;
  std::string what;
};

// Checks a git input whose fields are already known to be strings (the
// caller reports unknown fields and wrong types with its own positions).
// `fields` holds every field present except `kind`. Empty when it is valid.
std::vector<GitInputProblem> CheckGitInputFields(const std::map<std::string, std::string>& fields);

// "" when `url` is an acceptable repository location, else the reason. Valid:
// https://, http://, git://, ssh:// and file:/// URLs; scp-like
// [user@]host:path; absolute paths. Refused: relative paths, other schemes,
// remote-helper syntax (`ext::...`), a leading '-', control characters,
// passwords anywhere, userinfo in http(s)/git URLs, query strings and
// fragments (tokens hide there), more than kMaxGitUrlBytes.
std::string GitUrlProblem(std::string_view url);
// "" when `ref` is a git ref name the worker can fetch: "HEAD", a full name
// ("refs/heads/main") or a short one ("main", "v1.0"), by the rules of
// `git check-ref-format --allow-onelevel`; no globs, no leading '-'.
std::string GitRefProblem(std::string_view ref);
// True for 40 or 64 lowercase hex characters.
bool IsGitCommitId(std::string_view s);

// The git inputs of a manifest's `inputs` array, in order (entries of other
// kinds are skipped: they are opaque to the worker). InvalidArgument naming
// the entry when a git input breaks the rules above (a manifest that
// ParseManifest or ValidateManifest accepted never does).
Result<std::vector<GitInput>> GitInputsOf(const nlohmann::json& inputs);
// True when a JSON value is an object whose "kind" is "git".
bool IsGitInputJson(const nlohmann::json& entry);

// The repository's identity, free of credentials and of spelling
// differences, computed from the text alone (no file system access):
//   /srv/r/, /srv/r/.git, file:///srv/r  -> file:///srv/r
//   https://Host.Example/team/app.git/   -> https://host.example/team/app
//   ssh://git@host/team/app, git@host:team/app -> ssh://host/team/app
// Any user or password is dropped, also from a url GitUrlProblem refuses (a
// command line may carry one); a relative path is returned as it is.
// Used to name mirrors and scan state, never to fetch.
std::string GitUrlKey(std::string_view url);

// True when `url` names a repository on this machine (absolute path or
// file:// URL); `path` receives the path (percent-escapes are not decoded).
bool IsLocalGitUrl(std::string_view url, std::string* path = nullptr);

// Where a network URL makes git connect: its scheme ("https", "http", "ssh",
// "git"; "ssh" for user@host:path), host (lowercase; an IPv6 literal without
// brackets) and port (the scheme's default when absent). nullopt for local
// URLs and URLs GitUrlProblem refuses.
struct GitUrlEndpoint {
  std::string scheme;
  std::string host;
  int port = 0;
};
std::optional<GitUrlEndpoint> GitUrlEndpointOf(std::string_view url);

// Whether `url` starts with one of `prefixes` (byte for byte; a prefix that
// ends without '/' after a host must be followed by '/', ':' or the end, so
// "https://git.corp" does not admit "https://git.corp.evil.example").
bool GitUrlHasPrefix(std::string_view url, const std::vector<std::string>& prefixes);

// "" when `prefix` may stand in a list of allowed input URL prefixes (the
// policy's input_url_prefixes): an absolute path, or https/http/ssh/git/file
// "://" and at least a host; no control character, no credentials, at most
// kMaxGitUrlBytes. Otherwise what is wrong.
std::string InputUrlPrefixProblem(std::string_view prefix);

}  // namespace gatos

#endif  // GATOS_GIT_INPUT_H_
