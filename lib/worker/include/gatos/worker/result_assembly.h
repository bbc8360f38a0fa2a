// The signed result a finished job reports (PROTOCOL section 5): its files
// (stdout, stderr, the outputs, the provenance attestation) and its proof of
// execution, built and signed by the worker key, and the request that
// carries it to the ledger.
//
// A result the ledger would refuse for its form or size is refused here
// first, and the job is reported `failed` instead, with the reason, in steps
// that always end in a result that fits (docs/worker-execution.md, "Results
// that cannot be reported"):
//   1. outputs that break a rule (output_collection.h) are left out;
//   2. a result over the lease's max_result_bytes or the ledger's object
//      limit (BatchLimits) is built again without outputs;
//   3. if that is still too large (stdout and stderr over the limit), again
//      without stdout, stderr and the provenance attestation: the smallest
//      result there is, since a job that can report nothing would run again
//      at every takeover.
// Such a failed result has a reason, so the ledger never retries it.
//
// Thread-safety: pure functions (signing included); the key is only read.
#ifndef GATOS_WORKER_RESULT_ASSEMBLY_H_
#define GATOS_WORKER_RESULT_ASSEMBLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/result.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos::worker {

// What a job's result is bound to and signed with.
struct ResultContext {
  std::string job_commit;        // the job commit (parent 1)
  std::string lease_commit;      // the claim commit of the lease held (parent 2)
  int64_t max_result_bytes = 0;  // the lease's limit on all objects together
  size_t max_objects = BatchLimits{}.max_objects;
  std::string committer_name;              // "gatos worker <name>"
  const Ed25519PrivateKey* key = nullptr;  // the worker key; not owned
  int64_t now_ms = 0;                      // the commit time
};

struct AssembledResult {
  Poe poe;  // as reported: status and reason say what was left out and why
  // Set when a result was built (always, unless signing itself failed):
  std::string commit_id;
  std::string frame;  // the result request: rpc::EncodeFrame({commit}, object batch)
  std::string error;  // why no result could be built at all ("" when one was)
  // What the caller should log: a provenance attestation that could not be
  // made (the result goes without it).
  std::vector<std::string> warnings;
};

// Builds the result of a job whose proof of execution is `poe` (FinishPoe
// done) and whose files are `files`, adding the outputs under `out_dir`
// ("" = none) and, when `manifest_json` is not empty (the canonical
// manifest, whose BLAKE3 is the job id), a provenance attestation.
AssembledResult AssembleResult(const ResultContext& context, Poe poe, std::vector<ResultFile> files,
                               const std::string& manifest_json, const std::string& out_dir);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RESULT_ASSEMBLY_H_
