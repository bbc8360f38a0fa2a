// The baseline: findings a team has accepted, by secret fingerprint, so a
// scanner adopted on an old repository reports only what is new.
//
// File format (JSON, written by `gatos-scan --write-baseline FILE`):
//
//   {"gatos_scan_baseline": 1,
//    "accepted": [
//      {"fingerprint": "blake3k:<64 hex>", "rule": "github-pat",
//       "path": "src/app.py", "line": 3, "commit": "<40 hex>", "comment": "..."}]}
//
// A finding is accepted when its fingerprint is listed and, if the entry has
// a `rule`, its rule is that rule. `path`, `line`, `commit` and `comment` are
// for the people reviewing the file and never used for matching: a secret
// accepted once is the same (already leaked) secret wherever it appears.
// Fingerprints are keyed, so a baseline only matches scans with the same
// fingerprint key. Nothing in the file is a secret.
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_SCAN_BASELINE_H_
#define GATOS_SCAN_BASELINE_H_

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/scan/done_ledger.h"

namespace gatos::scan {

class Baseline {
 public:
  // Accepts `fingerprint` for `rule` (empty: any rule).
  void Accept(const std::string& fingerprint, const std::string& rule);
  bool Accepts(const std::string& rule, const std::string& fingerprint) const;
  size_t size() const { return entries_; }
  bool empty() const { return entries_ == 0; }

 private:
  std::map<std::string, std::set<std::string>> by_fingerprint_;  // fingerprint -> rules ("" any)
  size_t entries_ = 0;
};

// Parses a baseline document. Errors (InvalidArgument) read
// "origin:line: what": not JSON, wrong version, unknown keys (a typo would
// silently accept nothing), a fingerprint that is not blake3k:<64 hex>, a rule
// id that is not one, limits (16 MiB of text, 200,000 entries). Never throws.
Result<Baseline> ParseBaseline(std::string_view text, const std::string& origin);
// ParseBaseline on a file; NotFound if it cannot be read.
Result<Baseline> LoadBaselineFile(const std::string& path);

// A baseline document accepting every finding in `findings` (by fingerprint
// and rule, one entry per pair, sorted), with its first location for review.
std::string BaselineJson(const std::vector<ListedFinding>& findings);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_BASELINE_H_
