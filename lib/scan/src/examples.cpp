#include "gatos/scan/examples.h"

#include <memory>
#include <sstream>

#include "gatos/scan/detector.h"

namespace gatos::scan {
namespace {

// Does rule `rule` report anything in `ex`?
Result<bool> Reports(const Detector& d, Detector::Scratch* scratch, size_t rule,
                     const RuleExample& ex) {
  std::vector<Match> matches;
  if (ex.text.empty()) {
    // A path-only example: the file's content does not matter, only that it
    // is not empty.
    d.ScanPathRules(ex.path, 1, &matches);
  } else {
    GATOS_RETURN_IF_ERROR(d.Scan(ex.text, ex.path, scratch, &matches));
  }
  for (const Match& m : matches) {
    if (m.rule == rule) return true;
  }
  return false;
}

}  // namespace

Result<ExampleReport> CheckRuleExamples(const RuleSet& rules, bool require_both) {
  GATOS_ASSIGN_OR_RETURN(std::unique_ptr<Detector> d, Detector::Create(rules));
  GATOS_ASSIGN_OR_RETURN(std::unique_ptr<Detector::Scratch> scratch, d->NewScratch());
  ExampleReport rep;
  rep.rules = rules.rules.size();
  for (size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    if (r.examples.tp.empty() || r.examples.fp.empty()) {
      rep.incomplete.push_back(r.id);
      if (require_both) {
        rep.failures.push_back({r.id, r.origin,
                                std::string("rule has no ") +
                                    (r.examples.tp.empty() ? "true positive (examples.tp)"
                                                           : "false positive (examples.fp)") +
                                    " examples"});
      }
    }
    for (const RuleExample& ex : r.examples.tp) {
      ++rep.tp_total;
      GATOS_ASSIGN_OR_RETURN(bool hit, Reports(*d, scratch.get(), i, ex));
      if (hit) {
        ++rep.tp_found;
      } else {
        rep.failures.push_back({r.id, ex.origin, "true positive not reported by the rule"});
      }
    }
    for (const RuleExample& ex : r.examples.fp) {
      ++rep.fp_total;
      GATOS_ASSIGN_OR_RETURN(bool hit, Reports(*d, scratch.get(), i, ex));
      if (!hit) {
        ++rep.fp_silent;
      } else {
        rep.failures.push_back({r.id, ex.origin, "false positive reported by the rule"});
      }
    }
  }
  return rep;
}

std::string FormatExampleReport(const ExampleReport& r) {
  std::ostringstream out;
  for (const ExampleFailure& f : r.failures) {
    out << f.origin << ": " << f.rule << ": " << f.what << "\n";
  }
  out << r.rules << " rules; true positives found " << r.tp_found << "/" << r.tp_total
      << "; false positives silent " << r.fp_silent << "/" << r.fp_total << "; "
      << r.incomplete.size() << " rules without both kinds of example; "
      << (r.ok() ? "ok" : std::to_string(r.failures.size()) + " failures") << "\n";
  return out.str();
}

}  // namespace gatos::scan
