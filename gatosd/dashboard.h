// gatosd's read-only web dashboard (docs/dashboard.md): server-rendered
// pages, each with a JSON twin at the same URL plus ".json", and
// server-sent events from the ledger's log for live updates.
//
//   /            /overview.json        jobs by state, the last hour, backlog,
//                                      workers, rejected pushes
//   /jobs        /jobs.json            filters and id-prefix search, paginated
//   /jobs/<id>   /jobs/<id>.json       manifest, timeline, result, PoE outputs,
//                                      stdout/stderr, findings, verification
//   /jobs/<id>/live                    text/event-stream of a running job's
//                                      output and progress (live_output.h)
//   /batches     /batches.json         progress per batch
//   /batches/<id> /batches/<id>.json   progress per repository
//   /workers     /workers.json         keys, principals, running, last seen
//   /events                            text/event-stream of committed batches
//   /metrics /healthz                  as before
//   /login                             the token form (when a token is set)
//
// Read path: the LiveState (memory) for counts, workers, live jobs and the
// window of recent jobs; a libgit2 handle of its own, opened on the HTTP
// thread, for what a page reads from the ledger (the state index at the
// committed head, job, lease, cancel and result commits and their blobs).
// Nothing here holds the LedgerWriter or a request queue: no page can
// change the ledger.
//
// Thread-safety: NOT thread-safe. Handle is called on the HTTP thread only;
// the event streams it returns run on their own threads and touch only the
// LiveState.
#ifndef GATOS_GATOSD_DASHBOARD_H_
#define GATOS_GATOSD_DASHBOARD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dashboard_state.h"
#include "gatos/audit/verify.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/state_index.h"
#include "gatos/model/status.h"
#include "gatos/nats/bus.h"
#include "http.h"
#include "metrics.h"

namespace gatos::gatosd {

struct DashboardOptions {
  std::string ledger_dir;
  // When set, every route but /healthz, /login and /static/ needs
  // "Authorization: Bearer <token>" or the session cookie /login sets.
  std::string token;
  size_t page_size = 50;
  size_t output_cap = 64 << 10;  // bytes of stdout/stderr shown
  // Subscribes to a running job's live subjects for /jobs/<id>/live (gatosd
  // passes its bus; unset: the route answers 503). The handler runs on a
  // NATS library thread.
  std::function<Result<std::unique_ptr<Bus::Subscription>>(const std::string& subject,
                                                           Bus::Handler handler)>
      subscribe;
};

// Reads the token file: at most 4 KiB, surrounding whitespace removed; at
// least 16 printable ASCII characters without spaces. The error never
// contains the file's bytes.
Result<std::string> LoadHttpToken(const std::string& path);

// Text made safe for HTML text and attribute values: well-formed UTF-8
// (bad bytes become U+FFFD), & < > " ' as character references, control
// characters other than \n and \t as U+FFFD.
std::string HtmlEscape(std::string_view text);

class Dashboard {
 public:
  Dashboard(DashboardOptions options, LiveState* live, Metrics* metrics);
  ~Dashboard();
  // Never throws; unknown paths are 404, other methods than GET and HEAD
  // (and POST /login) 405.
  HttpResponse Handle(const HttpRequest& request);

 private:
  struct Page {
    int code = 200;
    std::string title;
    std::string live;  // data-live of the page ("" = no live updates)
    nlohmann::json data;
    // The newest log event before the page read the ledger: the page's
    // event stream starts after it, so no change between the render and
    // the stream's opening is missed.
    int64_t event_seq = 0;
  };
  bool Authorized(const HttpRequest& r) const;
  bool HostAllowed(const HttpRequest& r) const;
  HttpResponse Login(const HttpRequest& r);
  HttpResponse Events(const HttpRequest& r);
  HttpResponse LiveTail(const std::string& id);
  HttpResponse Render(const Page& page, bool json) const;
  // /tlog/checkpoint and /tlog/tile/...: files of the ledger's tree.
  HttpResponse Tlog(const std::string& name) const;
  Status Refresh();  // points the index at the committed head

  Result<Page> Overview();
  Result<Page> Jobs(const std::map<std::string, std::string>& q);
  Result<Page> Job(const std::string& id);
  Result<Page> Batches();
  Result<Page> Batch(const std::string& id, const std::map<std::string, std::string>& q);
  Result<Page> Workers();
  Result<Page> Pools();

  nlohmann::json JobRow(const JobRecord& r);
  nlohmann::json JobRow(const JobSummary& s);
  std::string JobName(const std::string& job_hex, const std::string& job_commit);
  std::string StateOf(const std::string& job_hex);
  nlohmann::json Verification(const JobRecord& r);
  nlohmann::json KeyJson(const std::string& key_hex) const;

  struct BatchInfo {
    std::string commit;
    int64_t time_ms = 0;
    std::string tmpl;
    std::vector<std::pair<std::string, std::string>> jobs;  // repo, job hex ("" = not submitted)
    std::vector<std::string> errors;
  };
  Result<const BatchInfo*> ReadBatch(const std::string& hex, const std::string& commit);

  DashboardOptions options_;
  LiveState* live_;
  Metrics* metrics_;
  std::string cookie_;  // the session cookie's value (a hash of the token)
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<StateIndex> index_;
  std::string indexed_head_;
  int64_t indexed_seq_ = 0;
  std::unique_ptr<Auditor> auditor_;
  std::string auditor_policy_;
  std::unordered_map<std::string, nlohmann::json> verdicts_;  // by job + refs read
  std::unordered_map<std::string, std::string> names_;        // job hex -> command line
  struct CachedState {
    std::string state;
    int64_t seq = 0;
  };
  std::unordered_map<std::string, CachedState> states_;  // jobs out of the LiveState
  std::map<std::string, BatchInfo> batches_;             // by batch hex (immutable records)
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_DASHBOARD_H_
