// A manifest in code: validation, its git inputs, its canonical JSON and
// its job id (manifest.h).
#include "gatos/model/manifest.h"

#include <string>
#include <vector>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/scheduling.h"
#include "manifest_rules.h"

namespace gatos {
using namespace manifest_internal;  // NOLINT: this library's own rules

Status ValidateManifest(const Manifest& m, const ManifestLimits& limits) {
  std::vector<std::string> errors;
  const auto add = [&](const std::string& field, const std::string& what) {
    if (!what.empty()) errors.push_back(field + ": " + what);
  };
  if (m.command.empty()) add("command", "is an empty list; expected the program to run");
  for (size_t i = 0; i < m.command.size(); ++i) {
    const std::string f = "command[" + std::to_string(i) + "]";
    if (m.command[i].empty()) add(f, "is an empty string; expected a program or argument");
    add(f, TextProblem(m.command[i], limits.max_string_bytes));
  }
  for (size_t i = 0; i < m.args.size(); ++i) {
    add("args[" + std::to_string(i) + "]", TextProblem(m.args[i], limits.max_string_bytes));
  }
  add("timeout", TimeoutRangeProblem(m.timeout_seconds, limits.max_timeout_seconds));
  if (m.env) {
    for (const auto& [k, v] : *m.env) {
      if (!IsEnvName(k)) {
        add("env." + k, Quote(k) +
                            " is not a valid environment variable name; expected "
                            "[A-Za-z_][A-Za-z0-9_]*");
      } else if (IsReservedEnvName(k)) {
        add("env." + k, Quote(k) + kReservedEnvProblem);
      }
      add("env." + k, TextProblem(v, limits.max_string_bytes));
    }
  }
  if (m.cwd) {
    add("cwd", TextProblem(*m.cwd, limits.max_string_bytes));
    add("cwd", CwdProblem(*m.cwd));
  }
  if (m.inputs) {
    if (!m.inputs->is_array()) {
      add("inputs", "is not a list; expected a list of objects");
    } else {
      for (size_t i = 0; i < m.inputs->size(); ++i) {
        if (!(*m.inputs)[i].is_object()) {
          add("inputs[" + std::to_string(i) + "]", "is not an object; expected an object");
        }
      }
      Result<std::string> c = CanonicalJson(*m.inputs);
      if (!c.ok()) add("inputs", c.status().message());
      Result<std::vector<GitInput>> git = GitInputsOf(*m.inputs);
      if (!git.ok()) errors.push_back(git.status().message());
    }
  }
  if (m.resources) {
    const JobResources& r = *m.resources;
    if (!r.memory_mb && !r.pids && !r.cpu_millis && !r.disk_mb) {
      add("resources", kEmptyResourcesProblem);
    }
    const std::optional<int64_t>* values[] = {&r.memory_mb, &r.pids, &r.cpu_millis, &r.disk_mb};
    for (int i = 0; i < 4; ++i) {
      if (*values[i]) {
        add(std::string("resources.") + kJobResourceKeys[i],
            JobResourceProblem(kJobResourceKeys[i], **values[i]));
      }
    }
  }
  if (m.policy_root) add("policy_root", PolicyRootProblem(*m.policy_root));
  if (m.pool) {
    add("pool", PoolNameProblem(*m.pool));
    if (*m.pool == kDefaultPool) add("pool", kDefaultPoolProblem);
  }
  if (m.ulid) add("ulid", UlidProblem(*m.ulid));
  if (errors.empty()) return OkStatus();
  std::string joined;
  for (const auto& e : errors) joined += (joined.empty() ? "" : "\n") + e;
  return InvalidArgumentError(joined);
}

Result<std::vector<GitInput>> GitInputs(const Manifest& m) {
  if (!m.inputs) return std::vector<GitInput>{};
  return GitInputsOf(*m.inputs);
}

nlohmann::json ManifestCoreJson(const Manifest& m) {
  nlohmann::json j = nlohmann::json::object();
  j["command"] = m.command;
  j["args"] = m.args;
  j["timeout"] = m.timeout_seconds;
  if (m.env) j["env"] = *m.env;
  if (m.cwd) j["cwd"] = *m.cwd;
  if (m.inputs) j["inputs"] = *m.inputs;
  if (m.resources) {
    nlohmann::json r = nlohmann::json::object();
    if (m.resources->memory_mb) r["memory_mb"] = *m.resources->memory_mb;
    if (m.resources->pids) r["pids"] = *m.resources->pids;
    if (m.resources->cpu_millis) r["cpu_millis"] = *m.resources->cpu_millis;
    if (m.resources->disk_mb) r["disk_mb"] = *m.resources->disk_mb;
    j["resources"] = std::move(r);
  }
  if (m.policy_root) j["policy_root"] = *m.policy_root;
  if (m.pool) j["pool"] = *m.pool;
  return j;
}

std::string ManifestPool(const Manifest& m) { return m.pool ? *m.pool : std::string(kDefaultPool); }

nlohmann::json ManifestJson(const Manifest& m) {
  nlohmann::json j = ManifestCoreJson(m);
  if (m.ulid) j["ulid"] = *m.ulid;
  return j;
}

std::string CanonicalManifest(const Manifest& m) {
  Result<std::string> c = CanonicalJson(ManifestCoreJson(m));
  return c.ok() ? std::move(c).value() : std::string();
}

std::string JobIdHexOfCanonical(std::string_view canonical) { return DigestHex(Blake3(canonical)); }

std::string JobIdHex(const Manifest& m) { return JobIdHexOfCanonical(CanonicalManifest(m)); }

std::string JobId(const Manifest& m) { return "blake3:" + JobIdHex(m); }

bool IsJobIdHex(std::string_view hex) { return IsLowerHex(hex, 64); }

}  // namespace gatos