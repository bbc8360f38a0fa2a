// System-call-only helpers of the supervisor side (signal_safe.h).
// Async-signal-safe.
#include "signal_safe.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace gatos::exec_internal {

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == ENOTSOCK) k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool ParseUint(const char* s, long* out) {
  if (*s < '0' || *s > '9') return false;
  long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return true;
}

bool WriteFileAt(int dir_fd, const char* path, const char* data) {
  int fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t n = strlen(data);
  bool ok = ::write(fd, data, n) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok;
}

bool WriteFile(const char* path, const char* data) { return WriteFileAt(AT_FDCWD, path, data); }

int64_t MonoMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace gatos::exec_internal
