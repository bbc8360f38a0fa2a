// Pools and priorities in the model: names, the Priority trailer, the
// manifest's pool in the hashed core, the policy's scheduling section, the
// job record, and the claim rule (a worker outside the job's pool is
// refused by the one transition function).
#include "gatos/model/scheduling.h"

#include <gtest/gtest.h>

#include "gatos/model/job_record.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"
#include "gatos/model/public_key.h"
#include "gatos/model/transition.h"

namespace gatos {
namespace {

constexpr char kAdrJobHex[] = "298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc";
constexpr char kAdrYaml[] =
    "command: [\"/usr/bin/env\", \"bash\", \"-lc\"]\n"
    "args: [\"echo\", \"hello\"]\n"
    "timeout: 30\n"
    "env: { GREETING: \"hello\" }\n";

TEST(SchedulingTest, PoolNames) {
  for (std::string ok : {std::string("default"), std::string("gpu"), std::string("a"), std::string("big-mem_2"),
                         std::string("0pool"), std::string(63, 'x')}) {
    EXPECT_EQ(PoolNameProblem(ok), "") << ok;
  }
  for (std::string bad : {std::string(""), std::string("GPU"), std::string("-gpu"), std::string("a.b"),
                          std::string("a/b"), std::string("a b"), std::string("a*"), std::string(64, 'x'),
                          std::string("..")}) {
    EXPECT_NE(PoolNameProblem(bad), "") << bad;
  }
  auto list = ParsePoolList("gpu,default,gpu");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<std::string>{"default", "gpu"}));
  EXPECT_FALSE(ParsePoolList("gpu,,a").ok());
  EXPECT_FALSE(ParsePoolList("").ok());
}

TEST(SchedulingTest, PriorityIsOneDigit) {
  for (int i = 0; i <= 9; ++i) EXPECT_EQ(*ParsePriority(std::to_string(i)), i);
  for (const char* bad : {"10", "-1", "", " 5", "five", "09", "9 "}) {
    auto p = ParsePriority(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("expected one digit 0-9"), std::string::npos);
  }
}

TEST(SchedulingTest, PoolIsHashedAndTheDefaultPoolHashesAsBefore) {
  auto plain = ParseManifest(kAdrYaml, "job.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(JobIdHex(*plain), kAdrJobHex);
  EXPECT_EQ(ManifestPool(*plain), "default");
  auto named_default = ParseManifest(std::string(kAdrYaml) + "pool: default\n", "job.yaml");
  ASSERT_TRUE(named_default.ok());
  EXPECT_EQ(JobIdHex(*named_default), kAdrJobHex);  // the same job
  auto gpu = ParseManifest(std::string(kAdrYaml) + "pool: gpu\n", "job.yaml");
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(CanonicalManifest(*gpu),
            R"({"args":["echo","hello"],"command":["/usr/bin/env","bash","-lc"],)"
            R"("env":{"GREETING":"hello"},"pool":"gpu","timeout":30})");
  EXPECT_EQ(JobIdHex(*gpu), "8234a25a2c66f47cfba16a1cede6aad0189d32c12c0b14946d26916fc51f7577");
  auto bad = ParseManifest(std::string(kAdrYaml) + "pool: Big.Pool\n", "job.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml:5:7: pool: \"Big.Pool\" is not a pool name"), std::string::npos)
      << bad.status().message();
  Manifest m = *plain;
  m.pool = "default";
  EXPECT_FALSE(ValidateManifest(m).ok());
}

TEST(SchedulingTest, AnEmptySectionLeavesPolicyJsonAsBefore) {
  PolicySettings s;
  const std::string before = SerializePolicySettings(s);
  EXPECT_EQ(before.find("scheduling"), std::string::npos);
  bool changed = false;
  const std::string key(64, 'a');
  ASSERT_TRUE(ApplySchedulingChange(&s.scheduling,
                                    {{"action", "worker-pools"}, {"key", key}, {"pools", {"gpu", "default"}}},
                                    &changed)
                  .ok());
  EXPECT_TRUE(changed);
  ASSERT_TRUE(ApplySchedulingChange(&s.scheduling, {{"action", "limits"}, {"key", "default"}, {"max_pending", 10}},
                                    &changed)
                  .ok());
  ASSERT_TRUE(ApplySchedulingChange(&s.scheduling, {{"action", "pause"}, {"pool", "gpu"}}, &changed).ok());
  ASSERT_TRUE(ApplySchedulingChange(&s.scheduling, {{"action", "pause"}, {"pool", "gpu"}}, &changed).ok());
  EXPECT_FALSE(changed);
  ASSERT_TRUE(ApplySchedulingChange(&s.scheduling, {{"action", "pool-limits"}, {"pool", "gpu"}, {"max_running", 4}},
                                    &changed)
                  .ok());
  const std::string text = SerializePolicySettings(s);
  auto back = ParsePolicySettings(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->scheduling, s.scheduling);
  EXPECT_EQ(SerializePolicySettings(*back), text);
  EXPECT_TRUE(KeyMayUsePool(s.scheduling.worker_pools, key, "gpu"));
  EXPECT_FALSE(KeyMayUsePool(s.scheduling.worker_pools, key, "cpu"));
  EXPECT_TRUE(KeyMayUsePool(s.scheduling.worker_pools, std::string(64, 'b'), "cpu"));  // unlisted: all
  EXPECT_EQ(LimitsFor(s.scheduling, key).max_pending, 10);
  // Back to nothing: policy.json is what it was.
  for (nlohmann::json c : {nlohmann::json{{"action", "worker-pools"}, {"key", key}, {"pools", nullptr}},
                           nlohmann::json{{"action", "limits"}, {"key", "default"}, {"max_pending", nullptr}},
                           nlohmann::json{{"action", "resume"}, {"pool", "gpu"}},
                           nlohmann::json{{"action", "pool-limits"}, {"pool", "gpu"}, {"max_running", 0}}}) {
    ASSERT_TRUE(ApplySchedulingChange(&s.scheduling, c, &changed).ok()) << c.dump();
  }
  EXPECT_EQ(SerializePolicySettings(s), before);
}

