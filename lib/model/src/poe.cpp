#include "gatos/model/poe.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/time_format.h"
#include "gatos/model/result_path.h"

namespace gatos {

bool IsResultStatus(std::string_view s) {
  return s == "succeeded" || s == "failed" || s == "timed-out" || s == "aborted";
}

std::string DssePae(std::string_view payload_type, std::string_view payload) {
  std::string out = "DSSEv1 ";
  out += std::to_string(payload_type.size());
  out += ' ';
  out += payload_type;
  out += ' ';
  out += std::to_string(payload.size());
  out += ' ';
  out += payload;
  return out;
}

namespace {

bool IsTaggedHex(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix && IsLowerHex(s.substr(prefix.size()), 64);
}

Status CheckFields(const Poe& p) {
  if (!IsTaggedHex(p.job_id, "blake3:")) return InvalidArgumentError("poe.json: job_id: expected blake3:<64 hex>");
  if (!IsTaggedHex(p.worker_id, "ed25519:")) return InvalidArgumentError("poe.json: worker_id: expected ed25519:<64 hex>");
  if (!IsTaggedHex(p.runner_program, "blake3:")) return InvalidArgumentError("poe.json: runner.program: expected blake3:<64 hex>");
  if (p.lease_epoch < 1) return InvalidArgumentError("poe.json: lease_epoch: expected an integer >= 1");
  if (!IsResultStatus(p.status)) return InvalidArgumentError("poe.json: status: expected succeeded, failed, timed-out or aborted");
  if (p.stdout_cap < 0) return InvalidArgumentError("poe.json: stdout_cap: expected an integer >= 0");
  if (!ParseRfc3339Millis(p.started_at).ok()) return InvalidArgumentError("poe.json: started_at: expected an RFC 3339 UTC time");
  if (!ParseRfc3339Millis(p.finished_at).ok()) return InvalidArgumentError("poe.json: finished_at: expected an RFC 3339 UTC time");
  if (p.transient && (p.status != "failed" || p.reason.empty())) {
    return InvalidArgumentError("poe.json: transient: only a failed result with a reason is transient");
  }
  std::string prev;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const auto& o = p.outputs[i];
    std::string where = "poe.json: outputs[" + std::to_string(i) + "]";
    if (o.path == kPoeFileName) {
      return InvalidArgumentError(where + ".path: \"" + o.path + "\" is not a relative file path of the result tree");
    }
    // The one rule for result paths: the worker refuses its outputs by it too.
    if (Status s = CheckResultPath(o.path); !s.ok()) return InvalidArgumentError(where + ".path: " + s.message());
    if (!IsTaggedHex(o.hash, "blake3:")) return InvalidArgumentError(where + ".hash: expected blake3:<64 hex>");
    if (i > 0 && !(prev < o.path)) return InvalidArgumentError(where + ".path: outputs must be sorted by path without duplicates");
    prev = o.path;
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const PoeInput& in = p.inputs[i];
    std::string where = "poe.json: inputs[" + std::to_string(i) + "]";
    if (in.index < 0 || (i > 0 && in.index <= p.inputs[i - 1].index)) {
      return InvalidArgumentError(where + ".index: expected integers >= 0 in increasing order");
    }
    if (in.url.empty() || in.url.size() > kMaxGitUrlBytes) {
      return InvalidArgumentError(where + ".url: expected 1 to " + std::to_string(kMaxGitUrlBytes) + " bytes");
    }
    if (in.ref.size() > kMaxGitRefBytes) return InvalidArgumentError(where + ".ref: too long");
    if (!IsGitCommitId(in.commit)) {
      return InvalidArgumentError(where + ".commit: expected 40 or 64 lowercase hex");
    }
  }
  const int64_t limits[] = {p.limits.memory_mb, p.limits.pids, p.limits.cpu_millis,
                            p.limits.disk_mb};
  for (int i = 0; i < 4; ++i) {
    if (limits[i] < 0 || limits[i] > JobResourceCeiling(kJobResourceKeys[i])) {
      return InvalidArgumentError(std::string("poe.json: limits.") + kJobResourceKeys[i] +
                                  ": out of range");
    }
  }
  if (!p.unenforced.empty() && !p.limits.Any()) {
    return InvalidArgumentError("poe.json: limits.unenforced: without limits");
  }
  for (size_t i = 0; i < p.unenforced.size(); ++i) {
    const std::string& u = p.unenforced[i];
    if (u != "memory" && u != "pids" && u != "cpu" && u != "disk") {
      return InvalidArgumentError(
          "poe.json: limits.unenforced: expected memory, pids, cpu or disk");
    }
    if (i > 0 && !(p.unenforced[i - 1] < u)) {
      return InvalidArgumentError("poe.json: limits.unenforced: must be sorted without duplicates");
    }
  }
  for (int64_t v :
       {p.usage.peak_memory_bytes, p.usage.cpu_ms, p.usage.peak_processes, p.usage.disk_bytes}) {
    if (v < -1 || v > kMaxSafeInteger) return InvalidArgumentError("poe.json: usage: out of range");
  }
  return OkStatus();
}

}  // namespace

