#include "gatos/worker/job_spec.h"

#include <map>
#include <set>

namespace gatos::worker {

bool IsScanJob(const Manifest& manifest) {
  return !manifest.command.empty() && manifest.command[0] == "gatos-scan";
}

bool IsLoaderVariable(const std::string& name) {
  static const std::set<std::string> kNames = {
      "GCONV_PATH",  "GETCONF_DIR",  "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
      "LOCPATH",     "MALLOC_TRACE", "NIS_PATH",       "NLSPATH",     "RESOLV_HOST_CONF",
      "RES_OPTIONS", "TMPDIR",       "TZDIR"};
  return name.rfind("LD_", 0) == 0 || kNames.count(name) > 0;
}

std::vector<ExecSpec::Bind> JobBinds(const JobHost& host, bool scan) {
  std::vector<ExecSpec::Bind> binds;
  for (const auto& b : host.ro_binds) binds.push_back({b, "", false, ""});
  binds.push_back({host.self_dir, "", false, ""});  // gatos-scan and friends, found by name
  if (scan) binds.push_back({host.scan_state, "", true, "GATOS_STATE_DIR"});
  return binds;
}

std::string ProgressFilePath(const std::string& slot) { return slot + "/work/.gatos-progress"; }

ExecSpec JobExecSpec(const JobToRun& job, const JobHost& host) {
  const Manifest& m = *job.manifest;
  const bool scan = IsScanJob(m);
  ExecSpec spec;
  spec.argv = m.command;
  if (scan) spec.argv[0] = host.self_dir + "/gatos-scan";
  spec.argv.insert(spec.argv.end(), m.args.begin(), m.args.end());
  spec.env = m.env.value_or(std::map<std::string, std::string>{});
  if (scan) std::erase_if(spec.env, [](const auto& kv) { return IsLoaderVariable(kv.first); });
  // Programs shipped with the worker (gatos-scan) are found by name;
  // a manifest that sets PATH decides for itself.
  if (!spec.env.count("PATH")) spec.env["PATH"] = host.self_dir + ":/usr/local/bin:/usr/bin:/bin";
  spec.binds = JobBinds(host, scan);
  spec.workspace = job.slot + "/work";
  spec.cwd = m.cwd.value_or("");
  spec.output_dir = job.slot + "/out";
  spec.timeout_ms = m.timeout_seconds * 1000;
  spec.kill_grace_ms = host.kill_grace_ms;
  spec.output_cap_bytes = static_cast<size_t>(job.lease->output_cap_bytes);
  spec.sandbox = host.sandbox;
  spec.allow_network = job.lease->allow_network;
  spec.limits = EffectiveJobLimits(m.resources.value_or(JobResources{}), job.lease->job_defaults,
                                   job.lease->job_maxima);
  spec.cgroups = host.cgroups;
  spec.extra_env = {{"GATOS_JOB_ID", "blake3:" + job.job_hex},
                    {"GATOS_LEASE_EPOCH", std::to_string(job.epoch)},
                    {"GATOS_PROGRESS_FILE", ProgressFilePath(job.slot)}};
  // Each fetched repository, read-only at /gatos/inputs/<n> ($GATOS_INPUT_<n>).
  if (job.inputs) ExposeInputs(*job.inputs, &spec);
  return spec;
}

}  // namespace gatos::worker
