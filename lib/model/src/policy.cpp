#include "gatos/model/policy.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"

namespace gatos {

std::string SerializePolicySettings(const PolicySettings& s) {
  nlohmann::json j = {
      {"version", 1},
      {"dev_mode", s.dev_mode},
      {"lease_ms", s.lease_ms},
      {"result_grace_ms", s.result_grace_ms},
      {"max_manifest_bytes", s.max_manifest_bytes},
      {"max_timeout_seconds", s.max_timeout_seconds},
      {"output_cap_bytes", s.output_cap_bytes},
      {"max_result_bytes", s.max_result_bytes},
      {"allow_network", s.allow_network},
      {"retention_ms", s.retention_ms},
      {"max_attempts", s.max_attempts},
      {"retry_base_ms", s.retry_base_ms},
      {"retry_factor", s.retry_factor},
      {"retry_max_ms", s.retry_max_ms},
      {"retry_jitter_pct", s.retry_jitter_pct},
      {"retry_failed", s.retry_failed},
      {"retry_timed_out", s.retry_timed_out},
  };
  if (!s.input_url_prefixes.empty()) j["input_url_prefixes"] = s.input_url_prefixes;
  const int64_t defaults[] = {s.job_defaults.memory_mb, s.job_defaults.pids,
                              s.job_defaults.cpu_millis, s.job_defaults.disk_mb};
  const int64_t maxima[] = {s.job_maxima.memory_mb, s.job_maxima.pids, s.job_maxima.cpu_millis,
                            s.job_maxima.disk_mb};
  for (int i = 0; i < 4; ++i) {
    if (defaults[i] != 0) j[std::string("job_") + kJobResourceKeys[i]] = defaults[i];
    if (maxima[i] != 0) j[std::string("max_job_") + kJobResourceKeys[i]] = maxima[i];
  }
  if (!s.scheduling.empty()) j["scheduling"] = SchedulingJson(s.scheduling);
  auto c = CanonicalJson(j);
  return c.ok() ? *c : j.dump();
}

Result<PolicySettings> ParsePolicySettings(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("policy.json: not a JSON object");
  PolicySettings s;
  struct IntField { const char* name; int64_t* dst; int64_t min; int64_t max; };
  IntField ints[] = {
      {"lease_ms", &s.lease_ms, 100, 86'400'000},
      {"result_grace_ms", &s.result_grace_ms, 0, 3'600'000},
      {"max_manifest_bytes", &s.max_manifest_bytes, 256, 16 << 20},
      {"max_timeout_seconds", &s.max_timeout_seconds, 1, 31'536'000},
      {"output_cap_bytes", &s.output_cap_bytes, 0, 64 << 20},
      {"max_result_bytes", &s.max_result_bytes, 4096, 256 << 20},
      {"retention_ms", &s.retention_ms, 0, 3650LL * 86'400'000},
      {"max_attempts", &s.max_attempts, 1, 100},
      {"retry_base_ms", &s.retry_base_ms, 0, 86'400'000},
      {"retry_factor", &s.retry_factor, 1, 10},
      {"retry_max_ms", &s.retry_max_ms, 0, 7LL * 86'400'000},
      {"retry_jitter_pct", &s.retry_jitter_pct, 0, 100},
      {"job_memory_mb", &s.job_defaults.memory_mb, 0, kMaxJobMemoryMb},
      {"job_pids", &s.job_defaults.pids, 0, kMaxJobPids},
      {"job_cpu_millis", &s.job_defaults.cpu_millis, 0, kMaxJobCpuMillis},
      {"job_disk_mb", &s.job_defaults.disk_mb, 0, kMaxJobDiskMb},
      {"max_job_memory_mb", &s.job_maxima.memory_mb, 0, kMaxJobMemoryMb},
      {"max_job_pids", &s.job_maxima.pids, 0, kMaxJobPids},
      {"max_job_cpu_millis", &s.job_maxima.cpu_millis, 0, kMaxJobCpuMillis},
      {"max_job_disk_mb", &s.job_maxima.disk_mb, 0, kMaxJobDiskMb},
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "version") {
      if (!it->is_number_integer() || it->get<int64_t>() != 1) {
        return InvalidArgumentError("policy.json: version: expected 1");
      }
      continue;
    }
    if (k == "input_url_prefixes") {
      if (!it->is_array() || it->size() > kMaxInputUrlPrefixes) {
        return InvalidArgumentError("policy.json: input_url_prefixes: expected a list of at most " +
                                    std::to_string(kMaxInputUrlPrefixes) + " URL prefixes");
      }
      for (const auto& e : *it) {
        if (!e.is_string()) return InvalidArgumentError("policy.json: input_url_prefixes: expected strings");
        const std::string& prefix = e.get_ref<const std::string&>();
        if (std::string problem = InputUrlPrefixProblem(prefix); !problem.empty()) {
          return InvalidArgumentError("policy.json: input_url_prefixes: " + problem);
        }
        s.input_url_prefixes.push_back(prefix);
      }
      continue;
    }
    if (k == "scheduling") {
      GATOS_ASSIGN_OR_RETURN(s.scheduling, ParseSchedulingJson(*it));
      continue;
    }
    bool* flag = k == "dev_mode"          ? &s.dev_mode
                 : k == "allow_network"   ? &s.allow_network
                 : k == "retry_failed"    ? &s.retry_failed
                 : k == "retry_timed_out" ? &s.retry_timed_out
                                          : nullptr;
    if (flag) {
      if (!it->is_boolean()) return InvalidArgumentError("policy.json: " + k + ": expected true or false");
      *flag = it->get<bool>();
      continue;
    }
    bool found = false;
    for (auto& f : ints) {
      if (k != f.name) continue;
      found = true;
      if (!it->is_number_integer()) return InvalidArgumentError("policy.json: " + k + ": expected an integer");
      int64_t v = it->get<int64_t>();
      if (v < f.min || v > f.max) {
        return InvalidArgumentError("policy.json: " + k + ": " + std::to_string(v) + " is outside " +
                                    std::to_string(f.min) + ".." + std::to_string(f.max));
      }
      *f.dst = v;
    }
    if (!found) return InvalidArgumentError("policy.json: unknown field \"" + k + "\"");
  }
  return s;
}

