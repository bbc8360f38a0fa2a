// Labelled findings: a person's judgement of each distinct finding in a
// corpus of real repositories as true (real key material: rotate it) or
// false (a placeholder, documented example, constant or nonce), so a rule
// set's precision on real code can be measured and kept (bench/scan/corpus,
// issue 40).
//
// A label names a finding by corpus, rule and the BLAKE3 of its matched
// bytes (unkeyed, so labels work with any fingerprint key), never the bytes
// themselves; path and commit (its first sighting) and a reason are for the
// people reading the file. Format, one canonical JSON object per line:
//
//   {"commit":"<40 hex>","corpus":"libgit2","label":false,
//    "match_b3":"<64 hex>","path":"tests/x.c",
//    "reason":"URL-parser test vector","rule":"url-embedded-password"}
//
// Thread-safety: value types and pure functions, except HashMatches, which
// opens the repository it is given.
#ifndef GATOS_SCAN_LABELS_H_
#define GATOS_SCAN_LABELS_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/secret_groups.h"
#include "gatos/model/status.h"

namespace gatos::scan {

struct Label {
  std::string corpus;    // which corpus repository ([a-z0-9._-]+)
  std::string rule;      // rule id
  std::string match_b3;  // 64 lowercase hex: BLAKE3 of the matched bytes
  bool truth = false;    // true: a real secret
  std::string path;      // first location, for readers
  std::string commit;
  std::string reason;    // why, in a few words; never the secret
  std::string origin;    // "file:line" of the label, for messages
};

// Parses a labels document. Errors (InvalidArgument) read "origin:line:
// what": not JSON, unknown or missing keys, a match_b3 that is not 64
// lowercase hex, a label that is not true/false, a (corpus, rule, match_b3)
// labelled twice. Never throws.
Result<std::vector<Label>> ParseLabels(std::string_view text, const std::string& origin);
Result<std::vector<Label>> LoadLabelsFile(const std::string& path);

// The canonical line of a label (no newline).
std::string LabelJson(const Label& l);

// A finding (one location) with the hash of its matched bytes.
struct HashedFinding {
  FindingLocation location;
  std::string match_b3;
};

// Reads each finding's blob from the git directory `git_dir` and hashes
// bytes [start, end). NotFound naming the blob when one is missing,
// InvalidArgument when a span is outside its blob. The bytes are hashed in
// memory and dropped.
Result<std::vector<HashedFinding>> HashMatches(const std::string& git_dir,
                                               const std::vector<FindingLocation>& findings);

// Counts of findings (locations) and of distinct secrets.
struct LabelScore {
  size_t true_findings = 0;
  size_t false_findings = 0;
  size_t unlabelled_findings = 0;
  size_t true_secrets = 0;
  size_t false_secrets = 0;
  size_t unlabelled_secrets = 0;
  // Labelled-true findings over labelled findings (1 when there are none).
  double precision() const;
  double secret_precision() const;
};

struct LabelReport {
  std::string corpus;
  std::map<std::string, LabelScore> by_rule;
  LabelScore total;
  size_t true_labels = 0;            // labels of the corpus that say true
  std::vector<Label> missing_true;   // labelled true and not found
  std::vector<Label> found_false;    // labelled false and found
  std::vector<HashedFinding> unlabelled;  // first location of each unlabelled secret
};

// Scores `findings` of corpus `corpus` against the labels of that corpus.
LabelReport EvaluateLabels(const std::string& corpus, const std::vector<Label>& labels,
                           const std::vector<HashedFinding>& findings);

// Human-readable: precision per rule (by finding and by secret), the true
// labels found, then each missing true label, found false label and
// unlabelled finding (rule, path, commit, match_b3; never the bytes).
std::string FormatLabelReport(const LabelReport& r);

// Labels to fill in for the unlabelled findings ("label" is false and
// "reason" says "unlabelled"): one line each.
std::string LabelStubs(const LabelReport& r);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_LABELS_H_
