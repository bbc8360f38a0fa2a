// `gatos verify` and `gatos attest` as an auditor runs them: the real binary
// over real ledgers built in-process (audit_fixture.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "audit_fixture.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

RunResult Gatos(const std::vector<std::string>& args) {
  // GATOS_TEST_GATOS_BIN lets the tests run against a gatos binary built
  // elsewhere; by default it is the one of this build tree.
  const char* bin = std::getenv("GATOS_TEST_GATOS_BIN");
  std::vector<std::string> argv = {bin && *bin ? bin : BinaryPath("gatos")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

bool Contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// Two accepted results (A by w1, B by w2) and one pending job.
struct CliLedger {
  LedgerFixture f;
  std::unique_ptr<Ledger> l = f.Open();
  JobRun a = RunJob(f, f.w1, {.yaml = Yaml(1)});
  JobRun b = RunJob(f, f.w2, {.yaml = Yaml(2), .status = "failed"});
  std::string pending = SubmitPair(f, Yaml(3)).second;

  void TamperStdoutOfA() {
    auto files = FilesWithPoe(a);
    files[0].data[0] ^= 0x20;
    auto objs = RebuildResult(files, {a.job_commit, a.grant.lease_commit},
                              CommitMessageOf(a.built.objects[0]), f.now, &f.w1);
    ForceResult(*l, a.job_hex, objs, objs[0].id);
  }
  std::string File(const std::string& name, const std::string& text) {
    WriteFile(f.dir.Join(name), text);
    return f.dir.Join(name);
  }
};

TEST(VerifyCliTest, AllJobsOfAGenuineLedgerVerify) {
  CliLedger t;
  RunResult r = Gatos({"verify", "--repo", t.f.path, "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "ok blake3:" + t.a.job_hex + " succeeded\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "ok blake3:" + t.b.job_hex + " failed\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "ok blake3:" + t.pending + " pending, no result\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "3 jobs: 2 results verified, 1 without a result, 0 failed\n"))
      << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(VerifyCliTest, TamperedResultFailsWithItsCheckAndExitsOne) {
  CliLedger t;
  t.TamperStdoutOfA();
  RunResult r = Gatos({"verify", "--repo", t.f.path, "--all"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(Contains(
      r.out, "FAIL blake3:" + t.a.job_hex + " tree_matches_outputs: \"stdout\" hashes to blake3:"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "ok blake3:" + t.b.job_hex + " failed\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "3 jobs: 1 results verified, 1 without a result, 1 failed\n"))
      << r.out;
  // Naming only the genuine job: exit 0.
  RunResult one = Gatos({"verify", "--repo", t.f.path, t.b.job_hex});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_EQ(one.out, "ok blake3:" + t.b.job_hex +
                         " failed\n1 jobs: 1 results verified, 0 without a result, 0 failed\n");
}

TEST(VerifyCliTest, JsonReportHasEveryCheckOfEveryJob) {
  CliLedger t;
  t.TamperStdoutOfA();
  RunResult r = Gatos(
      {"verify", "--repo", t.f.path, "--json", "blake3:" + t.a.job_hex, "blake3:" + t.b.job_hex});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["summary"]["failed"], 1);
  EXPECT_EQ(j["summary"]["verified"], 1);
  ASSERT_EQ(j["jobs"].size(), 2u);
  const json& a = j["jobs"][0];
  EXPECT_EQ(a["job_id"], "blake3:" + t.a.job_hex);
  EXPECT_EQ(a["ok"], false);
  EXPECT_EQ(a["checks"].size(), 26u);
  bool found = false;
  for (const auto& c : a["checks"]) {
    if (c["name"] == "tree_matches_outputs") {
      found = true;
      EXPECT_EQ(c["ok"], false);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["jobs"][1]["ok"], true);
  EXPECT_EQ(j["jobs"][1]["worker_id"], t.f.w2.public_key().WorkerId());
}

TEST(VerifyCliTest, TrustListsAndPinnedLedgerKey) {
  CliLedger t;
  std::string id = "blake3:" + t.a.job_hex;
  // Trusted programs as b3sum prints them.
  std::string progs = t.File("trusted", TestProgram().substr(7) + "  gatos-worker\n");
  RunResult ok = Gatos({"verify", "--repo", t.f.path, id, "--trusted-programs", progs});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  std::string other = t.File("other", Blake3Tagged("other build") + "\n");
  RunResult bad = Gatos({"verify", "--repo", t.f.path, id, "--trusted-programs", other});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.out, "FAIL " + id + " attest_program: Attest-Program " + TestProgram() +
                                    " is not in the trusted programs list"))
      << bad.out;
  // The auditor's own worker list, alone.
  std::string w2_only = t.File("w2.allowed", "w2 " + t.f.w2.public_key().ToOpenSsh() + "\n");
  RunResult only = Gatos(
      {"verify", "--repo", t.f.path, id, "--allowed-signers", w2_only, "--only-allowed-signers"});
  EXPECT_EQ(only.exit_code, 1);
  EXPECT_TRUE(Contains(only.out, "FAIL " + id + " worker_allowed: worker " +
                                     t.f.w1.public_key().WorkerId() +
                                     " is not allowed by --allowed-signers"))
      << only.out;
  // Pinning the ledger key.
  std::string lk = t.File("ledger.pub", t.f.ledger_key.public_key().ToOpenSsh() + "\n");
  EXPECT_EQ(Gatos({"verify", "--repo", t.f.path, "--all", "--ledger-key", lk}).exit_code, 0);
  std::string wrong = t.File("wrong.pub", t.f.w2.public_key().ToOpenSsh() + "\n");
  RunResult pinned = Gatos({"verify", "--repo", t.f.path, id, "--ledger-key", wrong});
  EXPECT_EQ(pinned.exit_code, 1);
  EXPECT_TRUE(Contains(pinned.out, "FAIL " + id + " policy: the first policy commit"))
      << pinned.out;
  // --require-results fails the pending job.
  RunResult req = Gatos({"verify", "--repo", t.f.path, "--all", "--require-results"});
  EXPECT_EQ(req.exit_code, 1);
  EXPECT_TRUE(Contains(req.out, "FAIL blake3:" + t.pending +
                                    " result_present: pending, no result; a result is required"))
      << req.out;
}

TEST(VerifyCliTest, UsageErrorsExitTwo) {
  CliLedger t;
  auto expect = [](const std::vector<std::string>& args, const std::string& needle) {
    RunResult r = Gatos(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, needle)) << r.err;
    EXPECT_EQ(r.out, "");
  };
  expect({"verify", "--repo", t.f.path}, "name the jobs to verify (JOB-ID...) or give --all");
  expect({"verify", "--all"}, "--repo DIR is required");
  expect({"verify", "--repo", t.f.path, "--all", t.a.job_hex}, "give --all or JOB-IDs, not both");
  expect({"verify", "--repo", t.f.path, "blake3:1234"}, "\"blake3:1234\" is not a job id");
  expect({"verify", "--repo", t.f.path, "--all", "--allowed-signers", t.f.dir.Join("nope")},
         "--allowed-signers " + t.f.dir.Join("nope") + ": cannot read the file");
  std::string bad = t.File("bad.allowed", "w1 ssh-ed25519 !!!\n");
  expect({"verify", "--repo", t.f.path, "--all", "--allowed-signers", bad},
         "error: --allowed-signers: " + bad + ":1:");
  expect({"verify", "--repo", t.f.path, "--all", "--only-allowed-signers"},
         "--only-allowed-signers needs --allowed-signers FILE");
  expect({"verify", "--repo", t.f.path, "--all", "--bogus"}, "unknown option '--bogus'");
  expect({"attest", "--repo", t.f.path}, "expects one JOB-ID");
  RunResult help = Gatos({"verify", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(Contains(help.out, "usage: gatos verify --repo DIR"));
}

TEST(VerifyCliTest, NotALedgerSaysHowToFetchTheRefs) {
  TempDir dir;
  RunResult init = testing::Run({"git", "init", "-q", "--bare", dir.Join("x.git")});
  ASSERT_EQ(init.exit_code, 0);
  RunResult r = Gatos({"verify", "--repo", dir.Join("x.git"), "--all"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "error: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "git fetch LEDGER \"refs/gatos/*:refs/gatos/*\"")) << r.err;
}

TEST(AttestCliTest, PrintsThePoeAndProvenanceEnvelopes) {
  CliLedger t;
  RunResult r = Gatos({"attest", "blake3:" + t.a.job_hex, "--repo", t.f.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseDsseEnvelope(r.out.substr(0, r.out.size() - 1));
  ASSERT_TRUE(env.ok()) << env.status().message() << "\n" << r.out;
  EXPECT_EQ(env->payload_type, kPoePayloadType);
  EXPECT_EQ(env->payload, t.a.built.poe_json);
  EXPECT_TRUE(VerifyDsse(*env, t.f.w1.public_key()).ok());

  RunResult p = Gatos({"attest", t.a.job_hex, "--repo", t.f.path, "--provenance"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto st = VerifyProvenanceEnvelope(p.out.substr(0, p.out.size() - 1), t.f.w1.public_key());
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->job_id, "blake3:" + t.a.job_hex);
}

TEST(AttestCliTest, RefusesTamperedResultsAndJobsWithoutOne) {
  CliLedger t;
  RunResult pending = Gatos({"attest", t.pending, "--repo", t.f.path});
  EXPECT_EQ(pending.exit_code, 1);
  EXPECT_TRUE(Contains(pending.err, "has no result yet (pending)")) << pending.err;
  EXPECT_EQ(pending.out, "");
  t.TamperStdoutOfA();
  RunResult r = Gatos({"attest", t.a.job_hex, "--repo", t.f.path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "does not verify (tree_matches_outputs:")) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace gatos::testing
