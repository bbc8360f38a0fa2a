#include "metrics.h"

#include <cstdio>

#include "gatos/model/clock.h"
#include "gatos/model/job_state.h"

namespace gatos::gatosd {

namespace {
std::vector<double> LatencyBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}
std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds_s)
    : bounds_(std::move(bounds_s)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  std::string base = name, extra;
  size_t brace = name.find('{');
  if (brace != std::string::npos) {
    base = name.substr(0, brace);
    extra = name.substr(brace + 1, name.size() - brace - 2) + ",";
  }
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += base + "_bucket{" + extra + "le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  *out += base + "_bucket{" + extra + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  std::string lbl = extra.empty() ? "" : "{" + extra.substr(0, extra.size() - 1) + "}";
  *out += base + "_sum" + lbl + " " + Num(sum_) + "\n";
  *out += base + "_count" + lbl + " " + std::to_string(count_) + "\n";
}

double Histogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  uint64_t target = static_cast<uint64_t>(q * static_cast<double>(count_));
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    if (cumulative > target) return bounds_[i];
  }
  return bounds_.empty() ? 0 : bounds_.back();
}

Metrics::Minute::Minute() : latency(std::vector<double>{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}) {}

Metrics::Metrics()
    : claim_(LatencyBounds()), submit_to_claim_(LatencyBounds()), batch_seconds_(LatencyBounds()),
      minutes_(kSeriesMinutes) {}

Metrics::Minute* Metrics::MinuteAt(int64_t now_ms) {
  int64_t minute = now_ms / 60000;
  Minute& m = minutes_[static_cast<size_t>(minute % kSeriesMinutes)];
  if (m.minute > minute) return nullptr;  // a late count for a minute out of the window
  if (m.minute != minute) {
    m = Minute();
    m.minute = minute;
  }
  return &m;
}

void Metrics::CountSeries(const std::string& name, uint64_t n, int64_t now_ms) {
  if (now_ms <= 0) now_ms = SystemNowMs();
  std::lock_guard<std::mutex> l(mu_);
  if (Minute* m = MinuteAt(now_ms)) m->counts[name] += n;
}

std::vector<SeriesPoint> Metrics::Series(int64_t now_ms) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<SeriesPoint> out;
  int64_t last = now_ms / 60000;
  for (int64_t minute = last - kSeriesMinutes + 1; minute <= last; ++minute) {
    SeriesPoint p;
    p.start_ms = minute * 60000;
    const Minute& m = minutes_[static_cast<size_t>(((minute % kSeriesMinutes) + kSeriesMinutes) % kSeriesMinutes)];
    if (m.minute == minute) {
      p.counts = m.counts;
      p.latency_count = m.latency.count();
      p.latency_p50_s = m.latency.Quantile(0.5);
      p.latency_p95_s = m.latency.Quantile(0.95);
    }
    out.push_back(std::move(p));
  }
  return out;
}

MetricsSnapshot Metrics::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  MetricsSnapshot s;
  s.jobs = jobs_;
  s.backlog = backlog_;
  s.published = published_;
  s.nats_up = nats_up_;
  s.heartbeat_ms = heartbeat_ms_;
  s.rejected = rejected_;
  s.batches = batches_;
  s.batched_requests = batched_requests_;
  s.claims = claim_.count();
  s.claim_p50_s = claim_.Quantile(0.5);
  s.claim_p99_s = claim_.Quantile(0.99);
  if (replica_) {
    s.replica_name = replica_name_.empty() ? "replica" : replica_name_;
    s.replica_leader = replica_leader_;
    s.replica_term = replica_term_;
    s.replica_lag_ms = replica_lag_ms_;
  }
  return s;
}

void Metrics::ObserveBatch(size_t requests, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  batch_seconds_.Observe(seconds);
  ++batches_;
  batched_requests_ += requests;
}

