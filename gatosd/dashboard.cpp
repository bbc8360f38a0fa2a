#include "dashboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <sstream>

#include "dashboard_html.h"
#include "gatos/audit/log_tree.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/live_output.h"
#include "gatos/model/log_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/poe.h"
#include "gatos/model/refs.h"
#include "gatos/model/secret_groups.h"
#include "gatos/model/time_format.h"
#include "gatos/sys/file.h"

namespace gatos::gatosd {

using nlohmann::json;

namespace {

constexpr char kCookieName[] = "gatos_session";
constexpr size_t kMaxLeaseChain = 200;  // lease commits read per job page
constexpr size_t kMaxSecrets = 500;     // secrets listed on a job page
constexpr size_t kMaxBatchesListed = 50;
constexpr size_t kBatchRowsPerPage = 500;
constexpr size_t kMaxNames = 20000;
constexpr size_t kMaxVerdicts = 5000;
constexpr size_t kMaxStates = 200000;

std::string Text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse Plain(int code, const std::string& body) {
  return {code, "text/plain; charset=utf-8", body, {}, nullptr};
}

// Constant-time comparison: the time does not depend on where they differ.
bool SameSecret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// "blake3:<hex>", "<hex>" -> hex (lowercase 64); "" when malformed.
std::string JobHexOf(std::string_view id) {
  if (id.substr(0, 7) == "blake3:") id.remove_prefix(7);
  return IsLowerHex(id, 64) ? std::string(id) : "";
}

bool IsHexPrefix(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// since/until: unix ms, RFC 3339 UTC, or a duration back from now
// ("30m", "2h", "7d"). 0 and *ok false when malformed.
int64_t ParseTime(const std::string& v, int64_t now, bool* ok) {
  *ok = true;
  if (v.empty()) return 0;
  if (v.size() <= 16 &&
      std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::stoll(v);
  }
  if (v.size() >= 2 && v.size() <= 8) {
    char unit = v.back();
    std::string n = v.substr(0, v.size() - 1);
    if (std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      int64_t k = std::stoll(n);
      int64_t mult = unit == 's'   ? 1000
                     : unit == 'm' ? 60000
                     : unit == 'h' ? 3600000
                     : unit == 'd' ? 86400000
                                   : 0;
      if (mult) return now - k * mult;
    }
  }
  auto t = ParseRfc3339Millis(v);
  if (t.ok()) return *t;
  *ok = false;
  return 0;
}

std::string CommandLine(const Manifest& m) {
  std::string out;
  for (const auto* v : {&m.command, &m.args}) {
    for (const auto& a : *v) {
      if (!out.empty()) out += ' ';
      out += a;
      if (out.size() > 200) return TruncateUtf8(out, 200) + "…";
    }
  }
  return out;
}

json TimeJson(int64_t ms) { return ms ? json(FormatRfc3339Millis(ms)) : json(nullptr); }

// A scan result's findings, one row per distinct secret (gatos/model/secret_groups.h):
// rule, fingerprint, locations, first and last commit, whether still at a
// scanned tip, paths. Only these fields: a finding names where a secret is,
// never the secret.
json FindingsBySecret(Ledger& ledger, const std::string& result_commit) {
  auto lines = ledger.ReadFileAtCommit(result_commit, "outputs/findings.jsonl", 8 << 20);
  if (!lines.ok())
    return {{"error", "cannot read outputs/findings.jsonl: " + lines.status().message()}};
  Result<std::vector<FindingLocation>> locations = ParseFindingsJsonl(*lines);
  if (!locations.ok())
    return {{"error", "outputs/findings.jsonl: " + locations.status().message()}};
  const size_t total = locations->size();
  const std::vector<SecretGroup> groups = GroupBySecret(std::move(*locations));
  json rows = json::array();
  for (const SecretGroup& g : groups) {
    if (rows.size() >= kMaxSecrets) break;
    std::string paths;
    for (const std::string& p : g.paths()) paths += (paths.empty() ? "" : ", ") + p;
    rows.push_back({{"rule", TruncateUtf8(g.rule, 512)},
                    {"fingerprint", TruncateUtf8(g.fingerprint, 512)},
                    {"secret", g.id},
                    {"locations", g.locations.size()},
                    {"first_commit", TruncateUtf8(g.first().commit, 64)},
                    {"last_commit", TruncateUtf8(g.last().commit, 64)},
                    {"at_tip", g.at_tip ? json(*g.at_tip) : json(nullptr)},
                    {"paths", TruncateUtf8(paths, 1024)}});
  }
  return {{"count", groups.size()}, {"locations", total}, {"rows", rows}, {"shown", rows.size()}};
}

}  // namespace

Result<std::string> LoadHttpToken(const std::string& path) {
  Result<std::string> read = ReadFileToString(path, 4096, {.secret = true});
  if (!read.ok()) {
    return Status(read.status().code(), "--http-token-file " + path + ": " +
                                            (read.status().code() == StatusCode::kInvalidArgument
                                                 ? "larger than 4 KiB or not a file"
                                                 : "cannot be read"));
  }
  const std::string& data = *read;
  size_t b = data.find_first_not_of(" \t\r\n");
  size_t e = data.find_last_not_of(" \t\r\n");
  std::string token = b == std::string::npos ? "" : data.substr(b, e - b + 1);
  if (token.size() < 16)
    return InvalidArgumentError("--http-token-file " + path +
                                ": the token must have at least 16 characters");
  for (unsigned char c : token) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgumentError("--http-token-file " + path +
                                  ": the token must be printable ASCII without spaces");
    }
  }
  return token;
}

Dashboard::Dashboard(DashboardOptions options, LiveState* live, Metrics* metrics)
    : options_(std::move(options)), live_(live), metrics_(metrics) {
  if (!options_.token.empty())
    cookie_ = Blake3Tagged("gatos dashboard session\n" + options_.token).substr(7);
}

Dashboard::~Dashboard() = default;

