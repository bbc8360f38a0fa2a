// The ledger's policy: who may submit jobs, which workers may claim and
// report, and the limits. Stored in git at refs/gatos/policy as a commit whose
// tree holds:
//   policy.json  settings (canonical JSON, see PolicySettings)
//   submitters   OpenSSH allowed_signers: keys allowed to sign job commits
//   workers      OpenSSH allowed_signers: keys allowed to claim and report
//   ledger.pub   the ledger's own key, which signs claim/lease/cancel commits
// Changing policy is a new commit, so an auditor can check any result against
// the policy in force when it was accepted (docs/ledger-format.md).
//
// Thread-safety: value types.
#ifndef GATOS_POLICY_H_
#define GATOS_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/allowed_signers.h"
#include "gatos/public_key.h"
#include "gatos/status.h"

namespace gatos {

struct PolicySettings {
  bool dev_mode = false;               // accept unsigned job commits (loudly)
  int64_t lease_ms = 30'000;           // lease length; holders renew every third
  int64_t result_grace_ms = 5'000;     // results accepted this long after expiry
  int64_t max_manifest_bytes = 1 << 20;
  int64_t max_timeout_seconds = 86'400;  // ceiling for a job's timeout (and for timeout 0)
  int64_t output_cap_bytes = 1 << 20;    // stdout and stderr kept, each
  int64_t max_result_bytes = 4 << 20;    // all result objects of one result together
  bool allow_network = false;          // jobs run with network access
};

struct Policy {
  PolicySettings settings;
  AllowedSigners submitters;
  AllowedSigners workers;
  Ed25519PublicKey ledger_key;
  std::string submitters_text;  // as stored, for round trips
  std::string workers_text;
};

inline constexpr char kPolicyRef[] = "refs/gatos/policy";
inline constexpr char kSignerNamespaceGit[] = "git";

// policy.json bytes (canonical JSON).
std::string SerializePolicySettings(const PolicySettings& s);
// Strict: unknown fields, wrong types and out-of-range values are errors that
// name the field.
Result<PolicySettings> ParsePolicySettings(std::string_view json);

// The bytes the policy root is a SHA-256 of: the stored policy files,
// length-prefixed so that no two different policies share an input.
// PolicyRoot (sha256.h) hashes them.
std::string PolicyRootInput(const Policy& p);

// Principal names we write into allowed_signers for a key.
std::string PrincipalForKey(std::string_view role, const Ed25519PublicKey& key);

}  // namespace gatos

#endif  // GATOS_POLICY_H_
