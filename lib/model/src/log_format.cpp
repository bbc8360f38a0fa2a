#include "gatos/model/log_format.h"

#include <array>
#include <cstdlib>

#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"
#include "gatos/model/trailers.h"

namespace gatos {
namespace {

constexpr std::array<std::pair<LogKind, std::string_view>, 18> kKinds = {{
    {LogKind::kInit, "init"},       {LogKind::kSubmit, "submit"},   {LogKind::kClaim, "claim"},
    {LogKind::kTakeover, "takeover"}, {LogKind::kRenew, "renew"},   {LogKind::kResult, "result"},
    {LogKind::kAttempt, "attempt"}, {LogKind::kCancel, "cancel"},   {LogKind::kAbort, "abort"},
    {LogKind::kRetry, "retry"},     {LogKind::kRevoke, "revoke"},   {LogKind::kPrune, "prune"},
    {LogKind::kPolicy, "policy"},   {LogKind::kWitness, "witness"}, {LogKind::kBatch, "batch"},
    {LogKind::kSchedule, "schedule"}, {LogKind::kFire, "fire"},
    {LogKind::kWatch, "watch"},
}};

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

Result<int64_t> ParseCount(std::string_view s, std::string_view what) {
  if (s.empty() || s.size() > 18) return InvalidArgumentError(std::string(what) + ": not a number");
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgumentError(std::string(what) + ": not a number");
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::string_view LogKindName(LogKind k) {
  for (const auto& [kind, name] : kKinds) {
    if (kind == k) return name;
  }
  return "unknown";
}

Result<LogKind> ParseLogKind(std::string_view s) {
  for (const auto& [kind, name] : kKinds) {
    if (name == s) return kind;
  }
  return InvalidArgumentError("unknown log kind \"" + std::string(s.substr(0, 20)) + "\"");
}

std::string EncodeBatch(const std::vector<LogEntry>& entries) {
  std::string out;
  out.reserve(entries.size() * 200);
  for (const LogEntry& e : entries) {
    out += LogKindName(e.kind);
    out += ' ';
    out += Dash(e.job_hex);
    out += ' ';
    out += Dash(e.ref);
    out += ' ';
    out += Dash(e.old_id);
    out += ' ';
    out += Dash(e.new_id);
    out += '\n';
  }
  return out;
}

Result<std::vector<LogEntry>> DecodeBatch(std::string_view text) {
  std::vector<LogEntry> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return InvalidArgumentError("batch line " + std::to_string(line_no) + ": no final newline");
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    std::array<std::string_view, 5> f;
    size_t fpos = 0;
    for (int i = 0; i < 5; ++i) {
      size_t sp = i < 4 ? line.find(' ', fpos) : std::string_view::npos;
      if (i < 4 && sp == std::string_view::npos) {
        return InvalidArgumentError("batch line " + std::to_string(line_no) + ": expected 5 fields");
      }
      f[i] = line.substr(fpos, i < 4 ? sp - fpos : std::string_view::npos);
      fpos = sp + 1;
    }
    auto bad = [&](const std::string& m) {
      return InvalidArgumentError("batch line " + std::to_string(line_no) + ": " + m);
    };
    if (f[4].find(' ') != std::string_view::npos) return bad("expected 5 fields");
    LogEntry e;
    auto kind = ParseLogKind(f[0]);
    if (!kind.ok()) return bad(kind.status().message());
    e.kind = *kind;
    if (f[1] != "-") {
      if (!IsLowerHex(f[1], 64)) return bad("job is not 64 lowercase hex");
      e.job_hex = std::string(f[1]);
    }
    if (f[2] != "-") {
      if (f[2].substr(0, 11) != "refs/gatos/" || f[2].size() > 512) return bad("ref is not under refs/gatos/");
      e.ref = std::string(f[2]);
    }
    for (int i : {3, 4}) {
      if (f[i] == "-") continue;
      if (!IsLowerHex(f[i], 40)) return bad("object id is not 40 lowercase hex");
      (i == 3 ? e.old_id : e.new_id) = std::string(f[i]);
    }
    if (e.ref.empty() && (!e.old_id.empty() || !e.new_id.empty())) return bad("ids without a ref");
    if (!e.ref.empty() && e.old_id == e.new_id) return bad("a ref change that changes nothing");
    out.push_back(std::move(e));
  }
  return out;
}

std::string EncodeLogMessage(const LogCommitInfo& info) {
  std::string title = "gatos log " + std::to_string(info.seq) + ":";
  if (info.counts.empty()) {
    title += " no transitions";
  } else {
    bool first = true;
    for (const auto& [kind, n] : info.counts) {
      title += (first ? " " : ", ") + std::to_string(n) + " " + kind;
      first = false;
    }
  }
  CommitMessage m;
  m.body = title;
  m.trailers = {{"Log-Seq", std::to_string(info.seq)},
                {"Log-Time", FormatRfc3339Millis(info.time_ms)},
                {"Ledger-Key", "ed25519:" + info.ledger_key_hex},
                {"Policy", info.policy_commit}};
  if (info.term > 0) m.trailers.push_back({"Ledger-Term", std::to_string(info.term)});
  return FormatCommitMessage(m);
}

Result<LogCommitInfo> ParseLogMessage(std::string_view message) {
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(message));
  LogCommitInfo info;
  GATOS_ASSIGN_OR_RETURN(std::string seq, RequireUniqueTrailer(m.trailers, "Log-Seq"));
  GATOS_ASSIGN_OR_RETURN(info.seq, ParseCount(seq, "Log-Seq"));
  GATOS_ASSIGN_OR_RETURN(std::string t, RequireUniqueTrailer(m.trailers, "Log-Time"));
  GATOS_ASSIGN_OR_RETURN(info.time_ms, ParseRfc3339Millis(t));
  GATOS_ASSIGN_OR_RETURN(std::string key, RequireUniqueTrailer(m.trailers, "Ledger-Key"));
  if (key.rfind("ed25519:", 0) != 0 || !IsLowerHex(std::string_view(key).substr(8), 64)) {
    return InvalidArgumentError("Ledger-Key: expected ed25519:<64 hex>");
  }
  info.ledger_key_hex = key.substr(8);
  GATOS_ASSIGN_OR_RETURN(info.policy_commit, RequireUniqueTrailer(m.trailers, "Policy"));
  if (!IsLowerHex(info.policy_commit, 40)) return InvalidArgumentError("Policy: expected a 40-hex commit id");
  if (FindTrailer(m.trailers, "Ledger-Term")) {
    GATOS_ASSIGN_OR_RETURN(std::string term, RequireUniqueTrailer(m.trailers, "Ledger-Term"));
    GATOS_ASSIGN_OR_RETURN(info.term, ParseCount(term, "Ledger-Term"));
    if (info.term < 1) return InvalidArgumentError("Ledger-Term: expected a term >= 1");
  }
  return info;
}

}  // namespace gatos
