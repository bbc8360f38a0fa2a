#include "gatos/sys/signal_watcher.h"

#include <pthread.h>
#include <signal.h>

namespace gatos {
namespace {

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

SignalWatcher::SignalWatcher(Callback on_signal) : callback_(std::move(on_signal)) {
  sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { Run(); });
}

SignalWatcher::~SignalWatcher() {
  quitting_ = true;
  // Wake the thread out of sigwait with a signal meant for it alone; it sees
  // quitting_ and ends without telling anyone. If a real signal came first,
  // the thread has ended or is about to, and this one dies with it.
  if (!stop_) pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void SignalWatcher::Run() {
  const sigset_t set = WatchedSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  if (quitting_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    signo_ = sig;
    stop_ = true;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> run(callback_mu_);
  if (callback_ && !callback_ran_) {
    callback_ran_ = true;
    callback_(sig);
  }
}

void SignalWatcher::OnSignal(Callback cb) {
  std::lock_guard<std::mutex> run(callback_mu_);  // waits for a running callback
  callback_ = std::move(cb);
  if (stop_ && callback_ && !callback_ran_) {
    callback_ran_ = true;
    callback_(signo_);
  }
}

bool SignalWatcher::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [this] { return stop_.load(); });
}

const char* SignalWatcher::Name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
  }
}

}  // namespace gatos
