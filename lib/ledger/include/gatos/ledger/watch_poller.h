// Reads the repositories that triggers watch (docs/scheduling.md,
// "Triggers"), on a thread of its own: `git ls-remote` can take seconds
// and must not hold up the ledger thread. The ledger thread says what to
// watch (SetWatches, after each schedule change) and takes what was read
// (Take, each sweep); it decides alone what fires.
//
// The reading itself is a function the program supplies (gatosd: `git
// ls-remote` with the workers' credential rules, gatos/exec/ls_remote.h),
// so this library runs no process. Its errors are summaries, never git's
// own output.
//
// Thread-safety: SetWatches and Take may be called from any thread. The
// destructor does not wait for a reading in progress (up to the reading's
// own timeout): the thread, which owns a copy of everything it uses, stops
// after it.
#ifndef GATOS_LEDGER_WATCH_POLLER_H_
#define GATOS_LEDGER_WATCH_POLLER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

// Every ref of the repository at `url` and the commit it names (an
// annotated tag: the commit). A summary of what failed otherwise.
using ListRemoteRefs =
    std::function<Result<std::map<std::string, std::string>>(const std::string& url)>;

class WatchPoller {
 public:
  struct Watch {
    std::string schedule;         // name
    std::string schedule_commit;  // the commit in force
    std::vector<std::string> urls;
    int64_t poll_ms = 0;
  };
  // One reading of one url for one schedule.
  struct Observation {
    std::string schedule, schedule_commit, url;
    int64_t seen_ms = 0;
    bool ok = false;
    std::string error;                        // !ok: what failed (a summary)
    std::map<std::string, std::string> refs;  // ok: every ref read
  };

  // `now_ms` is the clock readings are stamped with and timed by; it must
  // stay callable after the poller is destroyed (a free function).
  WatchPoller(ListRemoteRefs list, std::function<int64_t()> now_ms);
  ~WatchPoller();
  WatchPoller(const WatchPoller&) = delete;
  WatchPoller& operator=(const WatchPoller&) = delete;

  // Replaces the watches. A watch whose schedule commit is unchanged keeps
  // its timing; a new one is read at once.
  void SetWatches(std::vector<Watch> watches);
  // The readings since the last call: the latest per (schedule, url).
  std::vector<Observation> Take();

 private:
  struct Entry {
    Watch watch;
    int64_t next_ms = 0;
  };
  // Shared with the thread, which may outlive the poller by one reading.
  struct State {
    ListRemoteRefs list;
    std::function<int64_t()> now_ms;
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::map<std::string, Entry> watches;                              // by schedule
    std::map<std::pair<std::string, std::string>, Observation> ready;  // (schedule, url)
  };
  static void Run(const std::shared_ptr<State>& s);

  std::shared_ptr<State> state_;
};

}  // namespace gatos

#endif  // GATOS_LEDGER_WATCH_POLLER_H_
