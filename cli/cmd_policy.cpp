// gatos policy show | allow-* | revoke-* | set | rotate-ledger-key
#include <iostream>

#include "commands.h"
#include "gatos/crypto/sha256.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {

using nlohmann::json;

int PolicyChange(const std::string& name, const std::string& dir, const json& req, const std::string& done) {
  if (ClassifyLedger(dir) != LedgerKind::kDirectory) {
    return UsageError("policy " + name, "--ledger must be the ledger directory (policy changes are made on the ledger host)");
  }
  auto reply = LedgerCall(dir, rpc::kLocalPolicy, rpc::Dump(req), 30000);
  if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
  if (!reply->value("ok", false)) return ReportError(reply->value("message", "policy change refused"), kExitFailure);
  if (reply->value("existing", false)) {
    std::cout << done << ": already so; nothing changed\n";
    return kExitOk;
  }
  std::cout << done << " (policy " << reply->value("commit", "").substr(0, 12) << ")\n";
  if (reply->value("revoked_leases", 0) > 0) {
    std::cout << reply->value("revoked_leases", 0) << " lease(s) held by the revoked worker ended; those jobs are offered again\n";
  }
  if (reply->contains("ledger_key")) {
    std::cout << "new ledger key: " << reply->value("ledger_key", "") << "\n"
              << "workers check grants with the ledger's public key: give them the new key\n"
              << "(gatos-worker run --ledger-key FILE accepts several keys, one per line)\n";
  }
  return kExitOk;
}

namespace {

int Change(const std::string& name, const std::string& dir, const json& req, const std::string& done) {
  return PolicyChange(name, dir, req, done);
}

int KeyChange(const Args& args, const char* op, const char* role) {
  std::string name = std::string(op) + "-" + role;
  Flags flags;
  const bool pools_flag = std::string(op) == "allow" && std::string(role) != "operator";
  std::vector<FlagSpec> specs = {{"ledger"}};
  if (pools_flag) specs.push_back({"pools"});
  if (!flags.Parse(args, specs)) return UsageError("policy " + name, flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos policy " << name << " --ledger DIR KEY.pub"
              << (pools_flag ? " [--pools a,b|all]" : "") << "\n\n"
              << (std::string(op) == "allow" ? "Adds the key to" : "Removes the key from") << " the policy's "
              << role << " list: a new policy commit, signed by the ledger key and\n"
                 "recorded in the ledger's log. "
              << (std::string(op) == "allow"
                      ? "Adding a key that is already there is a no-op.\n"
                      : "A revoked worker's leases end at once (its jobs are offered again) and\n"
                        "its later requests and results are refused; a revoked submitter's new jobs\n"
                        "are refused. Jobs and results recorded before stay valid: the auditor\n"
                        "judges each by the policy in force when the ledger accepted it.\n");
    if (pools_flag) {
      std::cout << "--pools a,b: the pools the key may " << (std::string(role) == "worker" ? "serve" : "submit to")
                << " (default: every pool;\n'all' lifts a restriction). Enforced by the ledger "
                   "(docs/scheduling.md).\n";
    }
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError("policy " + name, "--ledger DIR is required");
  if (flags.positional().size() != 1) return UsageError("policy " + name, "expects one KEY.pub");
  auto key = ReadPublicKeyFile(flags.positional()[0]);
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  json req = {{"op", op}, {"role", role}, {"key", key->ToOpenSsh()}};
  if (pools_flag && flags.Get("pools")) {
    if (*flags.Get("pools") == "all") {
      req["pools"] = nullptr;
    } else {
      auto pools = ParsePoolList(*flags.Get("pools"));
      if (!pools.ok()) return UsageError("policy " + name, "--pools: " + pools.status().message());
      req["pools"] = *pools;
    }
  }
  return Change(name, *dir, req, std::string(std::string(op) == "allow" ? "allowed " : "revoked ") + role + " " +
                                     key->WorkerId());
}

}  // namespace

int RunPolicyAllowSubmitter(const Args& args) { return KeyChange(args, "allow", "submitter"); }
int RunPolicyAllowWorker(const Args& args) { return KeyChange(args, "allow", "worker"); }
int RunPolicyAllowOperator(const Args& args) { return KeyChange(args, "allow", "operator"); }
int RunPolicyRevokeSubmitter(const Args& args) { return KeyChange(args, "revoke", "submitter"); }
int RunPolicyRevokeWorker(const Args& args) { return KeyChange(args, "revoke", "worker"); }
int RunPolicyRevokeOperator(const Args& args) { return KeyChange(args, "revoke", "operator"); }

int RunPolicySet(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}})) return UsageError("policy set", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos policy set --ledger DIR NAME=VALUE...\n\n"
                 "Changes policy settings (policy.json), for example\n"
                 "  gatos policy set --ledger DIR max_attempts=3 retry_base_ms=5000\n"
                 "Values are integers or true/false; 'gatos policy show' lists the settings.\n"
                 "input_url_prefixes=P1,P2 restricts the URLs of jobs' git inputs to those\n"
                 "prefixes (checked at push); input_url_prefixes= lifts the restriction.\n"
                 "Job resource limits (docs/limits.md): job_memory_mb, job_pids,\n"
                 "job_cpu_millis, job_disk_mb apply to jobs whose manifest does not ask\n"
                 "(resources:); max_job_memory_mb, ... are the most a manifest may ask\n"
                 "(refused at push above). 0 = none. For example\n"
                 "  gatos policy set --ledger DIR job_memory_mb=1024 job_pids=512 "
                 "max_job_memory_mb=8192\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError("policy set", "--ledger DIR is required");
  if (flags.positional().empty()) return UsageError("policy set", "expects NAME=VALUE arguments");
  json settings = json::object();
  for (const auto& a : flags.positional()) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0) return UsageError("policy set", "expected NAME=VALUE, got '" + a + "'");
    std::string k = a.substr(0, eq), v = a.substr(eq + 1);
    if (k == "input_url_prefixes") {
      // A comma-separated list; empty: no restriction.
      json list = json::array();
      for (size_t start = 0; start < v.size();) {
        size_t comma = v.find(',', start);
        if (comma == std::string::npos) comma = v.size();
        if (comma > start) list.push_back(v.substr(start, comma - start));
        start = comma + 1;
      }
      settings[k] = list;
      continue;
    }
    if (v == "true" || v == "false") {
      settings[k] = v == "true";
      continue;
    }
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) return UsageError("policy set", k + ": expected an integer or true/false");
    settings[k] = n;
  }
  return Change("set", *dir, json{{"op", "set"}, {"settings", settings}}, "policy settings changed");
}

