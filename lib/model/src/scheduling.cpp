#include "gatos/model/scheduling.h"

#include <algorithm>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

using nlohmann::json;

constexpr int64_t kMaxLimit = 1'000'000'000;

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out + "\"";
}

Status CheckKey(std::string_view field, std::string_view hex) {
  if (IsLowerHex(hex, 64)) return OkStatus();
  return InvalidArgumentError("policy.json: scheduling." + std::string(field) + ": " + Quote(hex) +
                              " is not a key (64 lowercase hex)");
}

Result<std::vector<std::string>> PoolArray(std::string_view field, const json& j) {
  if (!j.is_array() || j.empty() || j.size() > kMaxPoolsPerList) {
    return InvalidArgumentError(std::string(field) + ": expected a list of 1 to " +
                                std::to_string(kMaxPoolsPerList) + " pool names");
  }
  std::vector<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) return InvalidArgumentError(std::string(field) + ": expected pool names (strings)");
    const std::string& s = e.get_ref<const std::string&>();
    if (std::string p = PoolNameProblem(s); !p.empty()) {
      return InvalidArgumentError(std::string(field) + ": " + p);
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<int64_t> Limit(std::string_view field, const json& j) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > kMaxLimit) {
    return InvalidArgumentError(std::string(field) + ": expected an integer 0.." + std::to_string(kMaxLimit) +
                                " (0 = no limit)");
  }
  return j.get<int64_t>();
}

json LimitsJson(const SubmitLimits& l) {
  json j = json::object();
  if (l.max_pending) j["max_pending"] = *l.max_pending;
  if (l.max_running) j["max_running"] = *l.max_running;
  if (l.per_minute) j["per_minute"] = *l.per_minute;
  return j;
}

Result<SubmitLimits> ParseLimits(std::string_view field, const json& j) {
  if (!j.is_object()) return InvalidArgumentError(std::string(field) + ": expected an object");
  SubmitLimits l;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::optional<int64_t>* dst = it.key() == "max_pending"   ? &l.max_pending
                                  : it.key() == "max_running" ? &l.max_running
                                  : it.key() == "per_minute"  ? &l.per_minute
                                                              : nullptr;
    if (!dst) {
      return InvalidArgumentError(std::string(field) + ": unknown field " + Quote(it.key()) +
                                  "; expected max_pending, max_running or per_minute");
    }
    GATOS_ASSIGN_OR_RETURN(*dst, Limit(std::string(field) + "." + it.key(), *it));
  }
  return l;
}

Result<std::map<std::string, std::vector<std::string>>> ParseKeyPools(std::string_view field, const json& j) {
  if (!j.is_object()) return InvalidArgumentError("policy.json: scheduling." + std::string(field) + ": expected an object");
  std::map<std::string, std::vector<std::string>> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    GATOS_RETURN_IF_ERROR(CheckKey(field, it.key()));
    GATOS_ASSIGN_OR_RETURN(out[it.key()],
                           PoolArray("policy.json: scheduling." + std::string(field) + "." + it.key().substr(0, 12), *it));
  }
  return out;
}

}  // namespace

std::string PoolNameProblem(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxPoolName;
  for (size_t i = 0; ok && i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    ok = alnum || (i > 0 && (c == '-' || c == '_'));
  }
  if (ok) return "";
  return Quote(name) + " is not a pool name; expected 1 to 63 characters of a-z, 0-9, '-' and '_', "
         "starting with a letter or digit";
}

Result<int> ParsePriority(std::string_view text) {
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '9') return text[0] - '0';
  return InvalidArgumentError("Priority: " + Quote(text) + " is not a priority; expected one digit 0-9 (9 first, " +
                              "default " + std::to_string(kDefaultPriority) + ")");
}

Result<std::vector<std::string>> ParsePoolList(std::string_view csv) {
  json list = json::array();
  for (size_t start = 0; start <= csv.size();) {
    size_t comma = csv.find(',', start);
    if (comma == std::string_view::npos) comma = csv.size();
    list.push_back(std::string(csv.substr(start, comma - start)));
    start = comma + 1;
  }
  return PoolArray("pools", list);
}

bool SchedulingPolicy::empty() const {
  return worker_pools.empty() && submitter_pools.empty() && default_limits == SubmitLimits{} &&
         key_limits.empty() && pool_max_running.empty() && paused.empty();
}

EffectiveLimits LimitsFor(const SchedulingPolicy& p, std::string_view key_hex) {
  EffectiveLimits e;
  e.max_pending = p.default_limits.max_pending.value_or(0);
  e.max_running = p.default_limits.max_running.value_or(0);
  e.per_minute = p.default_limits.per_minute.value_or(0);
  auto it = p.key_limits.find(std::string(key_hex));
  if (it != p.key_limits.end()) {
    if (it->second.max_pending) e.max_pending = *it->second.max_pending;
    if (it->second.max_running) e.max_running = *it->second.max_running;
    if (it->second.per_minute) e.per_minute = *it->second.per_minute;
  }
  return e;
}

bool KeyMayUsePool(const std::map<std::string, std::vector<std::string>>& lists, std::string_view key_hex,
                   std::string_view pool) {
  auto it = lists.find(std::string(key_hex));
  if (it == lists.end()) return true;
  return std::binary_search(it->second.begin(), it->second.end(), std::string(pool));
}

