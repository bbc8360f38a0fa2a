// Clocks the benchmarks read: wall time, this process tree's CPU and the
// whole machine's busy CPU (kernel threads included), all in milliseconds;
// and the median they report of several rounds.
#ifndef GATOS_BENCH_CPU_CLOCK_H_
#define GATOS_BENCH_CPU_CLOCK_H_

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace gatos::bench {

inline double MonoMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// CPU of this process and every descendant reaped so far.
inline double TreeCpuMs() {
  double ms = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage r;
    getrusage(who, &r);
    ms += r.ru_utime.tv_sec * 1e3 + r.ru_utime.tv_usec / 1e3 + r.ru_stime.tv_sec * 1e3 +
          r.ru_stime.tv_usec / 1e3;
  }
  return ms;
}

// Busy CPU of the whole machine: all cores, kernel threads included (a
// removed memory cgroup, for one, is freed by a kernel worker).
inline double MachineCpuMs() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  f >> cpu;
  for (auto& x : v) f >> x;
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // not idle, iowait
  return busy * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The middle value (the upper one of an even count); 0 for none.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace gatos::bench

#endif  // GATOS_BENCH_CPU_CLOCK_H_
