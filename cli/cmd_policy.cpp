// gatos policy show | allow-submitter | allow-worker
#include <iostream>

#include "commands.h"
#include "gatos/flags.h"
#include "gatos/sha256.h"
#include "gatos/job_index.h"
#include "gatos/job_plane.h"
#include "gatos/ledger.h"

namespace gatos::cli {
namespace {

int Allow(const Args& args, const char* role, const char* name) {
  std::string help = std::string("usage: gatos policy ") + name +
                     " --ledger DIR KEY.pub\n\nAdds the key to the policy's " + role +
                     " list (a new policy commit at refs/gatos/policy, signed by the\n"
                     "ledger key in DIR/gatos/ledger_key). Adding a key that is already there is a no-op.\n";
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}})) return UsageError(std::string("policy ") + name, flags.error());
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) return UsageError(std::string("policy ") + name, "--ledger DIR is required");
  if (flags.positional().size() != 1) return UsageError(std::string("policy ") + name, "expects one KEY.pub");
  auto key = ReadPublicKeyFile(flags.positional()[0]);
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
  auto ledger_key = ReadPrivateKeyFile(*dir + "/gatos/ledger_key");
  if (!ledger_key.ok()) return ReportError(ledger_key.status().message(), kExitFailure);
  bool worker = std::string(role) == "workers";
  AllowedSigners& list = worker ? policy->workers : policy->submitters;
  std::string& text = worker ? policy->workers_text : policy->submitters_text;
  if (list.FindKey(*key, kSignerNamespaceGit, SystemNowMs() / 1000)) {
    std::cout << key->WorkerId() << " is already allowed\n";
    return kExitOk;
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  std::string principal = PrincipalForKey(worker ? "worker" : "submitter", *key);
  text += principal + " " + key->ToOpenSsh() + "\n";
  auto commit = (*ledger)->WritePolicy(*policy,
                                       std::string("gatos: allow ") + (worker ? "worker " : "submitter ") +
                                           key->WorkerId() + "\n",
                                       *ledger_key, SystemNowMs());
  if (!commit.ok()) return ReportError(commit.status().message(), kExitFailure);
  (void)AppendInbox(*dir, "policy");  // a running gatosd reloads it
  std::cout << "allowed " << (worker ? "worker " : "submitter ") << key->WorkerId() << " as "
            << principal << " (policy " << commit->substr(0, 12) << ")\n";
  return kExitOk;
}

}  // namespace

int RunPolicyAllowSubmitter(const Args& args) { return Allow(args, "submitters", "allow-submitter"); }
int RunPolicyAllowWorker(const Args& args) { return Allow(args, "workers", "allow-worker"); }

int RunPolicyShow(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}})) return UsageError("policy show", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos policy show --ledger DIR [--json]\n\nPrints the policy in force.\n";
    return kExitOk;
  }
  auto dir = flags.Get("ledger");
  if (!dir) return UsageError("policy show", "--ledger DIR is required");
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
  auto commit = (*ledger)->ResolveRef(kPolicyRef);
  if (flags.Has("json")) {
    nlohmann::json j = nlohmann::json::parse(SerializePolicySettings(policy->settings));
    nlohmann::json out = {{"commit", commit.value_or("")}, {"policy_root", PolicyRoot(*policy)},
                          {"settings", j}, {"ledger_key", policy->ledger_key.WorkerId()},
                          {"submitters", nlohmann::json::array()}, {"workers", nlohmann::json::array()}};
    for (const auto& e : policy->submitters.entries()) out["submitters"].push_back(e.key.WorkerId());
    for (const auto& e : policy->workers.entries()) out["workers"].push_back(e.key.WorkerId());
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "policy commit: " << commit.value_or("") << "\n"
            << "policy root:   " << PolicyRoot(*policy) << "\n"
            << "ledger key:    " << policy->ledger_key.WorkerId() << "\n"
            << "settings:      " << SerializePolicySettings(policy->settings) << "\n";
  if (policy->settings.dev_mode) std::cout << "WARNING: dev mode: unsigned job commits are accepted\n";
  std::cout << "submitters (" << policy->submitters.entries().size() << "):\n";
  for (const auto& e : policy->submitters.entries()) std::cout << "  " << e.key.WorkerId() << "\n";
  std::cout << "workers (" << policy->workers.entries().size() << "):\n";
  for (const auto& e : policy->workers.entries()) std::cout << "  " << e.key.WorkerId() << "\n";
  return kExitOk;
}

}  // namespace gatos::cli
