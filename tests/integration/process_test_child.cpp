// A helper for process_test.cpp: what a gatos program does with gatos_sys,
// in a process of its own (signals sent to a test binary would hit whichever
// of its threads does not block them).
//
//   watch        SignalWatcher with a callback that Log()s; "ready" on stdout;
//                exits 0 once a signal has come (not killed by it)
//   watch-late   the callback is set after the signal came (OnSignal)
//   watch-none   a SignalWatcher built and destroyed without a signal
//   orphan       starts `sleep 60` with parent_death_signal SIGKILL, prints its
//                pid and exits without reaping it
//   log-threads  8 threads Log() 200 long lines each
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gatos/sys/log.h"
#include "gatos/sys/process.h"
#include "gatos/sys/signal_watcher.h"

namespace {

void Ready() {
  std::printf("ready\n");
  std::fflush(stdout);
}

int Watch() {
  gatos::SetLogProgram("watch-child", "w1");
  gatos::SignalWatcher signals([](int sig) {
    gatos::Log(std::string(gatos::SignalWatcher::Name(sig)) + ": stopping");
  });
  // A thread started afterwards inherits the blocked mask: the signal cannot
  // kill the process through it.
  std::thread busy([&signals] {
    while (!signals.stopped()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  Ready();
  while (!signals.WaitFor(std::chrono::milliseconds(50))) {
  }
  busy.join();
  std::printf("stopped by %s\n", gatos::SignalWatcher::Name(signals.signal()));
  return *signals.stop_flag() ? 0 : 3;
}

int WatchLate() {
  gatos::SignalWatcher signals;
  Ready();
  while (!signals.stopped()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto self = std::this_thread::get_id();
  bool on_caller = false;
  signals.OnSignal([&](int sig) {
    on_caller = std::this_thread::get_id() == self;
    std::printf("late %s\n", gatos::SignalWatcher::Name(sig));
  });
  return on_caller ? 0 : 4;
}

int WatchNone() {
  { gatos::SignalWatcher signals; }
  std::printf("done\n");
  return 0;
}

int Orphan() {
  gatos::SpawnOptions o;
  o.parent_death_signal = SIGKILL;
  auto p = gatos::Process::Spawn({"sleep", "60"}, o);
  if (!p.ok()) return 5;
  std::printf("%d\n", static_cast<int>(p->pid()));
  std::fflush(stdout);
  _exit(0);  // no destructor: only the parent-death signal can end the child
}

int LogThreads() {
  gatos::SetLogProgram("log-child");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        gatos::Log("thread " + std::to_string(t) + " line " + std::to_string(i) + " " + std::string(3000, 'a' + t));
      }
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "watch") return Watch();
  if (mode == "watch-late") return WatchLate();
  if (mode == "watch-none") return WatchNone();
  if (mode == "orphan") return Orphan();
  if (mode == "log-threads") return LogThreads();
  std::fprintf(stderr, "process_test_child: unknown mode '%s'\n", mode.c_str());
  return 2;
}
