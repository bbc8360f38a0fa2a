#include "dashboard_html.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "dashboard.h"
#include "gatos/model/encoding.h"
#include "http.h"

namespace gatos::gatosd {

using nlohmann::json;

std::string HtmlEscape(std::string_view text) {
  // Well-formed UTF-8 first, so that no byte sequence can end an attribute
  // or a tag in a browser's decoder.
  // (Each bad byte becomes 3 bytes: room for all of them.)
  std::string clean = TruncateUtf8(text, text.size() * 3);
  std::string out;
  out.reserve(clean.size() + clean.size() / 8);
  for (char ch : clean) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && ch != '\n' && ch != '\t') || c == 0x7f) {
          out += "\xEF\xBF\xBD";
        } else {
          out.push_back(ch);
        }
    }
  }
  return out;
}

namespace {

std::string E(std::string_view s) { return HtmlEscape(s); }

// A JSON value as display text (strings unquoted).
std::string S(const json& j) {
  if (j.is_null()) return "";
  if (j.is_string()) return j.get<std::string>();
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}
std::string ES(const json& j) { return E(S(j)); }
std::string Field(const json& j, const char* k) {
  return j.is_object() && j.contains(k) ? S(j[k]) : "";
}

std::string Short(const std::string& hex) {
  return hex.size() > 16 ? hex.substr(0, 12) + "…" : hex;
}

std::string StateBadge(const std::string& state) {
  std::string cls = "st";
  for (char c : state) cls += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return "<span class=\"badge " + E(cls) + "\" data-state=\"" + E(state) + "\">" + E(state) +
         "</span>";
}

// A key as its principal (when the policy names it), linking to its jobs.
std::string KeyHtml(const json& k, const char* filter) {
  if (!k.is_object()) return "<span class=\"muted\">–</span>";
  std::string key = Field(k, "key"), principal = Field(k, "principal");
  std::string label = principal.empty() ? Short(key) : principal;
  return "<a class=\"key\" title=\"ed25519:" + E(key) + "\" href=\"/jobs?" + filter + "=" +
         E(PercentEncode(key)) + "\">" + E(label) + "</a>";
}

std::string JobLink(const json& row) {
  std::string hex = Field(row, "hex");
  return "<a class=\"job\" href=\"/jobs/" + E(hex) + "\" title=\"blake3:" + E(hex) + "\">" +
         E(Short(hex)) + "</a>";
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// 60 bars, one per minute; `b` (optional) stacked on `a`.
std::string SvgBars(const std::vector<double>& a, const std::vector<double>& b,
                    const std::string& label_a, const std::string& label_b,
                    const std::string& unit) {
  const int w = 360, h = 90, pad = 14;
  double max = 0;
  for (size_t i = 0; i < a.size(); ++i) max = std::max(max, a[i] + (i < b.size() ? b[i] : 0));
  std::string out = "<svg class=\"chart\" viewBox=\"0 0 " + std::to_string(w) + " " +
                    std::to_string(h) + "\" width=\"" + std::to_string(w) + "\" height=\"" +
                    std::to_string(h) + "\" role=\"img\" aria-label=\"" + E(label_a) + "\">";
  double bw = static_cast<double>(w) / std::max<size_t>(a.size(), 1);
  for (size_t i = 0; i < a.size(); ++i) {
    double ha = max > 0 ? a[i] / max * (h - pad) : 0;
    double hb = max > 0 && i < b.size() ? b[i] / max * (h - pad) : 0;
    double x = static_cast<double>(i) * bw;
    if (ha > 0) {
      out += "<rect class=\"a\" x=\"" + Num(x) + "\" y=\"" + Num(h - ha) + "\" width=\"" +
             Num(bw - 1) + "\" height=\"" + Num(ha) + "\"><title>" + E(Num(a[i])) + " " + E(unit) +
             "</title></rect>";
    }
    if (hb > 0) {
      out += "<rect class=\"b\" x=\"" + Num(x) + "\" y=\"" + Num(h - ha - hb) + "\" width=\"" +
             Num(bw - 1) + "\" height=\"" + Num(hb) + "\"><title>" + E(Num(b[i])) + " " + E(unit) +
             "</title></rect>";
    }
  }
  out += "<text x=\"2\" y=\"11\">max " + E(Num(max)) + " " + E(unit) + "</text></svg>";
  out += "<div class=\"legend\"><span class=\"la\">" + E(label_a) + "</span>";
  if (!label_b.empty()) out += " <span class=\"lb\">" + E(label_b) + "</span>";
  out += " <span class=\"muted\">(last 60 minutes)</span></div>";
  return out;
}

std::string Overview(const json& d) {
  std::string o = "<h1>Overview</h1><section class=\"cards\">";
  const json& by = d["jobs"]["by_state"];
  for (const char* st : {"pending", "claimed", "succeeded", "failed", "timed-out", "aborted"}) {
    o += "<a class=\"card\" href=\"/jobs?state=" + std::string(st) +
         "\"><span class=\"n\" id=\"count-" + st + "\">" + ES(by.value(st, json(0))) + "</span>" +
         StateBadge(st) + "</a>";
  }
  o += "<div class=\"card\"><span class=\"n\">" + ES(d["jobs"]["total"]) +
       "</span>jobs in the ledger</div>";
  o += "<div class=\"card\"><span class=\"n\">" + ES(d["publish_backlog"]) +
       "</span>publish backlog</div></section>";
  std::vector<double> ok, bad, p50, p95, sub;
  for (const auto& m : d["last_hour"]["minutes"]) {
    const json& c = m["counts"];
    ok.push_back(c.value("succeeded", 0.0));
    bad.push_back(c.value("failed", 0.0) + c.value("timed-out", 0.0) + c.value("aborted", 0.0));
    sub.push_back(c.value("submit", 0.0));
    p50.push_back(m.value("submit_to_claim_p50_s", 0.0));
    p95.push_back(std::max(
        0.0, m.value("submit_to_claim_p95_s", 0.0) - m.value("submit_to_claim_p50_s", 0.0)));
  }
  o += "<section class=\"charts\"><div><h2>Throughput</h2>" +
       SvgBars(ok, bad, "succeeded / min", "failed, timed out, aborted", "jobs") + "<p>" +
       ES(d["last_hour"]["finished"]) + " finished, " + ES(d["last_hour"]["submitted"]) +
       " submitted in the last hour</p></div>";
  o += "<div><h2>Latency</h2>" + SvgBars(p50, p95, "submit → claim p50", "p95", "s") +
       "<p>claim RPC p50 " + ES(d["claim_latency_s"]["p50"]) + " s, p99 " +
       ES(d["claim_latency_s"]["p99"]) + " s (bucket bounds)</p></div>";
  o += "</section>";
  o += "<section><h2>Active workers</h2><p class=\"muted\">" + ES(d["workers_active_means"]) +
       "</p>";
  if (d["workers_active"].empty()) {
    o += "<p>none</p>";
  } else {
    o += "<table><tr><th>worker</th><th>running</th><th>last seen</th><th></th></tr>";
    for (const auto& w : d["workers_active"]) {
      o += "<tr><td>" + KeyHtml(json{{"key", w["key"]}, {"principal", w["principal"]}}, "worker") +
           "</td><td>" + ES(w["running"]) + "</td><td>" + ES(w["last_seen"]) + "</td><td>" +
           ES(w["last_kind"]) + "</td></tr>";
    }
    o += "</table>";
  }
  o += "</section><section><h2>Rejected pushes and submissions</h2>";
  if (d["rejected"].empty()) {
    o += "<p>none since gatosd started</p>";
  } else {
    o += "<table><tr><th>source</th><th>reason</th><th>count</th></tr>";
    for (const auto& r : d["rejected"]) {
      o += "<tr><td>" + ES(r["source"]) + "</td><td>" + ES(r["reason"]) + "</td><td>" +
           ES(r["count"]) + "</td></tr>";
    }
    o += "</table>";
  }
  if (d.contains("replica") && d["replica"].is_object()) {
    const json& r = d["replica"];
    o += "<p class=\"replica\">replica " + ES(r["name"]) + " · " + ES(r["role"]) + " · term " + ES(r["term"]) +
         " · lag " + ES(r["lag_ms"]) + " ms</p>";
  }
  o += "</section><p class=\"muted\">log sequence " + ES(d["ledger"]["seq"]) + " · NATS " +
       (d.value("nats_connected", false) ? "connected" : "disconnected") + " · " + ES(d["now"]) +
       "</p>";
  return o;
}

std::string JobsTable(const json& rows) {
  std::string o =
      "<table class=\"jobs\"><tr><th>job</th><th>command</th><th>state</th><th>submitter</th>"
      "<th>worker</th><th>submitted</th><th>finished</th></tr>";
  for (const auto& r : rows) {
    o += "<tr><td>" + JobLink(r) + "</td><td class=\"cmd\">" + ES(r["name"]) + "</td><td>" +
         StateBadge(Field(r, "state")) + "</td><td>" + KeyHtml(r["submitter"], "submitter") +
         "</td><td>" + KeyHtml(r["worker"], "worker") + "</td><td>" + ES(r["submitted"]) +
         "</td><td>" + ES(r["finished"]) + "</td></tr>";
  }
  return o + "</table>";
}

std::string Jobs(const json& d) {
  const json& f = d["filters"];
  std::string o = "<h1>Jobs</h1><form class=\"filters\" method=\"get\" action=\"/jobs\">";
  o += "<label>id <input name=\"q\" value=\"" + ES(f["q"]) +
       "\" placeholder=\"prefix\" size=\"14\"></label>";
  o += "<label>state <select name=\"state\"><option value=\"\">any</option>";
  for (const char* st :
       {"live", "pending", "claimed", "succeeded", "failed", "timed-out", "aborted"}) {
    o += std::string("<option") + (Field(f, "state") == st ? " selected" : "") + ">" + st +
         "</option>";
  }
  o += "</select></label>";
  o += "<label>submitter <input name=\"submitter\" value=\"" + ES(f["submitter"]) +
       "\" size=\"12\"></label>";
  o +=
      "<label>worker <input name=\"worker\" value=\"" + ES(f["worker"]) + "\" size=\"12\"></label>";
  o += "<label>since <input name=\"since\" value=\"" + ES(f["since"]) +
       "\" placeholder=\"1h\" size=\"8\"></label>";
  o += "<label>until <input name=\"until\" value=\"" + ES(f["until"]) + "\" size=\"8\"></label>";
  o += "<button>filter</button></form>";
  for (const auto& e : d["errors"]) o += "<p class=\"error\">" + ES(e) + "</p>";
  o += "<p class=\"muted covers\">" + ES(d["covers"]) + "</p>";
  o += JobsTable(d["jobs"]);
  if (d["jobs"].empty()) o += "<p>no jobs</p>";
  o += "<p class=\"pager\">";
  if (!d.value("first_page", true)) o += "<a href=\"/jobs\">first page</a> ";
  if (d["next"].is_string()) o += "<a rel=\"next\" href=\"" + ES(d["next"]) + "\">next page →</a>";
  return o + "</p>";
}

std::string Pre(const json& text, const char* id) {
  return std::string("<pre class=\"out\" id=\"") + id + "\">" + ES(text) + "</pre>";
}

std::string Job(const json& d) {
  std::string hex = Field(d, "hex");
  std::string o = "<h1>Job <span class=\"mono\">" + E(Short(hex)) +
                  "</span> <span id=\"job-state\">" + StateBadge(Field(d, "state")) +
                  "</span></h1>";
  o += "<p class=\"mono small\">blake3:" + E(hex) + "</p>";
  if (Field(d, "state") == "claimed") {
    // Filled by the script from /jobs/<hex>/live (text only, never HTML).
    o += "<section id=\"live-section\"><h2>Live output <span class=\"muted\">as the worker "
         "publishes it "
         "(best effort; the result is the record)</span></h2><p id=\"live-progress\" "
         "class=\"muted\"></p>"
         "<pre class=\"out\" id=\"live-output\" data-src=\"/jobs/" +
         E(hex) + "/live\"></pre></section>";
  }
  const json& v = d["verification"];
  std::string badge = Field(v, "badge");
  o += "<section class=\"verify\"><h2>Verification <span id=\"verify-badge\" class=\"vb vb-" +
       E(badge == "verified" ? "ok"
         : badge == "failed" ? "bad"
                             : "none") +
       "\">" + E(badge) + "</span></h2>";
  if (v.contains("first_failure") && v["first_failure"].is_object()) {
    o += "<p class=\"error\">" + ES(v["first_failure"]["name"]) + ": " +
         ES(v["first_failure"]["detail"]) + "</p>";
  }
  if (v.contains("detail")) o += "<p class=\"error\">" + ES(v["detail"]) + "</p>";
  o += "<p>Computed by the auditor's checks (gatos verify) on this ledger. Offline:</p><pre "
       "class=\"cmds\">";
  for (const auto& c : v["commands"]) o += ES(c) + "\n";
  o += "</pre>";
  if (v.contains("checks")) {
    o += "<details><summary>" + std::to_string(v["checks"].size()) + " checks</summary><table>";
    for (const auto& c : v["checks"]) {
      o += "<tr><td>" + std::string(c.value("ok", false) ? "✔" : "✘") + "</td><td>" +
           ES(c["name"]) + "</td><td>" + ES(c["detail"]) + "</td></tr>";
    }
    o += "</table></details>";
  }
  o += "</section>";
  o += "<section><h2>Timeline</h2><table "
       "id=\"timeline\"><tr><th>time</th><th>event</th><th>by</th><th>detail</th>"
       "<th>commit</th></tr>";
  for (const auto& t : d["timeline"]) {
    o += "<tr><td>" + ES(t["time"]) + "</td><td class=\"ev\">" + ES(t["event"]) + "</td><td>" +
         KeyHtml(t["by"], "worker") + "</td><td>" + ES(t["detail"]) +
         "</td><td class=\"mono\" title=\"" + ES(t["commit"]) + "\">" +
         E(Short(Field(t, "commit"))) + "</td></tr>";
  }
  o += "</table></section>";
  const json& m = d["manifest"];
  o += "<section><h2>Manifest</h2>";
  if (m.contains("command")) {
    o += "<table><tr><th>command</th><td class=\"mono\" id=\"manifest-command\">";
    for (const auto& a : m["command"]) o += "<span class=\"arg\">" + ES(a) + "</span> ";
    for (const auto& a : m["args"]) o += "<span class=\"arg\">" + ES(a) + "</span> ";
    o += "</td></tr><tr><th>timeout</th><td>" + ES(m["timeout_seconds"]) + " s</td></tr>";
    if (!m["cwd"].is_null()) o += "<tr><th>cwd</th><td>" + ES(m["cwd"]) + "</td></tr>";
    o += "<tr><th>env</th><td><table class=\"env\">";
    for (const auto& [k, val] : m["env"].items())
      o += "<tr><td>" + E(k) + "</td><td>" + ES(val) + "</td></tr>";
    o += "</table></td></tr></table>";
  }
  if (m.contains("error")) o += "<p class=\"error\">" + ES(m["error"]) + "</p>";
  o += "<details><summary>job.yaml (" + ES(m.value("raw_bytes", json(0))) + " bytes)</summary>" +
       Pre(m.value("raw", json("")), "manifest-raw") + "</details></section>";
  if (d.contains("result")) {
    const json& r = d["result"];
    o += "<section><h2>Result</h2><table><tr><th>status</th><td>" + StateBadge(Field(r, "status")) +
         "</td></tr>";
    o += "<tr><th>worker</th><td>" + KeyHtml(r.value("worker", json(nullptr)), "worker") +
         "</td></tr>";
    std::string exit;
    if (!r.value("exit_code", json(nullptr)).is_null()) exit += "code " + ES(r["exit_code"]);
    if (!r.value("signal", json(nullptr)).is_null()) exit += " signal " + ES(r["signal"]);
    if (r.value("timed_out", false)) exit += " (timed out)";
    exit += " " + ES(r.value("reason", json("")));
    o += "<tr><th>exit</th><td>" + exit + "</td></tr>";
    if (r.contains("limits")) o += "<tr><th>limits</th><td>" + ES(r["limits"]) + "</td></tr>";
    if (r.contains("usage")) o += "<tr><th>used</th><td>" + ES(r["usage"]) + "</td></tr>";
    o += "<tr><th>ran</th><td>" + ES(r.value("started_at", json(""))) + " → " +
         ES(r.value("finished_at", json(""))) + "</td></tr>";
    o += "<tr><th>commit</th><td class=\"mono\">" + ES(r["commit"]) + "</td></tr>";
    o += "<tr><th>poe.json</th><td class=\"mono\">" + ES(r.value("poe_hash", json(""))) +
         "</td></tr></table>";
    if (r.contains("error")) o += "<p class=\"error\">" + ES(r["error"]) + "</p>";
    o += "<h3>Proof-of-execution outputs</h3><table "
         "id=\"outputs\"><tr><th>path</th><th>bytes</th><th>hash</th></tr>";
    for (const auto& out : r.value("outputs", json::array())) {
      o += "<tr><td class=\"mono\">" + ES(out["path"]) + "</td><td>" + ES(out["size"]) +
           "</td><td class=\"mono\">" + ES(out["hash"]) + "</td></tr>";
    }
    o += "</table>";
    for (const char* stream : {"stdout", "stderr"}) {
      if (!r.contains(stream)) continue;
      const json& s = r[stream];
      o += "<h3>" + std::string(stream) + " <span class=\"muted\">" + ES(s["bytes"]) + " bytes" +
           (s.value("shown_cut", false) ? ", first part shown" : "") +
           (s.value("truncated_by_worker", false) ? ", cut by the worker's cap" : "") +
           "</span></h3>" + Pre(s["text"], stream);
    }
    o += "</section>";
  }
  if (d.contains("findings")) {
    // One row per distinct secret, with where and when it was seen.
    const json& f = d["findings"];
    if (f.contains("error")) {
      o += "<section><h2>Scan findings</h2><p class=\"error\">" + ES(f["error"]) + "</p></section>";
    } else {
      o += "<section><h2>Scan findings <span class=\"muted\">" + ES(f["count"]) + " secrets in " +
           ES(f["locations"]) +
           " locations</span></h2><table id=\"findings\"><tr><th>rule</th>"
           "<th>fingerprint</th><th>locations</th><th>first commit</th><th>last commit</th>"
           "<th>at tip</th><th>paths</th></tr>";
      for (const auto& row : f["rows"]) {
        const json& tip = row["at_tip"];
        const std::string at_tip = tip.is_boolean() ? (tip.get<bool>() ? "yes" : "no") : "?";
        o += "<tr><td>" + ES(row["rule"]) + "</td><td class=\"mono\">" + ES(row["fingerprint"]) +
             "</td><td>" + ES(row["locations"]) + "</td><td class=\"mono\">" +
             E(Short(Field(row, "first_commit"))) + "</td><td class=\"mono\">" +
             E(Short(Field(row, "last_commit"))) + "</td><td>" + at_tip +
             "</td><td class=\"mono\">" + ES(row["paths"]) + "</td></tr>";
      }
      o += "</table></section>";
    }
  }
  o += "<details><summary>ledger record</summary><pre>" +
       E(d["record"].dump(2, ' ', false, json::error_handler_t::replace)) + "</pre></details>";
  return o;
}

std::string Progress(const json& by, size_t total) {
  std::string o = "<span class=\"progress\">";
  for (const char* st : {"succeeded", "failed", "timed-out", "aborted", "claimed", "pending"}) {
    double n = by.value(st, 0.0);
    if (n <= 0 || total == 0) continue;
    o += "<span class=\"seg st" + std::string(st) + "\" title=\"" + st + " " + Num(n) + "\">" + st +
         " " + std::to_string(static_cast<long long>(n)) + "</span>";
  }
  for (const auto& [k, v] : by.items()) {
    static const std::vector<std::string> known = {"succeeded", "failed",  "timed-out",
                                                   "aborted",   "claimed", "pending"};
    if (std::find(known.begin(), known.end(), k) == known.end())
      o += "<span class=\"seg\">" + E(k) + " " + ES(v) + "</span>";
  }
  return o + "</span>";
}

std::string Batches(const json& d) {
  std::string o = "<h1>Batches</h1><p class=\"muted\">" + ES(d["shown"]) + " newest of " +
                  ES(d["total"]) + "</p>";
  o += "<table><tr><th>batch</th><th>created</th><th>repositories</th><th>finished</"
       "th><th>progress</th></tr>";
  for (const auto& b : d["batches"]) {
    o += "<tr><td><a class=\"mono\" href=\"/batches/" + ES(b["hex"]) + "\">" +
         E(Short(Field(b, "hex"))) + "</a></td><td>" + ES(b["created"]) + "</td><td>" +
         ES(b["repositories"]) + "</td><td>" + ES(b["finished"]) + "</td><td>" +
         Progress(b["by_state"], b.value("repositories", 0)) + "</td></tr>";
  }
  o += "</table>";
  for (const auto& e : d["errors"])
    o += "<p class=\"error\">" + ES(e["batch"]) + ": " + ES(e["error"]) + "</p>";
  return o;
}

std::string Batch(const json& d) {
  std::string o = "<h1>Batch <span class=\"mono\">" + E(Short(Field(d, "hex"))) + "</span></h1>";
  o += "<p class=\"mono small\">" + ES(d["batch"]) + " · template " + ES(d["template"]) +
       " · created " + ES(d["created"]) + "</p>";
  o += "<p>" + ES(d["repositories"]) +
       " repositories: " + Progress(d["by_state"], d.value("repositories", 0)) + "</p>";
  o += "<table><tr><th>repository</th><th>job</th><th>state</th><th>error</th></tr>";
  for (const auto& r : d["rows"]) {
    o += "<tr><td class=\"mono\">" + ES(r["repo"]) + "</td><td>" +
         (r["job"].is_string() ? JobLink(r) : std::string("–")) + "</td><td>" +
         StateBadge(Field(r, "state")) + "</td><td>" + ES(r["error"]) + "</td></tr>";
  }
  o += "</table>";
  if (d["next"].is_string())
    o += "<p class=\"pager\"><a href=\"" + ES(d["next"]) + "\">next →</a></p>";
  return o;
}

std::string Workers(const json& d) {
  std::string o =
      "<h1>Workers</h1><p class=\"muted\">last seen: " + ES(d["last_seen_means"]) + "</p>";
  o += "<table "
       "id=\"workers\"><tr><th>principal</th><th>key</th><th>allowed</th><th>running</th><th>last "
       "seen</th>"
       "<th>finished since start</th></tr>";
  for (const auto& w : d["workers"]) {
    o += "<tr><td>" + ES(w["principal"]) +
         "</td><td class=\"mono\"><a href=\"/jobs?worker=" + ES(w["key"]) + "\" title=\"" +
         ES(w["worker_id"]) + "\">" + E(Short(Field(w, "key"))) + "</a></td><td>" +
         (w.value("allowed", false) ? "yes" : "no (revoked?)") + "</td><td>" + ES(w["running"]);
    for (const auto& j : w["running_jobs"]) {
      std::string hex = S(j).substr(std::min<size_t>(7, S(j).size()));
      o += " <a class=\"mono\" href=\"/jobs/" + E(hex) + "\">" + E(Short(hex)) + "</a>";
    }
    o += "</td><td>" + ES(w["last_seen"]) + " " + ES(w["last_kind"]) + "</td><td>" +
         ES(w["finished_since_start"]) + "</td></tr>";
  }
  return o + "</table>";
}

// A count against its limit: "3 / 10", or "3" when 0 (no limit).
std::string OfLimit(const json& n, const json& max) {
  const std::string limit = max.is_number_integer() && max.get<int64_t>() > 0 ? " / " + ES(max) : "";
  return ES(n) + limit;
}

std::string Pools(const json& d) {
  std::string o = "<h1>Pools</h1><p class=\"muted\">the scheduler as of " + ES(d["as_of"]) +
                  " (docs/scheduling.md); workers: those whose heartbeat named the pool in the last minute</p>";
  o += "<table id=\"pools\"><tr><th>pool</th><th>pending</th><th>offered</th><th>running</th><th>paused</th>"
       "<th>workers</th></tr>";
  for (const auto& p : d["pools"]) {
    const bool paused = p.value("paused", false);
    o += "<tr><td>" + ES(p["pool"]) + "</td><td>" + ES(p["pending"]) + "</td><td>" + ES(p["offered"]) + "</td><td>" +
         OfLimit(p["running"], p.value("max_running", json())) + "</td><td>" + (paused ? "<b>paused</b>" : "no") +
         "</td><td>" + ES(p["workers"]) + (p.value("workers", 0) == 0 && p.value("pending", 0) > 0
                                             ? " <span class=\"error\">no worker serves this pool</span>"
                                             : "") +
         "</td></tr>";
  }
  o += "</table><h2>Submitters</h2><p class=\"muted\">usage against the policy's limits, the busiest first "
       "(at most 100)</p><table id=\"submitters\"><tr><th>submitter</th><th>key</th><th>pending</th>"
       "<th>running</th><th>submissions per minute (limit)</th></tr>";
  for (const auto& s : d["submitters"]) {
    o += "<tr><td>" + ES(s["principal"]) + "</td><td class=\"mono\"><a href=\"/jobs?submitter=" + ES(s["submitter"]) +
         "\">" + E(Short(Field(s, "submitter"))) + "</a></td><td>" + OfLimit(s["pending"], s["max_pending"]) +
         "</td><td>" + OfLimit(s["running"], s["max_running"]) + "</td><td>" +
         (s.value("per_minute", 0) > 0 ? ES(s["per_minute"]) : std::string("no limit")) + "</td></tr>";
  }
  return o + "</table>";
}

std::string Schedules(const json& d) {
  std::string o =
      "<h1>Schedules</h1><p class=\"muted\">overdue: ticks more than 5 s old since the last fire that have not "
      "fired (gatos verify reports the whole history of missed ticks)</p>";
  o += "<table id=\"schedules\"><tr><th>name</th><th>state</th><th>when</th><th>catch-up</th><th>next "
       "tick</th><th>last fire</th><th>overdue</th></tr>";
  for (const auto& s : d["schedules"]) {
    const std::string when = s.contains("every")   ? "every " + Field(s, "every")
                             : s.contains("watch") ? "watch " + std::to_string(s["watch"].size()) +
                                                         " repo(s), read every " + Field(s, "poll")
                                                   : Field(s, "cron") + " (" + Field(s, "tz") + ")";
    std::string last = s["last_fire"].is_string() ? Field(s, "last_fire") : "-";
    o += "<tr><td>" + ES(s["name"]) + "</td><td>" + ES(s["state"]) + "</td><td class=\"mono\">" + E(when) +
         "</td><td>" + ES(s["catch_up"]) + "</td><td>" +
         (s["next_tick"].is_string() ? ES(s["next_tick"]) : std::string("-")) + "</td><td>" + E(last) +
         "</td><td>" + ES(s["overdue"]) + "</td></tr>";
  }
  return o + "</table>";
}

std::string TwinPath(const std::string& live, const json& d) {
  if (live == "overview") return "/overview.json";
  if (live == "jobs") return "/jobs.json";
  if (live.compare(0, 4, "job:") == 0) return "/jobs/" + live.substr(4) + ".json";
  if (live == "workers") return "/workers.json";
  if (live == "pools") return "/pools.json";
  if (live == "schedules") return "/schedules.json";
  if (live == "batches")
    return d.contains("rows") ? "/batches/" + Field(d, "hex") + ".json" : "/batches.json";
  return "";
}

std::string Layout(const std::string& title, const std::string& live, const std::string& body,
                   const std::string& twin, int64_t event_seq = 0) {
  std::string o =
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>" +
      E(title) +
      " · GATOS</title><link rel=\"stylesheet\" href=\"/static/style.css\">"
      "<script src=\"/static/app.js\" defer></script></head><body data-live=\"" +
      E(live) + "\" data-seq=\"" + std::to_string(event_seq) +
      "\">"
      "<header><a class=\"brand\" href=\"/\">GATOS</a><nav><a href=\"/\">Overview</a><a "
      "href=\"/jobs\">Jobs</a>"
      "<a href=\"/batches\">Batches</a><a href=\"/workers\">Workers</a><a href=\"/pools\">Pools</a>"
      "<a href=\"/schedules\">Schedules</a></nav>"
      "<span id=\"live\" class=\"live-off\">static</span></header><main id=\"main\">" +
      body;
  if (!twin.empty()) o += "<p class=\"twin\"><a href=\"" + E(twin) + "\">this page as JSON</a></p>";
  return o + "</main></body></html>\n";
}

constexpr char kStyle[] = R"CSS(
:root{--fg:#1d232b;--muted:#66707c;--line:#e2e6ea;--bg:#f7f8fa;--ok:#1a7f37;--bad:#c62828;--run:#0b63c5;--wait:#8a6d00}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;gap:1.5em;align-items:center;padding:.6em 1.2em;background:#1d232b;color:#fff}
header a{color:#fff;text-decoration:none}header nav a{margin-right:1em;opacity:.85}.brand{font-weight:700;letter-spacing:.08em}
#live{margin-left:auto;font-size:12px;padding:.1em .6em;border-radius:1em}.live-on{background:var(--ok)}.live-off{background:#555}
main{padding:1em 1.4em;max-width:1200px}h1{font-size:20px;margin:.3em 0}h2{font-size:16px;margin:1.2em 0 .4em}h3{font-size:14px}
table{border-collapse:collapse;background:#fff;margin:.3em 0}td,th{border-bottom:1px solid var(--line);padding:.3em .6em;text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted)}a{color:var(--run)}.mono,pre,.cmd{font-family:ui-monospace,monospace;font-size:12.5px}
.small{font-size:12px}.muted{color:var(--muted)}.error{color:var(--bad)}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:.5em .9em;min-width:110px;color:var(--fg);text-decoration:none}
.card .n{display:block;font-size:22px;font-weight:600}
.badge{display:inline-block;padding:0 .5em;border-radius:.8em;font-size:12px;background:#ddd;color:#222}
.stsucceeded{background:#d6f0dc;color:var(--ok)}.stfailed,.sttimed-out{background:#fbdada;color:var(--bad)}.staborted{background:#eee;color:#555}
.stclaimed{background:#d8e8fb;color:var(--run)}.stpending{background:#fbf1cc;color:var(--wait)}
.charts{display:flex;flex-wrap:wrap;gap:2em}.chart{background:#fff;border:1px solid var(--line)}.chart rect.a{fill:#3b82c4}.chart rect.b{fill:#e0795f}
.chart text{font-size:10px;fill:var(--muted)}.legend .la::before{content:"■ ";color:#3b82c4}.legend .lb::before{content:"■ ";color:#e0795f}
pre.out,pre.cmds{background:#fff;border:1px solid var(--line);padding:.6em;max-height:28em;overflow:auto;white-space:pre-wrap;word-break:break-all}
.vb{padding:.1em .6em;border-radius:.8em;font-size:13px}.vb-ok{background:var(--ok);color:#fff}.vb-bad{background:var(--bad);color:#fff}.vb-none{background:#ccc}
.filters{display:flex;flex-wrap:wrap;gap:.8em;align-items:end;margin:.5em 0}.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
.progress .seg{display:inline-block;margin-right:.3em;padding:0 .4em;border-radius:.6em;font-size:12px;background:#eee}
.arg{background:#eef1f4;padding:0 .3em;border-radius:3px}.twin{margin-top:2em;font-size:12px}
)CSS";

constexpr char kScript[] =
    R"JS(// Live updates: the server's event stream says which jobs a committed log
// batch changed; a page that shows one of them fetches itself again and swaps
// in its <main>, rendered (and escaped) by the server. No reload, no HTML
// built here.
(function () {
  'use strict';
  var body = document.body;
  var page = body.getAttribute('data-live') || '';
  var badge = document.getElementById('live');
  if (!page || !window.EventSource || !window.fetch) return;
  var timer = null, last = 0, busy = false;
  function refresh() {
    timer = null;
    if (busy) { schedule(); return; }
    busy = true;
    last = Date.now();
    var failed = false;
    fetch(location.href, {credentials: 'same-origin', cache: 'no-store'})
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var fresh = doc.getElementById('main'), cur = document.getElementById('main');
        if (fresh && cur) {
          var open = {};
          cur.querySelectorAll('details[open] > summary').forEach(function (s) { open[s.textContent] = true; });
          fresh = document.adoptNode(fresh);
          fresh.querySelectorAll('details > summary').forEach(function (s) { if (open[s.textContent]) s.parentNode.open = true; });
          cur.replaceWith(fresh);
          body.setAttribute('data-refreshed', String(Date.now()));
        }
      })
      .catch(function () { failed = true; })
      .then(function () { busy = false; if (failed) schedule(); });  // a lost refresh is tried again
  }
  function schedule() {
    if (timer) return;
    timer = setTimeout(refresh, Math.max(0, 1000 - (Date.now() - last)));
  }
  function relevant(d) {
    if (page.indexOf('job:') !== 0) return true;
    var hex = page.slice(4);
    return (d.more || 0) > 0 || (d.changes || []).some(function (c) { return c.job === hex; });
  }
  // A running job's page tails its output: text appended with textContent,
  // kept here across refreshes of <main>, at most the last 64 KiB.
  var tail = null, tailText = '', tailProgress = '', tailNext = {stdout: 0, stderr: 0};
  function showTail() {
    var pre = document.getElementById('live-output'), p = document.getElementById('live-progress');
    if (pre) pre.textContent = tailText;
    if (p) p.textContent = tailProgress;
    if (pre && !tail && window.EventSource) {
      tail = new EventSource(pre.getAttribute('data-src'));
      tail.addEventListener('output', function (ev) {
        var d;
        try { d = JSON.parse(ev.data); } catch (e) { return; }
        var next = tailNext[d.stream] || 0;
        if (d.end <= next) return;  // seen already
        if (d.offset > next) tailText += '\n[' + (d.offset - next) + ' bytes not shown live]\n';
        tailNext[d.stream] = d.end;
        tailText = (tailText + String(d.text || '')).slice(-65536);
        showTail();
      });
      tail.addEventListener('progress', function (ev) {
        try { tailProgress = String(JSON.parse(ev.data).text || ''); } catch (e) { return; }
        showTail();
      });
    } else if (!pre && tail) {
      tail.close();
      tail = null;
    }
  }
  showTail();
  new MutationObserver(showTail).observe(body, {attributes: true, attributeFilter: ['data-refreshed']});
  // From the event the page was rendered at: a change that lands between
  // the render and this line still refreshes the page.
  var seq = body.getAttribute('data-seq') || '0';
  var es = new EventSource(/^[1-9][0-9]*$/.test(seq) ? '/events?after=' + seq : '/events');
  es.onopen = function () { badge.className = 'live-on'; badge.textContent = 'live'; };
  es.onerror = function () { badge.className = 'live-off'; badge.textContent = 'reconnecting'; };
  es.addEventListener('log', function (ev) {
    var d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    if (relevant(d)) schedule();
  });
  es.addEventListener('reset', schedule);
})();
)JS";

}  // namespace

std::string RenderPageHtml(const std::string& title, const std::string& live, const json& data, int64_t event_seq) {
  std::string body;
  if (data.contains("error")) {
    body = "<h1>" + E(title) + "</h1><p class=\"error\">" + ES(data["error"]) + "</p>";
    return Layout(title, "", body, "");
  }
  if (live == "overview") {
    body = Overview(data);
  } else if (live == "jobs") {
    body = Jobs(data);
  } else if (live.compare(0, 4, "job:") == 0) {
    body = Job(data);
  } else if (live == "batches") {
    body = data.contains("rows") ? Batch(data) : Batches(data);
  } else if (live == "pools") {
    body = Pools(data);
  } else if (live == "workers") {
    body = Workers(data);
  } else if (live == "schedules") {
    body = Schedules(data);
  }
  return Layout(title, live, body, TwinPath(live, data), event_seq);
}

std::string RenderLoginHtml(const std::string& message) {
  std::string body = "<h1>Sign in</h1>";
  if (!message.empty()) body += "<p class=\"error\">" + E(message) + "</p>";
  body +=
      "<p>This gatosd dashboard needs the token from its <span "
      "class=\"mono\">--http-token-file</span>. "
      "Scripts send <span class=\"mono\">Authorization: Bearer TOKEN</span>.</p>"
      "<form method=\"post\" action=\"/login\"><input type=\"password\" name=\"token\" "
      "autocomplete=\"current-password\" "
      "size=\"40\"> <button>sign in</button></form>";
  return Layout("Sign in", "", body, "");
}

std::optional<std::pair<std::string, std::string>> StaticAsset(std::string_view name) {
  if (name == "style.css")
    return std::make_pair(std::string("text/css; charset=utf-8"), std::string(kStyle));
  if (name == "app.js")
    return std::make_pair(std::string("text/javascript; charset=utf-8"), std::string(kScript));
  return std::nullopt;
}

}  // namespace gatos::gatosd
