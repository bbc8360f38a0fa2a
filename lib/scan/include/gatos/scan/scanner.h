// One scan run: mirror the repository, select commits per ref, scan every
// blob reachable from them once, record results durably, and advance the
// refs' watermarks only when the run completed.
//
// Run contract (see docs/scan.md):
//  - Commits are those reachable from the selected ref tips and not from
//    their watermarks (last completely scanned commit, per repo, ref and
//    policy). A watermark that is no longer an ancestor of its tip (a
//    force-push) is ignored for that run and the ref is walked in full.
//  - Each blob is read once per run; blobs already in the done-ledger under
//    the same policy are skipped (their earlier findings are kept).
//  - Complete: every selected blob was decided and every batch committed;
//    then all watermarks advance in one transaction. Partial (budget, missing
//    object, error): results so far are kept, no watermark moves.
//  - The report lists every finding recorded for this repository under this
//    policy (this run and earlier runs), minus path allow-list hits.
//
// Thread-safety: RunScan is reentrant; it uses `threads` scanning threads,
// each with its own libgit2 repository handle and Vectorscan scratch, plus
// one SQLite writer thread. Concurrent runs on one mirror serialize on its
// lock.
#ifndef GATOS_SCAN_SCANNER_H_
#define GATOS_SCAN_SCANNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gatos/model/blake3.h"
#include "gatos/model/secret_groups.h"
#include "gatos/model/status.h"
#include "gatos/scan/baseline.h"
#include "gatos/scan/done_ledger.h"
#include "gatos/scan/rules.h"

namespace gatos::scan {

inline constexpr const char* kScannerVersion = "0.2.0";
inline constexpr uint64_t kDefaultMaxBlobBytes = 50ull << 20;
// A blob with a NUL byte in this many leading bytes is binary and skipped.
inline constexpr uint64_t kBinaryProbeBytes = 8192;

struct ScanCounters {
  uint64_t commits_walked = 0;
  uint64_t blobs_seen = 0;  // unique blobs reached by the walk
  uint64_t blobs_scanned = 0;
  uint64_t bytes_scanned = 0;
  uint64_t blobs_skipped_done = 0;
  uint64_t blobs_skipped_binary = 0;
  uint64_t bytes_skipped_binary = 0;
  uint64_t blobs_skipped_too_large = 0;
  uint64_t bytes_skipped_too_large = 0;
  uint64_t blobs_not_reached = 0;  // queued but not read before the run stopped
  uint64_t findings_new = 0;       // confirmed in blobs scanned by this run
};

// A repository someone else fetched (the worker, for a job's git input;
// gatos/exec/inputs.h): scanned in place and read-only, without a mirror of its
// own or any network access.
struct PreparedRepo {
  std::string path;    // its git directory
  std::string key;     // repo key for the done-ledger, watermarks and reports (GitUrlKey)
  std::string commit;  // the one tip scanned (with its history)
  std::string ref;     // the name its watermark is kept under (e.g. the input's ref)
};

struct ScanOptions {
  std::string repo;  // local path, file:// URL or remote URL (unless `prepared`)
  std::optional<PreparedRepo> prepared;  // instead of `repo`; `refs` must then be empty
  std::vector<std::string> refs;         // full names, short names or globs; empty: heads and tags
  std::string state_dir;                 // required
  RuleSet rules;                         // the merged rule set to scan with
  Digest32 fingerprint_key{};
  std::optional<double> max_seconds;  // wall-clock budget for the whole run
  std::optional<uint64_t> max_blobs;  // budget of blobs read (for tests and slicing)
  uint64_t max_blob_bytes = kDefaultMaxBlobBytes;
  unsigned threads = 0;  // 0: one per core
  // Findings accepted here are listed apart (ScanReport::accepted), not as
  // findings: what a team adopting the scanner on old history has reviewed.
  Baseline baseline;
  // Called about once per second from a helper thread while the run lasts.
  std::function<void(const ScanCounters&)> progress;
  // Sleep this long after each blob scanned (SCAN_PACE_MS): only for
  // tests and demonstrations that need a scan to last; 0 in real use.
  int64_t pace_ms = 0;
};

struct RefReport {
  std::string name;
  std::string tip;
  std::optional<std::string> watermark_before;
  std::optional<std::string> watermark_after;
  bool force_pushed = false;
};

// What outputs say about a rule (SARIF rule metadata).
struct RuleInfo {
  std::string id;
  std::string description;
};

struct ScanReport {
  std::string repo_key;
  std::string policy_hash;  // "blake3:<hex>"
  std::string rules_version;
  size_t rules_count = 0;
  bool complete = false;
  bool budget_exhausted = false;  // partial only because a budget ran out
  std::vector<std::string> partial_reasons;
  ScanCounters counters;
  std::vector<RefReport> refs;
  bool force_pushed = false;
  double elapsed_seconds = 0;
  std::vector<ListedFinding> findings;  // sorted (path, line, start, rule, blob)
  std::vector<ListedFinding> accepted;  // in the baseline; same order
  std::vector<SecretGroup> secrets;     // `findings` grouped by secret, oldest first
  uint64_t findings_allowlisted = 0;    // dropped by path allow-lists
  bool baseline_used = false;           // a non-empty baseline was given
  std::vector<RuleInfo> rules;          // the rule set, in order
};

// The policy hash: BLAKE3 over the canonical rules and every setting that
// changes what a blob scan yields (size cap, binary probe, fingerprint key
// id, scanner version).
std::string PolicyHash(const RuleSet& rules, uint64_t max_blob_bytes, const Digest32& key);

// Runs one scan. An error Status means nothing was scanned (bad options,
// mirror or state unavailable); problems after scanning started make the
// report partial instead.
Result<ScanReport> RunScan(const ScanOptions& options);

// One canonical JSON object (no newline) per finding; never secret bytes.
std::string FindingJson(const ListedFinding& f);
// The finding as a location of its secret (gatos/model/secret_groups.h).
FindingLocation ToLocation(const ListedFinding& f);
// One canonical JSON object per line per distinct secret (GroupJson with
// every location), in the order of `r.secrets`.
std::string SecretsJsonl(const ScanReport& r);
std::string SummaryJson(const ScanReport& r);
// A SARIF 2.1.0 log (what code-scanning UIs read): the rules' metadata, one
// result per finding with its location, byte span and fingerprints, and the
// baseline's accepted findings as suppressed results. Never secret bytes: no
// snippets, only positions and keyed fingerprints.
std::string SarifJson(const ScanReport& r);
// Writes findings.jsonl, secrets.jsonl, findings.sarif and summary.json into
// `dir` (each atomically).
Status WriteOutputs(const ScanReport& r, const std::string& dir);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SCANNER_H_
