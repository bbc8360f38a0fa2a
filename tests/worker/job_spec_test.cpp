// What a job runs and reaches: the scan-state rule, the loader variables a
// scan job never gets, the default PATH, the binds and the worker's
// variables.
#include "gatos/worker/job_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gatos::worker {
namespace {

JobHost Host() {
  JobHost h;
  h.self_dir = "/opt/gatos/bin";
  h.scan_state = "/var/lib/worker/scan";
  h.ro_binds = {"/srv/repo"};
  h.kill_grace_ms = 1500;
  h.sandbox = ExecSpec::Sandbox::kRequire;
  return h;
}

struct Fixture {
  Manifest manifest;
  LeaseCommitInfo lease;
  std::vector<ResolvedInput> inputs;
  JobToRun Job() const {
    return {std::string(64, 'a'), 4, &manifest, &lease, "/var/lib/worker/jobs/slot-3", &inputs};
  }
};

Fixture Plain() {
  Fixture f;
  f.manifest.command = {"/bin/sh", "-c"};
  f.manifest.args = {"echo hi"};
  f.manifest.timeout_seconds = 30;
  f.manifest.env = std::map<std::string, std::string>{{"LD_PRELOAD", "/x.so"}, {"A", "1"}};
  f.manifest.cwd = "sub";
  f.lease.output_cap_bytes = 4096;
  f.lease.allow_network = true;
  return f;
}

bool SameBind(const ExecSpec::Bind& a, const ExecSpec::Bind& b) {
  return a.source == b.source && a.destination == b.destination && a.writable == b.writable &&
         a.env == b.env;
}

TEST(WorkerJobSpec, APlainJobRunsItsManifestInItsSlot) {
  Fixture f = Plain();
  ExecSpec s = JobExecSpec(f.Job(), Host());
  EXPECT_EQ(s.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(s.env, (std::map<std::string, std::string>{
                       {"A", "1"},
                       {"LD_PRELOAD", "/x.so"},
                       {"PATH", "/opt/gatos/bin:/usr/local/bin:/usr/bin:/bin"}}));
  EXPECT_EQ(s.workspace, "/var/lib/worker/jobs/slot-3/work");
  EXPECT_EQ(s.output_dir, "/var/lib/worker/jobs/slot-3/out");
  EXPECT_EQ(s.cwd, "sub");
  EXPECT_EQ(s.timeout_ms, 30000);
  EXPECT_EQ(s.kill_grace_ms, 1500);
  EXPECT_EQ(s.output_cap_bytes, 4096u);
  EXPECT_EQ(s.sandbox, ExecSpec::Sandbox::kRequire);
  EXPECT_TRUE(s.allow_network);
  EXPECT_EQ(s.extra_env,
            (std::map<std::string, std::string>{
                {"GATOS_JOB_ID", "blake3:" + std::string(64, 'a')},
                {"GATOS_LEASE_EPOCH", "4"},
                {"GATOS_PROGRESS_FILE", "/var/lib/worker/jobs/slot-3/work/.gatos-progress"}}));
}

TEST(WorkerJobSpec, APlainJobSeesNoScanState) {
  Fixture f = Plain();
  ExecSpec s = JobExecSpec(f.Job(), Host());
  ASSERT_EQ(s.binds.size(), 2u);
  EXPECT_TRUE(SameBind(s.binds[0], {"/srv/repo", "", false, ""}));
  EXPECT_TRUE(SameBind(s.binds[1], {"/opt/gatos/bin", "", false, ""}));
  for (const auto& b : s.binds) EXPECT_NE(b.source, "/var/lib/worker/scan");
}

TEST(WorkerJobSpec, AManifestThatSetsPathDecidesForItself) {
  Fixture f = Plain();
  f.manifest.env = std::map<std::string, std::string>{{"PATH", "/bin"}};
  EXPECT_EQ(JobExecSpec(f.Job(), Host()).env.at("PATH"), "/bin");
  f.manifest.env.reset();
  EXPECT_EQ(JobExecSpec(f.Job(), Host()).env,
            (std::map<std::string, std::string>{
                {"PATH", "/opt/gatos/bin:/usr/local/bin:/usr/bin:/bin"}}));
}

TEST(WorkerJobSpec, AScanJobRunsTheShippedScannerWithoutLoaderVariablesAndWithTheState) {
  Fixture f = Plain();
  f.manifest.command = {"gatos-scan"};
  f.manifest.args = {"--repo", "/srv/repo"};
  f.manifest.env = std::map<std::string, std::string>{
      {"LD_PRELOAD", "/x.so"}, {"LD_LIBRARY_PATH", "/x"}, {"GCONV_PATH", "/x"}, {"TMPDIR", "/x"},
      {"GLIBC_TUNABLES", "x"}, {"PATH", "/evil"},         {"KEEP", "yes"}};
  ASSERT_TRUE(IsScanJob(f.manifest));
  ExecSpec s = JobExecSpec(f.Job(), Host());
  EXPECT_EQ(s.argv, (std::vector<std::string>{"/opt/gatos/bin/gatos-scan", "--repo", "/srv/repo"}));
  EXPECT_EQ(s.env, (std::map<std::string, std::string>{{"KEEP", "yes"}, {"PATH", "/evil"}}));
  ASSERT_EQ(s.binds.size(), 3u);
  EXPECT_TRUE(SameBind(s.binds[2], {"/var/lib/worker/scan", "", true, "GATOS_STATE_DIR"}));
}

TEST(WorkerJobSpec, OnlyTheCommandNamedGatosScanIsAScanJob) {
  Manifest m;
  m.command = {"gatos-scan"};
  EXPECT_TRUE(IsScanJob(m));
  for (const char* other : {"/opt/gatos/bin/gatos-scan", "./gatos-scan", "gatos-scan2", "sh"}) {
    m.command = {other};
    EXPECT_FALSE(IsScanJob(m)) << other;
  }
  m.command = {"sh", "gatos-scan"};
  EXPECT_FALSE(IsScanJob(m));
  m.command.clear();
  EXPECT_FALSE(IsScanJob(m));
}

TEST(WorkerJobSpec, LoaderVariablesAreEveryLdAndThoseGlibcDropsForSetuid) {
  for (const char* v :
       {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_", "GCONV_PATH", "GETCONF_DIR",
        "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NIS_PATH",
        "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR"}) {
    EXPECT_TRUE(IsLoaderVariable(v)) << v;
  }
  for (const char* v :
       {"PATH", "HOME", "LANG", "XLD_PRELOAD", "ld_preload", "TZ", "GATOS_STATE_DIR"}) {
    EXPECT_FALSE(IsLoaderVariable(v)) << v;
  }
}

}  // namespace
}  // namespace gatos::worker
