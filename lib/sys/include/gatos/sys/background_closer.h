// Closes file descriptors on a thread of its own.
//
// Closing the last descriptor of a file that has no name left frees its
// blocks, and on ext4 mounted with `discard` and without a journal the
// kernel discards them synchronously, in close(): the caller waits for the
// device (~0.3 ms on this project's VM). A writer that replaces a file on
// its critical path (Ledger::CasRef replaces refs/gatos/log once per batch)
// opens the old file first, renames the new one over it, and hands the old
// descriptor here, so the freeing happens off that path.
//
// Thread-safety: Close may be called from any thread.
#ifndef GATOS_BACKGROUND_CLOSER_H_
#define GATOS_BACKGROUND_CLOSER_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

namespace gatos {

class BackgroundCloser {
 public:
  BackgroundCloser();
  // Closes every descriptor handed over, then returns.
  ~BackgroundCloser();
  BackgroundCloser(const BackgroundCloser&) = delete;
  BackgroundCloser& operator=(const BackgroundCloser&) = delete;

  // Takes ownership of `fd` (ignored when negative). When kMaxPending are
  // already waiting (the device is that slow), closes it on the caller
  // instead, so descriptors never pile up.
  void Close(int fd);

  static constexpr size_t kMaxPending = 256;

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> pending_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace gatos

#endif  // GATOS_BACKGROUND_CLOSER_H_
