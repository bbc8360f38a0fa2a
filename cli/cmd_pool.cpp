// gatos policy limits | pool ls | pool pause | pool resume (docs/scheduling.md)
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "gatos/git/ledger.h"
#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

// A limit flag's value: N (0 = no limit), or "none" (null: the key's own
// limit is removed, the default applies again).
bool LimitValue(const std::string& flag, const std::string& v, json* out, std::string* error) {
  if (v == "none") {
    *out = nullptr;
    return true;
  }
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 0) {
    *error = "--" + flag + ": expected a number (0 = no limit) or 'none'";
    return false;
  }
  *out = n;
  return true;
}

void PrintLimits(const SchedulingPolicy& s) {
  auto show = [](const SubmitLimits& l) {
    auto f = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("-"); };
    return "max_pending " + f(l.max_pending) + "  max_running " + f(l.max_running) + "  per_minute " +
           f(l.per_minute);
  };
  std::cout << "default: " << show(s.default_limits) << "\n";
  for (const auto& [k, l] : s.key_limits) std::cout << "ed25519:" << k << ": " << show(l) << "\n";
  for (const auto& [p, n] : s.pool_max_running) std::cout << "pool " << p << ": max_running " << n << "\n";
}

int PauseOrResume(const Args& args, const char* action) {
  const std::string name = std::string("pool ") + action;
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}})) return UsageError(name, flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos " << name << " NAME --ledger DIR\n\n"
              << (std::string(action) == "pause"
                      ? "Stops offering the jobs of pool NAME: they stay pending; running jobs finish.\n"
                      : "Offers the jobs of pool NAME again.\n")
              << "A policy change: signed by the ledger key and recorded in the log.\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError(name, "--ledger DIR is required");
  if (flags.positional().size() != 1) return UsageError(name, "expects one pool NAME");
  const std::string pool = flags.positional()[0];
  if (std::string p = PoolNameProblem(pool); !p.empty()) return UsageError(name, p);
  return PolicyChange(name, *dir, json{{"op", "scheduling"}, {"change", {{"action", action}, {"pool", pool}}}},
                      std::string(std::string(action) == "pause" ? "paused" : "resumed") + " pool " + pool);
}

}  // namespace

