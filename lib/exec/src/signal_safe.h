// Helpers of the supervisor side of gatos_exec that make only system calls:
// writing a whole buffer, parsing a decimal, listing a /proc-style directory,
// writing a small file, the monotonic clock.
//
// Async-signal-safe, all of them (no allocation, no lock, no stdio): they
// run in a forked copy of a multithreaded worker (ForkedSupervisorMain) and
// in job children that share their parent's memory until execve.
#ifndef GATOS_EXEC_SRC_SIGNAL_SAFE_H_
#define GATOS_EXEC_SRC_SIGNAL_SAFE_H_

#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace gatos::exec_internal {

// Writes all of `data` to a socket (MSG_NOSIGNAL) or any other descriptor;
// false if it could not.
bool WriteAll(int fd, const void* data, size_t n);

// A decimal of digits only, no sign; false for anything else.
bool ParseUint(const char* s, long* out);

// Writes `data` to the existing file `path` (relative to `dir_fd`) in one
// write; false if that failed or was short.
bool WriteFileAt(int dir_fd, const char* path, const char* data);
bool WriteFile(const char* path, const char* data);

int64_t MonoMillis();

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Calls fn(number) for each numeric entry of an open /proc-style directory,
// from its current offset.
template <typename Fn>
void ForEachNumericEntry(int dirfd, Fn fn) {
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      long v;
      if (ParseUint(d->d_name, &v)) fn(v);
      off += d->d_reclen;
    }
  }
}

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SIGNAL_SAFE_H_
