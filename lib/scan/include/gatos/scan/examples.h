// Rule examples as tests: every rule's true positives must be reported by
// that rule and its false positives must not, scanned with the whole rule set
// exactly as a blob would be (global allow-list, generic-rule suppression,
// inline `gatos:allow`). `gatos-scan --check-rules FILE` and the unit tests
// run this.
//
// Reports name a rule and the file:line of an example, never the example's
// text: a user's examples may be pasted from a real leak.
//
// Thread-safety: pure function.
#ifndef GATOS_SCAN_EXAMPLES_H_
#define GATOS_SCAN_EXAMPLES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/scan/rules.h"

namespace gatos::scan {

struct ExampleFailure {
  std::string rule;    // rule id
  std::string origin;  // "file:line" of the example (or of the rule when it has none)
  std::string what;    // e.g. "true positive not reported"
};

struct ExampleReport {
  size_t rules = 0;
  size_t tp_total = 0;
  size_t tp_found = 0;   // true positives reported by their rule
  size_t fp_total = 0;
  size_t fp_silent = 0;  // false positives their rule stayed silent on
  // Rules that lack true or false positives (ids). Each is also a failure
  // when CheckRuleExamples is asked to require both kinds.
  std::vector<std::string> incomplete;
  std::vector<ExampleFailure> failures;
  bool ok() const { return failures.empty(); }
};

// Compiles `rules` and runs every example. An error Status only when the
// rules do not compile; example failures are in the report.
// `require_both`: a rule without at least one tp and one fp fails.
Result<ExampleReport> CheckRuleExamples(const RuleSet& rules, bool require_both);

// Human-readable report: one line per failure, then the totals.
std::string FormatExampleReport(const ExampleReport& r);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_EXAMPLES_H_
