#include "gatos/rpc.h"

namespace gatos::rpc {

std::string ClaimPayload(std::string_view job_hex, std::string_view worker_hex,
                         int64_t requested_at_ms) {
  return "gatos-claim-v1\n" + std::string(job_hex) + "\n" + std::string(worker_hex) + "\n" +
         std::to_string(requested_at_ms) + "\n";
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

nlohmann::json LeaseRequestJson(const LeaseRequest& req) {
  nlohmann::json j = {{"job", req.job_hex},
                      {"worker", req.worker_hex},
                      {"requested_at", req.requested_at_ms},
                      {"sig", req.sig_hex}};
  if (req.epoch) j["epoch"] = req.epoch;
  return j;
}

Result<LeaseRequest> ParseLeaseRequest(const nlohmann::json& j, bool renew) {
  LeaseRequest req;
  GATOS_ASSIGN_OR_RETURN(req.job_hex, StringField(j, "job"));
  GATOS_ASSIGN_OR_RETURN(req.worker_hex, StringField(j, "worker"));
  GATOS_ASSIGN_OR_RETURN(req.requested_at_ms, IntField(j, "requested_at"));
  GATOS_ASSIGN_OR_RETURN(req.sig_hex, StringField(j, "sig"));
  if (req.job_hex.rfind("blake3:", 0) == 0) req.job_hex = req.job_hex.substr(7);
  if (req.worker_hex.rfind("ed25519:", 0) == 0) req.worker_hex = req.worker_hex.substr(8);
  if (renew) {
    GATOS_ASSIGN_OR_RETURN(req.epoch, IntField(j, "epoch"));
  }
  return req;
}

nlohmann::json OkReply() { return nlohmann::json{{"ok", true}}; }

nlohmann::json ErrorReply(TransitionError error, std::string_view message) {
  return nlohmann::json{{"ok", false},
                        {"error", std::string(TransitionErrorName(error))},
                        {"message", std::string(message)}};
}

Result<nlohmann::json> ParseReply(std::string_view data, std::string_view subject, ReplyError* error) {
  *error = {};
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    error->error = TransitionError::kRetry;
    error->message = "malformed reply on " + std::string(subject);
    return InvalidArgumentError(error->message);
  }
  if (!j["ok"].get<bool>()) {
    error->error = j.contains("error") && j["error"].is_string()
                       ? ParseTransitionError(j["error"].get<std::string>())
                       : TransitionError::kInvalid;
    error->message = j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>()
                                                                       : "refused";
  }
  return j;
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

nlohmann::json EntryJson(const IndexEntry& e, int64_t now_ms) {
  nlohmann::json j = {{"job", "blake3:" + e.job_hex},
                      {"state", std::string(JobStateName(e.state))},
                      {"job_commit", e.job_commit},
                      {"cancel_requested", e.cancel_requested}};
  if (!e.worker_hex.empty()) {
    j["lease"] = {{"worker", "ed25519:" + e.worker_hex},
                  {"epoch", e.epoch},
                  {"expires", FormatRfc3339Millis(e.lease_expires_ms)},
                  {"expired", now_ms >= e.lease_expires_ms}};
  }
  if (!e.result_commit.empty()) j["result_commit"] = e.result_commit;
  return j;
}

std::string EncodeFrame(const nlohmann::json& header, std::string_view batch) {
  std::string h = header.dump();
  std::string out;
  out.reserve(4 + h.size() + batch.size());
  uint32_t n = static_cast<uint32_t>(h.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += h;
  out += batch;
  return out;
}

Status DecodeFrame(std::string_view data, size_t max_header, nlohmann::json* header,
                   std::string_view* batch) {
  if (data.size() < 4) return InvalidArgumentError("frame shorter than its 4-byte header length");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(data[i]);
  if (n > max_header || n > data.size() - 4) {
    return InvalidArgumentError("frame header length " + std::to_string(n) + " is out of range");
  }
  *header = nlohmann::json::parse(data.substr(4, n), nullptr, false);
  if (header->is_discarded() || !header->is_object()) {
    return InvalidArgumentError("frame header is not a JSON object");
  }
  *batch = data.substr(4 + n);
  return OkStatus();
}

}  // namespace gatos::rpc
