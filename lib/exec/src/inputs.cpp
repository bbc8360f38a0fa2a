#include "gatos/exec/inputs.h"

#include "gatos/exec/git_command.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "gatos/exec/local_input.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/sys/process.h"
#include "bubblewrap.h"
#include "gatos/exec/supervise_protocol.h"

namespace gatos {
namespace fs = std::filesystem;
namespace {

// The ref a `ref: HEAD` input is fetched into: the mirror's own HEAD is a
// local symbolic ref, not the remote's default branch.
constexpr char kRemoteHeadRef[] = "refs/gatos-input/HEAD";
constexpr size_t kStderrKeep = 16384;

bool Cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(); }

// Holds flock(LOCK_EX) on a file for its lifetime.
class FileLock {
 public:
  FileLock() = default;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Polls so that a cancel is seen while another resolve holds the lock.
  Status Acquire(const std::string& path, const std::atomic<bool>* cancel) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return UnavailableError("cannot open lock " + path + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return UnavailableError("cannot lock " + path + ": " + std::strerror(errno));
      }
      if (Cancelled(cancel)) return AbortedError("cancelled while waiting for " + path);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return OkStatus();
  }

 private:
  int fd_ = -1;
};

struct GitRun {
  ExitStatus status;
  std::string out;
  std::string err;
  bool timed_out = false;
  bool cancelled = false;
};

bool Contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

}  // namespace

bool IsTransientInputError(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

Status ClassifyGitFetchError(std::string_view err, bool has_credentials) {
  // git 2.39 (LANG=C) and OpenSSH wording; the first match wins.
  if (Contains(err, "Host key verification failed") ||
      Contains(err, "REMOTE HOST IDENTIFICATION HAS CHANGED") ||
      Contains(err, "No ED25519 host key is known") || Contains(err, "host key is known for")) {
    return PermissionDeniedError(
        "authentication refused: the server's SSH host key is not known to this worker or does "
        "not match (add it to the known_hosts of this URL's credentials entry)");
  }
  if (Contains(err, "Authentication failed") || Contains(err, "Permission denied (") ||
      Contains(err, "terminal prompts disabled") || Contains(err, "could not read Username") ||
      Contains(err, "could not read Password") || Contains(err, "returned error: 401") ||
      Contains(err, "returned error: 403") || Contains(err, "Invalid username or password")) {
    return PermissionDeniedError(
        has_credentials
            ? "authentication refused by the server with this worker's credentials for this URL "
              "(check the token or key named in its --credentials file)"
            : "authentication refused: the server requires credentials and this worker has none "
              "for this URL (add an entry to its --credentials file)");
  }
  if (Contains(err, "couldn't find remote ref")) {
    return NotFoundError("ref not found in the repository");
  }
  if (Contains(err, "not our ref") || Contains(err, "unadvertised object") ||
      Contains(err, "no such remote ref")) {
    return NotFoundError("commit not found in the repository");
  }
  if ((Contains(err, "repository '") && Contains(err, "' not found")) ||
      Contains(err, "does not appear to be a git repository") ||
      Contains(err, "Repository not found") || Contains(err, "returned error: 404") ||
      Contains(err, "not a git repository") || Contains(err, "No such file or directory")) {
    return NotFoundError("repository not found");
  }
  return UnavailableError("the repository could not be fetched (transient; will be retried)");
}

std::string GitFailureKind(std::string_view err) {
  // A fixed vocabulary: what git said is never passed on, only which of
  // these it was (git 2.39, curl and OpenSSH wording under LANG=C).
  if (Contains(err, "Could not resolve host") || Contains(err, "Could not resolve hostname")) {
    return "host name not resolved";
  }
  if (Contains(err, "Connection refused")) return "connection refused";
  if (Contains(err, "timed out") || Contains(err, "Timeout")) return "connection timed out";
  if (Contains(err, "SSL") || Contains(err, "certificate") || Contains(err, "TLS")) return "TLS error";
  if (Contains(err, "returned error: 5")) return "server error (HTTP 5xx)";
  if (Contains(err, "hung up") || Contains(err, "unexpected disconnect") ||
      Contains(err, "Connection reset") || Contains(err, "Connection closed")) {
    return "connection closed by the server";
  }
  if (Contains(err, "protocol error") || Contains(err, "bad line length") ||
      Contains(err, "invalid packet")) {
    return "protocol error";
  }
  if (Contains(err, "unexpected line in") || Contains(err, "bad config") ||
      Contains(err, "corrupt") || Contains(err, "bad object") || Contains(err, "fatal: bad ")) {
    return "repository damaged or unreadable";
  }
  return "unclassified";
}

namespace {

// Whether git may connect to `a`: not a loopback, link-local or unspecified
// address (nor one of them mapped into IPv6).
bool IsLocalNetworkAddress(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    const uint32_t v = ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
    return (v >> 24) == 127 || (v >> 16) == 0xa9fe || (v >> 24) == 0;
  }
  if (a->sa_family == AF_INET6) {
    const in6_addr& v = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v) || IN6_IS_ADDR_LINKLOCAL(&v) || IN6_IS_ADDR_UNSPECIFIED(&v)) {
      return true;
    }
    if (IN6_IS_ADDR_V4MAPPED(&v) || IN6_IS_ADDR_V4COMPAT(&v)) {
      sockaddr_in four{};
      four.sin_family = AF_INET;
      std::memcpy(&four.sin_addr, &v.s6_addr[12], 4);
      return IsLocalNetworkAddress(reinterpret_cast<const sockaddr*>(&four));
    }
    return false;
  }
  return true;  // no other family is a place git should go
}

}  // namespace

