#include "gatos/model/rpc.h"

#include <algorithm>

#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"

namespace gatos::rpc {

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ClaimPayload(std::string_view job_hex, std::string_view worker_hex, int64_t epoch,
                         int64_t requested_at_ms) {
  return "gatos-claim-v2\n" + std::string(job_hex) + "\n" + std::string(worker_hex) + "\n" +
         std::to_string(epoch) + "\n" + std::to_string(requested_at_ms) + "\n";
}

std::string RenewPayload(std::string_view job_hex, std::string_view worker_hex, int64_t epoch,
                         int64_t requested_at_ms) {
  return "gatos-renew-v1\n" + std::string(job_hex) + "\n" + std::string(worker_hex) + "\n" +
         std::to_string(epoch) + "\n" + std::to_string(requested_at_ms) + "\n";
}

std::string CancelPayload(std::string_view job_hex, std::string_view requester_hex,
                          int64_t requested_at_ms) {
  return "gatos-cancel-v1\n" + std::string(job_hex) + "\n" + std::string(requester_hex) + "\n" +
         std::to_string(requested_at_ms) + "\n";
}

std::string RetryPayload(std::string_view job_hex, std::string_view requester_hex, int64_t attempt,
                         int64_t requested_at_ms) {
  return "gatos-retry-v1\n" + std::string(job_hex) + "\n" + std::string(requester_hex) + "\n" +
         std::to_string(attempt) + "\n" + std::to_string(requested_at_ms) + "\n";
}

namespace {
std::string StripPrefix(std::string s, std::string_view prefix) {
  if (s.compare(0, prefix.size(), prefix) == 0) s = s.substr(prefix.size());
  return s;
}
}  // namespace

nlohmann::json LeaseRequestJson(const LeaseRequest& req) {
  return nlohmann::json{{"job", req.job_hex},
                        {"worker", req.worker_hex},
                        {"epoch", req.epoch},
                        {"requested_at", req.requested_at_ms},
                        {"sig", req.sig_hex}};
}

Result<LeaseRequest> ParseLeaseRequest(const nlohmann::json& j, bool renew) {
  LeaseRequest req;
  req.renew = renew;
  GATOS_ASSIGN_OR_RETURN(req.job_hex, StringField(j, "job"));
  GATOS_ASSIGN_OR_RETURN(req.worker_hex, StringField(j, "worker"));
  GATOS_ASSIGN_OR_RETURN(req.epoch, IntField(j, "epoch"));
  GATOS_ASSIGN_OR_RETURN(req.requested_at_ms, IntField(j, "requested_at"));
  GATOS_ASSIGN_OR_RETURN(req.sig_hex, StringField(j, "sig"));
  req.job_hex = StripPrefix(req.job_hex, "blake3:");
  req.worker_hex = StripPrefix(req.worker_hex, "ed25519:");
  return req;
}

std::string GrantsPayload(const std::vector<Grant>& grants) {
  std::string out = "gatos-grant-v1\n" + std::to_string(grants.size()) + "\n";
  for (const Grant& g : grants) {
    out += g.job_hex + "\n" + std::to_string(g.epoch) + "\n" + g.lease_commit + "\n" +
           std::to_string(g.expires_ms) + "\n" + g.job_commit + "\n";
  }
  return out;
}

void SetGrantFields(const Grant& g, nlohmann::json* reply) {
  (*reply)["job"] = "blake3:" + g.job_hex;
  (*reply)["epoch"] = g.epoch;
  (*reply)["lease_commit"] = g.lease_commit;
  (*reply)["expires_ms"] = g.expires_ms;
  (*reply)["job_commit"] = g.job_commit;
}

Result<Grant> ParseGrantFields(const nlohmann::json& j) {
  Grant g;
  if (!j.is_object()) return InvalidArgumentError("a grant is a JSON object");
  GATOS_ASSIGN_OR_RETURN(g.job_hex, StringField(j, "job"));
  g.job_hex = StripPrefix(g.job_hex, "blake3:");
  GATOS_ASSIGN_OR_RETURN(g.epoch, IntField(j, "epoch"));
  GATOS_ASSIGN_OR_RETURN(g.lease_commit, StringField(j, "lease_commit"));
  GATOS_ASSIGN_OR_RETURN(g.expires_ms, IntField(j, "expires_ms"));
  GATOS_ASSIGN_OR_RETURN(g.job_commit, StringField(j, "job_commit"));
  if (!IsLowerHex(g.job_hex, 64)) return InvalidArgumentError("field \"job\": expected blake3:<64 hex>");
  if (!IsLowerHex(g.lease_commit, 40) || !IsLowerHex(g.job_commit, 40)) {
    return InvalidArgumentError("fields \"lease_commit\" and \"job_commit\": expected commit ids");
  }
  if (g.epoch < 1) return InvalidArgumentError("field \"epoch\": expected an integer >= 1");
  return g;
}

nlohmann::json UserRequestJson(const UserRequest& req) {
  nlohmann::json j = {{"job", req.job_hex},
                      {"requester", req.requester_hex},
                      {"requested_at", req.requested_at_ms},
                      {"sig", req.sig_hex}};
  if (req.retry) j["attempt"] = req.attempt;
  return j;
}

Result<UserRequest> ParseUserRequest(const nlohmann::json& j, bool retry) {
  UserRequest req;
  req.retry = retry;
  GATOS_ASSIGN_OR_RETURN(req.job_hex, StringField(j, "job"));
  GATOS_ASSIGN_OR_RETURN(req.requester_hex, StringField(j, "requester"));
  GATOS_ASSIGN_OR_RETURN(req.requested_at_ms, IntField(j, "requested_at"));
  GATOS_ASSIGN_OR_RETURN(req.sig_hex, StringField(j, "sig"));
  if (retry) {
    GATOS_ASSIGN_OR_RETURN(req.attempt, IntField(j, "attempt"));
  }
  req.job_hex = StripPrefix(req.job_hex, "blake3:");
  req.requester_hex = StripPrefix(req.requester_hex, "ed25519:");
  return req;
}

Result<std::string> ParseJobField(const nlohmann::json& j) {
  GATOS_ASSIGN_OR_RETURN(std::string job, StringField(j, "job"));
  std::string hex = StripPrefix(job, "blake3:");
  if (!IsLowerHex(hex, 64)) {
    return InvalidArgumentError("\"" + TruncateUtf8(job, 80) + "\" is not a job id (blake3:<64 hex>)");
  }
  return hex;
}

nlohmann::json ListRequestJson(const ListRequest& req) {
  nlohmann::json j = {{"limit", req.limit}};
  if (req.state) j["state"] = *req.state;
  if (!req.after.empty()) j["after"] = req.after;
  return j;
}

Result<ListRequest> ParseListRequest(const nlohmann::json& j) {
  ListRequest req;
  if (j.contains("state")) {
    auto st = StringField(j, "state");
    if (!st.ok() || (*st != "dead" && !ParseJobState(*st))) {
      return InvalidArgumentError("state must be pending, claimed, succeeded, failed, timed-out, aborted or dead");
    }
    req.state = *st;
  }
  if (j.contains("after")) {
    GATOS_ASSIGN_OR_RETURN(std::string after, StringField(j, "after"));
    req.after = StripPrefix(after, "blake3:");
    if (!req.after.empty() && !IsLowerHex(req.after, 64)) return InvalidArgumentError("after must be a job id");
  }
  if (j.contains("limit")) {
    GATOS_ASSIGN_OR_RETURN(req.limit, IntField(j, "limit"));
  }
  req.limit = std::clamp<int64_t>(req.limit, 1, 10000);
  return req;
}

nlohmann::json OkReply() { return nlohmann::json{{"ok", true}}; }

nlohmann::json ErrorReply(TransitionError error, std::string_view message) {
  return nlohmann::json{{"ok", false},
                        {"error", std::string(TransitionErrorName(error))},
                        {"message", TruncateUtf8(message, 4096)}};
}

Result<nlohmann::json> ParseReply(std::string_view data, std::string_view subject, Decision* error) {
  *error = {};
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    error->error = TransitionError::kRetry;
    error->message = "malformed reply on " + std::string(subject);
    return InvalidArgumentError(error->message);
  }
  if (!j["ok"].get<bool>()) {
    error->error = j.contains("error") && j["error"].is_string() ? ParseTransitionError(j["error"].get<std::string>())
                                                                 : TransitionError::kInvalid;
    error->message = j.contains("message") && j["message"].is_string()
                         ? TruncateUtf8(j["message"].get<std::string>(), 4096)
                         : "refused";
  }
  return j;
}

