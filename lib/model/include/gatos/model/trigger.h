// Triggers (docs/scheduling.md, "Triggers"): a schedule that fires when a
// ref of a watched repository moves, instead of on a clock.
//
//   watch:
//     - url: https://git.example.com/team/app      # a git input URL (no credentials)
//       refs: [refs/heads/main, refs/tags/v*]      # full ref names, one '*' at most
//   poll: 30s                                      # how often gatosd reads them
//
// The rules here are pure: which patterns are valid and what they match,
// what `git ls-remote` printed, the job a move fires, and the positions the
// ledger records (refs/gatos/watch/<name>, positions.json).
//
// Thread-safety: value types and pure functions.
#ifndef GATOS_MODEL_TRIGGER_H_
#define GATOS_MODEL_TRIGGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/manifest.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr int64_t kDefaultPollMs = 30'000;
inline constexpr int64_t kMinPollMs = 1'000;
inline constexpr int64_t kMaxPollMs = 86'400'000;
inline constexpr size_t kMaxWatches = 16;
inline constexpr size_t kMaxRefPatterns = 64;
// Refs of one watched repository the ledger tracks at most (matching the
// patterns); more are ignored, in name order, and logged.
inline constexpr size_t kMaxWatchedRefs = 10'000;
// `git ls-remote` output read at most.
inline constexpr size_t kMaxLsRemoteBytes = 64 << 20;

struct WatchSpec {
  std::string url;                // as written; a git input URL (GitUrlProblem)
  std::vector<std::string> refs;  // patterns (RefPatternProblem)
  bool operator==(const WatchSpec&) const = default;
};

// "" when `pattern` is a ref pattern a trigger may watch: "HEAD", or a full
// ref name under refs/ by `git check-ref-format` rules with at most one '*'
// (which matches any characters, '/' included, as in a refspec:
// refs/heads/* matches refs/heads/team/x). Otherwise the reason.
std::string RefPatternProblem(std::string_view pattern);
// Whether `ref` matches `pattern` (a pattern RefPatternProblem accepts).
bool RefPatternMatches(std::string_view pattern, std::string_view ref);
// Whether `ref` matches one of `w`'s patterns.
bool WatchMatches(const WatchSpec& w, std::string_view ref);

// The problems of a watch list, one per line ("" when valid): each url a
// git input URL without credentials, given once; 1..kMaxRefPatterns
// patterns each, valid; 1..kMaxWatches watches.
std::string WatchListProblem(const std::vector<WatchSpec>& watches);

// `git ls-remote` output ("<id>\t<ref>" lines) as ref -> commit: an
// annotated tag's peeled line ("<ref>^{}") gives its commit; lines that are
// not an object id (40 or 64 lowercase hex), a tab and a ref name are
// refused (InvalidArgument naming the line; never echoing it).
Result<std::map<std::string, std::string>> ParseLsRemote(std::string_view out);

// The refs of `all` that `w` watches (at most kMaxWatchedRefs, by name);
// refs whose names are not UTF-8 or not valid input refs are skipped.
std::map<std::string, std::string> WatchedRefs(const WatchSpec& w,
                                               const std::map<std::string, std::string>& all);

// The job a move fires: the template with the git input whose url is
// `url` (byte for byte) pinned to {ref: REF, commit: COMMIT} (its nonce
// kept), or such an input appended when the template has none; then the
// input {kind: schedule, schedule: NAME, nonce: "REF@COMMIT"}. So each
// (schedule, url, ref, commit) is one job id.
Manifest TriggeredManifest(const Manifest& job_template, std::string_view schedule,
                           std::string_view url, std::string_view ref, std::string_view commit);
std::string TriggerNonce(std::string_view ref, std::string_view commit);

// Whether the template has more than one git input whose url is `url`
// (which one to pin would be ambiguous).
bool TemplateHasDuplicateInput(const Manifest& job_template, std::string_view url);

// The positions the ledger last saw (refs/gatos/watch/<name>,
// positions.json): under which schedule commit, and url -> ref -> commit.
struct WatchPositions {
  std::string schedule_commit;
  std::map<std::string, std::map<std::string, std::string>> refs;
  bool operator==(const WatchPositions&) const = default;
};
std::string EncodeWatchPositions(const WatchPositions& p);
// Strict: the two keys, ids 40 hex, refs valid names, at most kMaxWatches
// urls and kMaxWatchedRefs refs each. InvalidArgument with the reason.
Result<WatchPositions> ParseWatchPositions(std::string_view json);

}  // namespace gatos

#endif  // GATOS_MODEL_TRIGGER_H_
