// The one signal thread of the gatos programs: SIGINT and SIGTERM are
// blocked in every thread and taken by one thread, which tells the program
// to stop (an atomic flag, a wake-up, a callback) instead of killing it.
//
// Construct it first thing in main / Serve, before any thread exists: the
// mask is set in the constructing thread and only threads created after it
// inherit it (a library thread started earlier could take the signal and
// die of it).
//
//   worker/main.cpp:
//     gatos::SignalWatcher signals([](int sig) {
//       gatos::Log(std::string(gatos::SignalWatcher::Name(sig)) + ": stopping");
//     });
//     return RunWorker(opts, signals.stop_flag());
//
//   gatosd/server.cpp (Serve), replacing the sigset/pthread_sigmask block
//   and the `std::thread signals` that sigwait()s:
//     gatos::SignalWatcher signals;                       // at the top of Serve
//     ...
//     signals.OnSignal([&queue](int sig) {                // once the queue exists
//       Log(std::string("received ") + gatos::SignalWatcher::Name(sig) + "; shutting down");
//       g_stop = true;
//       queue.Close();
//     });
//     ...
//     signals.OnSignal(nullptr);   // before `queue` goes; no join: the destructor ends the thread
//
//   a loop with other work (gatos up):
//     while (!signals.WaitFor(std::chrono::milliseconds(200))) CheckChildren();
//
// Only the first signal counts; later ones stay blocked and pending, so a
// second Ctrl-C does not interrupt a graceful shutdown (SIGKILL still does).
// The signals stay blocked after the watcher is destroyed.
//
// Thread-safety: stopped(), signal(), stop_flag(), WaitFor() and OnSignal()
// may be called from any thread. The callback runs on the watcher's thread
// (or, with OnSignal after the signal came, on the caller's) exactly once; it
// must not call OnSignal or destroy the watcher.
#ifndef GATOS_SIGNAL_WATCHER_H_
#define GATOS_SIGNAL_WATCHER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace gatos {

class SignalWatcher {
 public:
  using Callback = std::function<void(int signo)>;

  // Blocks SIGINT and SIGTERM in this thread and starts the watcher thread.
  explicit SignalWatcher(Callback on_signal = nullptr);
  // Ends the watcher thread (if no signal came) and joins it.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Sets (or, with nullptr, removes) the callback. If a signal has come
  // already and no callback has run for it, runs `cb` now on the calling
  // thread. Waits for a callback that is running to end, so OnSignal(nullptr)
  // before what the callback uses is destroyed makes that safe.
  void OnSignal(Callback cb);

  bool stopped() const { return stop_.load(); }
  // SIGINT or SIGTERM once one came, else 0.
  int signal() const { return signo_.load(); }
  // True from the first signal on; for loops that poll an atomic flag.
  std::atomic<bool>* stop_flag() { return &stop_; }
  // Waits up to `timeout` for a signal; true once one has come.
  bool WaitFor(std::chrono::milliseconds timeout);

  // "SIGINT", "SIGTERM", else "signal".
  static const char* Name(int signo);

 private:
  void Run();

  std::atomic<bool> stop_{false};
  std::atomic<int> signo_{0};
  std::atomic<bool> quitting_{false};
  std::mutex mu_;  // with cv_: WaitFor
  std::condition_variable cv_;
  std::mutex callback_mu_;  // held while the callback is replaced or runs
  Callback callback_;
  bool callback_ran_ = false;
  std::thread thread_;
};

}  // namespace gatos

#endif  // GATOS_SIGNAL_WATCHER_H_