nlohmann::json RecordJson(const JobRecord& r, int64_t now_ms) {
  JobState st = RecordState(r, now_ms);
  nlohmann::json j = {{"job", "blake3:" + r.job_hex},
                      {"state", std::string(JobStateName(st))},
                      {"job_commit", r.job_commit},
                      {"attempt", r.attempt},
                      {"submitted", FormatRfc3339Millis(r.submitted_ms)},
                      {"cancel_requested", !r.cancel_commit.empty()}};
  if (!r.submitter_hex.empty()) j["submitter"] = "ed25519:" + r.submitter_hex;
  if (!r.worker_hex.empty()) {
    j["lease"] = {{"worker", "ed25519:" + r.worker_hex},
                  {"epoch", r.epoch},
                  {"expires", FormatRfc3339Millis(r.expires_ms)},
                  {"expired", LeaseExpired(r, now_ms)}};
  }
  if (r.epoch) j["epoch"] = r.epoch;
  if (!r.result_commit.empty()) {
    j["result_commit"] = r.result_commit;
    j["result_status"] = r.result_status;
  }
  if (r.finished_ms) j["finished"] = FormatRfc3339Millis(r.finished_ms);
  if (r.not_before_ms && r.result_commit.empty()) j["not_before"] = FormatRfc3339Millis(r.not_before_ms);
  if (r.pruned_ms) j["pruned"] = FormatRfc3339Millis(r.pruned_ms);
  if (!r.attempts.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : r.attempts) {
      a.push_back({{"n", x.n}, {"status", x.status}, {"result_commit", x.result_commit},
                   {"epoch", x.epoch}, {"finished", FormatRfc3339Millis(x.finished_ms)}});
    }
    j["attempts"] = a;
  }
  if (RecordDead(r, now_ms)) j["dead"] = true;
  return j;
}

