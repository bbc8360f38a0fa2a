#include "gatos/worker/result_assembly.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "gatos/audit/attest.h"
#include "gatos/model/encoding.h"
#include "gatos/model/rpc.h"
#include "gatos/worker/output_collection.h"
#include "gatos/worker/poe_assembly.h"

namespace gatos::worker {

namespace {

// One attempt: the files as given, with a provenance attestation over them
// when `manifest_json` is set, refused if the ledger would refuse its size.
Result<BuiltResult> Build(const ResultContext& c, const Poe& poe, std::vector<ResultFile> files,
                          const std::string& manifest_json, std::vector<std::string>* warnings) {
  if (!manifest_json.empty()) {
    // An in-toto Statement (SLSA provenance) over the final files, signed by
    // this worker; poe.json then lists and hashes it like every file.
    ProvenanceInput p;
    p.manifest_json = manifest_json;
    p.job_id = poe.job_id;
    p.job_commit = c.job_commit;
    p.worker_id = poe.worker_id;
    p.lease_epoch = poe.lease_epoch;
    p.runner_program = poe.runner_program;
    p.runner_version = poe.runner_version;
    p.runner_platform = poe.runner_platform;
    p.started_at = poe.started_at;
    p.finished_at = poe.finished_at;
    p.subjects = SubjectsForFiles(files);
    p.inputs = poe.inputs;  // resolvedDependencies: the commits the job was shown
    auto envelope = BuildProvenanceEnvelope(p, *c.key);
    if (envelope.ok()) {
      files.push_back({kProvenanceFileName, *envelope, false});
    } else {
      warnings->push_back("no provenance attestation: " + envelope.status().message());
    }
  }
  ResultBuildInput in;
  in.job_commit = c.job_commit;
  in.lease_commit = c.lease_commit;
  in.poe = poe;
  in.files = std::move(files);
  in.committer_name = c.committer_name;
  in.time_ms = c.now_ms;
  GATOS_ASSIGN_OR_RETURN(BuiltResult built, BuildResult(in, *c.key));
  // What the ledger counts (the sum of every object: blobs, trees,
  // poe.json, the attestation, the commit) and how many objects.
  size_t bytes = 0;
  for (const auto& o : built.objects) bytes += o.data.size();
  const size_t limit = static_cast<size_t>(std::max<int64_t>(0, c.max_result_bytes));
  if (bytes > limit || built.objects.size() > c.max_objects) {
    return InvalidArgumentError("the result would be " + std::to_string(bytes) + " bytes in " +
                                std::to_string(built.objects.size()) +
                                " objects, over this ledger's limit of " + std::to_string(limit) +
                                " bytes and " + std::to_string(c.max_objects) +
                                " objects (files, trees, poe.json and attestation together)");
  }
  return built;
}

}  // namespace

AssembledResult AssembleResult(const ResultContext& c, Poe poe, std::vector<ResultFile> files,
                               const std::string& manifest_json, const std::string& out_dir) {
  AssembledResult out;
  if (!out_dir.empty()) {
    // The attestation is one more file of the result: the ledger counts it.
    const size_t other_files = files.size() + (manifest_json.empty() ? 0 : 1);
    Status outputs =
        CollectOutputs(out_dir, OutputLimitsFor(c.max_result_bytes, other_files), &files);
    if (!outputs.ok()) {
      poe.status = "failed";
      poe.reason = outputs.message();
    }
  }
  auto built = Build(c, poe, files, manifest_json, &out.warnings);
  for (int level = 0; !built.ok() && level < 2; ++level) {
    poe.status = "failed";
    poe.reason = TruncateUtf8(
        "the result could not be reported as it was: " + built.status().message(), kMaxReasonBytes);
    std::erase_if(files, [](const ResultFile& f) { return f.path.rfind("outputs/", 0) == 0; });
    if (level == 1) {
      // The smallest result there is: with the provenance attestation
      // (a few KiB) it may not fit a small max_result_bytes.
      for (auto& f : files) f.data.clear();
      poe.reason += "; stdout, stderr and the provenance attestation were dropped as well";
    }
    built = Build(c, poe, files, level == 1 ? std::string() : manifest_json, &out.warnings);
  }
  out.poe = std::move(poe);
  if (!built.ok()) {  // cannot happen with empty files; never retried either way
    out.error = built.status().message();
    return out;
  }
  out.commit_id = built->commit_id;
  out.frame = rpc::EncodeFrame(nlohmann::json{{"commit", built->commit_id}},
                               EncodeObjectBatch(built->objects));
  return out;
}

}  // namespace gatos::worker