Result<std::string> SerializePoe(const Poe& p) {
  GATOS_RETURN_IF_ERROR(CheckFields(p));
  return poe_internal::CanonicalPoe(p);
}

namespace poe_internal {

Result<std::string> CanonicalPoe(const Poe& p) {
  // Written directly in canonical form (keys in byte order: all ASCII), as
  // CanonicalJson would write the same document: no tree built, for each
  // result a worker signs and the ledger checks.
  CanonicalJsonWriter w;
  w.BeginObject();
  w.Key("exit").BeginObject();
  w.Key("code");
  p.exit_code ? w.Int(*p.exit_code) : w.Null();
  w.Key("signal");
  p.signal ? w.Int(*p.signal) : w.Null();
  w.Key("timed_out").Bool(p.timed_out);
  w.EndObject();
  w.Key("finished_at").String(p.finished_at);
  if (!p.inputs.empty()) {
    w.Key("inputs").BeginArray();
    for (const auto& in : p.inputs) {
      w.BeginObject().Key("commit").String(in.commit).Key("index").Int(in.index);
      if (!in.ref.empty()) w.Key("ref").String(in.ref);
      w.Key("url").String(in.url).EndObject();
    }
    w.EndArray();
  }
  w.Key("job_id").String(p.job_id);
  w.Key("lease_epoch").Int(p.lease_epoch);
  if (p.limits.Any()) {
    w.Key("limits").BeginObject();
    w.Key("cpu_millis").Int(p.limits.cpu_millis).Key("disk_mb").Int(p.limits.disk_mb);
    w.Key("memory_mb").Int(p.limits.memory_mb).Key("pids").Int(p.limits.pids);
    if (!p.unenforced.empty()) {
      w.Key("unenforced").BeginArray();
      for (const auto& u : p.unenforced) w.String(u);
      w.EndArray();
    }
    w.EndObject();
  }
  w.Key("outputs").BeginArray();
  for (const auto& o : p.outputs) {
    w.BeginObject().Key("hash").String(o.hash).Key("path").String(o.path).Key("size").Uint(o.size).EndObject();
  }
  w.EndArray();
  w.Key("reason").String(p.reason);
  w.Key("runner").BeginObject();
  w.Key("platform").String(p.runner_platform).Key("program").String(p.runner_program);
  w.Key("version").String(p.runner_version).EndObject();
  w.Key("started_at").String(p.started_at);
  w.Key("status").String(p.status);
  w.Key("stdout_cap").Int(p.stdout_cap);
  if (p.transient) w.Key("transient").Bool(true);
  w.Key("truncated").BeginObject();
  w.Key("stderr").Bool(p.stderr_truncated).Key("stdout").Bool(p.stdout_truncated).EndObject();
  if (p.usage.Any()) {
    w.Key("usage").BeginObject();
    if (p.usage.cpu_ms >= 0) w.Key("cpu_ms").Int(p.usage.cpu_ms);
    if (p.usage.disk_bytes >= 0) w.Key("disk_bytes").Int(p.usage.disk_bytes);
    if (p.usage.peak_memory_bytes >= 0) w.Key("peak_memory_bytes").Int(p.usage.peak_memory_bytes);
    if (p.usage.peak_processes >= 0) w.Key("peak_processes").Int(p.usage.peak_processes);
    w.EndObject();
  }
  w.Key("worker_id").String(p.worker_id);
  w.EndObject();
  return w.Finish();
}

}  // namespace poe_internal

namespace {
constexpr size_t kMaxPoeBytes = 4u << 20;

// v.get<T>(), except for a float outside T's range, whose conversion would
// be undefined behaviour: T's largest value instead (no such number is
// canonical, so the document is refused either way).
template <typename T>
T IntOf(const nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= static_cast<double>(std::numeric_limits<T>::min()) &&
          d < static_cast<double>(std::numeric_limits<T>::max()))) {
      return std::numeric_limits<T>::max();
    }
  }
  return v.get<T>();
}
}  // namespace

Result<Poe> ParsePoe(std::string_view bytes) {
  if (bytes.size() > kMaxPoeBytes) return InvalidArgumentError("poe.json: larger than 4 MiB");
  // The reader takes only the bytes CanonicalPoe writes for the fields it
  // returns (poe_fuzz serializes each one back), so the fields' checks are
  // all that is left of SerializePoe.
  if (std::optional<Poe> p = poe_internal::ReadCanonicalPoe(bytes)) {
    if (CheckFields(*p).ok()) return std::move(*p);
  }
  return poe_internal::ParsePoeJson(bytes);
}