std::string PolicyRootInput(const Policy& p) {
  // Length-prefixed parts so that no two different policies share an input.
  std::string data;
  auto add = [&](std::string_view part) {
    data += std::to_string(part.size());
    data += ':';
    data += part;
  };
  add(SerializePolicySettings(p.settings));
  add(p.submitters_text);
  add(p.workers_text);
  add(p.ledger_key.ToOpenSsh());
  // Policies without operators hash as before the operators list existed.
  if (!p.operators_text.empty()) add(p.operators_text);
  return data;
}

int64_t RetryBackoffMs(const PolicySettings& s, int64_t next_attempt) {
  int64_t b = s.retry_base_ms;
  for (int64_t i = 2; i < next_attempt && b < s.retry_max_ms; ++i) b *= s.retry_factor;
  return std::min(b, s.retry_max_ms);
}

int64_t RetryBackoffMinMs(const PolicySettings& s, int64_t next_attempt) {
  int64_t b = RetryBackoffMs(s, next_attempt);
  return b - b * s.retry_jitter_pct / 100;
}

bool RetriesStatus(const PolicySettings& s, std::string_view status) {
  return (status == "failed" && s.retry_failed) || (status == "timed-out" && s.retry_timed_out);
}

bool RetriesAttempt(const PolicySettings& s, std::string_view status, std::string_view reason, bool transient) {
  return (reason.empty() || transient) && RetriesStatus(s, status);
}

int64_t DrawRetryBackoffMs(const PolicySettings& s, int64_t next_attempt, uint64_t random) {
  int64_t hi = RetryBackoffMs(s, next_attempt), lo = RetryBackoffMinMs(s, next_attempt);
  return lo + (hi > lo ? static_cast<int64_t>(random % static_cast<uint64_t>(hi - lo + 1)) : 0);
}

namespace {

Result<std::pair<AllowedSigners*, std::string*>> RoleList(Policy* p, std::string_view role) {
  if (role == "submitter") return std::make_pair(&p->submitters, &p->submitters_text);
  if (role == "worker") return std::make_pair(&p->workers, &p->workers_text);
  if (role == "operator") return std::make_pair(&p->operators, &p->operators_text);
  return InvalidArgumentError("role must be submitter, worker or operator");
}

}  // namespace

Status PolicyAllow(Policy* p, std::string_view role, const Ed25519PublicKey& key, bool* changed) {
  *changed = false;
  GATOS_ASSIGN_OR_RETURN(auto list, RoleList(p, role));
  for (const auto& e : list.first->entries()) {
    if (!e.cert_authority && e.key == key) return OkStatus();
  }
  std::string text = *list.second;
  if (!text.empty() && text.back() != '\n') text += '\n';
  Ed25519PublicKey bare = key;
  bare.comment.clear();
  text += PrincipalForKey(role, key) + " namespaces=\"git\" " + bare.ToOpenSsh() + "\n";
  GATOS_ASSIGN_OR_RETURN(*list.first, ParseAllowedSigners(text, "policy:" + std::string(role) + "s"));
  *list.second = std::move(text);
  *changed = true;
  return OkStatus();
}

Status PolicyRevoke(Policy* p, std::string_view role, const Ed25519PublicKey& key) {
  GATOS_ASSIGN_OR_RETURN(auto list, RoleList(p, role));
  Ed25519PublicKey bare = key;
  bare.comment.clear();
  // The base64 blob identifies the key on any line that names it.
  std::string blob = bare.ToOpenSsh().substr(std::string("ssh-ed25519 ").size());
  std::string kept;
  bool removed = false;
  size_t pos = 0;
  const std::string& text = *list.second;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.find(blob) != std::string::npos) {
      removed = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!removed) {
    return NotFoundError(key.WorkerId() + " is not in the policy's " + std::string(role) + " list");
  }
  GATOS_ASSIGN_OR_RETURN(*list.first, ParseAllowedSigners(kept, "policy:" + std::string(role) + "s"));
  *list.second = std::move(kept);
  return OkStatus();
}

std::string PrincipalForKey(std::string_view role, const Ed25519PublicKey& key) {
  return std::string(role) + "-" + key.Hex().substr(0, 16);
}

}  // namespace gatos
