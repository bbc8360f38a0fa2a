// The /proc descendant scan (proc_scan.h). Async-signal-safe.
#include "proc_scan.h"

#include <fcntl.h>
#include <unistd.h>

#include "signal_safe.h"

namespace gatos::exec_internal {

pid_t ReadPpid(int proc_fd, long pid) {
  char path[32];
  // Hand-rolled "<pid>/stat": snprintf is not async-signal-safe.
  char digits[24];
  int nd = 0;
  for (long v = pid; v > 0 && nd < 23; v /= 10) digits[nd++] = static_cast<char>('0' + v % 10);
  int k = 0;
  while (nd > 0) path[k++] = digits[--nd];
  const char* suffix = "/stat";
  for (int i = 0; suffix[i]; ++i) path[k++] = suffix[i];
  path[k] = '\0';
  int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so use the last ')'.
  char* rp = nullptr;
  for (char* p = buf; *p; ++p) {
    if (*p == ')') rp = p;
  }
  if (!rp || rp[1] != ' ' || !rp[2] || rp[3] != ' ') return -1;
  long ppid = 0;
  for (char* p = rp + 4; *p >= '0' && *p <= '9'; ++p) ppid = ppid * 10 + (*p - '0');
  return static_cast<pid_t>(ppid);
}

int ScanDescendants(pid_t* tracked) {
  pid_t self = getpid();
  int count = 0;
  int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_fd < 0) return 0;
  for (bool grew = true; grew && count < kMaxTracked;) {
    grew = false;
    lseek(proc_fd, 0, SEEK_SET);
    ForEachNumericEntry(proc_fd, [&](long pid) {
      if (count >= kMaxTracked || pid == self) return;
      for (int i = 0; i < count; ++i) {
        if (tracked[i] == pid) return;
      }
      pid_t ppid = ReadPpid(proc_fd, pid);
      if (ppid <= 0) return;
      bool ours = ppid == self;
      for (int i = 0; !ours && i < count; ++i) ours = tracked[i] == ppid;
      if (ours) {
        tracked[count++] = static_cast<pid_t>(pid);
        grew = true;
      }
    });
  }
  ::close(proc_fd);
  return count;
}

}  // namespace gatos::exec_internal
