#include "gatos/model/replica_status.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gatos/model/election.h"

namespace gatos {
namespace {

nlohmann::json ToJson(const ReplicaStatus& s, bool with_time) {
  nlohmann::json j = {{"name", s.name}, {"role", s.role}, {"term", s.term}, {"log_seq", s.log_seq}, {"lag_ms", s.lag_ms}};
  if (with_time) j["updated_ms"] = s.updated_ms;
  return j;
}

}  // namespace

std::string EncodeReplicaStatus(const ReplicaStatus& s) { return ToJson(s, true).dump(); }

Result<ReplicaStatus> DecodeReplicaStatus(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("replica status: not JSON: ") + e.what());
  }
  static const char* kFields[] = {"name", "role", "term", "log_seq", "lag_ms", "updated_ms"};
  if (!j.is_object() || j.size() != std::size(kFields)) {
    return InvalidArgumentError("replica status: expected an object with name, role, term, log_seq, lag_ms, updated_ms");
  }
  for (const char* f : kFields) {
    if (!j.contains(f)) return InvalidArgumentError(std::string("replica status: no ") + f);
  }
  ReplicaStatus s;
  if (!j["name"].is_string() || !ValidReplicaName(j["name"].get<std::string>())) {
    return InvalidArgumentError("replica status: bad name");
  }
  s.name = j["name"].get<std::string>();
  if (!j["role"].is_string() || (j["role"] != "leader" && j["role"] != "follower")) {
    return InvalidArgumentError("replica status: role must be leader or follower");
  }
  s.role = j["role"].get<std::string>();
  if (!j["term"].is_number_unsigned()) return InvalidArgumentError("replica status: bad term");
  s.term = j["term"].get<uint64_t>();
  for (auto [field, out] : {std::pair{"log_seq", &s.log_seq}, {"lag_ms", &s.lag_ms}, {"updated_ms", &s.updated_ms}}) {
    if (!j[field].is_number_integer() || j[field].get<int64_t>() < 0) {
      return InvalidArgumentError(std::string("replica status: bad ") + field);
    }
    *out = j[field].get<int64_t>();
  }
  return s;
}

std::string ClusterStatusJson(std::vector<ReplicaStatus> replicas) {
  std::sort(replicas.begin(), replicas.end(),
            [](const ReplicaStatus& a, const ReplicaStatus& b) { return a.name < b.name; });
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : replicas) arr.push_back(ToJson(r, false));
  return nlohmann::json{{"replicas", arr}}.dump();
}

std::optional<ReplicaStatus> MoreCurrentPeer(const std::vector<ReplicaStatus>& peers, std::string_view self,
                                             int64_t own_log_seq) {
  std::optional<ReplicaStatus> best;
  for (const auto& p : peers) {
    if (p.name == self || p.role != "follower" || p.log_seq <= own_log_seq) continue;
    if (!best || p.log_seq > best->log_seq) best = p;
  }
  return best;
}

}  // namespace gatos
