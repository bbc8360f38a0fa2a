// The job's output files (what it left in GATOS_OUTPUT_DIR) as result files
// outputs/<path>, checked against the rules the ledger applies to a result
// before anything is read into memory or signed: every name by
// CheckResultPath (result_path.h, the ledger's own function), and the
// result's limits (result.h ResultCheckLimits, BatchLimits): how many files,
// how deep, how many bytes. docs/worker-execution.md, "Results that cannot be
// reported".
//
// The outputs go into a result all or not at all: at the first violation
// collection stops (a job that wrote 100,000 files or a 5 GB file costs no
// more than the first one over the limit) and the caller reports a `failed`
// result whose reason is the error's message, without outputs.
//
// Symlinks (to files or directories) and anything that is not a regular file
// or a directory are skipped: a job's link never makes the worker read a
// file outside the output directory.
//
// Thread-safety: free functions; the directory must not change while they
// run (the job's processes are gone when the worker collects).
#ifndef GATOS_WORKER_OUTPUT_COLLECTION_H_
#define GATOS_WORKER_OUTPUT_COLLECTION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gatos/git/result.h"
#include "gatos/model/status.h"

namespace gatos::worker {

struct OutputLimits {
  size_t max_bytes = 0;  // all outputs together (the lease's max_result_bytes)
  size_t max_files = 0;  // output files: what the result's file limit leaves for them
  // The result tree's own limits, as the ledger checks them.
  size_t result_max_files = ResultCheckLimits{}.max_files;
  size_t result_max_depth = ResultCheckLimits{}.max_depth;
};

// The limits for outputs in a result of at most `max_result_bytes` that
// holds `other_files` other files (stdout, stderr, the provenance
// attestation) and poe.json.
OutputLimits OutputLimitsFor(int64_t max_result_bytes, size_t other_files);

// Appends outputs/<rel> for each regular file under `out_dir` to *files (in
// directory order; BuildResult sorts). A missing `out_dir` has no outputs.
// On error *files is unchanged and the message says why the outputs cannot
// be part of the result, ending "; no output file was kept":
//   InvalidArgument   a name CheckResultPath refuses (its message), a
//                     directory nested deeper than a result tree may be,
//                     more than max_files files, more than max_bytes bytes
//   Internal          the directory or a file cannot be read
Status CollectOutputs(const std::string& out_dir, const OutputLimits& limits,
                      std::vector<ResultFile>* files);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_OUTPUT_COLLECTION_H_