std::string PendingMsgId(std::string_view job_hex, int64_t attempt, int64_t epoch) {
  return std::string(job_hex) + ".a" + std::to_string(attempt) + ".e" + std::to_string(epoch);
}

std::string EncodePending(const PendingMessage& m) {
  return Dump(nlohmann::json{{"job", "blake3:" + m.job_hex}, {"epoch", m.epoch}, {"attempt", m.attempt}});
}

Result<PendingMessage> DecodePending(std::string_view data) {
  if (data.size() > 4096) return InvalidArgumentError("pending message too large");
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("pending message is not a JSON object");
  PendingMessage m;
  GATOS_ASSIGN_OR_RETURN(m.job_hex, ParseJobField(j));
  GATOS_ASSIGN_OR_RETURN(m.epoch, IntField(j, "epoch"));
  GATOS_ASSIGN_OR_RETURN(m.attempt, IntField(j, "attempt"));
  if (m.epoch < 1 || m.attempt < 1) return InvalidArgumentError("pending message: epoch and attempt start at 1");
  return m;
}

Result<nlohmann::json> ParseRequest(std::string_view data, std::string_view subject) {
  if (data.size() > kMaxJsonRequest) {
    return InvalidArgumentError(std::string(subject) + ": request of " + std::to_string(data.size()) +
                                " bytes is over the " + std::to_string(kMaxJsonRequest) + "-byte limit");
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError(std::string(subject) + ": request is not a JSON object");
  }
  return j;
}

Result<std::string> StringField(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    return InvalidArgumentError(std::string("field \"") + name + "\" is missing or not a string");
  }
  return it->get<std::string>();
}

Result<int64_t> IntField(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) {
    return InvalidArgumentError(std::string("field \"") + name + "\" is missing or not an integer");
  }
  return it->get<int64_t>();
}

std::string EncodeFrame(const nlohmann::json& header, std::string_view batch) {
  std::string h = Dump(header);
  std::string out;
  out.reserve(4 + h.size() + batch.size());
  uint32_t n = static_cast<uint32_t>(h.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += h;
  out += batch;
  return out;
}

Status DecodeFrame(std::string_view data, size_t max_header, nlohmann::json* header, std::string_view* batch) {
  if (data.size() < 4) return InvalidArgumentError("frame shorter than its 4-byte header length");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(data[i]);
  if (n > max_header || n > data.size() - 4) {
    return InvalidArgumentError("frame header length " + std::to_string(n) + " is out of range");
  }
  *header = nlohmann::json::parse(data.substr(4, n), nullptr, false);
  if (header->is_discarded() || !header->is_object()) return InvalidArgumentError("frame header is not a JSON object");
  *batch = data.substr(4 + n);
  return OkStatus();
}

namespace {
constexpr std::string_view kBatchMagic = "GATOSRB1";

void PutU32(std::string* out, uint32_t n) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((n >> shift) & 0xff));
}

