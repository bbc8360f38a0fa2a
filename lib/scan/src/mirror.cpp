#include "gatos/scan/mirror.h"

#include <fcntl.h>
#include <git2.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "gatos/model/blake3.h"
#include "gatos/model/git_input.h"
#include "git/git_util.h"

namespace gatos::scan {
namespace fs = std::filesystem;
namespace {

struct RepoFree {
  void operator()(git_repository* r) const { git_repository_free(r); }
};
struct RemoteFree {
  void operator()(git_remote* r) const { git_remote_free(r); }
};

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

Result<RepoTarget> NormalizeLocal(const std::string& path_text) {
  std::error_code ec;
  fs::path p = fs::canonical(fs::path(path_text), ec);
  if (ec) {
    return NotFoundError("repository path " + path_text + " does not exist or is unreadable (" +
                         ec.message() + "); give an existing directory or a URL");
  }
  if (!fs::is_directory(p, ec)) {
    return InvalidArgumentError("repository path " + p.string() +
                                " is not a directory; give a git repository");
  }
  RepoTarget t;
  t.local = true;
  t.fetch_url = p.string();
  t.key = GitUrlKey(p.string());
  return t;
}

// Replaces the fetch URL (which may carry credentials) in libgit2 messages.
Status Redact(Status s, const RepoTarget& t) {
  if (s.ok() || t.fetch_url.empty()) return s;
  std::string msg = s.message();
  for (size_t at = msg.find(t.fetch_url); at != std::string::npos;
       at = msg.find(t.fetch_url, at + t.key.size())) {
    msg.replace(at, t.fetch_url.size(), t.key);
  }
  return Status(s.code(), msg);
}

int CreateMirrorRemote(git_remote** out, git_repository* repo, const char* name, const char* url,
                       void* /*payload*/) {
  int rc = git_remote_create_with_fetchspec(out, repo, name, url, "+refs/*:refs/*");
  if (rc != 0) return rc;
  git_config* cfg = nullptr;
  if (git_repository_config(&cfg, repo) == 0) {
    git_config_set_bool(cfg, "remote.origin.mirror", 1);
    git_config_free(cfg);
  }
  return 0;
}

}  // namespace

Result<RepoTarget> NormalizeRepo(std::string_view arg_view) {
  std::string arg(arg_view);
  if (arg.empty()) return InvalidArgumentError("--repo is empty; give a path or URL");
  const size_t scheme_end = arg.find("://");
  if (scheme_end == std::string::npos) {
    // scp-like "user@host:path" (a colon before any slash) is ssh.
    const size_t colon = arg.find(':');
    const size_t slash = arg.find('/');
    std::error_code ec;
    if (colon != std::string::npos && (slash == std::string::npos || colon < slash) &&
        !fs::exists(arg, ec)) {
      RepoTarget t;
      t.fetch_url = arg;
      t.key = GitUrlKey(arg);
      return t;
    }
    return NormalizeLocal(arg);
  }
  const std::string scheme = Lower(arg.substr(0, scheme_end));
  std::string rest = arg.substr(scheme_end + 3);
  if (scheme == "file") {
    if (rest.starts_with("localhost/")) rest = rest.substr(9);
    if (!rest.starts_with("/")) {
      return InvalidArgumentError("file URL must be file:///absolute/path, got a host part");
    }
    return NormalizeLocal(rest);
  }
  if (scheme != "https" && scheme != "http" && scheme != "ssh" && scheme != "git") {
    return InvalidArgumentError("repository URL scheme \"" + scheme +
                                "\" is not supported (use https, http, ssh, git, file or a "
                                "local path)");
  }
  std::string authority = rest.substr(0, rest.find('/'));
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  if (authority.empty()) return InvalidArgumentError("repository URL has no host");
  RepoTarget t;
  t.fetch_url = arg;
  t.key = GitUrlKey(arg);  // credentials never reach the key
  return t;
}

std::string MirrorPath(const RepoTarget& target, const std::string& state_dir) {
  return state_dir + "/mirrors/" + DigestHex(Blake3(target.key));
}

MirrorLock::~MirrorLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

MirrorLock& MirrorLock::operator=(MirrorLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Status SyncMirror(const RepoTarget& target, const std::string& state_dir, MirrorLock* lock) {
  git::EnsureInit();
  const std::string dir = MirrorPath(target, state_dir);
  std::error_code ec;
  fs::create_directories(state_dir + "/mirrors", ec);
  if (ec) {
    return UnavailableError("cannot create " + state_dir + "/mirrors: " + ec.message() +
                            " (check --state-dir is writable)");
  }
  int fd = ::open((dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UnavailableError("cannot open mirror lock " + dir + ".lock: " + std::strerror(errno));
  }
  MirrorLock held(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      return UnavailableError("cannot lock mirror " + dir + ": " + std::strerror(errno));
    }
  }

  if (!fs::exists(dir + "/HEAD", ec)) {
    // Clone into a temporary directory and rename it into place, so a crash
    // mid-clone never leaves a half mirror that later runs would trust.
    const std::string tmp = dir + ".clone-" + std::to_string(::getpid());
    fs::remove_all(tmp, ec);
    fs::remove_all(dir, ec);
    git_clone_options opts = GIT_CLONE_OPTIONS_INIT;
    opts.bare = 1;
    opts.remote_cb = CreateMirrorRemote;
    opts.fetch_opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_ALL;
    git_repository* raw = nullptr;
    int rc = git_clone(&raw, target.fetch_url.c_str(), tmp.c_str(), &opts);
    std::unique_ptr<git_repository, RepoFree> repo(raw);
    if (rc != 0) {
      Status s = Redact(git::GitError(rc, "cloning " + target.key), target);
      fs::remove_all(tmp, ec);
      return s;
    }
    repo.reset();
    fs::rename(tmp, dir, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      return UnavailableError("cannot move new mirror into " + dir + ": " + ec.message());
    }
  } else {
    git_repository* raw = nullptr;
    int rc = git_repository_open_bare(&raw, dir.c_str());
    std::unique_ptr<git_repository, RepoFree> repo(raw);
    if (rc != 0) {
      return Redact(git::GitError(rc, "opening mirror " + dir + " of " + target.key +
                                          " (delete the directory to re-clone)"),
                    target);
    }
    // The same key may be spelled with other credentials this time.
    rc = git_remote_set_url(repo.get(), "origin", target.fetch_url.c_str());
    if (rc != 0)
      return Redact(git::GitError(rc, "updating mirror remote of " + target.key), target);
    git_remote* rraw = nullptr;
    rc = git_remote_lookup(&rraw, repo.get(), "origin");
    std::unique_ptr<git_remote, RemoteFree> remote(rraw);
    if (rc != 0) return Redact(git::GitError(rc, "reading mirror remote of " + target.key), target);
    git_fetch_options fo = GIT_FETCH_OPTIONS_INIT;
    fo.prune = GIT_FETCH_PRUNE;
    fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_ALL;
    rc = git_remote_fetch(remote.get(), nullptr, &fo, "gatos-scan: fetch");
    if (rc != 0) return Redact(git::GitError(rc, "fetching " + target.key), target);
  }
  *lock = std::move(held);
  return OkStatus();
}

}  // namespace gatos::scan
