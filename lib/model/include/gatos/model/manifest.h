// Job manifests (job.yaml / job.json): parsing, validation, normalization and
// the job id.
//
// A manifest is authored in YAML or JSON (docs/manifest.md). ParseManifest
// checks every field against the rules of PROTOCOL section 2 and ADR-0002,
// normalizes it (args omitted -> [], ISO-8601 timeout -> integer seconds) and
// returns a Manifest. The job id is BLAKE3 over the RFC 8785 canonical JSON of
// the hashed core (every field except `ulid`).
//
// Errors: InvalidArgument with one line per problem (all problems are
// reported, not just the first):
//   SOURCE:LINE:COL: FIELD: what is wrong; what is expected
// e.g. `job.yaml:3:10: timeout: "PT1.5S" has fractional seconds; use whole
// seconds`. No I/O: gatos/sys/manifest_file.h reads a manifest from a file.
//
// Thread-safety: pure functions; Manifest is a value type.
#ifndef GATOS_MANIFEST_H_
#define GATOS_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/git_input.h"
#include "gatos/model/job_limits.h"
#include "gatos/model/status.h"

namespace gatos {

// Resource limits applied while parsing (see docs/manifest.md, "Limits").
struct ManifestLimits {
  size_t max_bytes = 1 << 20;              // file size; also string bytes after alias expansion
  size_t max_nodes = 10000;                // YAML/JSON nodes after alias expansion
  size_t max_depth = 32;                   // nested collections, the top-level mapping is 1
  size_t max_string_bytes = 65536;         // any one string (key or value)
  int64_t max_timeout_seconds = 31536000;  // 365 days
};

enum class ManifestFormat {
  kAuto,  // ".json" suffix of source_name -> kJson, anything else -> kYaml
  kYaml,
  kJson,
};

struct Manifest {
  std::vector<std::string> command;  // non-empty, each element non-empty
  std::vector<std::string> args;     // omitted in the file = empty
  int64_t timeout_seconds = 0;       // normalized; 0 <= t <= max_timeout_seconds
  std::optional<std::map<std::string, std::string>> env;  // POSIX names
  std::optional<std::string> cwd;                         // relative to the workspace, no ".."
  // Array of objects; no floats. Entries with `kind: git` follow the rules
  // of git_input.h (GitInputs); any other entry is opaque.
  std::optional<nlohmann::json> inputs;
  std::optional<std::string> policy_root;                 // "sha256:<64 lowercase hex>"
  // What the job asks of its worker (job_limits.h); hashed. Never an empty
  // mapping: at least one key is set.
  std::optional<JobResources> resources;
  // The pool of workers that may run the job (scheduling.h PoolNameProblem);
  // hashed. Never "default": the default pool is the absence of the field,
  // so a manifest that names it is the same job as one that does not.
  std::optional<std::string> pool;
  std::optional<std::string> ulid;                        // 26 Crockford base32; not hashed

  bool operator==(const Manifest&) const = default;
};

// Parses and validates a manifest. `source_name` (e.g. "job.yaml") prefixes
// every error line and, with kAuto, selects the format.
// InvalidArgument (every problem, one per line) when the manifest is invalid
// or exceeds `limits`.
Result<Manifest> ParseManifest(std::string_view bytes, std::string_view source_name,
                               ManifestFormat format = ManifestFormat::kAuto,
                               const ManifestLimits& limits = {});

// Checks a Manifest built in code against the same rules as ParseManifest
// (without positions: errors read "FIELD: what is wrong; what is expected").
Status ValidateManifest(const Manifest& manifest, const ManifestLimits& limits = {});

// The git inputs of `manifest`, in order (empty without inputs).
// InvalidArgument only for a manifest that ValidateManifest refuses.
Result<std::vector<GitInput>> GitInputs(const Manifest& manifest);

// The job's pool: manifest.pool, or "default".
std::string ManifestPool(const Manifest& manifest);

// The hashed core as JSON: command, args (always present), timeout, and the
// optional fields that are set, except ulid.
nlohmann::json ManifestCoreJson(const Manifest& manifest);
// ManifestCoreJson plus "ulid" when set: the full normalized document (what
// the schema validates).
nlohmann::json ManifestJson(const Manifest& manifest);

// CanonicalJson(ManifestCoreJson(m)). Cannot fail for a manifest that
// ParseManifest returned or ValidateManifest accepted; for an invalid one
// (e.g. a float inside inputs) it returns an empty string.
std::string CanonicalManifest(const Manifest& manifest);
// Lowercase hex BLAKE3 of CanonicalManifest(m): the bare job id used in ref
// names.
std::string JobIdHex(const Manifest& manifest);
// The same from CanonicalManifest(m) already computed.
std::string JobIdHexOfCanonical(std::string_view canonical_manifest);
// "blake3:" + JobIdHex(m): the job id as written in trailers and messages.
std::string JobId(const Manifest& manifest);
// True when `hex` is exactly 64 lowercase hex characters.
bool IsJobIdHex(std::string_view hex);

// Parses an ISO-8601 duration restricted to weeks, days, hours, minutes and
// whole seconds ("P1DT2H", "PT90S", "P2W") into seconds. InvalidArgument with
// the reason (years/months have no fixed length in seconds; fractional
// seconds; malformed; above max_seconds).
Result<int64_t> ParseIsoDuration(std::string_view text, int64_t max_seconds);

}  // namespace gatos

#endif  // GATOS_MANIFEST_H_
