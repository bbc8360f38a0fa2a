#include "gatos/sys/private_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gatos {
namespace fs = std::filesystem;

Status MarkPrivate(const std::string& dir) {
  const std::string path = dir + "/" + kPrivateMarker;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return InternalError("cannot write " + path + ": " + std::strerror(errno));
  static constexpr char kText[] =
      "gatos state: never a job input (docs/inputs.md, \"Local repositories\")\n";
  const bool ok = ::ftruncate(fd, 0) == 0 && ::write(fd, kText, sizeof kText - 1) ==
                                                  static_cast<ssize_t>(sizeof kText - 1);
  const int err = errno;
  ::close(fd);
  if (!ok) return InternalError("cannot write " + path + ": " + std::strerror(err));
  return OkStatus();
}

bool IsPrivateStatePath(const std::string& canonical) {
  for (fs::path p(canonical);; p = p.parent_path()) {
    struct stat st;
    const std::string dir = p.string();
    const std::string base = dir == "/" ? "" : dir;
    if (::lstat((base + "/" + kPrivateMarker).c_str(), &st) == 0) return true;
    if (::lstat((base + "/gatos/ledger_key").c_str(), &st) == 0) return true;
    if (!p.has_relative_path()) return false;
  }
}

}  // namespace gatos
