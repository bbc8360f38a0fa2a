// Git inputs at run time (docs/inputs.md): before a job starts, the worker
// fetches every repository the manifest declares (git_input.h) into its own
// cache, outside the job's sandbox and with credentials only it holds
// (input_credentials.h); resolves each input to one commit; and shows the job
// the fetched repository read-only. The job needs no network and never sees a
// credential.
//
//   worker                                   job (sandboxed)
//   git fetch URL -> <cache>/mirrors/<key>   /gatos/inputs/<n>  (read-only bind)
//   (token file / SSH key via git itself)    $GATOS_INPUT_<n>         its path
//                                            $GATOS_INPUT_<n>_COMMIT  the commit to read
//                                            $GATOS_INPUT_<n>_URL, _REF, $GATOS_INPUTS
//
// How git is run: stock `git fetch` with an environment built from scratch
// (no system or user git config, no terminal prompts, no SSH agent, only the
// https/http/ssh/git/file protocols, no redirects), credentials handed over by
// a credential helper that reads the token file, or by GIT_SSH_COMMAND naming
// the key file. Mirrors are bare repositories holding the remote's branches
// and tags (plus a requested ref outside them); their config holds no URL and
// no credential. A pinned commit already in the cache is used without any
// network access. Automatic gc is off, so objects a running job reads are
// never removed under it. A local repository is opened and checked by
// local_input.h, and git fetches it in a sandbox that shows it nothing else.
//
// What git prints is never passed on (it may quote a host file a repository
// pointed at, or a server's banner): a failure becomes one of the classes
// below, and `log` gets one word more from GitFailureKind's fixed list.
//
// Errors: every Status message starts with "input <n> (<url>): ". Codes:
//   InvalidArgument   the url is not acceptable (manifest rules)
//   NotFound          "repository not found", "ref <r> not found in the
//                     repository", "commit <c> not found in the repository"
//   PermissionDenied  "authentication refused ...", an unknown SSH host key, a
//                     local repository outside this worker's --local-inputs,
//                     gatos state, "refused: redirects outside the input (...)"
//   FailedPrecondition a local repository git cannot read ("not a readable
//                     git repository"), or no sandbox for local fetches
//   Unavailable       network or server trouble: transient, retry later
//   DeadlineExceeded  the fetch took longer than fetch_timeout_ms: transient
//   Aborted           `cancel` became true
// IsTransientInputError tells the two classes apart.
//
// Thread-safety: an InputResolver is thread-safe; concurrent resolves of one
// repository serialize on a lock file per mirror, others run in parallel.
#ifndef GATOS_INPUTS_H_
#define GATOS_INPUTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/exec/exec.h"
#include "gatos/exec/input_credentials.h"
#include "gatos/model/git_input.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos {

// Where the sandbox shows input <n>: kInputsMountDir + "/<n>".
inline constexpr char kInputsMountDir[] = "/gatos/inputs";

struct InputResolverOptions {
  std::string cache_dir;  // absolute; created (mode 0700) with mirrors/, tmp/, home/
  InputCredentials credentials;
  // Local repositories (absolute paths, file:// URLs) may be inputs only
  // under these directories. Empty: no local inputs.
  std::vector<std::string> local_roots;
  // Never inputs, even under a local root: the worker's own state (its cache
  // of private mirrors, keys, outbox), checked after resolving symlinks.
  // Directories marked as gatos state (local_input.h) are refused too.
  std::vector<std::string> forbidden_roots;
  // Network URLs starting with one of these (GitUrlHasPrefix) may reach a
  // loopback, link-local or unspecified address; every other URL whose host
  // resolves to one is refused (the worker's own services are not inputs).
  std::vector<std::string> local_network_url_prefixes;
  std::string git_program = "git";
  std::string bwrap_path = "/usr/bin/bwrap";  // the sandbox of local fetches
  // Told why a fetch failed, in words of GitFailureKind's list (for the
  // worker's log; never git's own text). Called from resolving threads.
  std::function<void(const std::string&)> log;
  int64_t fetch_timeout_ms = 30 * 60 * 1000;  // per git process
};

