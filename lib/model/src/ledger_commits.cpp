#include "gatos/model/ledger_commits.h"

#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"
#include "gatos/model/trailers.h"

namespace gatos {
namespace {

Result<std::string> Prefixed(const std::vector<Trailer>& t, const char* key, const char* prefix,
                             size_t hex_len) {
  GATOS_ASSIGN_OR_RETURN(std::string v, RequireUniqueTrailer(t, key));
  std::string p = prefix;
  if (v.compare(0, p.size(), p) != 0 || !IsLowerHex(std::string_view(v).substr(p.size()), hex_len)) {
    return InvalidArgumentError(std::string(key) + ": expected " + p + "<" + std::to_string(hex_len) + " hex>");
  }
  return v.substr(p.size());
}

Result<int64_t> Number(const std::vector<Trailer>& t, const char* key, int64_t min) {
  GATOS_ASSIGN_OR_RETURN(std::string v, RequireUniqueTrailer(t, key));
  if (v.empty() || v.size() > 18) return InvalidArgumentError(std::string(key) + ": expected an integer");
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return InvalidArgumentError(std::string(key) + ": expected an integer");
    n = n * 10 + (c - '0');
  }
  if (n < min) return InvalidArgumentError(std::string(key) + ": must be at least " + std::to_string(min));
  return n;
}

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

}  // namespace

std::string FormatLeaseCommitMessage(const LeaseCommitInfo& i) {
  CommitMessage m;
  m.body = "gatos: " + i.kind + " job " + Short(i.job_hex) + " by worker " + Short(i.worker_hex) +
           " (epoch " + std::to_string(i.epoch) + ", attempt " + std::to_string(i.attempt) + ")";
  m.trailers = {
      {"Job-Id", "blake3:" + i.job_hex},
      {"Worker-Id", "ed25519:" + i.worker_hex},
      {"Lease-Epoch", std::to_string(i.epoch)},
      {"Lease-Expires", FormatRfc3339Millis(i.expires_ms)},
      {"Attempt", std::to_string(i.attempt)},
      {"Requested-At", std::to_string(i.requested_at_ms)},
      {"Request-Sig", "ed25519:" + i.request_sig_hex},
      {"Lease-Ms", std::to_string(i.lease_ms)},
      {"Output-Cap", std::to_string(i.output_cap_bytes)},
      {"Result-Cap", std::to_string(i.max_result_bytes)},
      {"Network", i.allow_network ? "allowed" : "denied"},
  };
  return FormatCommitMessage(m);
}

Result<LeaseCommitInfo> ParseLeaseCommitMessage(std::string_view message) {
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(message));
  LeaseCommitInfo i;
  const auto& t = m.trailers;
  for (const char* k : {"claim", "takeover", "renew"}) {
    if (m.body.rfind(std::string("gatos: ") + k + " ", 0) == 0) i.kind = k;
  }
  if (i.kind.empty()) return InvalidArgumentError("not a lease commit (title is not 'gatos: claim|takeover|renew ...')");
  GATOS_ASSIGN_OR_RETURN(i.job_hex, Prefixed(t, "Job-Id", "blake3:", 64));
  GATOS_ASSIGN_OR_RETURN(i.worker_hex, Prefixed(t, "Worker-Id", "ed25519:", 64));
  GATOS_ASSIGN_OR_RETURN(i.epoch, Number(t, "Lease-Epoch", 1));
  GATOS_ASSIGN_OR_RETURN(std::string exp, RequireUniqueTrailer(t, "Lease-Expires"));
  GATOS_ASSIGN_OR_RETURN(i.expires_ms, ParseRfc3339Millis(exp));
  GATOS_ASSIGN_OR_RETURN(i.attempt, Number(t, "Attempt", 1));
  GATOS_ASSIGN_OR_RETURN(i.requested_at_ms, Number(t, "Requested-At", 0));
  GATOS_ASSIGN_OR_RETURN(i.request_sig_hex, Prefixed(t, "Request-Sig", "ed25519:", 128));
  GATOS_ASSIGN_OR_RETURN(i.lease_ms, Number(t, "Lease-Ms", 1));
  GATOS_ASSIGN_OR_RETURN(i.output_cap_bytes, Number(t, "Output-Cap", 0));
  GATOS_ASSIGN_OR_RETURN(i.max_result_bytes, Number(t, "Result-Cap", 0));
  GATOS_ASSIGN_OR_RETURN(std::string net, RequireUniqueTrailer(t, "Network"));
  if (net != "allowed" && net != "denied") return InvalidArgumentError("Network: expected allowed or denied");
  i.allow_network = net == "allowed";
  return i;
}

std::string FormatUserRequestCommitMessage(const UserRequestCommitInfo& i) {
  CommitMessage m;
  if (i.retry) {
    m.body = "gatos: re-run job " + Short(i.job_hex) + " (attempt " + std::to_string(i.attempt) + ")";
    m.trailers = {{"Job-Id", "blake3:" + i.job_hex},
                  {"Attempt", std::to_string(i.attempt)},
                  {"Retried-By", "ed25519:" + i.requester_hex},
                  {"Retried-At", FormatRfc3339Millis(i.recorded_at_ms)}};
  } else {
    m.body = "gatos: cancel job " + Short(i.job_hex);
    m.trailers = {{"Job-Id", "blake3:" + i.job_hex},
                  {"Cancelled-By", "ed25519:" + i.requester_hex},
                  {"Cancelled-At", FormatRfc3339Millis(i.recorded_at_ms)}};
  }
  m.trailers.push_back({"Requested-At", std::to_string(i.requested_at_ms)});
  m.trailers.push_back({"Request-Sig", "ed25519:" + i.request_sig_hex});
  return FormatCommitMessage(m);
}

Result<UserRequestCommitInfo> ParseUserRequestCommitMessage(std::string_view message) {
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(message));
  UserRequestCommitInfo i;
  const auto& t = m.trailers;
  if (m.body.rfind("gatos: re-run job ", 0) == 0) {
    i.retry = true;
  } else if (m.body.rfind("gatos: cancel job ", 0) != 0) {
    return InvalidArgumentError("not a cancel or re-run commit");
  }
  GATOS_ASSIGN_OR_RETURN(i.job_hex, Prefixed(t, "Job-Id", "blake3:", 64));
  GATOS_ASSIGN_OR_RETURN(i.requester_hex,
                         Prefixed(t, i.retry ? "Retried-By" : "Cancelled-By", "ed25519:", 64));
  GATOS_ASSIGN_OR_RETURN(std::string at, RequireUniqueTrailer(t, i.retry ? "Retried-At" : "Cancelled-At"));
  GATOS_ASSIGN_OR_RETURN(i.recorded_at_ms, ParseRfc3339Millis(at));
  if (i.retry) {
    GATOS_ASSIGN_OR_RETURN(i.attempt, Number(t, "Attempt", 2));
  }
  GATOS_ASSIGN_OR_RETURN(i.requested_at_ms, Number(t, "Requested-At", 0));
  GATOS_ASSIGN_OR_RETURN(i.request_sig_hex, Prefixed(t, "Request-Sig", "ed25519:", 128));
  return i;
}

}  // namespace gatos
