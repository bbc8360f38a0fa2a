#include "follower_http.h"

#include <array>

#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/refs.h"
#include "gatos/sys/log.h"

namespace gatos::gatosd {

Result<std::unique_ptr<FollowerHttp>> FollowerHttp::Start(const ServeOptions& opts, const std::string& dir) {
  if (opts.http_addr.empty()) return std::unique_ptr<FollowerHttp>();
  std::unique_ptr<FollowerHttp> f(new FollowerHttp(dir));
  f->metrics_.SetReplicaName(opts.replica_name);
  f->metrics_.SetReplica(false, 0, 0);
  f->Refresh();
  DashboardOptions dopts;
  dopts.ledger_dir = dir;
  dopts.token = opts.http_token;  // no live output subscription: /jobs/<id>/live answers 503
  f->dashboard_ = std::make_unique<Dashboard>(std::move(dopts), &f->live_, &f->metrics_);
  FollowerHttp* self = f.get();
  GATOS_ASSIGN_OR_RETURN(f->http_, HttpServer::Start(opts.http_addr, [self](const HttpRequest& r) {
                           return self->dashboard_->Handle(r);
                         }));
  Log("follower's dashboard and metrics on port " + std::to_string(f->http_->port()));
  return f;
}

FollowerHttp::~FollowerHttp() { http_.reset(); }

void FollowerHttp::Update(uint64_t term, int64_t lag_ms, bool nats_connected) {
  metrics_.SetReplica(false, term, lag_ms);
  metrics_.SetNatsConnected(nats_connected);
  const int64_t now = SystemNowMs();
  metrics_.Heartbeat(now);
  if (now < next_refresh_ms_) return;
  next_refresh_ms_ = now + 250;
  Refresh();
}

void FollowerHttp::Refresh() {
  auto view = LedgerView::Open(dir_);
  if (!view.ok() || (*view)->head() == head_) return;
  LedgerView& v = **view;
  const int64_t now = SystemNowMs();
  if (v.policy_commit() != policy_commit_) {
    auto policy = v.ReadPolicy();
    if (!policy.ok()) return;
    live_.SetPolicy(*policy, v.policy_commit());
    policy_commit_ = v.policy_commit();
  }
  // Every job live now, and those live before that are not (they ended).
  std::set<std::string> live;
  Status s = v.index().ForEachLive([&](const JobRecord& r) {
    live.insert(r.job_hex);
    live_.Note(r, v.seq(), now);
    return OkStatus();
  });
  if (!s.ok()) return;
  for (const std::string& hex : live_jobs_) {
    if (live.count(hex)) continue;
    auto rec = v.Find(hex);
    if (rec.ok() && *rec) live_.Note(**rec, v.seq(), now);
  }
  live_jobs_ = std::move(live);
  auto stats = v.index().Stats();
  if (!stats.ok()) return;
  live_.SetHead(v.seq(), v.head(), *stats);
  std::array<size_t, 6> counts{};
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<size_t>(std::max<int64_t>(0, stats->by_state[i]));
  metrics_.SetJobCounts(counts);
  head_ = v.head();
}

}  // namespace gatos::gatosd
