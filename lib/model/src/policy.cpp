#include "gatos/policy.h"

#include <nlohmann/json.hpp>

#include "gatos/canonical_json.h"
#include "gatos/encoding.h"

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
  };
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
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "version") {
      if (!it->is_number_integer() || it->get<int64_t>() != 1) {
        return InvalidArgumentError("policy.json: version: expected 1");
      }
      continue;
    }
    if (k == "dev_mode" || k == "allow_network") {
      if (!it->is_boolean()) return InvalidArgumentError("policy.json: " + k + ": expected true or false");
      (k == "dev_mode" ? s.dev_mode : s.allow_network) = it->get<bool>();
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
  return data;
}

std::string PrincipalForKey(std::string_view role, const Ed25519PublicKey& key) {
  return std::string(role) + "-" + key.Hex().substr(0, 16);
}

}  // namespace gatos
