// Secret-scan findings grouped by secret: one entry per distinct secret
// (rule and keyed fingerprint) with every location it was found at. The
// same secret in every version of a file is one secret to rotate, not one
// per version (as Nosey Parker and Kingfisher report matches by secret).
//
// gatos-scan writes the groups (outputs/secrets.jsonl) and a group id on
// each line of outputs/findings.jsonl; `gatos findings` and the dashboard
// group findings.jsonl with the same function, so older results without the
// new fields read the same way.
//
// A location never holds the secret: rule, blob, commit, path, line, byte
// span and keyed fingerprint only.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_SECRET_GROUPS_H_
#define GATOS_SECRET_GROUPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/model/status.h"

namespace gatos {

// One place a secret was found: a line of findings.jsonl.
struct FindingLocation {
  std::string rule;
  std::string fingerprint;  // "blake3k:<hex>"
  std::string blob;
  std::string commit;  // where the blob was first seen
  std::string path;    // as written in findings.jsonl
  bool path_percent = false;  // `path` is percent-encoded (not UTF-8 in git)
  uint64_t line = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::optional<int64_t> commit_time;  // seconds since the epoch; absent in older outputs
  // Position of `commit` in history among the commits of one listing,
  // oldest first (ancestors before descendants when times are equal, as
  // after a rebase); only comparable within one scan's outputs.
  std::optional<int64_t> commit_rank;
  std::optional<bool> at_tip;          // blob in a scanned tip's tree; absent in older outputs
};

struct SecretGroup {
  std::string id;  // SecretId(rule, fingerprint)
  std::string rule;
  std::string fingerprint;
  // Oldest first: by commit rank or else commit time when known, then by
  // (path, line, start, blob, commit) so the order is stable.
  std::vector<FindingLocation> locations;
  // True when some location is at a scanned tip, false when all are known
  // not to be, nullopt when the outputs do not say.
  std::optional<bool> at_tip;

  const FindingLocation& first() const { return locations.front(); }
  const FindingLocation& last() const { return locations.back(); }
  // Distinct paths, sorted.
  std::vector<std::string> paths() const;
};

// 64 hex digits: BLAKE3 of the rule and the (keyed) fingerprint. Reveals
// nothing the fingerprint does not.
std::string SecretId(std::string_view rule, std::string_view fingerprint);

// Groups `locations` by (rule, fingerprint); groups are sorted by (first
// location's commit time, rule, fingerprint), so the oldest leak comes first.
std::vector<SecretGroup> GroupBySecret(std::vector<FindingLocation> locations);

// One line of findings.jsonl. InvalidArgument naming the missing or
// mistyped key for a line that is not a finding object. Never throws.
Result<FindingLocation> ParseFindingLine(std::string_view line);

// Every non-empty line of a findings.jsonl document; the first bad line is
// an error "line N: ...".
Result<std::vector<FindingLocation>> ParseFindingsJsonl(std::string_view text);

// JSON of a location (the findings.jsonl fields plus the group id) and of a
// group (id, rule, fingerprint, first/last commit and time, at_tip, the
// distinct paths, the number of locations, and with `with_locations` each
// location).
nlohmann::json LocationJson(const FindingLocation& l);
nlohmann::json GroupJson(const SecretGroup& g, bool with_locations);

}  // namespace gatos

#endif  // GATOS_SECRET_GROUPS_H_