bool Dashboard::Authorized(const HttpRequest& r) const {
  if (options_.token.empty()) return true;
  std::string auth = r.header("authorization");
  if (auth.size() > 7 && auth.compare(0, 7, "Bearer ") == 0 &&
      SameSecret(auth.substr(7), options_.token))
    return true;
  std::string cookies = r.header("cookie");
  std::string want = std::string(kCookieName) + "=";
  size_t pos = 0;
  while (pos < cookies.size()) {
    size_t end = cookies.find(';', pos);
    std::string c = cookies.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t b = c.find_first_not_of(' ');
    if (b != std::string::npos && c.compare(b, want.size(), want) == 0 &&
        SameSecret(c.substr(b + want.size()), cookie_)) {
      return true;
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return false;
}

// Without a token the dashboard is on loopback only; a page from another
// site that resolves its own name to 127.0.0.1 (DNS rebinding) still sends
// its own name as Host, and is refused.
bool Dashboard::HostAllowed(const HttpRequest& r) const {
  if (!options_.token.empty()) return true;
  auto it = r.headers.find("host");
  if (it == r.headers.end()) return true;  // HTTP/1.0 without Host
  std::string host = it->second;
  if (!host.empty() && host[0] == '[') {
    return host.compare(0, 5, "[::1]") == 0;
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return true;
  if (host.compare(0, 4, "127.") != 0) return false;
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

HttpResponse Dashboard::Login(const HttpRequest& r) {
  if (r.method == "POST") {
    auto form = ParseQuery(r.body);
    if (!options_.token.empty() && SameSecret(form["token"], options_.token)) {
      HttpResponse resp = Plain(303, "signed in\n");
      resp.headers.push_back({"Location", "/"});
      resp.headers.push_back({"Set-Cookie", std::string(kCookieName) + "=" + cookie_ +
                                                "; Path=/; HttpOnly; SameSite=Strict"});
      return resp;
    }
    HttpResponse resp{
        401,
        "text/html; charset=utf-8",
        RenderLoginHtml(options_.token.empty() ? "This dashboard needs no token."
                                               : "That token is not the one gatosd was given."),
        {},
        nullptr};
    return resp;
  }
  return {200,
          "text/html; charset=utf-8",
          RenderLoginHtml(options_.token.empty() ? "This dashboard needs no token." : ""),
          {},
          nullptr};
}

HttpResponse Dashboard::Handle(const HttpRequest& r) {
  try {
    const std::string& path = r.path;
    if (path == "/healthz") {
      if (r.method != "GET" && r.method != "HEAD") return Plain(405, "only GET\n");
      int64_t age = SystemNowMs() - metrics_->last_heartbeat_ms();
      if (age > 5000)
        return Plain(503, "ledger thread stalled for " + std::to_string(age) + " ms\n");
      if (!metrics_->nats_connected()) return Plain(503, "NATS disconnected\n");
      return Plain(200, "ok\n");
    }
    if (!HostAllowed(r))
      return Plain(421, "this dashboard answers to localhost and 127.0.0.1 only\n");
    if (path == "/login") {
      if (r.method != "GET" && r.method != "HEAD" && r.method != "POST")
        return Plain(405, "only GET and POST\n");
      return Login(r);
    }
    if (r.method != "GET" && r.method != "HEAD") {
      HttpResponse resp = Plain(405, "the dashboard is read-only: only GET\n");
      resp.headers.push_back({"Allow", "GET, HEAD"});
      return resp;
    }
    // The log's Merkle tree (C2SP tlog-tiles) and its signed checkpoint:
    // public, like a transparency log's, for witnesses and holders of proof
    // bundles; hashes and a signed size, nothing about any job.
    if (path == "/tlog/checkpoint" || path.compare(0, 11, "/tlog/tile/") == 0) return Tlog(path.substr(6));
    if (path.compare(0, 8, "/static/") == 0) {
      auto asset = StaticAsset(path.substr(8));
      if (!asset) return Plain(404, "no such file\n");
      return {200, asset->first, asset->second, {}, nullptr};
    }
    if (!Authorized(r)) {
      bool html = r.header("accept").find("text/html") != std::string::npos;
      HttpResponse resp =
          html ? HttpResponse{401, "text/html; charset=utf-8", RenderLoginHtml(""), {}, nullptr}
               : Plain(401, "a bearer token is required\n");
      resp.headers.push_back({"WWW-Authenticate", "Bearer realm=\"gatosd\""});
      return resp;
    }
    if (path == "/metrics")
      return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_->Render(), {}, nullptr};
    if (path == "/events") return Events(r);
    if (path.size() > 11 && path.compare(0, 6, "/jobs/") == 0 &&
        path.compare(path.size() - 5, 5, "/live") == 0) {
      return LiveTail(path.substr(6, path.size() - 11));
    }

    bool as_json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    std::string base = as_json ? path.substr(0, path.size() - 5) : path;
    if (base == "/overview" && !as_json) base = "/";
    auto query = ParseQuery(r.query);
    const int64_t event_seq = live_->last_event_seq();
    Result<Page> page = Page{};
    if (base == "/" || base == "/overview") {
      page = Overview();
    } else if (base == "/jobs") {
      page = Jobs(query);
      if (page.ok() && !as_json && page->code == 303) {
        HttpResponse resp = Plain(303, "see " + page->data.value("location", "/jobs") + "\n");
        resp.headers.push_back({"Location", page->data.value("location", "/jobs")});
        return resp;
      }
    } else if (base.compare(0, 6, "/jobs/") == 0) {
      page = Job(base.substr(6));
    } else if (base == "/batches") {
      page = Batches();
    } else if (base.compare(0, 9, "/batches/") == 0) {
      page = Batch(base.substr(9), query);
    } else if (base == "/workers") {
      page = Workers();
    } else if (base == "/pools") {
      page = Pools();
    } else {
      page->code = 404;
      page->title = "Not found";
      page->data = {{"error", "no such page"}, {"path", TruncateUtf8(path, 200)}};
    }
    // The ledger could not be read: the page says so, and not how (the
    // message may name host paths).
    if (!page.ok()) return Plain(500, "internal error: the ledger could not be read\n");
    page->event_seq = event_seq;
    return Render(*page, as_json);
  } catch (const std::exception& e) {
    // A bug in a page (a JSON value of an unexpected type) must not take
    // the daemon down.
    return Plain(500, "internal error\n");
  }
}

HttpResponse Dashboard::Render(const Page& page, bool as_json) const {
  if (as_json) return {page.code, "application/json", Text(page.data) + "\n", {}, nullptr};
  return {page.code,
          "text/html; charset=utf-8",
          RenderPageHtml(page.title, page.live, page.data, page.event_seq),
          {},
          nullptr};
}

namespace {

// One turn of an event stream, after a wait of about a second: `out` when
// there is any, else a keepalive comment after 15 s of silence. False when
// the client is gone.
bool SendStreamTurn(HttpStream& s, const std::string& out, int* idle_ms) {
  if (!out.empty()) {
    if (!s.Write(out)) return false;
    *idle_ms = 0;
  } else if ((*idle_ms += 1000) >= 15000) {
    if (!s.Write(": keepalive\n\n")) return false;
    *idle_ms = 0;
  }
  return !s.ClientClosed(0);
}

}  // namespace

HttpResponse Dashboard::Events(const HttpRequest& r) {
  // From the newest event, or after the one a page was rendered at
  // (`?after=`), or after the last one a reconnecting browser saw
  // (Last-Event-ID, newer than the page's).
  int64_t after = live_->last_event_seq();
  auto seq_of = [](const std::string& v) {
    return !v.empty() && v.size() < 19 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::string last_id = r.header("last-event-id");
  const std::string from_page = ParseQuery(r.query)["after"];
  if (seq_of(last_id)) {
    after = std::stoll(last_id);
  } else if (seq_of(from_page)) {
    after = std::min<int64_t>(after, std::stoll(from_page));
  }
  HttpResponse resp{200, "text/event-stream; charset=utf-8", "", {}, nullptr};
  LiveState* live = live_;
  resp.stream = [live, after](HttpStream& s) mutable {
    if (!s.Write("retry: 2000\n: gatosd log events\n\n")) return;
    int idle_ms = 0;
    while (!s.stopping()) {
      std::vector<LiveEvent> events;
      bool reset = false;
      std::string out;
      if (live->WaitEvents(after, 1000, &events, &reset)) {
        if (reset) out += "event: reset\ndata: {}\n\n";
        for (const auto& e : events) {
          out += "id: " + std::to_string(e.seq) + "\nevent: log\ndata: " + e.data + "\n\n";
          after = e.seq;
        }
      }
      if (!SendStreamTurn(s, out, &idle_ms)) return;
    }
  };
  return resp;
}

HttpResponse Dashboard::Tlog(const std::string& name) const {
  const std::string dir = LogTree::DirFor(options_.ledger_dir);
  if (name == "checkpoint") {
    auto note = ReadFileToString(dir + "/checkpoint", 1 << 20);
    if (!note.ok()) return Plain(404, "no checkpoint yet (gatosd serve --checkpoint-s, or gatos checkpoint)\n");
    HttpResponse resp{200, "text/plain; charset=utf-8", *note, {}, nullptr};
    resp.headers.push_back({"Cache-Control", "no-cache"});
    return resp;
  }
  int level = 0, width = 0;
  uint64_t index = 0;
  if (!ParseTlogTilePath(name, &level, &index, &width)) return Plain(404, "no such tile\n");
  auto tile = ReadFileToString(dir + "/" + name, 256 * 32);
  if (!tile.ok()) return Plain(404, "no such tile\n");
  HttpResponse resp{200, "application/octet-stream", *tile, {}, nullptr};
  // A full tile never changes; a partial one is replaced as the log grows.
  resp.headers.push_back({"Cache-Control", width == 0 ? "public, max-age=31536000, immutable" : "no-cache"});
  return resp;
}

HttpResponse Dashboard::LiveTail(const std::string& id) {
  std::string hex = JobHexOf(id);
  if (hex.empty()) return Plain(404, "a job id is blake3: and 64 lowercase hex digits\n");
  if (!options_.subscribe) return Plain(503, "live output needs gatosd's NATS connection\n");
  if (!Refresh().ok()) return Plain(500, "internal error: the ledger could not be read\n");
  auto rec = index_->Get(hex);
  if (!rec.ok()) return Plain(500, "internal error: the ledger could not be read\n");
  if (!*rec) return Plain(404, "no such job in the ledger\n");
  // The dashboard is an operator's view (its token): it may follow any job.
  const std::string subject = LiveJobSubjects((*rec)->submitter_hex, hex);
  HttpResponse resp{200, "text/event-stream; charset=utf-8", "", {}, nullptr};
  auto subscribe = options_.subscribe;
  resp.stream = [subscribe, subject, hex](HttpStream& s) {
    // Filled on a NATS thread, drained here; bounded (a slow browser loses
    // events, never the daemon's memory).
    struct Queue {
      std::mutex mu;
      std::condition_variable cv;
      std::deque<std::string> events;
      size_t bytes = 0;
    };
    auto q = std::make_shared<Queue>();
    auto sub = subscribe(subject, [q, hex](Message m) {
      // Anyone allowed to publish there may send anything: parsed strictly,
      // then shown by the page as text (textContent), never as HTML.
      auto p = ParseLiveMessage(m.data);
      if (!p.ok() || p->job_hex != hex) return;
      json d = {{"attempt", p->attempt}, {"seq", p->seq}};
      std::string name;
      if (p->kind == LiveKind::kOutput) {
        name = "output";
        d["stream"] = p->stream;
        d["offset"] = p->offset;
        d["end"] = p->offset + static_cast<int64_t>(p->data.size());  // bytes, as offsets count
        d["text"] = p->data;
      } else {
        name = "progress";
        d["text"] = DescribeProgress(p->progress);
      }
      std::string ev = "event: " + name +
                       "\ndata: " + d.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
      std::lock_guard<std::mutex> l(q->mu);
      if (q->bytes + ev.size() > (1u << 20)) return;
      q->bytes += ev.size();
      q->events.push_back(std::move(ev));
      q->cv.notify_one();
    });
    if (!sub.ok()) {
      (void)s.Write("event: unavailable\ndata: {}\n\n");
      return;
    }
    if (!s.Write("retry: 5000\n: live output of job " + hex + "\n\n")) return;
    int idle_ms = 0;
    while (!s.stopping()) {
      std::deque<std::string> events;
      {
        std::unique_lock<std::mutex> l(q->mu);
        q->cv.wait_for(l, std::chrono::milliseconds(1000), [&] { return !q->events.empty(); });
        events.swap(q->events);
        q->bytes = 0;
      }
      std::string out;
      for (auto& e : events) out += e;
      if (!SendStreamTurn(s, out, &idle_ms)) return;
    }
  };
  return resp;
}

Status Dashboard::Refresh() {
  if (!ledger_) {
    GATOS_ASSIGN_OR_RETURN(ledger_, Ledger::Open(options_.ledger_dir));
    index_ = std::make_unique<StateIndex>(ledger_.get());
  }
  LiveState::Head h = live_->head();
  std::string head = h.log_commit;
  if (head.empty()) {
    GATOS_ASSIGN_OR_RETURN(head, ledger_->ResolveRef(kLogRef));
  }
  if (head.empty()) return FailedPreconditionError("the ledger has no log");
  if (head == indexed_head_) return OkStatus();
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_->ReadCommit(head));
  index_->Reset(c.tree);
  indexed_head_ = head;
  indexed_seq_ = h.seq;
  return OkStatus();
}

json Dashboard::KeyJson(const std::string& key_hex) const {
  if (key_hex.empty()) return nullptr;
  return {{"key", key_hex}, {"principal", live_->PrincipalOf(key_hex)}};
}

std::string Dashboard::JobName(const std::string& job_hex, const std::string& job_commit) {
  auto it = names_.find(job_hex);
  if (it != names_.end()) return it->second;
  std::string name;
  if (!job_commit.empty() && ledger_) {
    auto yaml = ledger_->ReadFileAtCommit(job_commit, "job.yaml", 1 << 20);
    if (yaml.ok()) {
      auto m = ParseManifest(*yaml, "job.yaml", ManifestFormat::kYaml);
      name = m.ok() ? CommandLine(*m) : "(unreadable manifest)";
    }
  }
  if (names_.size() >= kMaxNames) names_.clear();
  names_.emplace(job_hex, name);
  return name;
}

json Dashboard::JobRow(const JobRecord& r) {
  int64_t now = SystemNowMs();
  std::string worker = r.worker_hex;
  if (worker.empty() && r.claims.size() == 1) worker = r.claims.begin()->first;
  return {{"job", "blake3:" + r.job_hex},
          {"hex", r.job_hex},
          {"name", JobName(r.job_hex, r.job_commit)},
          {"state", JobStateName(RecordState(r, now))},
          {"submitter", KeyJson(r.submitter_hex)},
          {"worker", KeyJson(worker)},
          {"submitted", TimeJson(r.submitted_ms)},
          {"finished", TimeJson(r.finished_ms)},
          {"attempt", r.attempt}};
}

json Dashboard::JobRow(const JobSummary& s) {
  return {{"job", "blake3:" + s.job_hex},
          {"hex", s.job_hex},
          {"name", JobName(s.job_hex, s.job_commit)},
          {"state", JobStateName(s.state)},
          {"submitter", KeyJson(s.submitter_hex)},
          {"worker", KeyJson(s.worker_hex)},
          {"submitted", TimeJson(s.submitted_ms)},
          {"finished", TimeJson(s.finished_ms)},
          {"attempt", s.attempt}};
}

// ---- overview ----

Result<Dashboard::Page> Dashboard::Overview() {
  Page p;
  p.title = "Overview";
  p.live = "overview";
  int64_t now = SystemNowMs();
  LiveState::Head h = live_->head();
  MetricsSnapshot m = metrics_->Snapshot();
  json counts = json::object();
  for (size_t i = 0; i < h.stats.by_state.size(); ++i) {
    counts[std::string(JobStateName(static_cast<JobState>(i)))] = h.stats.by_state[i];
  }
  json series = json::array();
  uint64_t finished_hour = 0, submitted_hour = 0;
  for (const auto& pt : metrics_->Series(now)) {
    json c = json::object();
    for (const auto& [k, v] : pt.counts) c[k] = v;
    for (const char* s : {"succeeded", "failed", "timed-out", "aborted"}) {
      auto it = pt.counts.find(s);
      if (it != pt.counts.end()) finished_hour += it->second;
    }
    auto sub = pt.counts.find("submit");
    if (sub != pt.counts.end()) submitted_hour += sub->second;
    series.push_back({{"start", FormatRfc3339Millis(pt.start_ms)},
                      {"counts", c},
                      {"latency_count", pt.latency_count},
                      {"submit_to_claim_p50_s", pt.latency_p50_s},
                      {"submit_to_claim_p95_s", pt.latency_p95_s}});
  }
  json workers = json::array();
  int64_t recent = std::max<int64_t>(2 * h.lease_ms, 60000);
  for (const auto& w : live_->Workers()) {
    bool active = w.running > 0 || (w.last_seen_ms && now - w.last_seen_ms <= recent);
    if (!active) continue;
    workers.push_back({{"key", w.key_hex},
                       {"principal", w.principal},
                       {"running", w.running},
                       {"last_seen", TimeJson(w.last_seen_ms)},
                       {"last_kind", w.last_kind}});
  }
  json rejected = json::array();
  for (const auto& [k, v] : m.rejected)
    rejected.push_back({{"source", k.first}, {"reason", k.second}, {"count", v}});
  p.data = {
      {"ledger",
       {{"seq", h.seq}, {"log_commit", h.log_commit}, {"policy_commit", h.policy_commit}}},
      {"jobs", {{"total", h.stats.jobs}, {"pruned", h.stats.pruned}, {"by_state", counts}}},
      {"last_hour",
       {{"submitted", submitted_hour}, {"finished", finished_hour}, {"minutes", series}}},
      {"publish_backlog", m.backlog},
      {"published", m.published},
      {"nats_connected", m.nats_up},
      {"claim_latency_s", {{"p50", m.claim_p50_s}, {"p99", m.claim_p99_s}, {"count", m.claims}}},
      {"workers_active", workers},
      {"workers_active_means", "holding a lease, or seen (claim/renew) in the last " +
                                   std::to_string(recent / 1000) + " s"},
      {"rejected", rejected},
      {"now", FormatRfc3339Millis(now)}};
  return p;
}

// ---- jobs ----

Result<Dashboard::Page> Dashboard::Jobs(const std::map<std::string, std::string>& q) {
  Page p;
  p.title = "Jobs";
  p.live = "jobs";
  int64_t now = SystemNowMs();
  auto get = [&](const char* k) {
    auto it = q.find(k);
    return it == q.end() ? std::string() : TruncateUtf8(it->second, 200);
  };
  JobQuery jq;
  jq.limit = options_.page_size;
  std::string state = get("state"), submitter = get("submitter"), worker = get("worker"),
              since = get("since"), until = get("until"), search = get("q"), cursor = get("after");
  json filters = {{"state", state}, {"submitter", submitter}, {"worker", worker},
                  {"since", since}, {"until", until},         {"q", search}};
  json errors = json::array();
  if (!state.empty() && state != "live" && !ParseJobState(state))
    errors.push_back("state: not a state");
  // A key (hex or ed25519:hex) or a policy principal.
  auto key_of = [&](std::string v, const char* what) -> std::string {
    if (v.empty()) return "";
    if (v.compare(0, 8, "ed25519:") == 0) v = v.substr(8);
    if (IsLowerHex(v, 64)) return v;
    std::string k = live_->KeyOfPrincipal(v);
    if (k.empty())
      errors.push_back(std::string(what) + ": no key with that principal in the policy");
    return k.empty() ? std::string(64, 'x') : k;  // matches nothing
  };
  jq.state = state;
  jq.submitter_hex = key_of(submitter, "submitter");
  jq.worker_hex = key_of(worker, "worker");
  bool ok = true;
  jq.since_ms = ParseTime(since, now, &ok);
  if (!ok) errors.push_back("since: unix ms, RFC 3339 UTC or a duration like 2h");
  jq.until_ms = ParseTime(until, now, &ok);
  if (!ok) errors.push_back("until: unix ms, RFC 3339 UTC or a duration like 2h");

  std::string prefix = search;
  if (prefix.compare(0, 7, "blake3:") == 0) prefix = prefix.substr(7);
  std::transform(prefix.begin(), prefix.end(), prefix.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (!search.empty() && !IsHexPrefix(prefix))
    errors.push_back("q: a job id or a prefix of one (hex)");

  json rows = json::array();
  std::string next, source, covers;
  size_t scanned = 0;
  bool filtered =
      !state.empty() || !submitter.empty() || !worker.empty() || !since.empty() || !until.empty();
  if (!errors.empty()) {
    p.code = 400;
    source = "none";
  } else if (!search.empty()) {
    if (prefix.size() == 64) {
      p.code = 303;
      p.data = {{"location", "/jobs/" + prefix}};
      // The JSON twin answers with the job's row directly.
    }
    Status s = Refresh();
    GATOS_RETURN_IF_ERROR(s);
    source = "index";
    covers =
        "every job in the ledger whose id starts with the prefix (the state index is ordered by "
        "id)";
    std::string after = cursor.empty() || cursor < prefix ? prefix : cursor;
    if (prefix.size() == 64) {
      auto rec = index_->Get(prefix);
      if (rec.ok() && *rec) rows.push_back(JobRow(**rec));
    } else {
      std::vector<JobRecord> got;
      Status st = index_->ForEachJob(after, [&](const JobRecord& r) {
        if (r.job_hex.compare(0, prefix.size(), prefix) != 0) return false;
        ++scanned;
        if (got.size() == jq.limit) {
          next = got.back().job_hex;
          return false;
        }
        got.push_back(r);
        return true;
      });
      GATOS_RETURN_IF_ERROR(st);
      for (const auto& r : got) rows.push_back(JobRow(r));
    }
    if (p.code == 303) {
      p.data["jobs"] = rows;
      return p;
    }
  } else if (!filtered) {
    Status s = Refresh();
    GATOS_RETURN_IF_ERROR(s);
    source = "index";
    covers = "every job in the ledger, in id order (the state index)";
    std::vector<JobRecord> got;
    Status st = index_->ForEachJob(IsHexPrefix(cursor) ? cursor : "", [&](const JobRecord& r) {
      ++scanned;
      if (got.size() == jq.limit) {
        next = got.back().job_hex;
        return false;
      }
      got.push_back(r);
      return true;
    });
    GATOS_RETURN_IF_ERROR(st);
    for (const auto& r : got) rows.push_back(JobRow(r));
  } else {
    Status s = Refresh();  // job names are read from the ledger
    GATOS_RETURN_IF_ERROR(s);
    jq.cursor = cursor;
    bool live_only = state == "pending" || state == "claimed" || state == "live";
    JobPage page =
        live_only && jq.since_ms == 0 && jq.until_ms == 0 ? live_->Live(jq) : live_->Recent(jq);
    source = page.source;
    covers =
        page.source == "live"
            ? "every pending and claimed job (gatosd's live set), in id order"
            : "every pending and claimed job, and the " + std::to_string(live_->window_size()) +
                  " finished jobs that changed last (a window of at most " +
                  std::to_string(LiveState::kDefaultWindow) +
                  ", from the newest log batches), newest submission first; older finished jobs: "
                  "search by id";
    scanned = page.scanned;
    next = page.next;
    for (const auto& s2 : page.jobs) rows.push_back(JobRow(s2));
  }
  std::string next_url;
  if (!next.empty()) {
    next_url = "/jobs?";
    for (const auto& [k, v] : filters.items()) {
      std::string val = v.get<std::string>();
      if (!val.empty()) next_url += k + "=" + PercentEncode(val) + "&";
    }
    next_url += "after=" + PercentEncode(next);
  }
  p.data = {{"filters", filters},
            {"errors", errors},
            {"source", source},
            {"covers", covers},
            {"scanned", scanned},
            {"jobs", rows},
            {"next", next_url.empty() ? json(nullptr) : json(next_url)},
            {"first_page", cursor.empty()},
            {"live_jobs", live_->live_size()},
            {"window_jobs", live_->window_size()}};
  return p;
}

// ---- one job ----

json Dashboard::Verification(const JobRecord& r) {
  LiveState::Head h = live_->head();
  std::string key = r.job_hex + r.lease_commit + r.result_commit + r.cancel_commit +
                    h.policy_commit + std::to_string(r.pruned_ms);
  auto it = verdicts_.find(key);
  if (it != verdicts_.end()) return it->second;
  if (!auditor_ || auditor_policy_ != h.policy_commit) {
    auditor_ = std::make_unique<Auditor>(ledger_.get(), VerifyOptions{});
    auditor_policy_ = h.policy_commit;
  }
  json v;
  auto report = auditor_->VerifyJob(r.job_hex);
  if (!report.ok()) {
    v = {{"badge", "unavailable"}, {"ok", false}, {"detail", report.status().message()}};
  } else {
    json full = AuditReportToJson(*report);
    const ResultCheck* fail = report->first_failure();
    std::string badge = fail ? "failed" : report->has_result ? "verified" : "no result yet";
    v = {{"badge", badge},
         {"ok", report->ok()},
         {"state", report->state},
         {"dev_mode", report->dev_mode},
         {"first_failure",
          fail ? json{{"name", fail->name}, {"detail", fail->detail}} : json(nullptr)},
         {"checks", full.value("checks", json::array())}};
  }
  v["commands"] = {
      "git clone --mirror LEDGER ledger.git   # LEDGER: this ledger's URL or path (" +
          options_.ledger_dir + ")",
      "gatos verify --repo ledger.git blake3:" + r.job_hex + " --ledger-key ledger.pub"};
  if (verdicts_.size() >= kMaxVerdicts) verdicts_.clear();
  verdicts_.emplace(key, v);
  return v;
}

Result<Dashboard::Page> Dashboard::Job(const std::string& id) {
  Page p;
  std::string hex = JobHexOf(id);
  if (hex.empty()) {
    p.code = 404;
    p.title = "Not found";
    p.data = {{"error", "a job id is blake3: and 64 lowercase hex digits"}};
    return p;
  }
  p.title = "Job " + hex.substr(0, 12);
  p.live = "job:" + hex;
  Status s = Refresh();
  GATOS_RETURN_IF_ERROR(s);
  auto rec = index_->Get(hex);
  if (!rec.ok()) return rec.status();
  if (!*rec) {
    p.code = 404;
    p.data = {{"error", "no such job in the ledger"}, {"job", "blake3:" + hex}};
    return p;
  }
  const JobRecord& r = **rec;
  int64_t now = SystemNowMs();
  json d = JobRow(r);
  d["record"] = json::parse(EncodeJobRecord(r));
  // The manifest, as stored and as parsed.
  json manifest = json::object();
  auto yaml = ledger_->ReadFileAtCommit(r.job_commit, "job.yaml", 1 << 20);
  if (yaml.ok()) {
    manifest["raw"] = TruncateUtf8(*yaml, options_.output_cap);
    manifest["raw_bytes"] = yaml->size();
    auto m = ParseManifest(*yaml, "job.yaml", ManifestFormat::kYaml);
    if (m.ok()) {
      manifest["command"] = m->command;
      manifest["args"] = m->args;
      manifest["timeout_seconds"] = m->timeout_seconds;
      manifest["env"] = m->env ? json(*m->env) : json::object();
      manifest["cwd"] = m->cwd ? json(*m->cwd) : json(nullptr);
    } else {
      manifest["error"] = TruncateUtf8(m.status().message(), 2000);
    }
  } else {
    manifest["error"] = yaml.status().message();
  }
  d["manifest"] = manifest;

  // The timeline, from the commits the record names.
  json timeline = json::array();
  auto add = [&](int64_t t, const std::string& event, const std::string& key,
                 const std::string& commit, const std::string& detail) {
    timeline.push_back({{"time_ms", t},
                        {"time", TimeJson(t)},
                        {"event", event},
                        {"by", KeyJson(key)},
                        {"commit", commit},
                        {"detail", detail}});
  };
  add(r.submitted_ms, "submitted", r.submitter_hex, r.job_commit, "");
  std::string lease = r.lease_commit;
  size_t read = 0;
  while (!lease.empty()) {
    if (read == kMaxLeaseChain) {
      add(0, "earlier leases", "", lease,
          "older lease commits not shown (" + std::to_string(kMaxLeaseChain) + " read)");
      break;
    }
    auto c = ledger_->ReadCommit(lease);
    if (!c.ok()) break;
    auto info = ParseLeaseCommitMessage(c->message);
    if (!info.ok()) break;
    ++read;
    std::string event = info->kind == "renew"      ? "renewed"
                        : info->kind == "takeover" ? "taken over"
                                                   : "claimed";
    add(info->expires_ms - info->lease_ms, event, info->worker_hex, lease,
        "attempt " + std::to_string(info->attempt) + ", epoch " + std::to_string(info->epoch) +
            ", expires " + FormatRfc3339Millis(info->expires_ms));
    lease = c->parents.size() >= 2 ? c->parents[1] : "";
  }
  for (const auto* commit : {&r.cancel_commit, &r.retry_commit}) {
    if (commit->empty()) continue;
    auto c = ledger_->ReadCommit(*commit);
    if (!c.ok()) continue;
    auto info = ParseUserRequestCommitMessage(c->message);
    if (!info.ok()) continue;
    add(info->recorded_at_ms, info->retry ? "re-run requested" : "cancel requested",
        info->requester_hex, *commit,
        info->retry ? "opens attempt " + std::to_string(info->attempt) : "");
  }
  for (const auto& a : r.attempts) {
    add(a.finished_ms, "attempt " + std::to_string(a.n) + " ended", "", a.result_commit,
        a.status + ", epoch " + std::to_string(a.epoch));
  }
  JobState state = RecordState(r, now);
  if (!r.result_commit.empty()) {
    add(r.finished_ms, "result: " + r.result_status,
        d["worker"].is_object() ? d["worker"]["key"].get<std::string>() : "", r.result_commit, "");
  } else if (state == JobState::kAborted && r.finished_ms) {
    add(r.finished_ms, "aborted", "", "", "cancelled; the lease ran out");
  }
  if (r.pruned_ms) add(r.pruned_ms, "refs pruned", "", "", "the record stays in the log");
  std::vector<json> tl(timeline.begin(), timeline.end());
  std::stable_sort(tl.begin(), tl.end(), [](const json& a, const json& b) {
    int64_t ta = a["time_ms"].get<int64_t>(), tb = b["time_ms"].get<int64_t>();
    if (ta == 0 || tb == 0) return ta != 0 && tb == 0;  // unknown times last
    return ta < tb;
  });
  d["timeline"] = tl;

  // The result: PoE, outputs, stdout/stderr, findings.
  if (!r.result_commit.empty()) {
    json res = {{"commit", r.result_commit}, {"status", r.result_status}};
    auto poe_bytes = ledger_->ReadFileAtCommit(r.result_commit, kPoeFileName, 1 << 20);
    auto poe = poe_bytes.ok() ? ParsePoe(*poe_bytes) : Result<Poe>(poe_bytes.status());
    if (poe.ok()) {
      res["worker"] = KeyJson(poe->worker_id.size() > 8 ? poe->worker_id.substr(8) : "");
      res["exit_code"] = poe->exit_code ? json(*poe->exit_code) : json(nullptr);
      res["signal"] = poe->signal ? json(*poe->signal) : json(nullptr);
      res["timed_out"] = poe->timed_out;
      res["reason"] = poe->reason;
      if (poe->limits.Any()) res["limits"] = JobLimitsText(poe->limits, poe->unenforced);
      if (poe->usage.Any()) res["usage"] = JobUsageText(poe->usage);
      res["started_at"] = poe->started_at;
      res["finished_at"] = poe->finished_at;
      res["runner"] = {{"program", poe->runner_program},
                       {"version", poe->runner_version},
                       {"platform", poe->runner_platform}};
      res["poe_hash"] = Blake3Tagged(*poe_bytes);
      json outs = json::array();
      bool has_findings = false;
      for (const auto& o : poe->outputs) {
        outs.push_back({{"path", o.path}, {"size", o.size}, {"hash", o.hash}});
        if (o.path == "outputs/findings.jsonl") has_findings = true;
      }
      res["outputs"] = outs;
      for (const char* stream : {"stdout", "stderr"}) {
        auto text = ledger_->ReadFileAtCommit(r.result_commit, stream, 8 << 20);
        if (!text.ok()) continue;
        bool cut = text->size() > options_.output_cap;
        bool truncated =
            std::string(stream) == "stdout" ? poe->stdout_truncated : poe->stderr_truncated;
        res[stream] = {{"text", TruncateUtf8(*text, options_.output_cap)},
                       {"bytes", text->size()},
                       {"shown_cut", cut},
                       {"truncated_by_worker", truncated}};
      }
      if (has_findings) d["findings"] = FindingsBySecret(*ledger_, r.result_commit);
    } else {
      res["error"] = poe.status().message();
    }
    d["result"] = res;
  }
  d["verification"] = Verification(r);
  p.data = d;
  return p;
}

// ---- batches ----

Result<const Dashboard::BatchInfo*> Dashboard::ReadBatch(const std::string& hex,
                                                         const std::string& commit) {
  auto it = batches_.find(hex);
  if (it != batches_.end() && it->second.commit == commit) return &it->second;
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_->ReadCommit(commit));
  GATOS_ASSIGN_OR_RETURN(std::string text,
                         ledger_->ReadFileAtCommit(commit, "batch.json", 64 << 20));
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return DataLossError("batch.json of batch " + hex + " is not a JSON object");
  BatchInfo b;
  b.commit = commit;
  b.time_ms = c.time_s * 1000;
  b.tmpl = j.value("template", "");
  if (j.contains("jobs") && j["jobs"].is_array()) {
    for (const auto& row : j["jobs"]) {
      if (!row.is_object()) continue;
      std::string repo =
          row.contains("repo") && row["repo"].is_string() ? row["repo"].get<std::string>() : "";
      std::string job = row.contains("job") && row["job"].is_string()
                            ? JobHexOf(row["job"].get<std::string>())
                            : "";
      std::string err =
          row.contains("error") && row["error"].is_string() ? row["error"].get<std::string>() : "";
      b.jobs.push_back({TruncateUtf8(repo, 1024), job});
      b.errors.push_back(TruncateUtf8(err, 1024));
    }
  }
  if (batches_.size() > 1000) batches_.clear();
  return &(batches_[hex] = std::move(b));
}

// A job's state: the LiveState when it holds the job; else a cached read of
// the index, valid while no job evicted from the window changed after it.
std::string Dashboard::StateOf(const std::string& job_hex) {
  if (job_hex.empty()) return "not submitted";
  if (auto s = live_->Find(job_hex)) return std::string(JobStateName(s->state));
  auto it = states_.find(job_hex);
  if (it != states_.end() && it->second.seq >= live_->evicted_watermark()) return it->second.state;
  auto rec = index_->Get(job_hex);
  std::string state = !rec.ok() ? "unreadable"
                      : !*rec   ? "not in the ledger"
                                : std::string(JobStateName(RecordState(**rec, SystemNowMs())));
  if (states_.size() >= kMaxStates) states_.clear();
  states_[job_hex] = {state, indexed_seq_};
  return state;
}

Result<Dashboard::Page> Dashboard::Batches() {
  Page p;
  p.title = "Batches";
  p.live = "batches";
  Status s = Refresh();
  GATOS_RETURN_IF_ERROR(s);
  auto refs = ledger_->ListRefs(kBatchPrefix);
  if (!refs.ok()) return refs.status();
  std::vector<std::pair<const BatchInfo*, std::string>> list;
  json errors = json::array();
  for (const auto& ref : *refs) {
    std::string hex = ref.substr(std::string(kBatchPrefix).size());
    auto commit = ledger_->ResolveRef(ref);
    if (!commit.ok() || commit->empty()) continue;
    auto b = ReadBatch(hex, *commit);
    if (!b.ok()) {
      errors.push_back({{"batch", hex}, {"error", b.status().message()}});
      continue;
    }
    list.push_back({*b, hex});
  }
  std::sort(list.begin(), list.end(),
            [](const auto& a, const auto& b) { return a.first->time_ms > b.first->time_ms; });
  json rows = json::array();
  for (size_t i = 0; i < list.size() && i < kMaxBatchesListed; ++i) {
    const BatchInfo& b = *list[i].first;
    std::map<std::string, size_t> by_state;
    for (const auto& [repo, job] : b.jobs) ++by_state[StateOf(job)];
    size_t done = 0;
    for (const char* st : {"succeeded", "failed", "timed-out", "aborted"}) done += by_state[st];
    json states = json::object();
    for (const auto& [k, v] : by_state) states[k] = v;
    rows.push_back({{"batch", "blake3:" + list[i].second},
                    {"hex", list[i].second},
                    {"created", TimeJson(b.time_ms)},
                    {"template", b.tmpl},
                    {"repositories", b.jobs.size()},
                    {"finished", done},
                    {"by_state", states}});
  }
  p.data = {{"batches", rows}, {"total", list.size()}, {"shown", rows.size()}, {"errors", errors}};
  return p;
}

Result<Dashboard::Page> Dashboard::Batch(const std::string& id,
                                         const std::map<std::string, std::string>& q) {
  Page p;
  std::string hex = JobHexOf(id);
  p.title = "Batch " + hex.substr(0, 12);
  p.live = "batches";
  if (hex.empty()) {
    p.code = 404;
    p.data = {{"error", "a batch id is blake3: and 64 lowercase hex digits"}};
    return p;
  }
  Status s = Refresh();
  GATOS_RETURN_IF_ERROR(s);
  auto commit = ledger_->ResolveRef(kBatchPrefix + hex);
  if (!commit.ok() || commit->empty()) {
    p.code = 404;
    p.data = {{"error", "no such batch"}, {"batch", "blake3:" + hex}};
    return p;
  }
  auto b = ReadBatch(hex, *commit);
  if (!b.ok()) return b.status();
  size_t offset = 0;
  auto it = q.find("offset");
  if (it != q.end() && !it->second.empty() && it->second.size() < 10 &&
      std::all_of(it->second.begin(), it->second.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    offset = std::stoul(it->second);
  }
  json rows = json::array();
  std::map<std::string, size_t> by_state;
  const BatchInfo& info = **b;
  for (size_t i = 0; i < info.jobs.size(); ++i) {
    std::string st = StateOf(info.jobs[i].second);
    ++by_state[st];
    if (i < offset || rows.size() >= kBatchRowsPerPage) continue;
    rows.push_back({{"repo", info.jobs[i].first},
                    {"job", info.jobs[i].second.empty() ? json(nullptr)
                                                        : json("blake3:" + info.jobs[i].second)},
                    {"hex", info.jobs[i].second},
                    {"state", st},
                    {"error", info.errors[i]}});
  }
  json states = json::object();
  for (const auto& [k, v] : by_state) states[k] = v;
  std::string next;
  if (offset + kBatchRowsPerPage < info.jobs.size()) {
    next = "/batches/" + hex + "?offset=" + std::to_string(offset + kBatchRowsPerPage);
  }
  p.data = {{"batch", "blake3:" + hex},
            {"hex", hex},
            {"created", TimeJson(info.time_ms)},
            {"template", info.tmpl},
            {"repositories", info.jobs.size()},
            {"by_state", states},
            {"rows", rows},
            {"offset", offset},
            {"next", next.empty() ? json(nullptr) : json(next)}};
  return p;
}

// ---- workers ----

Result<Dashboard::Page> Dashboard::Workers() {
  Page p;
  p.title = "Workers";
  p.live = "workers";
  json rows = json::array();
  for (const auto& w : live_->Workers()) {
    json jobs = json::array();
    for (const auto& j : w.running_jobs) jobs.push_back("blake3:" + j);
    rows.push_back({{"key", w.key_hex},
                    {"worker_id", "ed25519:" + w.key_hex},
                    {"principal", w.principal},
                    {"allowed", w.allowed},
                    {"running", w.running},
                    {"running_jobs", jobs},
                    {"last_seen", TimeJson(w.last_seen_ms)},
                    {"last_kind", w.last_kind},
                    {"finished_since_start", w.finished_since_start}});
  }
  p.data = {{"workers", rows},
            {"last_seen_means",
             "the worker's latest claim, takeover or renewal recorded by this gatosd; "
             "at start, the request time of the leases it holds"}};
  return p;
}

Result<Dashboard::Page> Dashboard::Pools() {
  Page p;
  p.title = "Pools";
  p.live = "pools";
  json snap = json::parse(live_->pools(), nullptr, false);
  if (!snap.is_object()) {
    p.data = {{"pools", json::array()}, {"submitters", json::array()}, {"as_of", nullptr}};
    return p;
  }
  json subs = json::array();
  for (const auto& s : snap.value("submitters", json::array())) {
    json row = s;
    const std::string key = s.value("submitter", "");
    row["principal"] = live_->PrincipalOf(key.rfind("ed25519:", 0) == 0 ? key.substr(8) : key);
    subs.push_back(std::move(row));
  }
  p.data = {{"pools", snap.value("pools", json::array())},
            {"submitters", std::move(subs)},
            {"as_of", FormatRfc3339Millis(snap.value("now_ms", int64_t{0}))}};
  return p;
}

}  // namespace gatos::gatosd
