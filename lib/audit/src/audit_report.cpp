// The auditor's state file and mirror record, and the report as JSON
// (log_audit.h).
#include "gatos/audit/log_audit.h"
#include "gatos/model/time_format.h"

#include "replay_internal.h"

namespace gatos {

// ---- the state file ----

std::string EncodeAuditState(const AuditState& s) {
  return "gatos-audit-state 1\nledger " + s.ledger_root + "\nhead " + s.head + "\nseq " + std::to_string(s.seq) +
         "\nverified-at " + FormatRfc3339Millis(s.verified_at_ms) + "\n";
}

namespace {

// Lines "key value" in exactly the order of `keys`, the first one the
// format's name with version 1; returns the values.
Result<std::vector<std::string>> ParseKeyLines(std::string_view text, const std::vector<const char*>& keys,
                                               const char* what) {
  if (text.size() > 4096) return InvalidArgumentError(std::string("a ") + what + " is at most 4096 bytes");
  std::vector<std::string> values;
  size_t pos = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string where = "line " + std::to_string(i + 1) + ": ";
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return InvalidArgumentError(where + "expected \"" + keys[i] + " ...\" ending with a newline");
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != keys[i]) {
      return InvalidArgumentError(where + "expected \"" + keys[i] + " ...\"");
    }
    std::string v(line.substr(sp + 1));
    if (i == 0 && v != "1") {
      return InvalidArgumentError(where + "unknown " + what + " version \"" + v.substr(0, 20) + "\"");
    }
    values.push_back(std::move(v));
  }
  if (pos != text.size()) {
    return InvalidArgumentError("line " + std::to_string(keys.size() + 1) + ": unexpected text after " +
                                keys.back());
  }
  return values;
}

// The values of ParseKeyLines, read by type; errors name the line.
struct KeyLines {
  std::vector<std::string> v;
  static std::string Where(size_t i) { return "line " + std::to_string(i + 1) + ": "; }
  Result<std::string> Commit(size_t i) const {
    if (!IsLowerHex(v[i], 40)) return InvalidArgumentError(Where(i) + "expected a 40-hex commit id");
    return v[i];
  }
  Result<int64_t> Seq(size_t i) const {
    const std::string& s = v[i];
    if (s.empty() || s.size() > 18 || s[0] == '0' || s.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgumentError(Where(i) + "expected a positive sequence number");
    }
    return std::stoll(s);
  }
  Result<int64_t> Time(size_t i) const {
    auto t = ParseRfc3339Millis(v[i]);
    if (!t.ok()) return InvalidArgumentError(Where(i) + t.status().message());
    return *t;
  }
};

}  // namespace

Result<AuditState> ParseAuditState(std::string_view text) {
  GATOS_ASSIGN_OR_RETURN(auto values, ParseKeyLines(text, {"gatos-audit-state", "ledger", "head", "seq", "verified-at"},
                                                     "state file"));
  KeyLines k{std::move(values)};
  AuditState s;
  GATOS_ASSIGN_OR_RETURN(s.ledger_root, k.Commit(1));
  GATOS_ASSIGN_OR_RETURN(s.head, k.Commit(2));
  GATOS_ASSIGN_OR_RETURN(s.seq, k.Seq(3));
  GATOS_ASSIGN_OR_RETURN(s.verified_at_ms, k.Time(4));
  return s;
}

std::string EncodeMirrorRecord(const MirrorRecord& m) {
  return "gatos-mirror 1\nlog-before " + m.log_before + "\nseq-before " + std::to_string(m.seq_before) +
         "\nlog-after " + m.log_after + "\nseq-after " + std::to_string(m.seq_after) + "\nfetched-at " +
         FormatRfc3339Millis(m.fetched_at_ms) + "\n";
}

Result<MirrorRecord> ParseMirrorRecord(std::string_view text) {
  GATOS_ASSIGN_OR_RETURN(auto values, ParseKeyLines(text,
                                                     {"gatos-mirror", "log-before", "seq-before", "log-after",
                                                      "seq-after", "fetched-at"},
                                                     "mirror record"));
  KeyLines k{std::move(values)};
  MirrorRecord m;
  GATOS_ASSIGN_OR_RETURN(m.log_before, k.Commit(1));
  GATOS_ASSIGN_OR_RETURN(m.log_after, k.Commit(3));
  GATOS_ASSIGN_OR_RETURN(m.seq_before, k.Seq(2));
  GATOS_ASSIGN_OR_RETURN(m.seq_after, k.Seq(4));
  if (m.seq_after < m.seq_before) {
    return InvalidArgumentError(KeyLines::Where(4) + "seq-after is before seq-before (the log only grows)");
  }
  GATOS_ASSIGN_OR_RETURN(m.fetched_at_ms, k.Time(5));
  return m;
}

AuditState LogAuditReport::state() const {
  AuditState s;
  s.ledger_root = ledger_root;
  s.head = head;
  s.seq = seq;
  return s;
}

nlohmann::json LogAuditReportToJson(const LogAuditReport& r) {
  using nlohmann::json;
  json problems = json::array();
  for (const auto& p : r.problems) {
    json j = {{"check", p.check}, {"detail", p.detail}};
    if (p.seq) j["seq"] = p.seq;
    if (!p.job_hex.empty()) j["job_id"] = "blake3:" + p.job_hex;
    if (!p.ref.empty()) j["ref"] = p.ref;
    problems.push_back(std::move(j));
  }
  json reruns = json::array();
  for (const auto& j : r.reruns) {
    json runs = json::array();
    for (const auto& x : j.runs) {
      runs.push_back({{"attempt", x.attempt},
                      {"epoch", x.epoch},
                      {"worker_id", "ed25519:" + x.worker_hex},
                      {"status", x.status},
                      {"result_commit", x.result_commit},
                      {"final", x.final}});
    }
    reruns.push_back({{"job_id", "blake3:" + j.job_hex}, {"runs", runs}});
  }
  json witnesses = json::array();
  for (const auto& w : r.witnesses) {
    witnesses.push_back({{"ref", w.ref},
                         {"commit", w.commit},
                         {"key", w.key_hex.empty() ? "" : "ed25519:" + w.key_hex},
                         {"seq", w.seq},
                         {"log_commit", w.log_commit},
                         {"ok", w.ok},
                         {"detail", w.detail}});
  }
  json missed = json::array();
  for (const auto& m : r.missed_ticks) {
    missed.push_back({{"schedule", m.schedule},
                      {"count", m.count},
                      {"first", FormatRfc3339Millis(m.first_ms)},
                      {"last", FormatRfc3339Millis(m.last_ms)}});
  }
  return {{"ok", r.ok()},
          {"ledger", r.ledger_root},
          {"head", r.head},
          {"seq", r.seq},
          {"from_seq", r.from_seq},
          {"incremental", r.incremental},
          {"log_commits", r.commits},
          {"transitions", r.transitions},
          {"results", r.results},
          {"jobs_touched", r.jobs_touched},
          {"refs_checked", r.refs_checked},
          {"refs_settling", r.refs_settling},
          {"refs_behind", r.refs_behind},
          {"behind_refs", r.behind_refs},
          {"settling_after", r.settling_after},
          {"dev_mode_jobs", r.dev_mode_jobs},
          {"by_kind", r.by_kind},
          {"forked", r.forked},
          {"problems", problems},
          {"reruns", reruns},
          {"witnesses", witnesses},
          {"fires", r.fires},
          {"missed_ticks", missed}};
}

}  // namespace gatos
