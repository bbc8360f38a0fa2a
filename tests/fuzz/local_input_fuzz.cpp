// libFuzzer target: the checks on job inputs (local_input.h, git_input.h).
//
// The first byte picks what is fuzzed:
//  - URL checks on the rest as "url\nprefix": GitUrlEndpointOf,
//    GitUrlHasPrefix and InputUrlPrefixProblem never crash; an endpoint has
//    a host without '@', '/' or brackets and a port in 1..65535; a URL
//    admitted by a prefix starts with it.
//  - The git directory walk on a tree the input describes (directories,
//    files, symlinks, FIFOs, hard links, in a scratch directory):
//    CheckGitDirHasNoRedirects accepts it only if an independent walk
//    (nftw, not following symlinks) finds nothing it must refuse.
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "gatos/exec/local_input.h"
#include "gatos/model/git_input.h"

namespace {

namespace fs = std::filesystem;

void FuzzUrls(std::string_view in) {
  const size_t nl = in.find('\n');
  const std::string url(in.substr(0, nl));
  const std::string prefix(nl == std::string_view::npos ? "" : in.substr(nl + 1));
  if (auto e = gatos::GitUrlEndpointOf(url)) {
    if (e->host.empty() || e->host.find_first_of("@/[]") != std::string::npos) abort();
    if (e->port < 1 || e->port > 65535) abort();
  }
  if (gatos::GitUrlHasPrefix(url, {prefix}) && !url.starts_with(prefix)) abort();
  (void)gatos::InputUrlPrefixProblem(prefix);
}

const std::string& Scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/gatos-local-input-fuzz-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (!d) abort();
    return std::string(d);
  }();
  return dir;
}

// The independent judge: what the walk must have refused.
std::string g_root;
bool g_bad = false;
int Judge(const char* path, const struct stat* st, int type, FTW*) {
  const std::string rel = std::string(path).substr(std::min(g_root.size() + 1, std::strlen(path)));
  if (type == FTW_SL || type == FTW_SLN) g_bad = true;
  if (type == FTW_F && !S_ISREG(st->st_mode)) g_bad = true;
  if (type == FTW_DNR || type == FTW_NS) g_bad = true;
  if (rel == "commondir" || rel == "info/grafts" || rel == "objects/info/alternates" ||
      rel == "objects/info/http-alternates") {
    g_bad = true;
  }
  if (type == FTW_F && st->st_nlink > 1 && !rel.starts_with("objects/")) g_bad = true;
  return 0;
}

void FuzzWalk(std::string_view in) {
  const std::string root = Scratch() + "/git";
  const std::string outside = Scratch() + "/outside";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root + "/objects", ec);
  fs::create_directories(root + "/refs", ec);
  {
    int fd = ::open(outside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0600);
    if (fd >= 0) ::close(fd);
    fd = ::open((root + "/HEAD").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0644);
    if (fd >= 0) ::close(fd);
  }
  // Ops: [kind][length][name bytes]; names are relative, from a small
  // alphabet so that they collide with the paths git cares about.
  static const char* const kWords[] = {"objects", "info", "refs", "heads", "alternates",
                                       "http-alternates", "commondir", "grafts", "packed-refs",
                                       "HEAD", "config", "x"};
  size_t i = 0;
  for (int ops = 0; ops < 24 && i + 2 <= in.size(); ++ops) {
    const uint8_t kind = static_cast<uint8_t>(in[i]) % 6;
    const size_t len = static_cast<uint8_t>(in[i + 1]) % 4 + 1;
    i += 2;
    std::string name;
    for (size_t k = 0; k < len && i < in.size(); ++k, ++i) {
      name += (name.empty() ? "" : "/") +
              std::string(kWords[static_cast<uint8_t>(in[i]) % (sizeof kWords / sizeof *kWords)]);
    }
    if (name.empty()) break;
    const std::string path = root + "/" + name;
    fs::create_directories(fs::path(path).parent_path(), ec);
    switch (kind) {
      case 0: fs::create_directories(path, ec); break;
      case 1: {
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd >= 0) ::close(fd);
        break;
      }
      case 2: (void)::symlink(outside.c_str(), path.c_str()); break;
      case 3: (void)::symlink("HEAD", path.c_str()); break;
      case 4: (void)::mkfifo(path.c_str(), 0644); break;
      case 5: (void)::link(outside.c_str(), path.c_str()); break;
    }
  }
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) abort();
  const gatos::Status s = gatos::CheckGitDirHasNoRedirects(fd);
  ::close(fd);
  g_root = root;
  g_bad = false;
  if (::nftw(root.c_str(), Judge, 16, FTW_PHYS) != 0) abort();
  if (s.ok() && g_bad) abort();  // something that redirects got through
  if (!s.ok() && s.message().empty()) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    FuzzUrls(rest);
  } else {
    FuzzWalk(rest);
  }
  return 0;
}