std::vector<std::string> PinnedAddressConfig(const GitUrlEndpoint& endpoint,
                                             const std::vector<std::string>& addresses) {
  if (endpoint.scheme != "http" && endpoint.scheme != "https") return {};
  std::string pin = endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
  pin += ":" + std::to_string(endpoint.port) + ":";
  for (size_t i = 0; i < addresses.size(); ++i) pin += (i ? "," : "") + addresses[i];
  return {"-c", "http.curloptResolve=" + pin};
}

Result<std::vector<std::string>> CheckInputEndpoint(const GitUrlEndpoint& e) {
  const std::string refused =
      "refused: the repository's host is a loopback or link-local address of this worker (an "
      "operator may allow a URL prefix with gatos-worker --allow-input-url)";
  if (e.host == "localhost" || e.host.ends_with(".localhost")) return PermissionDeniedError(refused);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res);
  if (rc != 0) {
    return rc == EAI_NONAME ? Status(NotFoundError("repository not found (its host name does not resolve)"))
                            : Status(UnavailableError("the repository's host name could not be resolved "
                                                      "(transient; will be retried)"));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, ::freeaddrinfo);
  std::vector<std::string> out;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    if (IsLocalNetworkAddress(a->ai_addr)) return PermissionDeniedError(refused);
    char text[INET6_ADDRSTRLEN] = {};
    const void* bytes = a->ai_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (!::inet_ntop(a->ai_family, bytes, text, sizeof text)) continue;
    const std::string addr = a->ai_family == AF_INET6 ? "[" + std::string(text) + "]" : text;
    if (std::find(out.begin(), out.end(), addr) == out.end()) out.push_back(addr);
  }
  if (out.empty()) return UnavailableError("the repository's host name has no usable address (transient; will be retried)");
  return out;
}

