// Scheduling rules (docs/scheduling.md): pool names, the Priority trailer,
// and the policy's `scheduling` section (which keys may use which pools,
// admission and running limits, paused pools).
//
// The section lives in policy.json under "scheduling" and is absent when
// empty, so a policy that uses none of it hashes as before.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_SCHEDULING_H_
#define GATOS_SCHEDULING_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kDefaultPool[] = "default";
inline constexpr int kDefaultPriority = 5;
inline constexpr int kMaxPriority = 9;
inline constexpr char kPriorityTrailer[] = "Priority";
inline constexpr size_t kMaxPoolName = 63;
// Pools named in one policy list (a key's pools, the paused set).
inline constexpr size_t kMaxPoolsPerList = 64;

// "" when `name` is a pool name: 1 to 63 characters of [a-z0-9_-], starting
// with a letter or digit. Such a name is safe in a ref name, a NATS subject
// token and a JetStream durable name. Otherwise what is wrong.
std::string PoolNameProblem(std::string_view name);

// A `Priority:` trailer's value: one digit 0-9. InvalidArgument naming the
// value and the range otherwise.
Result<int> ParsePriority(std::string_view text);

// "a,b" -> {"a", "b"} (sorted, no duplicates); each a pool name.
// InvalidArgument for an empty list or a bad name.
Result<std::vector<std::string>> ParsePoolList(std::string_view csv);

// Admission and running limits of a submitter key. Unset fields fall back
// to the policy's default; 0 means no limit.
struct SubmitLimits {
  std::optional<int64_t> max_pending;  // jobs waiting (not finished, not running)
  std::optional<int64_t> max_running;  // jobs holding a live lease
  std::optional<int64_t> per_minute;   // new jobs accepted in the last 60 s
  bool operator==(const SubmitLimits&) const = default;
};

struct SchedulingPolicy {
  // key hex -> the pools it may use. A key not listed may use every pool.
  std::map<std::string, std::vector<std::string>> worker_pools;
  std::map<std::string, std::vector<std::string>> submitter_pools;
  SubmitLimits default_limits;
  std::map<std::string, SubmitLimits> key_limits;  // submitter key hex -> overrides
  std::map<std::string, int64_t> pool_max_running;  // pool -> running jobs at most (0 = none)
  std::set<std::string> paused;                    // pools whose jobs are not offered
  bool empty() const;
  bool operator==(const SchedulingPolicy&) const = default;
};

// The limits in force for `key_hex` (its overrides over the default), every
// field set (0 = none).
struct EffectiveLimits {
  int64_t max_pending = 0, max_running = 0, per_minute = 0;
};
EffectiveLimits LimitsFor(const SchedulingPolicy& p, std::string_view key_hex);

// Whether `key_hex` may use `pool` under `lists` (worker_pools or
// submitter_pools): unlisted keys may use every pool.
bool KeyMayUsePool(const std::map<std::string, std::vector<std::string>>& lists,
                   std::string_view key_hex, std::string_view pool);

// The JSON of the section (keys sorted; empty parts omitted) and its strict
// parse (unknown fields, bad names, keys that are not 64 lowercase hex and
// negative limits are InvalidArgument naming the field).
nlohmann::json SchedulingJson(const SchedulingPolicy& p);
Result<SchedulingPolicy> ParseSchedulingJson(const nlohmann::json& j);

// One change requested by `gatos policy ...` / `gatos pool ...`:
//   {"action":"worker-pools"|"submitter-pools", "key":HEX, "pools":[...]|null}
//   {"action":"limits", "key":HEX|"default", "max_pending":N|null, ...}
//   {"action":"pool-limits", "pool":NAME, "max_running":N}
//   {"action":"pause"|"resume", "pool":NAME}
// null removes an override. *changed is false when the policy already said
// so. InvalidArgument for a malformed change.
Status ApplySchedulingChange(SchedulingPolicy* p, const nlohmann::json& change, bool* changed);

}  // namespace gatos

#endif  // GATOS_SCHEDULING_H_
