#include "gatos/sys/parallel.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace gatos {

size_t ThreadsFor(size_t items, size_t per_thread) {
  // hardware_concurrency() reads /sys on every call: once per process.
  static const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::min<size_t>(cpus, items / std::max<size_t>(1, per_thread) + 1);
}

void RunOnThreads(size_t threads, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(fn, t);
  fn(0);
  for (auto& h : helpers) h.join();
}

}  // namespace gatos
