#include "result_signer.h"

#include <utility>

#include "gatos/model/clock.h"
#include "gatos/sys/log.h"
#include "gatos/worker/result_assembly.h"

namespace gatos::worker {

Finished ResultSigner::Sign(const std::shared_ptr<Job>& job, Poe poe, std::vector<ResultFile> files,
                            const std::string& manifest_json, const std::string& out_dir) const {
  ResultContext c;
  c.job_commit = job->grant.job_commit;
  c.lease_commit = job->grant.lease_commit;
  c.max_result_bytes = job->grant.lease.max_result_bytes;
  c.committer_name = committer_name_;
  c.key = key_;
  c.now_ms = SystemNowMs();
  AssembledResult r = AssembleResult(c, std::move(poe), std::move(files), manifest_json, out_dir);
  for (const auto& w : r.warnings) Log("job " + Short(job->hex) + ": " + w);
  if (!r.error.empty()) {  // cannot happen with empty files; never retried either way
    Log("job " + Short(job->hex) + ": cannot build even a failed result: " + r.error);
  }
  Finished f;
  f.job = job;
  f.job_hex = job->hex;
  f.status = r.poe.status;
  f.poe = std::move(r.poe);
  f.commit_id = std::move(r.commit_id);
  f.frame = std::move(r.frame);
  return f;
}

}  // namespace gatos::worker