InputResolver::InputResolver(InputResolverOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<InputResolver>> InputResolver::Create(InputResolverOptions o) {
  if (o.cache_dir.empty() || o.cache_dir[0] != '/') {
    return InvalidArgumentError("input cache " + o.cache_dir + " must be an absolute path");
  }
  std::error_code ec;
  for (const char* sub : {"mirrors", "tmp", "home"}) {
    fs::create_directories(o.cache_dir + "/" + sub, ec);
    if (ec) {
      return InternalError("cannot create the input cache " + o.cache_dir + "/" + sub + ": " +
                           ec.message());
    }
  }
  ::chmod(o.cache_dir.c_str(), 0700);
  o.cache_dir = fs::canonical(o.cache_dir, ec).string();
  for (std::string& root : o.local_roots) {
    fs::path c = fs::canonical(root, ec);
    if (ec || !fs::is_directory(c, ec)) {
      return InvalidArgumentError("--local-inputs " + root + ": not an existing directory");
    }
    root = c.string();
  }
  // The cache itself holds other jobs' (possibly private) mirrors.
  o.forbidden_roots.push_back(o.cache_dir);
  for (std::string& root : o.forbidden_roots) {
    fs::path c = fs::weakly_canonical(fs::absolute(root, ec), ec);
    if (!ec) root = c.string();
  }
  return std::unique_ptr<InputResolver>(new InputResolver(std::move(o)));
}

namespace {

// Runs git with `args` and the resolver's environment. Output goes to files
// (no pipe can fill up); the process group is killed on cancel or timeout.
// Where a sandboxed git sees a local source's git directory and the mirror.
constexpr char kSandboxSource[] = "/gatos/source";
constexpr char kSandboxMirror[] = "/gatos/mirror";

// A git run that must see nothing of the host but a local source's git
// directory (bound from `source_fd`, opened without following symlinks) and
// the mirror `mirror_dir` it writes (local_input.h, step 3).
struct Isolation {
  int source_fd = -1;
  std::string mirror_dir;
};

Result<GitRun> RunGit(const InputResolverOptions& o, const InputCredential* cred,
                      const std::vector<std::string>& args, const std::atomic<bool>* cancel,
                      uint64_t serial, const Isolation* isolation = nullptr) {
  GitCommand cmd = InputGitCommand(o.git_program, isolation ? "/tmp" : o.cache_dir + "/home", cred);
  Environment env = std::move(cmd.env);
  std::vector<std::string> argv = std::move(cmd.argv);
  argv.insert(argv.end(), args.begin(), args.end());
  if (isolation) {
    // The source is bwrap's stdin: /proc/self/fd/0 is the directory opened
    // by OpenLocalGitDir, whatever its path names by now.
    std::vector<exec_protocol::BindPlan> binds = {
        {"/proc/self/fd/0", kSandboxSource, false, true},
        {isolation->mirror_dir, kSandboxMirror, true, true}};
    std::vector<std::string> wrapped =
        exec_internal::BwrapArgs(o.bwrap_path, /*network=*/false, binds, "/");
    wrapped.push_back("--");
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    argv = std::move(wrapped);
  }

  const std::string base = o.cache_dir + "/tmp/git-" + std::to_string(::getpid()) + "-" +
                           std::to_string(serial);
  SpawnOptions so;
  so.env = env;
  so.in = isolation ? Stdio::Fd(isolation->source_fd) : Stdio::Null();
  so.out = Stdio::File(base + ".out", false);
  so.err = Stdio::File(base + ".err", false);
  so.new_process_group = true;
  so.parent_death_signal = SIGKILL;
  struct Cleanup {
    std::string base;
    ~Cleanup() {
      std::error_code ec;
      fs::remove(base + ".out", ec);
      fs::remove(base + ".err", ec);
    }
  } cleanup{base};
  GATOS_ASSIGN_OR_RETURN(Process p, Process::Spawn(argv, so));
  GitRun run;
  const int64_t deadline = SystemNowMs() + o.fetch_timeout_ms;
  while (true) {
    if (auto st = p.WaitFor(std::chrono::milliseconds(100))) {
      run.status = *st;
      break;
    }
    if (Cancelled(cancel)) {
      run.cancelled = true;
      run.status = p.Kill();
      break;
    }
    if (SystemNowMs() > deadline) {
      run.timed_out = true;
      run.status = p.Kill();
      break;
    }
  }
  auto read_capped = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return data.size() > kStderrKeep ? data.substr(data.size() - kStderrKeep) : data;
  };
  run.out = read_capped(base + ".out");
  run.err = read_capped(base + ".err");
  return run;
}

}  // namespace