int RunPolicyRotateLedgerKey(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}})) return UsageError("policy rotate-ledger-key", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos policy rotate-ledger-key --ledger DIR\n\n"
                 "Makes a new ledger key. The policy commit that introduces it is signed with\n"
                 "the old key, so auditors follow the chain of keys; from then on the ledger\n"
                 "signs its log, leases and cancels with the new key. The old key is kept as\n"
                 "DIR/gatos/ledger_key.retired-<seq>.\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) return UsageError("policy rotate-ledger-key", "--ledger DIR is required");
  return Change("rotate-ledger-key", *dir, json{{"op", "rotate-ledger-key"}}, "rotated the ledger key");
}

int RunPolicyShow(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}})) return UsageError("policy show", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos policy show --ledger DIR [--json]\n\nPrints the policy in force, with the\n"
                 "ledger's public key (what workers need for --ledger-key).\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError("policy show", "--ledger DIR is required");
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
  auto commit = (*ledger)->ResolveRef(kPolicyRef);
  auto keys = [](const AllowedSigners& list) {
    json a = json::array();
    for (const auto& e : list.entries()) a.push_back(e.key.WorkerId());
    return a;
  };
  if (flags.Has("json")) {
    json out = {{"commit", commit.value_or("")},
                {"policy_root", PolicyRoot(*policy)},
                {"settings", json::parse(SerializePolicySettings(policy->settings))},
                {"ledger_key", policy->ledger_key.WorkerId()},
                {"ledger_key_openssh", policy->ledger_key.ToOpenSsh()},
                {"submitters", keys(policy->submitters)},
                {"workers", keys(policy->workers)},
                {"operators", keys(policy->operators)}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "policy commit: " << commit.value_or("") << "\n"
            << "policy root:   " << PolicyRoot(*policy) << "\n"
            << "ledger key:    " << policy->ledger_key.ToOpenSsh() << "\n"
            << "settings:      " << SerializePolicySettings(policy->settings) << "\n";
  if (policy->settings.dev_mode) std::cout << "WARNING: dev mode: unsigned job commits are accepted\n";
  for (auto [title, list] : {std::pair{"submitters", &policy->submitters}, std::pair{"workers", &policy->workers},
                             std::pair{"operators", &policy->operators}}) {
    std::cout << title << " (" << list->entries().size() << "):\n";
    for (const auto& e : list->entries()) std::cout << "  " << e.key.WorkerId() << "\n";
  }
  return kExitOk;
}

}  // namespace gatos::cli
