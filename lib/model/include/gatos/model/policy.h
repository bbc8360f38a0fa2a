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

#include "gatos/model/allowed_signers.h"
#include "gatos/model/job_limits.h"
#include "gatos/model/public_key.h"
#include "gatos/model/refs.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/status.h"

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
  // Finished jobs' refs leave the ref namespace this long after they end
  // (the log keeps them; status and verify still work). 0 = never.
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;
  // Retries (docs/retries.md): attempts per job (1 = none); the backoff
  // before attempt n (n >= 2) is min(base * factor^(n-2), max) minus a random
  // part of up to jitter_pct % of it.
  int64_t max_attempts = 1;
  int64_t retry_base_ms = 10'000;
  int64_t retry_factor = 2;
  int64_t retry_max_ms = 3'600'000;
  int64_t retry_jitter_pct = 20;
  bool retry_failed = true;     // a failed attempt is retried (while attempts are left)
  bool retry_timed_out = true;  // a timed-out attempt is retried
  // When not empty, every git input's URL must start with one of these
  // (GitUrlHasPrefix), checked at push. Absent from policy.json when empty.
  std::vector<std::string> input_url_prefixes;
  // Job resource limits (docs/limits.md, "Job resource limits"): job_*
  // applies to a job whose manifest does not ask (`resources`), max_job_*
  // is the most a manifest may ask (refused at push above it) and caps the
  // default. 0 = none. In policy.json only when not 0, so policies without
  // limits hash as before.
  JobLimits job_defaults;  // job_memory_mb, job_pids, job_cpu_millis, job_disk_mb
  JobLimits job_maxima;    // max_job_memory_mb, max_job_pids, ...
  // Pools, limits and paused pools (scheduling.h, docs/scheduling.md). In
  // policy.json as "scheduling" only when not empty.
  SchedulingPolicy scheduling;
};

inline constexpr size_t kMaxInputUrlPrefixes = 64;

// The backoff before attempt `next_attempt` (>= 2) without jitter, and the
// smallest value jitter can make of it.
int64_t RetryBackoffMs(const PolicySettings& s, int64_t next_attempt);
int64_t RetryBackoffMinMs(const PolicySettings& s, int64_t next_attempt);
// Whether an attempt that ended with `status` is retried when attempts are left.
bool RetriesStatus(const PolicySettings& s, std::string_view status);
// Whether an attempt whose result says `status` and (its proof of execution)
// `reason` may be retried: RetriesStatus, and no reason. A failed result with
// a reason is one whose job never ran to an exit (its job.yaml does not parse
// on the worker, its command cannot start) or whose result the policy refused
// (outputs over max_result_bytes, a name the ledger refuses): the same job
// would meet the same refusal, so it is final — unless the proof of execution
// marks it `transient` (an input that could not be fetched for a reason that
// may pass): that is retried like a plain failure.
bool RetriesAttempt(const PolicySettings& s, std::string_view status, std::string_view reason,
                    bool transient = false);
// The backoff drawn for attempt `next_attempt` from a uniform random value:
// in [RetryBackoffMinMs, RetryBackoffMs], both ends included.
int64_t DrawRetryBackoffMs(const PolicySettings& s, int64_t next_attempt, uint64_t random);

struct Policy {
  PolicySettings settings;
  AllowedSigners submitters;
  AllowedSigners workers;
  // Keys that may cancel and re-run any job (a submitter may do so for its
  // own jobs only).
  AllowedSigners operators;
  Ed25519PublicKey ledger_key;
  std::string submitters_text;  // as stored, for round trips
  std::string workers_text;
  std::string operators_text;
};

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

// One change to a policy's lists. role: "submitter", "worker" or "operator".
// Allow adds the key (no-op when present, *changed false); revoke removes
// every line naming it (NotFound when absent). The parsed lists and their
// text are updated together.
Status PolicyAllow(Policy* p, std::string_view role, const Ed25519PublicKey& key, bool* changed);
Status PolicyRevoke(Policy* p, std::string_view role, const Ed25519PublicKey& key);

// Principal names we write into allowed_signers for a key.
std::string PrincipalForKey(std::string_view role, const Ed25519PublicKey& key);

}  // namespace gatos

#endif  // GATOS_POLICY_H_
