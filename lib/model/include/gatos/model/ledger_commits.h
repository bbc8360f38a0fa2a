// The messages of the commits the ledger writes and signs: lease commits
// (claim, takeover, renew), cancel commits and re-run commits
// (docs/ledger-format.md, "Commits"). One codec, used by the ledger that
// writes them, the worker that checks a grant before running anything, and
// the auditor.
//
// Thread-safety: pure functions.
#ifndef GATOS_LEDGER_COMMITS_H_
#define GATOS_LEDGER_COMMITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/model/job_limits.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kLedgerCommitterName[] = "gatos ledger";
inline constexpr char kLedgerCommitterEmail[] = "ledger@gatos.invalid";

// A lease commit: parents [job commit] for the first claim of a job, [job
// commit, previous lease commit] otherwise.
struct LeaseCommitInfo {
  std::string kind;  // "claim", "takeover" or "renew" (title only)
  std::string job_hex;
  std::string worker_hex;
  int64_t epoch = 0;
  int64_t expires_ms = 0;
  int64_t attempt = 1;
  int64_t requested_at_ms = 0;
  std::string request_sig_hex;  // the worker's signature over its request
  // What the worker may use: the ledger's limits for this lease.
  int64_t lease_ms = 0;
  int64_t output_cap_bytes = 0;
  int64_t max_result_bytes = 0;
  bool allow_network = false;
  // The policy's job limits (job_limits.h): trailers Job-Limits and
  // Job-Limits-Max, each present only when one of its values is not 0.
  JobLimits job_defaults;
  JobLimits job_maxima;
  bool operator==(const LeaseCommitInfo&) const = default;
};
std::string FormatLeaseCommitMessage(const LeaseCommitInfo& info);
// Strict: every trailer present exactly once and well-formed (InvalidArgument
// names the trailer).
Result<LeaseCommitInfo> ParseLeaseCommitMessage(std::string_view message);

// A cancel or a deliberate re-run, requested by a user's key and recorded by
// the ledger. Cancel: parents [job commit]. Re-run: parents [job commit, the
// result it re-opens].
struct UserRequestCommitInfo {
  bool retry = false;  // false: cancel
  std::string job_hex;
  std::string requester_hex;
  int64_t attempt = 0;  // re-run: the attempt it opens
  int64_t recorded_at_ms = 0;
  int64_t requested_at_ms = 0;
  std::string request_sig_hex;
  bool operator==(const UserRequestCommitInfo&) const = default;
};
std::string FormatUserRequestCommitMessage(const UserRequestCommitInfo& info);
Result<UserRequestCommitInfo> ParseUserRequestCommitMessage(std::string_view message);

}  // namespace gatos

#endif  // GATOS_LEDGER_COMMITS_H_