struct ResolvedInput {
  GitInput input;
  std::string commit;      // the commit the job is shown (40 or 64 hex)
  std::string repository;  // host path of the bare mirror, shown read-only
};

struct InputRetryPolicy {
  int max_attempts = 5;            // per input, counting the first
  int64_t first_backoff_ms = 1000;  // doubled after each failure, with jitter
  int64_t max_backoff_ms = 30000;
  int64_t deadline_ms = 0;  // unix ms after which no attempt starts; 0: none
};

// What ResolveAll did: the inputs resolved before `status` (all of them when
// it is OK), and how many fetch attempts were retried.
struct InputResolution {
  std::vector<ResolvedInput> inputs;
  Status status;
  int retries = 0;
};

class InputResolver {
 public:
  // InvalidArgument for a relative cache_dir or a local root that does not
  // exist; Internal when the cache cannot be created.
  static Result<std::unique_ptr<InputResolver>> Create(InputResolverOptions options);

  // One attempt for one input (codes above).
  Result<ResolvedInput> Resolve(const GitInput& input, const std::atomic<bool>* cancel = nullptr);

  // Every input in order. A transient error is retried with exponential
  // backoff and jitter (policy); the first permanent error, or a transient
  // one that outlived its attempts or the deadline, ends the resolution.
  // `log`, when set, is told about each retry (messages hold no secret).
  InputResolution ResolveAll(const std::vector<GitInput>& inputs, const InputRetryPolicy& policy,
                             const std::atomic<bool>* cancel = nullptr,
                             const std::function<void(const std::string&)>& log = {});

  const InputResolverOptions& options() const { return options_; }

 private:
  explicit InputResolver(InputResolverOptions options);
  Result<ResolvedInput> ResolveOnce(const GitInput& input, const std::atomic<bool>* cancel);
  InputResolverOptions options_;
  std::atomic<uint64_t> counter_{0};
};

// Where git may connect for a network input: the host's addresses (IPv6 in
// brackets), or PermissionDenied when the host is "localhost" or one of its
// addresses is loopback, link-local or unspecified; NotFound when the name
// does not exist, Unavailable when resolving failed otherwise.
Result<std::vector<std::string>> CheckInputEndpoint(const GitUrlEndpoint& endpoint);

// git's "-c" arguments that make an http(s) connection to `endpoint` use
// only `addresses` (CheckInputEndpoint's), so a name that resolves
// elsewhere a moment later (DNS rebinding) changes nothing; none for other
// schemes.
std::vector<std::string> PinnedAddressConfig(const GitUrlEndpoint& endpoint,
                                             const std::vector<std::string>& addresses);

// Unavailable and DeadlineExceeded.
bool IsTransientInputError(const Status& status);

// The job's view of its inputs: per input a read-only bind of the mirror at
// kInputsMountDir/<n> named by $GATOS_INPUT_<n>, and GATOS_INPUT_<n>_COMMIT,
// GATOS_INPUT_<n>_URL, GATOS_INPUT_<n>_REF (when the manifest names a ref)
// and GATOS_INPUTS (the indexes, space-separated) in extra_env.
void ExposeInputs(const std::vector<ResolvedInput>& inputs, ExecSpec* spec);

// What the PoE and the provenance record.
std::vector<PoeInput> PoeInputsOf(const std::vector<ResolvedInput>& inputs);

// Maps the stderr of a failed `git fetch` to the codes above (no prefix).
// Exposed for tests; `has_credentials` says whether the worker offered any.
// The message is one of a fixed set: nothing of `stderr_text` is in it.
Status ClassifyGitFetchError(std::string_view stderr_text, bool has_credentials);

// Which of a fixed list of failures git's stderr describes ("connection
// refused", "repository damaged or unreadable", ..., "unclassified"): a word
// for an operator's log that cannot carry what git quoted.
std::string GitFailureKind(std::string_view stderr_text);

}  // namespace gatos

#endif  // GATOS_INPUTS_H_
