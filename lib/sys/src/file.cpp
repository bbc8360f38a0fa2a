#include "gatos/sys/file.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gatos {
namespace {

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close(2)'s own error, which for a written file can be the write's.
  int Close() {
    int r = ::close(fd_);
    fd_ = -1;
    return r == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

Status OpenError(const std::string& path, int err) {
  const std::string what = path + ": cannot open: " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return NotFoundError(what);
  if (err == EACCES || err == EPERM) return PermissionDeniedError(what);
  if (err == EISDIR || err == ELOOP) return InvalidArgumentError(what);
  return InternalError(what);
}

void Wipe(std::string* s) {
  if (!s->empty()) explicit_bzero(s->data(), s->size());
  s->clear();
}

// 0 or the errno of the write that failed.
int WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

Result<std::string> ReadFileToString(const std::string& path, size_t limit, const ReadFileOptions& options) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | (options.regular_only ? O_NONBLOCK : 0)));
  if (fd.get() < 0) return OpenError(path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return InternalError(path + ": fstat: " + std::strerror(errno));
  if (options.regular_only && !S_ISREG(st.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file");
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit) {
    return InvalidArgumentError(path + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                std::to_string(limit));
  }
  std::string data;
  // One byte past the limit, so that a file that grew since fstat is seen.
  data.resize(std::min<size_t>(limit, S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 4096) + 1);
  size_t got = 0;
  for (;;) {
    if (got == data.size()) {
      if (data.size() > limit) break;
      data.resize(std::min(limit + 1, data.size() * 2));
    }
    const ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      if (options.secret) Wipe(&data);
      return InternalError(path + ": read: " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > limit) {
    if (options.secret) Wipe(&data);
    return InvalidArgumentError(path + " is over the limit of " + std::to_string(limit) + " bytes");
  }
  data.resize(got);
  return data;
}

Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode, bool sync) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string tmp = dir + "/." + target.filename().string() + ".tmp-XXXXXX";
  Fd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) return InternalError(path + ": cannot create a temporary file: " + std::strerror(errno));
  auto fail = [&](const std::string& step, int err) {
    ::unlink(tmp.c_str());
    return InternalError(path + ": " + step + ": " + std::strerror(err));
  };
  if (::fchmod(fd.get(), mode) != 0) return fail("chmod", errno);
  if (int err = WriteAll(fd.get(), data)) return fail("write", err);
  if (sync && ::fsync(fd.get()) != 0) return fail("fsync", errno);
  if (int err = fd.Close()) return fail("close", err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  if (sync) {
    Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d.get() < 0 || ::fsync(d.get()) != 0) {
      return InternalError(path + ": fsync of its directory: " + std::strerror(errno));
    }
  }
  return OkStatus();
}

Result<Digest32> Blake3File(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return OpenError(path, errno);
  Blake3Hasher h;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return InternalError(path + ": read: " + std::strerror(errno));
    }
    if (n == 0) break;
    h.Update(buf, static_cast<size_t>(n));
  }
  return h.Finalize();
}

}  // namespace gatos