Result<ResolvedInput> InputResolver::Resolve(const GitInput& in, const std::atomic<bool>* cancel) {
  Result<ResolvedInput> r = ResolveOnce(in, cancel);
  if (r.ok()) return r;
  return Status(r.status().code(), "input " + std::to_string(in.index) + " (" +
                                       TruncateUtf8(in.url, 300) + "): " + r.status().message());
}

Result<ResolvedInput> InputResolver::ResolveOnce(const GitInput& in,
                                                 const std::atomic<bool>* cancel) {
  if (Cancelled(cancel)) return AbortedError("cancelled");
  if (std::string p = GitUrlProblem(in.url); !p.empty()) return InvalidArgumentError(p);
  if (in.ref && !GitRefProblem(*in.ref).empty()) {
    return InvalidArgumentError("ref: " + GitRefProblem(*in.ref));
  }
  if (in.commit && !IsGitCommitId(*in.commit)) {
    return InvalidArgumentError("commit: not a commit id");
  }
  if (!in.ref && !in.commit) return InvalidArgumentError("has neither ref nor commit");

  std::string source, key;
  const InputCredential* cred = nullptr;
  std::string local;
  std::optional<LocalGitDir> local_dir;
  std::vector<std::string> network_config;  // "-c", "name=value" for git fetch
  if (IsLocalGitUrl(in.url, &local)) {
    // Only the git directory is shown to git (local_input.h), so a project
    // checkout that holds `gatos up`'s state in its work tree is fine.
    GATOS_ASSIGN_OR_RETURN(LocalGitDir d,
                           OpenLocalGitDir(local, {options_.local_roots, options_.forbidden_roots}));
    if (Status sandbox = ProbeSandbox(options_.bwrap_path); !sandbox.ok()) {
      if (options_.log) options_.log("input " + std::to_string(in.index) + ": " + sandbox.message());
      return FailedPreconditionError(
          "local repositories are fetched in a sandbox, and this worker cannot make one (its log "
          "says why)");
    }
    key = GitUrlKey(d.canonical.ends_with("/.git") ? d.canonical.substr(0, d.canonical.size() - 5)
                                                   : d.canonical);
    source = kSandboxSource;
    local_dir = std::move(d);
  } else {
    source = in.url;
    key = GitUrlKey(in.url);
    cred = options_.credentials.Match(in.url);
    const std::optional<GitUrlEndpoint> endpoint = GitUrlEndpointOf(in.url);
    if (!endpoint) return InvalidArgumentError("not a repository URL this worker can fetch");
    if (!GitUrlHasPrefix(in.url, options_.local_network_url_prefixes)) {
      GATOS_ASSIGN_OR_RETURN(std::vector<std::string> addresses, CheckInputEndpoint(*endpoint));
      network_config = PinnedAddressConfig(*endpoint, addresses);
    }
  }

  const std::string mirror = options_.cache_dir + "/mirrors/" + DigestHex(Blake3(key));
  FileLock lock;
  GATOS_RETURN_IF_ERROR(lock.Acquire(mirror + ".lock", cancel));
  std::error_code ec;
  const bool fresh = !fs::exists(mirror + "/HEAD", ec);
  const std::string dir = fresh ? mirror + ".new" : mirror;

  auto git = [&](const std::vector<std::string>& args) {
    return RunGit(options_, cred, args, cancel, ++counter_);
  };
  auto has_commit = [&](const std::string& commit) -> Result<bool> {
    GATOS_ASSIGN_OR_RETURN(GitRun r, git({"--git-dir=" + dir, "cat-file", "-e", commit + "^{commit}"}));
    if (r.cancelled) return AbortedError("cancelled");
    return r.status.ok();
  };
  // A commit already in the cache needs no network: objects never change.
  if (!fresh && in.commit) {
    GATOS_ASSIGN_OR_RETURN(bool have, has_commit(*in.commit));
    if (have) return ResolvedInput{in, *in.commit, mirror};
  }
  if (fresh) {
    fs::remove_all(dir, ec);
    std::vector<std::string> init = {"init", "--bare", "--quiet"};
    if (in.commit && in.commit->size() == 64) init.push_back("--object-format=sha256");
    init.push_back(dir);
    GATOS_ASSIGN_OR_RETURN(GitRun r, git(init));
    if (!r.status.ok()) {
      return UnavailableError("cannot create a mirror in the input cache (git init " +
                              r.status.ToString() + ")");
    }
  }
  auto cleanup_fresh = [&] {
    if (fresh) fs::remove_all(dir, ec);
  };
  auto fetch = [&](const std::vector<std::string>& refspecs) -> Status {
    Isolation iso;
    if (local_dir) iso = {local_dir->fd.get(), dir};
    std::vector<std::string> args = network_config;
    args.insert(args.end(), {"--git-dir=" + (local_dir ? std::string(kSandboxMirror) : dir),
                                     "fetch", "--quiet", "--prune", "--no-tags",
                                     "--no-write-fetch-head", "--no-recurse-submodules",
                                     "--no-auto-maintenance", "--", source});
    args.insert(args.end(), refspecs.begin(), refspecs.end());
    GATOS_ASSIGN_OR_RETURN(GitRun r, RunGit(options_, cred, args, cancel, ++counter_,
                                            local_dir ? &iso : nullptr));
    if (r.cancelled) return AbortedError("cancelled");
    if (r.timed_out) {
      return DeadlineExceededError("fetching took longer than " +
                                   std::to_string(options_.fetch_timeout_ms / 1000) +
                                   " s (transient; will be retried)");
    }
    if (r.status.ok()) return OkStatus();
    // What git said stays here: it may quote a file it read (a line of
    // packed-refs) or a server's banner. The job's result gets a class, the
    // worker's log one word more from a fixed list.
    const std::string kind = GitFailureKind(r.err);
    if (options_.log) {
      options_.log("input " + std::to_string(in.index) + ": git fetch " + r.status.ToString() + ": " +
                   kind);
    }
    if (local_dir) {
      Status s = ClassifyGitFetchError(r.err, false);
      if (s.code() == StatusCode::kNotFound) return s;
      // A local repository git cannot read will not become readable.
      return FailedPreconditionError("not a readable git repository (" + kind + ")");
    }
    return ClassifyGitFetchError(r.err, cred != nullptr);
  };

  std::vector<std::string> refspecs = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
  if (in.ref && *in.ref == "HEAD") {
    refspecs.push_back(std::string("+HEAD:") + kRemoteHeadRef);
  } else if (in.ref && in.ref->starts_with("refs/") && !in.ref->starts_with("refs/heads/") &&
             !in.ref->starts_with("refs/tags/")) {
    refspecs.push_back("+" + *in.ref + ":" + *in.ref);
  }
  if (Status s = fetch(refspecs); !s.ok()) {
    cleanup_fresh();
    if (s.message() == "ref not found in the repository" && in.ref) {
      return NotFoundError("ref " + *in.ref + " not found in the repository");
    }
    return s;
  }

  std::string commit;
  if (in.commit) {
    GATOS_ASSIGN_OR_RETURN(bool have, has_commit(*in.commit));
    if (!have) {
      // Not reachable from a branch or tag: ask for it by id (servers with
      // protocol v2 usually allow it for reachable commits).
      Status s = fetch({*in.commit});
      GATOS_ASSIGN_OR_RETURN(have, has_commit(*in.commit));
      if (!have) {
        cleanup_fresh();
        if (s.code() == StatusCode::kAborted || IsTransientInputError(s)) return s;
        return NotFoundError("commit " + *in.commit + " not found in the repository");
      }
    }
    commit = *in.commit;
  } else {
    std::vector<std::string> candidates;
    if (*in.ref == "HEAD") {
      candidates = {kRemoteHeadRef};
    } else if (in.ref->starts_with("refs/")) {
      candidates = {*in.ref};
    } else {
      candidates = {"refs/tags/" + *in.ref, "refs/heads/" + *in.ref};  // git's order
    }
    for (const std::string& ref : candidates) {
      GATOS_ASSIGN_OR_RETURN(GitRun r, git({"--git-dir=" + dir, "rev-parse", "--verify", "--quiet",
                                            "--end-of-options", ref + "^{commit}"}));
      if (r.cancelled) return AbortedError("cancelled");
      std::string out = r.out;
      while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
      if (r.status.ok() && IsGitCommitId(out)) {
        commit = out;
        break;
      }
    }
    if (commit.empty()) {
      cleanup_fresh();
      return NotFoundError("ref " + *in.ref + " not found in the repository");
    }
  }
  if (fresh) {
    fs::rename(dir, mirror, ec);
    if (ec) {
      cleanup_fresh();
      return UnavailableError("cannot move the new mirror into place: " + ec.message());
    }
  }
  return ResolvedInput{in, commit, mirror};
}

