// Cgroup control files (cgroup_files.h).
#include "cgroup_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace gatos::exec_internal {
namespace {

int64_t ParseLeadingNumber(std::string_view s) {
  size_t i = 0;
  int64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i < 19) v = v * 10 + (s[i++] - '0');
  return i == 0 ? -1 : v;
}

}  // namespace

bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return false;
  out->assign(buf, static_cast<size_t>(n));
  return true;
}

int WriteSmallFile(const std::string& path, std::string_view value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = n == static_cast<ssize_t>(value.size()) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

int64_t ReadNumber(const std::string& path) {
  std::string s;
  if (!ReadSmallFile(path, &s)) return -1;
  return ParseLeadingNumber(s);
}

int64_t ReadKeyed(const std::string& path, std::string_view key) {
  std::string s;
  if (!ReadSmallFile(path, &s)) return -1;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    std::string_view line(s.data() + pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseLeadingNumber(line.substr(key.size() + 1));
    }
    pos = end + 1;
  }
  return -1;
}

void RemoveCgroupTree(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) RemoveCgroupTree(e.path().string());
  }
  rmdir(dir.c_str());
}

}  // namespace gatos::exec_internal
