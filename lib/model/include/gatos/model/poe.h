// The Proof-Of-Execution envelope (PROTOCOL section 5) and its DSSE signature.
//
// poe.json is the RFC 8785 canonical JSON of the envelope; Attest-Sig is an
// Ed25519 signature over DSSE v1 PAE(kPoePayloadType, poe.json), so a standard
// DSSE envelope can be rebuilt from a result commit alone.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_POE_H_
#define GATOS_POE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/job_limits.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kPoePayloadType[] = "application/vnd.gatos.poe.v1+json";
inline constexpr char kPoeFileName[] = "poe.json";

struct PoeOutput {
  std::string path;  // path in the result tree, '/'-separated, e.g. "stdout", "outputs/a.txt"
  uint64_t size = 0;
  std::string hash;  // "blake3:<hex>"
  bool operator==(const PoeOutput&) const = default;
};

// A git input the worker resolved before the job ran (git_input.h): the
// exact commit the job was shown, so an auditor knows what it read.
struct PoeInput {
  int64_t index = 0;   // position in the manifest's `inputs`
  std::string url;     // as in the manifest (credential-free by its rules)
  std::string ref;     // the ref the manifest named; "" when it named only a commit
  std::string commit;  // 40 or 64 lowercase hex
  bool operator==(const PoeInput&) const = default;
};

// What a job used (job_limits.h), as poe.json's `usage`.
using PoeUsage = JobUsage;

struct Poe {
  std::string job_id;     // "blake3:<hex>"
  std::string worker_id;  // "ed25519:<hex>"
  int64_t lease_epoch = 0;
  std::string status;     // succeeded | failed | timed-out | aborted
  std::string runner_program;  // "blake3:<hex>" of the worker binary
  std::string runner_version;
  std::string runner_platform;  // e.g. "linux-x86_64"
  std::optional<int64_t> exit_code;  // absent when killed by a signal or never started
  std::optional<int64_t> signal;
  bool timed_out = false;
  std::string reason;  // why a job failed or aborted without running; "" otherwise
  // A failure that may not recur (an input could not be fetched for a reason
  // that may pass, docs/inputs.md): the ledger's retry policy treats it as a
  // plain failure. Only with status "failed" and a reason; in poe.json only
  // when true.
  bool transient = false;
  int64_t stdout_cap = 0;  // bytes kept of stdout and of stderr each
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::string started_at;   // RFC 3339 UTC
  std::string finished_at;  // RFC 3339 UTC
  std::vector<PoeOutput> outputs;  // sorted by path; every file of the result tree but poe.json
  // Sorted by index, no duplicates. Absent from poe.json when empty, so
  // envelopes of jobs without git inputs are unchanged.
  std::vector<PoeInput> inputs;
  // The resource limits the job ran under (0 = none) and those of them this
  // worker could not enforce ("memory", "pids", "cpu", "disk"; sorted). In
  // poe.json as `limits` only when a limit is set.
  JobLimits limits;
  std::vector<std::string> unenforced;
  // In poe.json as `usage` only when something was measured.
  PoeUsage usage;
  bool operator==(const Poe&) const = default;
};

// Canonical bytes of poe.json. InvalidArgument if a field is malformed.
Result<std::string> SerializePoe(const Poe& poe);
namespace poe_internal {
// The canonical JSON of `poe`'s fields, without SerializePoe's field checks
// (its tests compare it with CanonicalJson of the same document).
Result<std::string> CanonicalPoe(const Poe& poe);
// The fields of `bytes` when it is exactly what CanonicalPoe writes for them
// (key order, optional members where it writes them, escapes, integers),
// read without a JSON parser; nullopt otherwise. ParsePoe takes them when
// they pass SerializePoe's field checks, and parses in full (ParsePoeJson)
// in every other case, so its result and its errors are the same either way.
std::optional<Poe> ReadCanonicalPoe(std::string_view bytes);
// ParsePoe through the JSON parser, always.
Result<Poe> ParsePoeJson(std::string_view bytes);
}  // namespace poe_internal

// Parses poe.json and checks that `bytes` is exactly its canonical form and
// that every field has the documented type (schemas/v1/job/
// proof_of_execution_envelope.schema.json). Errors name the field.
Result<Poe> ParsePoe(std::string_view bytes);

// DSSE v1 pre-authentication encoding:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, LEN in ASCII decimal.
std::string DssePae(std::string_view payload_type, std::string_view payload);

bool IsResultStatus(std::string_view s);  // succeeded | failed | timed-out | aborted

}  // namespace gatos

#endif  // GATOS_POE_H_