int RunPolicyLimits(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"},
                          {"default", 0, false},
                          {"key"},
                          {"pool"},
                          {"max-pending"},
                          {"max-running"},
                          {"per-minute"}})) {
    return UsageError("policy limits", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos policy limits --ledger DIR (--default | --key KEY.pub) [--max-pending N]\n"
                 "                           [--max-running N] [--per-minute N]\n"
                 "       gatos policy limits --ledger DIR --pool NAME --max-running N\n"
                 "       gatos policy limits --ledger DIR      (prints the limits)\n\n"
                 "Admission and running limits (docs/scheduling.md). Per submitter key (or the\n"
                 "default for every key): max_pending (jobs waiting), max_running (jobs holding\n"
                 "a lease) and per_minute (new jobs accepted in the last minute). A submission\n"
                 "over max_pending or per_minute is refused with the limit's name; jobs beyond\n"
                 "max_running wait while other submitters' jobs run. Per pool: max_running.\n"
                 "N = 0 means no limit; 'none' removes a key's own value (the default applies).\n"
                 "A policy change: signed by the ledger key and recorded in the log.\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError("policy limits", "--ledger DIR is required");
  const int targets = (flags.Has("default") ? 1 : 0) + (flags.Get("key") ? 1 : 0) + (flags.Get("pool") ? 1 : 0);
  const bool any_value = flags.Get("max-pending") || flags.Get("max-running") || flags.Get("per-minute");
  if (targets == 0 && !any_value) {
    auto ledger = Ledger::Open(*dir);
    if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
    auto policy = (*ledger)->ReadPolicy();
    if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
    PrintLimits(policy->settings.scheduling);
    return kExitOk;
  }
  if (targets != 1) return UsageError("policy limits", "give one of --default, --key KEY.pub, --pool NAME");
  if (!any_value) return UsageError("policy limits", "give at least one of --max-pending, --max-running, --per-minute");
  json change = json::object();
  std::string error, what;
  if (auto pool = flags.Get("pool")) {
    if (flags.Get("max-pending") || flags.Get("per-minute")) {
      return UsageError("policy limits", "a pool has only --max-running");
    }
    if (std::string p = PoolNameProblem(*pool); !p.empty()) return UsageError("policy limits", p);
    json v;
    if (!LimitValue("max-running", *flags.Get("max-running"), &v, &error)) return UsageError("policy limits", error);
    change = {{"action", "pool-limits"}, {"pool", *pool}, {"max_running", v}};
    what = "pool " + *pool;
  } else {
    std::string key = "default";
    if (auto k = flags.Get("key")) {
      auto pub = ReadPublicKeyFile(*k);
      if (!pub.ok()) return ReportError(pub.status().message(), kExitUsage);
      key = pub->Hex();
      what = pub->WorkerId();
    } else {
      what = "the default";
    }
    change = {{"action", "limits"}, {"key", key}};
    for (const char* f : {"max-pending", "max-running", "per-minute"}) {
      auto v = flags.Get(f);
      if (!v) continue;
      json value;
      if (!LimitValue(f, *v, &value, &error)) return UsageError("policy limits", error);
      std::string field = f;
      for (char& c : field) c = c == '-' ? '_' : c;
      change[field] = value;
    }
  }
  return PolicyChange("policy limits", *dir, json{{"op", "scheduling"}, {"change", change}},
                      "limits of " + what + " changed");
}

int RunPoolPause(const Args& args) { return PauseOrResume(args, "pause"); }
int RunPoolResume(const Args& args) { return PauseOrResume(args, "resume"); }

int RunPoolLs(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}, {"submitters", 0, false}})) {
    return UsageError("pool ls", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos pool ls --ledger DIR|nats://HOST:PORT [--submitters] [--json]\n\n"
                 "Per pool, as gatosd sees it now: pending jobs (of which offered), running\n"
                 "jobs, whether the pool is paused, its running limit, and the live workers\n"
                 "serving it (from their heartbeats). --submitters: per submitter instead\n"
                 "(the 100 busiest), its pending and running jobs against its limits.\n";
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("pool ls", "--ledger is required (or set GATOS_LEDGER)");
  auto reply = LedgerCall(*target, rpc::kPools, "{}", 10000);
  if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
  if (!reply->value("ok", false)) return ReportError(reply->value("message", "pools request refused"), kExitFailure);
  const json pools = reply->value("pools", json::array());
  const json submitters = reply->value("submitters", json::array());
  if (flags.Has("json")) {
    std::cout << (flags.Has("submitters") ? submitters : pools).dump() << "\n";
    return kExitOk;
  }
  if (flags.Has("submitters")) {
    auto limit = [](const json& s, const char* k) {
      int64_t v = s.value(k, int64_t{0});
      return v > 0 ? std::to_string(v) : std::string("-");
    };
    std::printf("%-26s %9s %11s %9s %11s %10s\n", "SUBMITTER", "PENDING", "MAX_PENDING", "RUNNING", "MAX_RUNNING",
                "PER_MINUTE");
    for (const auto& s : submitters) {
      std::printf("%-26s %9lld %11s %9lld %11s %10s\n", s.value("submitter", "").substr(0, 24).c_str(),
                  static_cast<long long>(s.value("pending", int64_t{0})), limit(s, "max_pending").c_str(),
                  static_cast<long long>(s.value("running", int64_t{0})), limit(s, "max_running").c_str(),
                  limit(s, "per_minute").c_str());
    }
    return kExitOk;
  }
  std::printf("%-24s %9s %9s %9s %7s %7s\n", "POOL", "PENDING", "OFFERED", "RUNNING", "WORKERS", "PAUSED");
  for (const auto& p : pools) {
    std::printf("%-24s %9lld %9lld %9lld %7lld %7s\n", p.value("pool", "").c_str(),
                static_cast<long long>(p.value("pending", int64_t{0})),
                static_cast<long long>(p.value("offered", int64_t{0})),
                static_cast<long long>(p.value("running", int64_t{0})),
                static_cast<long long>(p.value("workers", int64_t{0})), p.value("paused", false) ? "yes" : "no");
  }
  return kExitOk;
}

}  // namespace gatos::cli