Result<Poe> poe_internal::ParsePoeJson(std::string_view bytes) {
  if (bytes.size() > kMaxPoeBytes) return InvalidArgumentError("poe.json: larger than 4 MiB");
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("poe.json: not a JSON object");
  Poe p;
  try {
    static const char* kKeys[] = {"job_id",    "worker_id",  "lease_epoch", "status",
                                  "runner",    "exit",       "reason",      "stdout_cap",
                                  "truncated", "started_at", "finished_at", "outputs",
                                  "inputs",    "transient",  "limits",      "usage"};
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      for (const char* k : kKeys) known |= it.key() == k;
      if (!known) return InvalidArgumentError("poe.json: unknown field \"" + it.key() + "\"");
    }
    p.job_id = j.at("job_id").get<std::string>();
    p.worker_id = j.at("worker_id").get<std::string>();
    p.lease_epoch = IntOf<int64_t>(j.at("lease_epoch"));
    p.status = j.at("status").get<std::string>();
    const auto& r = j.at("runner");
    p.runner_program = r.at("program").get<std::string>();
    p.runner_version = r.at("version").get<std::string>();
    p.runner_platform = r.at("platform").get<std::string>();
    const auto& e = j.at("exit");
    if (!e.at("code").is_null()) p.exit_code = IntOf<int64_t>(e.at("code"));
    if (!e.at("signal").is_null()) p.signal = IntOf<int64_t>(e.at("signal"));
    p.timed_out = e.at("timed_out").get<bool>();
    p.reason = j.at("reason").get<std::string>();
    if (j.contains("transient")) p.transient = j.at("transient").get<bool>();
    p.stdout_cap = IntOf<int64_t>(j.at("stdout_cap"));
    p.stdout_truncated = j.at("truncated").at("stdout").get<bool>();
    p.stderr_truncated = j.at("truncated").at("stderr").get<bool>();
    p.started_at = j.at("started_at").get<std::string>();
    p.finished_at = j.at("finished_at").get<std::string>();
    for (const auto& o : j.at("outputs")) {
      p.outputs.push_back({o.at("path").get<std::string>(), IntOf<uint64_t>(o.at("size")),
                           o.at("hash").get<std::string>()});
    }
    if (j.contains("inputs")) {
      for (const auto& in : j.at("inputs")) {
        PoeInput e;
        e.index = IntOf<int64_t>(in.at("index"));
        e.url = in.at("url").get<std::string>();
        e.commit = in.at("commit").get<std::string>();
        if (in.contains("ref")) e.ref = in.at("ref").get<std::string>();
        p.inputs.push_back(std::move(e));
      }
    }
    if (j.contains("limits")) {
      const auto& l = j.at("limits");
      for (auto it = l.begin(); it != l.end(); ++it) {
        if (it.key() != "memory_mb" && it.key() != "pids" && it.key() != "cpu_millis" &&
            it.key() != "disk_mb" && it.key() != "unenforced") {
          return InvalidArgumentError("poe.json: limits: unknown field \"" + it.key() + "\"");
        }
      }
      p.limits.memory_mb = IntOf<int64_t>(l.at("memory_mb"));
      p.limits.pids = IntOf<int64_t>(l.at("pids"));
      p.limits.cpu_millis = IntOf<int64_t>(l.at("cpu_millis"));
      p.limits.disk_mb = IntOf<int64_t>(l.at("disk_mb"));
      if (l.contains("unenforced")) {
        p.unenforced = l.at("unenforced").get<std::vector<std::string>>();
      }
    }
    if (j.contains("usage")) {
      const auto& u = j.at("usage");
      for (auto it = u.begin(); it != u.end(); ++it) {
        int64_t* dst = it.key() == "peak_memory_bytes" ? &p.usage.peak_memory_bytes
                       : it.key() == "cpu_ms"          ? &p.usage.cpu_ms
                       : it.key() == "peak_processes"  ? &p.usage.peak_processes
                       : it.key() == "disk_bytes"      ? &p.usage.disk_bytes
                                                       : nullptr;
        if (!dst)
          return InvalidArgumentError("poe.json: usage: unknown field \"" + it.key() + "\"");
        *dst = IntOf<int64_t>(*it);
        if (*dst < 0) return InvalidArgumentError("poe.json: usage." + it.key() + ": negative");
      }
    }
  } catch (const nlohmann::json::exception& ex) {
    return InvalidArgumentError(std::string("poe.json: missing or mistyped field: ") + ex.what());
  }
  auto canon = SerializePoe(p);
  if (!canon.ok()) return canon.status();
  if (*canon != bytes) {
    return InvalidArgumentError("poe.json: not in canonical form (RFC 8785) or carries extra structure");
  }
  return p;
}

}  // namespace gatos
