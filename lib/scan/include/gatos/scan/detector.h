// The detection engine: every rule compiled into one Vectorscan database used
// as a prefilter over a blob, then each hit confirmed exactly with the rule's
// PCRE2 (JIT) regex in a window around it, then the entropy gate, keywords
// and content allow-lists.
//
// Contract: a match of a rule's regex that is at most `window` bytes long is
// reported (Vectorscan in prefilter mode reports a superset of the end
// offsets of real matches). Path allow-lists are not applied here: scanning is
// content-only so its results can be cached per blob; callers apply
// PathAllowlisted() where a path is known.
//
// Thread-safety: a Detector is immutable after Create and may be shared by
// any number of threads; each thread needs its own Scratch.
#ifndef GATOS_SCAN_DETECTOR_H_
#define GATOS_SCAN_DETECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/scan/rules.h"

namespace gatos::scan {

// One confirmed secret. Holds positions only, never the bytes.
struct Match {
  size_t rule = 0;     // index into Detector::rules().rules
  uint64_t start = 0;  // byte span of the secret within the scanned data
  uint64_t end = 0;
  uint64_t line = 0;  // 1-based line of `start`
};

class Detector {
 public:
  // Per-thread match state (Vectorscan scratch, PCRE2 match data). Owned by
  // one thread at a time; must not outlive its Detector.
  class Scratch {
   public:
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class Detector;
    struct State;
    explicit Scratch(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
  };

  // Compiles `rules`. InvalidArgument "<rule origin>: rule <id>: ..." when a
  // regex is outside what Vectorscan or PCRE2 accept, or can match empty.
  static Result<std::unique_ptr<Detector>> Create(const RuleSet& rules);
  // Same, reusing the compiled Vectorscan database from `cache_dir` (a file
  // per distinct set of expressions) and storing it there after compiling:
  // compiling a few hundred rules takes longer than scanning a small
  // repository. A missing, stale or damaged file is compiled again.
  static Result<std::unique_ptr<Detector>> Create(const RuleSet& rules,
                                                  const std::string& cache_dir);
  ~Detector();
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  Result<std::unique_ptr<Scratch>> NewScratch() const;

  // Appends the confirmed matches in `data`, sorted by (start, rule, end) and
  // without duplicates. Internal on a Vectorscan failure. `path` (may be
  // empty: unknown) decides the rules that have a `path` condition, and
  // path-only rules report the whole of `data` when it matches.
  // A match whose line(s) hold `gatos:allow` is not reported.
  Status Scan(std::string_view data, std::string_view path, Scratch* scratch,
              std::vector<Match>* out) const;
  // Scan with no path: rules with a path condition do not apply.
  Status Scan(std::string_view data, Scratch* scratch, std::vector<Match>* out) const;

  // Only the path-only rules, for a blob whose content is not scanned (a
  // binary file): each one whose path regex matches reports [0, size).
  void ScanPathRules(std::string_view path, uint64_t size, std::vector<Match>* out) const;

  // True when rule `rule` has no path condition or `path` matches it.
  bool PathMatches(size_t rule, std::string_view path) const;

  // True when the global or rule `rule`'s path allow-list matches `path`.
  bool PathAllowlisted(size_t rule, std::string_view path) const;

  const RuleSet& rules() const;

 private:
  struct Impl;
  explicit Detector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gatos::scan

#endif  // GATOS_SCAN_DETECTOR_H_
