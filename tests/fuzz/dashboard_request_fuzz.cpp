// libFuzzer target: the dashboard's request path on arbitrary bytes.
// ParseHttpRequest, then routing, the token and Host checks and rendering
// through Dashboard::Handle (with no ledger behind it: pages that need one
// answer 500), and every page renderer fed the request's own strings.
// Invariants: no crash, no exception out of Handle; every response has a
// valid code; no rendered page holds a <script> or <img> element of the
// input's making (only /static/app.js); a tile path parses only in the one
// spelling the tree writes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dashboard.h"
#include "gatos/audit/log_tree.h"
#include "dashboard_html.h"
#include "dashboard_state.h"
#include "http.h"
#include "metrics.h"

namespace {

size_t Count(const std::string& s, std::string_view needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

void CheckPage(const std::string& html) {
  if (html.find("<img") != std::string::npos) abort();
  if (Count(html, "<script") > 1) abort();
  if (html.find("<script>") != std::string::npos) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gatos::gatosd;
  using nlohmann::json;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static LiveState live;
  static Metrics metrics;
  static Dashboard open_dashboard({"/nonexistent-gatos-ledger", ""}, &live, &metrics);
  static Dashboard token_dashboard({"/nonexistent-gatos-ledger", "fuzz-token-0123456789"}, &live, &metrics);

  // Tile paths from the network: what parses is exactly what the tree writes.
  {
    int level = 0, width = 0;
    uint64_t index = 0;
    if (gatos::ParseTlogTilePath(bytes, &level, &index, &width) &&
        gatos::TlogTilePath(level, index, width) != bytes) {
      abort();
    }
  }
  auto req = ParseHttpRequest(bytes);
  if (!req.ok()) return 0;
  (void)ParseQuery(req->query);
  for (Dashboard* d : {&open_dashboard, &token_dashboard}) {
    if (req->path == "/events") continue;  // a stream: runs until the client leaves
    HttpResponse r = d->Handle(*req);
    if (r.code < 200 || r.code > 599) abort();
    if (r.content_type.rfind("text/html", 0) == 0) CheckPage(r.body);
  }
  // The renderers, with the request's strings wherever the ledger's go.
  std::string s = req->path + req->query + req->body;
  json key = {{"key", s}, {"principal", s}};
  json row = {{"job", s}, {"hex", s}, {"name", s}, {"state", s}, {"submitter", key}, {"worker", key},
              {"submitted", s}, {"finished", s}, {"attempt", 1}};
  json jobs = {{"filters", {{"state", s}, {"submitter", s}, {"worker", s}, {"since", s}, {"until", s}, {"q", s}}},
               {"errors", json::array({s})}, {"source", s}, {"covers", s}, {"scanned", 0},
               {"jobs", json::array({row})}, {"next", s}, {"first_page", false}};
  CheckPage(RenderPageHtml(s, "jobs", jobs));
  json job = row;
  job["verification"] = {{"badge", s}, {"commands", json::array({s})}, {"checks", json::array({{{"name", s}, {"ok", false}, {"detail", s}}})}};
  job["timeline"] = json::array({{{"time", s}, {"event", s}, {"by", key}, {"detail", s}, {"commit", s}}});
  job["manifest"] = {{"command", json::array({s})}, {"args", json::array({s})}, {"timeout_seconds", 1},
                     {"env", {{s, s}}}, {"cwd", s}, {"raw", s}, {"raw_bytes", 1}};
  job["result"] = {{"status", s}, {"commit", s}, {"worker", key}, {"reason", s},
                   {"outputs", json::array({{{"path", s}, {"size", 1}, {"hash", s}}})},
                   {"stdout", {{"text", s}, {"bytes", 1}}}};
  job["record"] = json::object();
  job["findings"] = {{"count", 1}, {"locations", 2},
                     {"rows", json::array({{{"rule", s}, {"fingerprint", s}, {"secret", s}, {"locations", 2},
                                            {"first_commit", s}, {"last_commit", s}, {"at_tip", nullptr},
                                            {"paths", s}}})}};
  CheckPage(RenderPageHtml(s, "job:" + s, job));
  job["findings"] = {{"error", s}};
  CheckPage(RenderPageHtml(s, "job:" + s, job));
  CheckPage(RenderPageHtml(s, "workers", {{"workers", json::array({{{"key", s}, {"worker_id", s}, {"principal", s}, {"allowed", true}, {"running", 1}, {"running_jobs", json::array({s})}, {"last_seen", s}, {"last_kind", s}, {"finished_since_start", 0}}})}, {"last_seen_means", s}}));
  CheckPage(RenderPageHtml(s, "batches", {{"hex", s}, {"batch", s}, {"template", s}, {"created", s}, {"repositories", 1}, {"by_state", {{s, 1}}}, {"rows", json::array({{{"repo", s}, {"job", s}, {"hex", s}, {"state", s}, {"error", s}}})}, {"next", s}}));
  CheckPage(RenderLoginHtml(s));
  return 0;
}
