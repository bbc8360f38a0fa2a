// A follower's HTTP endpoint (--http): the dashboard, /metrics and /healthz
// as the leader serves them, read from the follower's own repository as
// it applies the replicated log. /metrics has gatos_replica_leader 0, the
// term it knows and gatos_replica_lag_seconds; the dashboard's overview
// names the replica, its role, term and lag, and the log sequence its
// pages are as of. Nothing here writes.
//
// Thread-safety: Start, Update and the destructor from the follower's
// thread; pages are served on the HTTP thread.
#ifndef GATOS_GATOSD_FOLLOWER_HTTP_H_
#define GATOS_GATOSD_FOLLOWER_HTTP_H_

#include <memory>
#include <set>
#include <string>

#include "dashboard.h"
#include "dashboard_state.h"
#include "http.h"
#include "metrics.h"
#include "server.h"

namespace gatos::gatosd {

class FollowerHttp {
 public:
  // Nothing to serve (nullptr) when opts.http_addr is empty.
  static Result<std::unique_ptr<FollowerHttp>> Start(const ServeOptions& opts, const std::string& dir);
  ~FollowerHttp();
  // Role, term and lag now; the dashboard's state from the repository
  // when its log moved.
  void Update(uint64_t term, int64_t lag_ms, bool nats_connected);

 private:
  explicit FollowerHttp(std::string dir) : dir_(std::move(dir)) {}
  void Refresh();
  std::string dir_;
  Metrics metrics_;
  LiveState live_;
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<HttpServer> http_;
  std::string head_;                 // the log commit the state is as of
  std::string policy_commit_;
  std::set<std::string> live_jobs_;  // pending or claimed at head_
  int64_t next_refresh_ms_ = 0;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_FOLLOWER_HTTP_H_