TEST(SchedulingTest, BadSectionsAndChangesAreRefusedWithTheField) {
  for (const char* bad : {
           R"({"scheduling":{"paused":["Bad.Pool"]}})",
           R"({"scheduling":{"worker_pools":{"abc":["gpu"]}}})",
           R"({"scheduling":{"default_limits":{"max_pending":-1}}})",
           R"({"scheduling":{"default_limits":{"max_queued":1}}})",
           R"({"scheduling":{"surprise":1}})",
       }) {
    auto p = ParsePolicySettings(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("scheduling"), std::string::npos) << p.status().message();
  }
  SchedulingPolicy s;
  bool changed = true;
  EXPECT_FALSE(ApplySchedulingChange(&s, {{"action", "pause"}, {"pool", "a/b"}}, &changed).ok());
  EXPECT_FALSE(ApplySchedulingChange(&s, {{"action", "explode"}}, &changed).ok());
  EXPECT_FALSE(
      ApplySchedulingChange(&s, {{"action", "limits"}, {"key", "default"}, {"per_minute", "many"}}, &changed).ok());
  EXPECT_TRUE(s.empty());
}

TEST(SchedulingTest, RecordKeepsPoolAndPriorityOnlyWhenNotDefault) {
  JobRecord r;
  r.job_hex = std::string(64, 'a');
  r.job_commit = std::string(40, 'c');
  r.submitted_ms = 1;
  const std::string plain = EncodeJobRecord(r);
  EXPECT_EQ(plain.find("pool"), std::string::npos);
  EXPECT_EQ(plain.find("priority"), std::string::npos);
  r.pool = "gpu";
  r.priority = 9;
  auto back = DecodeJobRecord(EncodeJobRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(DecodeJobRecord(R"({"attempt":1,"job":")" + std::string(64, 'a') + R"(","job_commit":")" +
                               std::string(40, 'c') + R"(","priority":10,"submitted_ms":1,"v":1})")
                   .ok());
}

TEST(SchedulingTest, AClaimOutsideTheWorkersPoolsIsRefusedByTheTransition) {
  Policy policy;
  const std::string w(64, '1');
  auto key = ParseWorkerId("ed25519:" + w);
  ASSERT_TRUE(key.ok());
  bool changed = false;
  ASSERT_TRUE(PolicyAllow(&policy, "worker", *key, &changed).ok());
  const std::string job(64, 'a');
  AppliedTransition a;
  ASSERT_TRUE(ApplyTransition(job, std::nullopt, SubmitTransition{job, std::string(40, 'c'), "", "gpu", 9},
                              {&policy, 1000}, &a)
                  .ok());
  const JobRecord rec = a.record;
  EXPECT_EQ(rec.pool, "gpu");
  EXPECT_EQ(rec.priority, 9);
  LeaseTransition claim{false, w, 1, 1000, std::string(40, 'b')};
  // Unlisted: every pool.
  ASSERT_TRUE(ApplyTransition(job, rec, claim, {&policy, 1000}, &a).ok());
  ASSERT_TRUE(ApplySchedulingChange(&policy.settings.scheduling,
                                    {{"action", "worker-pools"}, {"key", w}, {"pools", {"default"}}}, &changed)
                  .ok());
  Decision d = ApplyTransition(job, rec, claim, {&policy, 1000}, &a);
  EXPECT_EQ(d.error, TransitionError::kUnauthorized);
  EXPECT_NE(d.message.find("may not serve pool gpu"), std::string::npos) << d.message;
}

}  // namespace
}  // namespace gatos
