// What JobService tells gatosd: the metrics, the dashboard's live state.
//
// Thread-safety: called on the ledger thread.
#ifndef GATOS_GATOSD_METRICS_OBSERVER_H_
#define GATOS_GATOSD_METRICS_OBSERVER_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gatos/ledger/job_service.h"
#include "gatos/nats/bus.h"
#include <map>
#include <string_view>

#include "dashboard_state.h"
#include "gatos/ledger/writer.h"
#include "gatos/sys/log.h"
#include "metrics.h"

namespace gatos::gatosd {

class MetricsObserver : public ServiceObserver {
 public:
  MetricsObserver(Metrics* m, LiveState* live, LedgerWriter* w) : m_(m), live_(live), w_(w) {}
  // The dashboard's live state and event stream, and the per-minute series.
  void OnCommitted(int64_t seq, const std::string& log_commit, const std::vector<LogEntry>& entries,
                   const std::map<std::string, JobRecord>& records) override {
    int64_t now = SystemNowMs();
    for (const auto& [name, n] : live_->Committed(*w_, seq, log_commit, entries, records, now)) {
      m_->CountSeries(name, n, now);
    }
  }
  void OnRequest(std::string_view kind, std::string_view outcome, double seconds) override {
    m_->CountRequest(std::string(kind), std::string(outcome));
    if (outcome == "ok") m_->ObserveTransition(std::string(kind), seconds);
    if (kind == "claim" && outcome == "ok") m_->ObserveClaim(seconds);
  }
  void OnRejectedSubmit(std::string_view source, std::string_view reason) override {
    m_->CountRejected(std::string(source), std::string(reason));
  }
  void OnBatch(size_t requests, size_t changes, double seconds) override { m_->ObserveBatch(requests, seconds); }
  void OnSubmitToClaim(double seconds) override { m_->ObserveSubmitToClaim(seconds); }
  void OnPolicyChanged() override { policy_changed = true; }
  void Log(const std::string& line) override { gatos::Log(line); }
  bool policy_changed = false;

 private:
  Metrics* m_;
  LiveState* live_;
  LedgerWriter* w_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_METRICS_OBSERVER_H_