InputResolution InputResolver::ResolveAll(const std::vector<GitInput>& inputs,
                                          const InputRetryPolicy& policy,
                                          const std::atomic<bool>* cancel,
                                          const std::function<void(const std::string&)>& log) {
  InputResolution out;
  std::mt19937_64 rng(std::random_device{}());
  for (const GitInput& in : inputs) {
    int64_t backoff = std::max<int64_t>(1, policy.first_backoff_ms);
    for (int attempt = 1;; ++attempt) {
      Result<ResolvedInput> r = Resolve(in, cancel);
      if (r.ok()) {
        out.inputs.push_back(std::move(*r));
        break;
      }
      const bool transient = IsTransientInputError(r.status());
      // Jitter in [backoff/2, backoff] keeps workers from retrying in step.
      const int64_t wait = backoff / 2 + static_cast<int64_t>(rng() % (backoff / 2 + 1));
      const bool past_deadline =
          policy.deadline_ms > 0 && SystemNowMs() + wait >= policy.deadline_ms;
      if (!transient || attempt >= policy.max_attempts || past_deadline) {
        out.status = transient ? Status(r.status().code(),
                                        r.status().message() + " (gave up after " +
                                            std::to_string(attempt) + " attempt" +
                                            (attempt == 1 ? "" : "s") + ")")
                               : r.status();
        return out;
      }
      ++out.retries;
      if (log) {
        log(r.status().message() + "; retrying in " + std::to_string(wait) + " ms (attempt " +
            std::to_string(attempt + 1) + " of " + std::to_string(policy.max_attempts) + ")");
      }
      const int64_t until = SystemNowMs() + wait;
      while (SystemNowMs() < until) {
        if (Cancelled(cancel)) {
          out.status = AbortedError("input " + std::to_string(in.index) + ": cancelled");
          return out;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(
            std::min<int64_t>(50, std::max<int64_t>(1, until - SystemNowMs()))));
      }
      backoff = std::min(policy.max_backoff_ms, backoff * 2);
    }
  }
  return out;
}

void ExposeInputs(const std::vector<ResolvedInput>& inputs, ExecSpec* spec) {
  std::string indexes;
  for (const ResolvedInput& r : inputs) {
    const std::string n = std::to_string(r.input.index);
    const std::string var = "GATOS_INPUT_" + n;
    spec->binds.push_back({r.repository, std::string(kInputsMountDir) + "/" + n, false, var});
    spec->extra_env[var + "_COMMIT"] = r.commit;
    spec->extra_env[var + "_URL"] = r.input.url;
    if (r.input.ref) spec->extra_env[var + "_REF"] = *r.input.ref;
    indexes += (indexes.empty() ? "" : " ") + n;
  }
  if (!inputs.empty()) spec->extra_env["GATOS_INPUTS"] = indexes;
}

std::vector<PoeInput> PoeInputsOf(const std::vector<ResolvedInput>& inputs) {
  std::vector<PoeInput> out;
  for (const ResolvedInput& r : inputs) {
    out.push_back({static_cast<int64_t>(r.input.index), r.input.url, r.input.ref.value_or(""),
                   r.commit});
  }
  return out;
}

}  // namespace gatos
