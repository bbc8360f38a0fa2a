// The latest progress report of each running job, as its worker published
// it on core NATS (live_output.h, kAllProgressSubjects), for `gatos status`
// and the dashboard. Display data, not the record: anyone allowed to
// publish on the bus can send a report, so it is shown as what a worker
// said, never used for a decision. Bounded: at most kMaxJobs entries (the
// least recently updated goes first), each forgotten kMaxAgeMs after its
// last report.
//
// Thread-safety: thread-safe (one mutex); Record runs on a NATS library
// thread and only parses and stores.
#ifndef GATOSD_PROGRESS_BOARD_H_
#define GATOSD_PROGRESS_BOARD_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/live_output.h"

namespace gatos {

class ProgressBoard {
 public:
  static constexpr size_t kMaxJobs = 10000;
  static constexpr int64_t kMaxAgeMs = 10 * 60 * 1000;

  // A message from the bus; anything that is not a valid progress report is
  // counted and dropped.
  void Record(std::string_view data, int64_t now_ms);
  // {attempt, counters: [{name, done, total?, rate?}], reported (the
  // worker's clock, RFC 3339), age_ms (since gatosd heard it)} for the job
  // at `attempt`, if a recent report exists.
  std::optional<nlohmann::json> Get(const std::string& job_hex, int64_t attempt,
                                    int64_t now_ms) const;
  // Adds "progress" to a status reply (rpc::kStatus's JSON text) of a
  // claimed job with a report; any other reply is returned as it is.
  std::string Annotate(const std::string& status_reply, int64_t now_ms) const;
  int64_t ignored() const;

 private:
  struct Entry {
    LiveMessage report;
    int64_t received_ms = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> jobs_;  // by job hex
  int64_t ignored_ = 0;
};

// The JSON form of a progress report used in status replies and the dashboard.
nlohmann::json ProgressJson(const Progress& p);

}  // namespace gatos

#endif  // GATOSD_PROGRESS_BOARD_H_
