// Job resource limits in the model: the manifest's `resources` (strict
// integers, hashed), the policy's job_* and max_job_* keys, the lease's
// trailers and the effective limits (docs/limits.md).
#include "gatos/model/job_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "gatos/model/ledger_commits.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"

namespace gatos {
namespace {

const char kBase[] = "command: [\"/bin/true\"]\ntimeout: 5\n";

Result<Manifest> WithResources(const std::string& resources, bool json = false) {
  if (json) {
    return ParseManifest(
        "{\"command\": [\"/bin/true\"], \"timeout\": 5, \"resources\": " + resources + "}",
        "job.json");
  }
  return ParseManifest(std::string(kBase) + "resources: " + resources + "\n", "job.yaml");
}

TEST(JobLimitsTest, ResourcesAreParsedAndHashed) {
  auto m = WithResources("{memory_mb: 256, pids: 64, cpu_millis: 500, disk_mb: 64}");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->resources);
  EXPECT_EQ(m->resources->memory_mb, 256);
  EXPECT_EQ(m->resources->pids, 64);
  EXPECT_EQ(m->resources->cpu_millis, 500);
  EXPECT_EQ(m->resources->disk_mb, 64);
  EXPECT_NE(CanonicalManifest(*m).find(
                "\"resources\":{\"cpu_millis\":500,\"disk_mb\":64,\"memory_mb\":256,\"pids\":64}"),
            std::string::npos)
      << CanonicalManifest(*m);
  // Part of the job: another value is another job; none is the job as before.
  auto other = WithResources("{memory_mb: 257, pids: 64, cpu_millis: 500, disk_mb: 64}");
  auto none = ParseManifest(kBase, "job.yaml");
  ASSERT_TRUE(other.ok() && none.ok());
  EXPECT_NE(JobIdHex(*m), JobIdHex(*other));
  EXPECT_NE(JobIdHex(*m), JobIdHex(*none));
  EXPECT_EQ(CanonicalManifest(*none).find("resources"), std::string::npos);
  // The same in JSON and in block YAML.
  auto json = WithResources(
      "{\"memory_mb\": 256, \"pids\": 64, \"cpu_millis\": 500, \"disk_mb\": 64}", true);
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(JobIdHex(*json), JobIdHex(*m));
  auto some = WithResources("{pids: 10}");
  ASSERT_TRUE(some.ok());
  EXPECT_FALSE(some->resources->memory_mb);
  EXPECT_TRUE(ValidateManifest(*m).ok());
}

TEST(JobLimitsTest, ResourceValuesThatAreNotPositiveIntegersAreRefused) {
  struct Case {
    std::string yaml;
    std::string want;  // in the error
  } cases[] = {
      {"{memory_mb: -1}", "job.yaml:3:24: resources.memory_mb: -1 is negative"},
      {"{memory_mb: 0}", "0 is not positive"},
      {"{memory_mb: 1.5}", "1.5 is not a whole number"},
      {"{memory_mb: 1e3}", "is not a whole number"},
      {"{memory_mb: \"256\"}", "is quoted"},
      {"{memory_mb: 256MB}", "\"256MB\" is not a decimal integer"},
      {"{memory_mb: 0x100}", "is not a decimal integer"},
      {"{memory_mb: 0256}", "leading zero"},
      {"{memory_mb: +5}", "is not a decimal integer"},
      {"{memory_mb: .inf}", "is not a whole number"},
      {"{memory_mb: ~}", "resources.memory_mb: is null; expected a positive integer"},
      {"{memory_mb: [1]}", "expected a positive integer"},
      {"{pids: 99999999999999999999999}", "is over the largest value"},
      {"{pids: 4194305}", "4194305 is over the largest value, 4194304"},
      {"{memory_mb: 16777217}", "is over the largest value, 16777216"},
      {"{swap_mb: 1}", "resources.swap_mb: unknown key"},
      {"{}", "resources: is an empty mapping"},
      {"[memory_mb, 1]", "expected a mapping of memory_mb"},
      {"256", "expected a mapping"},
      {"{pids: 1, pids: 2}", "duplicate key"},
  };
  for (const auto& c : cases) {
    auto m = WithResources(c.yaml);
    ASSERT_FALSE(m.ok()) << c.yaml;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.want), std::string::npos)
        << c.yaml << ": " << m.status().message();
  }
  for (const char* json : {"{\"pids\": 1.0}", "{\"pids\": \"1\"}", "{\"pids\": -2}",
                           "{\"pids\": true}", "{\"pids\": null}", "{\"pids\": 1e2}"}) {
    auto m = WithResources(json, true);
    EXPECT_FALSE(m.ok()) << json;
  }
  Manifest code;
  code.command = {"/bin/true"};
  code.resources = JobResources{};
  EXPECT_EQ(ValidateManifest(code).code(), StatusCode::kInvalidArgument);
  code.resources->pids = -3;
  EXPECT_NE(ValidateManifest(code).message().find("resources.pids: -3 is not positive"),
            std::string::npos);
}

