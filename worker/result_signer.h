// Turns a finished job's PoE and files into the signed result the reporter
// delivers (gatos/worker/result_assembly.h decides what goes in it; this
// adds the worker's key, name and clock, and logs what the assembly says).
//
// Thread-safety: const and thread-safe; the runner threads and the reporter
// (for the small result that replaces one the bus refused) call it at once.
// Does not own the key.
#ifndef GATOS_WORKER_RESULT_SIGNER_H_
#define GATOS_WORKER_RESULT_SIGNER_H_

#include <memory>
#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/result.h"
#include "gatos/model/poe.h"
#include "job.h"

namespace gatos::worker {

class ResultSigner {
 public:
  ResultSigner(const Ed25519PrivateKey* key, std::string worker_name)
      : key_(key), committer_name_("gatos worker " + std::move(worker_name)) {}

  // A result that cannot be built or would be refused for its form or size
  // becomes a `failed` one that fits. `out_dir` ("" = none) holds the job's
  // outputs; `manifest_json` ("" = none) makes a provenance attestation.
  Finished Sign(const std::shared_ptr<Job>& job, Poe poe, std::vector<ResultFile> files,
                const std::string& manifest_json, const std::string& out_dir) const;

 private:
  const Ed25519PrivateKey* key_;
  std::string committer_name_;
};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RESULT_SIGNER_H_