json SchedulingJson(const SchedulingPolicy& p) {
  json j = json::object();
  if (!p.worker_pools.empty()) j["worker_pools"] = p.worker_pools;
  if (!p.submitter_pools.empty()) j["submitter_pools"] = p.submitter_pools;
  if (!(p.default_limits == SubmitLimits{})) j["default_limits"] = LimitsJson(p.default_limits);
  if (!p.key_limits.empty()) {
    json k = json::object();
    for (const auto& [key, l] : p.key_limits) k[key] = LimitsJson(l);
    j["key_limits"] = k;
  }
  if (!p.pool_max_running.empty()) j["pool_max_running"] = p.pool_max_running;
  if (!p.paused.empty()) j["paused"] = std::vector<std::string>(p.paused.begin(), p.paused.end());
  return j;
}

Result<SchedulingPolicy> ParseSchedulingJson(const json& j) {
  if (!j.is_object()) return InvalidArgumentError("policy.json: scheduling: expected an object");
  SchedulingPolicy p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string field = "policy.json: scheduling." + k;
    if (k == "worker_pools") {
      GATOS_ASSIGN_OR_RETURN(p.worker_pools, ParseKeyPools(k, *it));
    } else if (k == "submitter_pools") {
      GATOS_ASSIGN_OR_RETURN(p.submitter_pools, ParseKeyPools(k, *it));
    } else if (k == "default_limits") {
      GATOS_ASSIGN_OR_RETURN(p.default_limits, ParseLimits(field, *it));
    } else if (k == "key_limits") {
      if (!it->is_object()) return InvalidArgumentError(field + ": expected an object");
      for (auto kt = it->begin(); kt != it->end(); ++kt) {
        GATOS_RETURN_IF_ERROR(CheckKey("key_limits", kt.key()));
        GATOS_ASSIGN_OR_RETURN(p.key_limits[kt.key()], ParseLimits(field + "." + kt.key().substr(0, 12), *kt));
      }
    } else if (k == "pool_max_running") {
      if (!it->is_object()) return InvalidArgumentError(field + ": expected an object");
      for (auto pt = it->begin(); pt != it->end(); ++pt) {
        if (std::string pr = PoolNameProblem(pt.key()); !pr.empty()) return InvalidArgumentError(field + ": " + pr);
        GATOS_ASSIGN_OR_RETURN(p.pool_max_running[pt.key()], Limit(field + "." + pt.key(), *pt));
      }
    } else if (k == "paused") {
      GATOS_ASSIGN_OR_RETURN(auto pools, PoolArray(field, *it));
      p.paused.insert(pools.begin(), pools.end());
    } else {
      return InvalidArgumentError("policy.json: scheduling: unknown field " + Quote(k));
    }
  }
  return p;
}

Status ApplySchedulingChange(SchedulingPolicy* p, const json& c, bool* changed) {
  *changed = false;
  if (!c.is_object() || !c.contains("action") || !c["action"].is_string()) {
    return InvalidArgumentError("a scheduling change needs an action");
  }
  const SchedulingPolicy before = *p;
  const std::string action = c["action"].get<std::string>();
  auto str = [&](const char* f) -> Result<std::string> {
    if (!c.contains(f) || !c[f].is_string()) return InvalidArgumentError(action + " needs " + f);
    return c[f].get<std::string>();
  };
  if (action == "worker-pools" || action == "submitter-pools") {
    GATOS_ASSIGN_OR_RETURN(std::string key, str("key"));
    GATOS_RETURN_IF_ERROR(CheckKey(action, key));
    auto& lists = action == "worker-pools" ? p->worker_pools : p->submitter_pools;
    if (!c.contains("pools") || c["pools"].is_null()) {
      lists.erase(key);
    } else {
      GATOS_ASSIGN_OR_RETURN(lists[key], PoolArray("pools", c["pools"]));
    }
  } else if (action == "limits") {
    GATOS_ASSIGN_OR_RETURN(std::string key, str("key"));
    if (key != "default") GATOS_RETURN_IF_ERROR(CheckKey("limits", key));
    SubmitLimits l = key == "default" ? p->default_limits : (p->key_limits.count(key) ? p->key_limits[key] : SubmitLimits{});
    for (const char* f : {"max_pending", "max_running", "per_minute"}) {
      if (!c.contains(f)) continue;
      std::optional<int64_t>& dst = std::string(f) == "max_pending"   ? l.max_pending
                                    : std::string(f) == "max_running" ? l.max_running
                                                                      : l.per_minute;
      if (c[f].is_null()) {
        dst.reset();
      } else {
        GATOS_ASSIGN_OR_RETURN(int64_t v, Limit(f, c[f]));
        dst = v;
      }
    }
    if (key == "default") {
      p->default_limits = l;
    } else if (l == SubmitLimits{}) {
      p->key_limits.erase(key);
    } else {
      p->key_limits[key] = l;
    }
  } else if (action == "pool-limits" || action == "pause" || action == "resume") {
    GATOS_ASSIGN_OR_RETURN(std::string pool, str("pool"));
    if (std::string pr = PoolNameProblem(pool); !pr.empty()) return InvalidArgumentError(pr);
    if (action == "pause") {
      if (p->paused.size() >= kMaxPoolsPerList && !p->paused.count(pool)) {
        return InvalidArgumentError("at most " + std::to_string(kMaxPoolsPerList) + " pools can be paused");
      }
      p->paused.insert(pool);
    } else if (action == "resume") {
      p->paused.erase(pool);
    } else {
      if (!c.contains("max_running") || c["max_running"].is_null()) {
        p->pool_max_running.erase(pool);
      } else {
        GATOS_ASSIGN_OR_RETURN(int64_t v, Limit("max_running", c["max_running"]));
        if (v == 0) {
          p->pool_max_running.erase(pool);
        } else {
          p->pool_max_running[pool] = v;
        }
      }
    }
  } else {
    return InvalidArgumentError("unknown scheduling action " + Quote(action));
  }
  *changed = !(*p == before);
  return OkStatus();
}

}  // namespace gatos
