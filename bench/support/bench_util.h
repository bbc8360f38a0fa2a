// What every benchmark program does on an error it cannot go on from, and
// where it finds the project's other programs (beside itself).
#ifndef GATOS_BENCH_BENCH_UTIL_H_
#define GATOS_BENCH_BENCH_UTIL_H_

#include <errno.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>

#include "gatos/model/status.h"

namespace gatos::bench {

// Prints "<program>: why" and exits 1.
[[noreturn]] inline void Die(const std::string& why) {
  std::cerr << program_invocation_short_name << ": " << why << "\n";
  std::exit(1);
}

// The value of `r`, or Die with `what` and its error.
template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().message());
  return std::move(r).value();
}

// The directory of this program (build/bin: gatosd, gatos, the worker).
inline std::string SelfDir() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string();
}

}  // namespace gatos::bench

#endif  // GATOS_BENCH_BENCH_UTIL_H_