TEST(JobLimitsTest, TheManifestAsksWithinThePolicysMaxima) {
  const JobLimits defaults{256, 64, 0, 64};
  const JobLimits maxima{1024, 0, 2000, 0};
  JobResources asked;
  EXPECT_EQ(EffectiveJobLimits(asked, defaults, maxima), (JobLimits{256, 64, 2000, 64}))
      << "a maximum caps an unlimited default";
  asked.memory_mb = 512;
  asked.pids = 100000;
  EXPECT_EQ(EffectiveJobLimits(asked, defaults, maxima), (JobLimits{512, 100000, 2000, 64}));
  EXPECT_EQ(ResourcesOverMaximum(asked, maxima), "");
  asked.memory_mb = 4096;
  EXPECT_EQ(ResourcesOverMaximum(asked, maxima),
            "resources.memory_mb: 4096 is over this ledger's maximum of 1024 (max_job_memory_mb)");
  EXPECT_EQ(EffectiveJobLimits(asked, defaults, maxima).memory_mb, 1024);
  EXPECT_EQ(EffectiveJobLimits(asked, JobLimits{2048, 0, 0, 0}, JobLimits{1024, 0, 0, 0}).memory_mb,
            1024);
}

TEST(JobLimitsTest, PolicyKeysRoundTripAndAreAbsentWhenZero) {
  PolicySettings s;
  const std::string plain = SerializePolicySettings(s);
  EXPECT_EQ(plain.find("job_"), std::string::npos) << "policies without limits hash as before";
  s.job_defaults = {256, 64, 1000, 64};
  s.job_maxima = {1024, 512, 0, 1024};
  const std::string text = SerializePolicySettings(s);
  EXPECT_NE(text.find("\"job_memory_mb\":256"), std::string::npos) << text;
  EXPECT_NE(text.find("\"max_job_pids\":512"), std::string::npos) << text;
  EXPECT_EQ(text.find("max_job_cpu_millis"), std::string::npos) << text;
  auto back = ParsePolicySettings(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job_defaults, s.job_defaults);
  EXPECT_EQ(back->job_maxima, s.job_maxima);
  for (const char* bad : {"{\"job_pids\":-1}", "{\"job_pids\":1.5}", "{\"job_pids\":\"64\"}",
                          "{\"max_job_memory_mb\":16777217}", "{\"job_swap_mb\":1}"}) {
    EXPECT_EQ(ParsePolicySettings(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(JobLimitsTest, TheLeaseCarriesThePolicysLimits) {
  LeaseCommitInfo i;
  i.kind = "claim";
  i.job_hex = std::string(64, 'a');
  i.worker_hex = std::string(64, 'b');
  i.epoch = 1;
  i.expires_ms = 1000;
  i.request_sig_hex = std::string(128, 'c');
  i.lease_ms = 30000;
  const std::string none = FormatLeaseCommitMessage(i);
  EXPECT_EQ(none.find("Job-Limits"), std::string::npos);
  auto parsed = ParseLeaseCommitMessage(none);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, i);
  i.job_defaults = {256, 64, 0, 64};
  i.job_maxima = {1024, 0, 0, 0};
  const std::string with = FormatLeaseCommitMessage(i);
  EXPECT_NE(with.find("\nJob-Limits: memory_mb=256 pids=64 cpu_millis=0 disk_mb=64\n"),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("Job-Limits-Max: memory_mb=1024 pids=0 cpu_millis=0 disk_mb=0"),
            std::string::npos);
  parsed = ParseLeaseCommitMessage(with);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, i);
  for (const char* bad : {"memory_mb=256", "memory_mb=256 pids=64 cpu_millis=0 disk_mb=-1",
                          "memory_mb=256 pids=64 cpu_millis=0 disk_mb=64 x=1",
                          "pids=64 memory_mb=256 cpu_millis=0 disk_mb=64",
                          "memory_mb=0256 pids=64 cpu_millis=0 disk_mb=64",
                          "memory_mb=256  pids=64 cpu_millis=0 disk_mb=64",
                          "memory_mb=99999999999999 pids=64 cpu_millis=0 disk_mb=64"}) {
    EXPECT_FALSE(ParseJobLimits(bad).ok()) << bad;
  }
  auto ok = ParseJobLimits("memory_mb=1 pids=2 cpu_millis=3 disk_mb=4");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (JobLimits{1, 2, 3, 4}));
}

TEST(JobLimitsTest, ReasonsNameTheLimit) {
  EXPECT_EQ(MemoryLimitReason(256), "killed: memory limit 256 MB");
  EXPECT_EQ(ProcessLimitReason(64), "process limit 64 reached");
  EXPECT_EQ(DiskLimitReason(64), "disk limit 64 MB reached");
}

}  // namespace
}  // namespace gatos