void Metrics::SetJobCounts(const std::array<size_t, 6>& by_state) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_ = by_state;
}
void Metrics::SetPools(std::map<std::string, PoolGauge> pools) {
  std::lock_guard<std::mutex> l(mu_);
  pools_ = std::move(pools);
}
void Metrics::SetPublishBacklog(size_t n) {
  std::lock_guard<std::mutex> l(mu_);
  backlog_ = n;
}
void Metrics::SetNatsConnected(bool up) {
  std::lock_guard<std::mutex> l(mu_);
  nats_up_ = up;
}
void Metrics::SetReplica(bool leader, uint64_t term, int64_t lag_ms) {
  std::lock_guard<std::mutex> l(mu_);
  replica_ = true;
  replica_leader_ = leader;
  replica_term_ = term;
  replica_lag_ms_ = lag_ms;
}
void Metrics::SetReplicaName(std::string name) {
  std::lock_guard<std::mutex> l(mu_);
  replica_name_ = std::move(name);
}
void Metrics::ObserveClaim(double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  claim_.Observe(seconds);
}
void Metrics::ObserveSubmitToClaim(double seconds) {
  int64_t now = SystemNowMs();
  std::lock_guard<std::mutex> l(mu_);
  submit_to_claim_.Observe(seconds);
  if (Minute* m = MinuteAt(now)) m->latency.Observe(seconds);
}
void Metrics::ObserveTransition(const std::string& kind, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  transitions_.try_emplace(kind, LatencyBounds()).first->second.Observe(seconds);
}
void Metrics::CountRequest(const std::string& kind, const std::string& outcome) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{kind, outcome}];
}
void Metrics::CountRejected(const std::string& source, const std::string& reason) {
  int64_t now = SystemNowMs();
  std::lock_guard<std::mutex> l(mu_);
  ++rejected_[{source, reason}];
  if (Minute* m = MinuteAt(now)) ++m->counts["rejected"];
}
void Metrics::CountPublished() {
  std::lock_guard<std::mutex> l(mu_);
  ++published_;
}
void Metrics::Heartbeat(int64_t now_ms) {
  std::lock_guard<std::mutex> l(mu_);
  heartbeat_ms_ = now_ms;
}
int64_t Metrics::last_heartbeat_ms() const {
  std::lock_guard<std::mutex> l(mu_);
  return heartbeat_ms_;
}
bool Metrics::nats_connected() const {
  std::lock_guard<std::mutex> l(mu_);
  return nats_up_;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  out += "# HELP gatos_jobs Jobs in the ledger by state (from gatosd's index of the refs).\n";
  out += "# TYPE gatos_jobs gauge\n";
  for (size_t i = 0; i < jobs_.size(); ++i) {
    out += "gatos_jobs{state=\"" + std::string(JobStateName(static_cast<JobState>(i))) + "\"} " +
           std::to_string(jobs_[i]) + "\n";
  }
  if (!pools_.empty()) {
    // Pool names are [a-z0-9_-]: nothing to escape in a label.
    out += "# HELP gatos_pool_jobs Live jobs per pool: queued (waiting for an offer), offered, running.\n";
    out += "# TYPE gatos_pool_jobs gauge\n";
    for (const auto& [pool, g] : pools_) {
      for (auto [state, n] : {std::pair{"queued", g.queued}, std::pair{"offered", g.offered},
                              std::pair{"running", g.running}}) {
        out += "gatos_pool_jobs{pool=\"" + pool + "\",state=\"" + state + "\"} " + std::to_string(n) + "\n";
      }
    }
    out += "# HELP gatos_pool_paused 1 when the policy pauses the pool.\n# TYPE gatos_pool_paused gauge\n";
    for (const auto& [pool, g] : pools_) {
      out += "gatos_pool_paused{pool=\"" + pool + "\"} " + std::string(g.paused ? "1" : "0") + "\n";
    }
  }
  out += "# HELP gatos_publish_backlog Job events waiting to be published on JetStream.\n";
  out += "# TYPE gatos_publish_backlog gauge\ngatos_publish_backlog " + std::to_string(backlog_) + "\n";
  out += "# HELP gatos_published_total Job events acknowledged by JetStream.\n";
  out += "# TYPE gatos_published_total counter\ngatos_published_total " + std::to_string(published_) + "\n";
  out += "# HELP gatos_batches_total Log batches the ledger thread applied (group commit).\n";
  out += "# TYPE gatos_batches_total counter\ngatos_batches_total " + std::to_string(batches_) + "\n";
  out += "# HELP gatos_batched_requests_total Requests applied in those batches.\n";
  out += "# TYPE gatos_batched_requests_total counter\ngatos_batched_requests_total " +
         std::to_string(batched_requests_) + "\n";
  out += "# HELP gatos_batch_seconds Time to apply one batch, durable.\n";
  out += "# TYPE gatos_batch_seconds histogram\n";
  batch_seconds_.Render("gatos_batch_seconds", &out);
  out += "# HELP gatos_nats_connected 1 while the NATS connection is up.\n";
  out += "# TYPE gatos_nats_connected gauge\ngatos_nats_connected " + std::string(nats_up_ ? "1" : "0") + "\n";
  if (replica_) {
    out += "# HELP gatos_replica_leader 1 while this replica leads its replicated ledger.\n";
    out += "# TYPE gatos_replica_leader gauge\ngatos_replica_leader " + std::string(replica_leader_ ? "1" : "0") + "\n";
    out += "# HELP gatos_replica_term The election term this replica leads with.\n";
    out += "# TYPE gatos_replica_term gauge\ngatos_replica_term " + std::to_string(replica_term_) + "\n";
    out += "# HELP gatos_replica_lag_seconds How long since this replica last held every record of the replicated log.\n";
    out += "# TYPE gatos_replica_lag_seconds gauge\ngatos_replica_lag_seconds " +
           std::to_string(static_cast<double>(replica_lag_ms_) / 1000.0) + "\n";
  }
  out += "# HELP gatos_claim_latency_seconds Claim requests, received to replied.\n";
  out += "# TYPE gatos_claim_latency_seconds histogram\n";
  claim_.Render("gatos_claim_latency_seconds", &out);
  out += "# HELP gatos_submit_to_claim_seconds From a job's acceptance to its first lease.\n";
  out += "# TYPE gatos_submit_to_claim_seconds histogram\n";
  submit_to_claim_.Render("gatos_submit_to_claim_seconds", &out);
  out += "# HELP gatos_transition_seconds Ledger transitions by kind, received to replied.\n";
  out += "# TYPE gatos_transition_seconds histogram\n";
  for (const auto& [kind, h] : transitions_) h.Render("gatos_transition_seconds{kind=\"" + kind + "\"}", &out);
  out += "# HELP gatos_requests_total RPC requests by kind and outcome.\n";
  out += "# TYPE gatos_requests_total counter\n";
  for (const auto& [k, v] : requests_) {
    out += "gatos_requests_total{kind=\"" + k.first + "\",outcome=\"" + k.second + "\"} " + std::to_string(v) + "\n";
  }
  out += "# HELP gatos_rejected_total Refused pushes and submissions by source and reason.\n";
  out += "# TYPE gatos_rejected_total counter\n";
  for (const auto& [k, v] : rejected_) {
    out += "gatos_rejected_total{source=\"" + k.first + "\",reason=\"" + k.second + "\"} " + std::to_string(v) + "\n";
  }
  return out;
}

}  // namespace gatos::gatosd
