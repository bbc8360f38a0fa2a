// The ledger's ref names (docs/ledger-format.md, "Refs"), in one place.
//
// Thread-safety: pure functions.
#ifndef GATOS_REFS_H_
#define GATOS_REFS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace gatos {

// Hidden from receive-pack (git push sees none of them); upload-pack (fetch)
// serves them all.
inline constexpr char kJobsPrefix[] = "refs/gatos/jobs/";
inline constexpr char kLogRef[] = "refs/gatos/log";
inline constexpr char kPolicyRef[] = "refs/gatos/policy";
inline constexpr char kWitnessPrefix[] = "refs/gatos/witness/";
inline constexpr char kBatchPrefix[] = "refs/gatos/batches/";
// refs/gatos/schedules/<name>: a schedule's latest signed commit.
inline constexpr char kSchedulePrefix[] = "refs/gatos/schedules/";
// refs/gatos/fires/<name>: the job commit of a schedule's latest fire; its
// first-parent history is every fire of the schedule.
inline constexpr char kFirePrefix[] = "refs/gatos/fires/";
// refs/gatos/watch/<name>: the ledger-signed positions of the refs a
// trigger watches, as it last saw them (positions.json).
inline constexpr char kWatchPrefix[] = "refs/gatos/watch/";
// Push targets, taken by the proc-receive hook: the push creates no ref.
inline constexpr char kSubmitPrefix[] = "refs/gatos/submit/";
inline constexpr char kResultsPushPrefix[] = "refs/gatos/results/";
inline constexpr char kWitnessPushPrefix[] = "refs/gatos/witnesses/";
// A schedule commit pushed with stock git (docs/scheduling.md, "Pushed
// schedules"): recorded at refs/gatos/schedules/<name> like gatos schedule add.
inline constexpr char kSchedulePushPrefix[] = "refs/gatos/submit-schedule/";

inline constexpr char kZeroOid[] = "0000000000000000000000000000000000000000";
// The empty tree's id (git's well-known constant).
inline constexpr char kEmptyTreeId[] = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

// refs/gatos/jobs/<job_hex>/<leaf>: job, lease, result, cancel, retry.
std::string JobRef(std::string_view job_hex, std::string_view leaf);
// refs/gatos/jobs/<job_hex>/claims/<worker_hex>
std::string ClaimRef(std::string_view job_hex, std::string_view worker_hex);
// refs/gatos/jobs/<job_hex>/attempts/<n>
std::string AttemptRef(std::string_view job_hex, int64_t n);

// Splits refs/gatos/jobs/<64 hex>/<leaf>; false for any other shape.
bool SplitJobRef(std::string_view ref, std::string* job_hex, std::string* leaf);

}  // namespace gatos

#endif  // GATOS_REFS_H_