uint32_t GetU32(std::string_view data, size_t at) {
  uint32_t n = 0;
  for (size_t i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(data[at + i]);
  return n;
}
}  // namespace

std::string EncodeBatch(const std::vector<std::string>& entries) {
  size_t total = kBatchMagic.size() + 4;
  for (const auto& e : entries) total += 4 + e.size();
  std::string out;
  out.reserve(total);
  out += kBatchMagic;
  PutU32(&out, static_cast<uint32_t>(entries.size()));
  for (const auto& e : entries) {
    PutU32(&out, static_cast<uint32_t>(e.size()));
    out += e;
  }
  return out;
}

bool IsBatch(std::string_view data) { return data.substr(0, kBatchMagic.size()) == kBatchMagic; }

Result<std::vector<std::string_view>> DecodeBatch(std::string_view data, size_t max_entries) {
  if (!IsBatch(data) || data.size() < kBatchMagic.size() + 4) {
    return InvalidArgumentError("not a batch (it must start with GATOSRB1 and a u32 entry count)");
  }
  size_t at = kBatchMagic.size();
  uint32_t count = GetU32(data, at);
  at += 4;
  if (count == 0 || count > max_entries) {
    return InvalidArgumentError("a batch holds 1 to " + std::to_string(max_entries) + " entries, not " +
                                std::to_string(count));
  }
  std::vector<std::string_view> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (data.size() - at < 4) return InvalidArgumentError("batch entry " + std::to_string(i) + " is truncated");
    uint32_t n = GetU32(data, at);
    at += 4;
    if (n > data.size() - at) return InvalidArgumentError("batch entry " + std::to_string(i) + " is truncated");
    out.push_back(data.substr(at, n));
    at += n;
  }
  if (at != data.size()) return InvalidArgumentError("trailing bytes after the batch's last entry");
  return out;
}

std::string EncodeHeartbeat(const WorkerHeartbeat& h) {
  return Dump({{"worker", h.worker_hex}, {"pools", h.pools}});
}

Result<WorkerHeartbeat> DecodeHeartbeat(std::string_view data) {
  if (data.size() > 8192) return InvalidArgumentError("heartbeat too large");
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("heartbeat: not a JSON object");
  WorkerHeartbeat h;
  auto w = j.find("worker");
  if (w == j.end() || !w->is_string() || !IsLowerHex(w->get_ref<const std::string&>(), 64)) {
    return InvalidArgumentError("heartbeat: worker must be 64 lowercase hex");
  }
  h.worker_hex = w->get<std::string>();
  auto p = j.find("pools");
  if (p == j.end() || !p->is_array() || p->empty() || p->size() > kMaxPoolsPerList) {
    return InvalidArgumentError("heartbeat: pools must be a list of pool names");
  }
  for (const auto& e : *p) {
    if (!e.is_string() || !PoolNameProblem(e.get_ref<const std::string&>()).empty()) {
      return InvalidArgumentError("heartbeat: pools must be a list of pool names");
    }
    h.pools.push_back(e.get<std::string>());
  }
  return h;
}

std::string ReplicaReadSubject(std::string_view replica, std::string_view subject) {
  if (subject != kStatus && subject != kList && subject != kLogs) return std::string(subject);
  const std::string_view kind = subject.substr(subject.rfind('.') + 1);
  if (replica.empty()) return std::string(kAnyReplicaReadPrefix) + std::string(kind);
  return std::string(kReplicaReadPrefix) + std::string(replica) + "." + std::string(kind);
}

std::string PendingSubjectFor(std::string_view pool) {
  if (pool.empty() || pool == "default") return kPendingSubject;
  return std::string(kPendingSubject) + "." + std::string(pool);
}

std::string WorkerDurableFor(std::string_view pool) {
  if (pool.empty() || pool == "default") return kWorkerDurable;
  return std::string(kWorkerDurable) + "-" + std::string(pool);
}

}  // namespace gatos::rpc

namespace gatos {

std::string LeaseRequestPayload(const LeaseRequest& req) {
  return req.renew ? rpc::RenewPayload(req.job_hex, req.worker_hex, req.epoch, req.requested_at_ms)
                   : rpc::ClaimPayload(req.job_hex, req.worker_hex, req.epoch, req.requested_at_ms);
}

std::string UserRequestPayload(const UserRequest& req) {
  return req.retry ? rpc::RetryPayload(req.job_hex, req.requester_hex, req.attempt, req.requested_at_ms)
                   : rpc::CancelPayload(req.job_hex, req.requester_hex, req.requested_at_ms);
}

}  // namespace gatos
