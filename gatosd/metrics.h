// gatosd's metrics, rendered in the Prometheus text format for /metrics,
// and the last hour per minute (counts and latency quantiles) for the
// dashboard's charts.
//
// Thread-safety: every method is thread-safe (one mutex; the ledger thread
// writes, the HTTP thread reads).
#ifndef GATOS_GATOSD_METRICS_H_
#define GATOS_GATOSD_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gatos::gatosd {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds_s);
  void Observe(double seconds);
  // Appends the _bucket/_sum/_count lines of `name`.
  void Render(const std::string& name, std::string* out) const;
  uint64_t count() const { return count_; }
  // Approximate quantile from the buckets (upper bound of the bucket).
  double Quantile(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One minute of the dashboard's time series.
struct SeriesPoint {
  int64_t start_ms = 0;                     // the minute's start (unix ms)
  std::map<std::string, uint64_t> counts;   // e.g. "submit", "claim", "succeeded", "failed", "rejected"
  uint64_t latency_count = 0;               // submit -> first claim observations
  double latency_p50_s = 0, latency_p95_s = 0;  // bucket upper bounds (Histogram::Quantile)
};

// What the dashboard's overview shows besides the series.
struct MetricsSnapshot {
  std::array<size_t, 6> jobs{};
  size_t backlog = 0;
  uint64_t published = 0;
  bool nats_up = false;
  int64_t heartbeat_ms = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> rejected;  // (source, reason) -> count
  uint64_t batches = 0, batched_requests = 0;
  double claim_p50_s = 0, claim_p99_s = 0;
  uint64_t claims = 0;
  // A replica of a replicated ledger: replica_name is "" otherwise.
  std::string replica_name;
  bool replica_leader = false;
  uint64_t replica_term = 0;
  int64_t replica_lag_ms = 0;
};

class Metrics {
 public:
  static constexpr int kSeriesMinutes = 60;
  Metrics();
  void SetJobCounts(const std::array<size_t, 6>& by_state);
  void SetPublishBacklog(size_t n);
  // Per pool (docs/scheduling.md): jobs queued, offered, running; paused.
  struct PoolGauge {
    int64_t queued = 0, offered = 0, running = 0;
    bool paused = false;
  };
  void SetPools(std::map<std::string, PoolGauge> pools);
  void SetNatsConnected(bool up);
  // A replica of a replicated ledger (only then rendered): its role, term
  // and lag (docs/replication.md).
  void SetReplica(bool leader, uint64_t term, int64_t lag_ms);
  void SetReplicaName(std::string name);  // shown by the dashboard
  void ObserveClaim(double seconds);           // claim RPC, received -> replied
  void ObserveSubmitToClaim(double seconds);   // job first seen -> first lease
  void ObserveTransition(const std::string& kind, double seconds);
  void CountRequest(const std::string& kind, const std::string& outcome);
  void CountRejected(const std::string& source, const std::string& reason);
  void CountPublished();
  void ObserveBatch(size_t requests, double seconds);
  void Heartbeat(int64_t now_ms);
  int64_t last_heartbeat_ms() const;
  bool nats_connected() const;
  std::string Render() const;

  // Adds `n` to this minute's count `name` (now_ms 0 = the system clock).
  void CountSeries(const std::string& name, uint64_t n = 1, int64_t now_ms = 0);
  // The last kSeriesMinutes minutes up to now_ms, oldest first, zero-filled.
  std::vector<SeriesPoint> Series(int64_t now_ms) const;
  MetricsSnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::array<size_t, 6> jobs_{};
  size_t backlog_ = 0;
  std::map<std::string, PoolGauge> pools_;
  bool nats_up_ = false;
  bool replica_ = false, replica_leader_ = false;
  uint64_t replica_term_ = 0;
  int64_t replica_lag_ms_ = 0;
  std::string replica_name_;
  Histogram claim_;
  Histogram submit_to_claim_;
  std::map<std::string, Histogram> transitions_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, uint64_t> rejected_;
  uint64_t published_ = 0;
  Histogram batch_seconds_;
  uint64_t batches_ = 0;
  uint64_t batched_requests_ = 0;
  int64_t heartbeat_ms_ = 0;
  // A ring of minutes: slot = minute % kSeriesMinutes; a slot whose minute
  // is not the one asked for is stale (zero).
  struct Minute {
    int64_t minute = -1;
    std::map<std::string, uint64_t> counts;
    Histogram latency;
    Minute();
  };
  Minute* MinuteAt(int64_t now_ms);  // mu_ held; nullptr for a minute older than its slot's
  std::vector<Minute> minutes_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_METRICS_H_
