#include "gatos/exec/local_input.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace gatos {
namespace fs = std::filesystem;
namespace {

bool Under(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root ||
         (path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/');
}

// A relative path inside the submitter's repository, fit for a message:
// printable ASCII only, at most 120 bytes. It names the submitter's own file.
std::string Printable(std::string_view rel) {
  std::string out;
  for (char c : rel.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  return out;
}

Status Redirect(std::string_view what) {
  return PermissionDeniedError("refused: redirects outside the input (" + std::string(what) + ")");
}

// Opens `canonical` (absolute, no symlinks, no "..") one component at a time
// without following a symlink: an O_PATH descriptor of the directory, or -1
// with errno set (ELOOP/ENOTDIR when a component is not a plain directory).
int OpenDirNoSymlinks(const std::string& canonical) {
  int fd = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  for (const auto& part : fs::path(canonical).relative_path()) {
    const std::string name = part.string();
    if (name.empty() || name == "." || name == "..") {
      ::close(fd);
      errno = EINVAL;
      return -1;
    }
    int next = ::openat(fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(fd);
    if (next < 0) {
      errno = err;
      return -1;
    }
    struct stat st;
    if (::fstat(next, &st) != 0 || !S_ISDIR(st.st_mode)) {
      ::close(next);
      errno = ENOTDIR;
      return -1;
    }
    fd = next;
  }
  return fd;
}

struct Walk {
  int entries = 0;
  Status status;
};

// Walks the directory open at `dir_fd` (relative name `rel` from the git
// directory), refusing what could redirect git. Never follows a symlink.
void WalkDir(int dir_fd, const std::string& rel, bool in_objects, int depth, Walk* w) {
  if (!w->status.ok()) return;
  if (depth > 64) {
    w->status = InvalidArgumentError("the repository's git directory is nested too deeply to check");
    return;
  }
  int list_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list_fd < 0) {
    w->status = NotFoundError("not a git repository (a directory of it cannot be read)");
    return;
  }
  DIR* d = ::fdopendir(list_fd);
  if (!d) {
    ::close(list_fd);
    w->status = NotFoundError("not a git repository (a directory of it cannot be read)");
    return;
  }
  while (w->status.ok()) {
    errno = 0;
    dirent* e = ::readdir(d);
    if (!e) break;
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (++w->entries > kMaxGitDirEntries) {
      w->status = InvalidArgumentError("the repository's git directory has more than " +
                                       std::to_string(kMaxGitDirEntries) + " files to check");
      break;
    }
    const std::string path = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      w->status = NotFoundError("not a git repository (" + Printable(path) + " cannot be read)");
      break;
    }
    if (S_ISLNK(st.st_mode)) {
      w->status = Redirect("a symlink: " + Printable(path));
      break;
    }
    // git reads these to find objects or history somewhere else. Refused
    // whatever they are: a directory of that name is no redirect today, but
    // nothing a repository needs, and the rule stays one line to read.
    if (path == "commondir" || path == "info/grafts" || path == "objects/info/alternates" ||
        path == "objects/info/http-alternates") {
      w->status = Redirect(path);
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      int sub = ::openat(::dirfd(d), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        w->status = NotFoundError("not a git repository (" + Printable(path) + " cannot be read)");
        break;
      }
      WalkDir(sub, path, in_objects || (rel.empty() && name == "objects"), depth + 1, w);
      ::close(sub);
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      // A FIFO named packed-refs would block git; a device would be read.
      w->status = Redirect("not a regular file: " + Printable(path));
      break;
    }
    // A second name for a file elsewhere on the host (refs, packed-refs,
    // config are text git may quote). Object files may be shared with the
    // repository they were cloned from (`git clone --local` links them).
    if (!in_objects && st.st_nlink > 1) {
      w->status = Redirect("a file with another name elsewhere: " + Printable(path));
      break;
    }
  }
  if (w->status.ok() && errno != 0) {
    w->status = NotFoundError("not a git repository (a directory of it cannot be read)");
  }
  ::closedir(d);
}

}  // namespace

Status CheckGitDirHasNoRedirects(int gitdir_fd) {
  Walk w;
  WalkDir(gitdir_fd, "", false, 0, &w);
  if (!w.status.ok()) return w.status;
  // What makes a directory a git directory to git.
  struct stat st;
  if (::fstatat(gitdir_fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::fstatat(gitdir_fd, "objects", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      ::fstatat(gitdir_fd, "refs", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFoundError("not a git repository");
  }
  return OkStatus();
}

Result<LocalGitDir> OpenLocalGitDir(const std::string& path, const LocalInputRules& rules) {
  const std::string outside =
      std::string("local repositories are inputs on this worker only under its --local-inputs "
                  "directories") +
      (rules.roots.empty() ? " (it has none)" : "");
  // Lexically first: a path outside every root is refused before the file
  // system is asked anything, so the answer tells nothing about the host.
  if (path.empty() || path[0] != '/') return PermissionDeniedError(outside);
  const std::string lexical = fs::path(path).lexically_normal().string();
  auto under_a_root = [&](const std::string& p) {
    std::string q = p;
    while (q.size() > 1 && q.back() == '/') q.pop_back();
    return std::any_of(rules.roots.begin(), rules.roots.end(),
                       [&](const std::string& root) { return Under(q, root); });
  };
  if (!under_a_root(lexical)) return PermissionDeniedError(outside);

  std::error_code ec;
  const fs::path canonical = fs::canonical(lexical, ec);
  if (ec || !fs::is_directory(canonical, ec)) return NotFoundError("repository not found");
  const std::string source = canonical.string();
  // A symlink under a root may lead anywhere: judge where it leads.
  if (!under_a_root(source)) return PermissionDeniedError(outside);
  for (const std::string& f : rules.forbidden) {
    if (Under(source, f)) return PermissionDeniedError("this path holds gatos state and is never an input");
  }
  if (IsPrivateStatePath(source)) {
    return PermissionDeniedError("this path holds gatos state and is never an input");
  }

  UniqueFd dir(OpenDirNoSymlinks(source));
  if (!dir) {
    return errno == ENOENT ? Status(NotFoundError("repository not found"))
                           : Redirect("a symlink in its path");
  }
  // A work tree's git directory is its .git; a bare repository is its own.
  LocalGitDir out;
  out.canonical = source;
  struct stat st;
  if (::fstatat(dir.get(), ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return Redirect("a .git symlink");
    if (!S_ISDIR(st.st_mode)) return Redirect("a .git file (gitdir: elsewhere)");
    int g = ::openat(dir.get(), ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (g < 0) return NotFoundError("not a git repository");
    out.fd = UniqueFd(g);
    out.canonical = source + "/.git";
  } else {
    out.fd = std::move(dir);
  }
  GATOS_RETURN_IF_ERROR(CheckGitDirHasNoRedirects(out.fd.get()));
  return out;
}

}  // namespace gatos
