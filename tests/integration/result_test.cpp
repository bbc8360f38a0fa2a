// Result commits: built on the worker side without a repository, shipped as
// an object batch, checked and recorded by the ledger (its writer),
// and verified by stock git.
#include "gatos/git/result.h"

#include <gtest/gtest.h>

#include "gatos/model/blake3.h"
#include "gatos/model/job_state.h"
#include "gatos/model/decision.h"
#include "gatos/model/time_format.h"
#include "ledger_fixture.h"
#include "test_util.h"

namespace gatos {
namespace {

using testing::LedgerFixture;


const char kJob[] = "command: [\"/bin/true\"]\ntimeout: 30\n";

struct Claimed {
  std::string job_commit, job_hex;
  std::string lease_commit;
  int64_t epoch = 0;
};

Claimed SubmitAndClaim(LedgerFixture& f, const Ed25519PrivateKey& w, const std::string& yaml = kJob) {
  Claimed c;
  auto j = f.Submit(yaml);
  c.job_commit = j.commit;
  c.job_hex = j.hex;
  OpResult r = f.Claim(c.job_hex, w);
  EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
  c.lease_commit = r.commit;
  c.epoch = r.record ? r.record->epoch : 0;
  return c;
}

ResultBuildInput Input(const LedgerFixture& f, const Claimed& c, const Ed25519PrivateKey& w,
                       const std::string& status = "succeeded") {
  ResultBuildInput in;
  in.job_commit = c.job_commit;
  in.lease_commit = c.lease_commit;
  in.poe.job_id = "blake3:" + c.job_hex;
  in.poe.worker_id = w.public_key().WorkerId();
  in.poe.lease_epoch = c.epoch;
  in.poe.status = status;
  in.poe.runner_program = Blake3Tagged("worker binary");
  in.poe.runner_version = "test";
  in.poe.runner_platform = "linux-x86_64";
  in.poe.exit_code = 0;
  in.poe.stdout_cap = 1024;
  in.poe.started_at = FormatRfc3339Millis(f.now);
  in.poe.finished_at = FormatRfc3339Millis(f.now + 5);
  in.files = {{"stdout", "hello\n"}, {"stderr", ""}, {"outputs/report.txt", "42\n"},
              {"outputs/deep/a.bin", std::string("\0\1\2", 3)}};
  in.time_ms = f.now;
  return in;
}

TEST(ObjectBatchTest, RoundTripsAndRecomputesIds) {
  std::vector<GitObject> objs = {{ObjectType::kBlob, "abc", ""}, {ObjectType::kTree, "", ""}};
  for (auto& o : objs) o.id = GitObjectId(o.type, o.data);
  EXPECT_EQ(objs[0].id, "f2ba8f84ab5c1bce84a7b441cb1959cfc7093b7f");  // git hash-object of "abc"
  EXPECT_EQ(objs[1].id, kEmptyTreeId);
  auto back = DecodeObjectBatch(EncodeObjectBatch(objs), {});
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].id, objs[0].id);
  EXPECT_EQ((*back)[1].type, ObjectType::kTree);
}

TEST(ObjectBatchTest, MalformedBatchesAreRefusedWithAReason) {
  std::string good = EncodeObjectBatch({{ObjectType::kBlob, "abc", ""}});
  auto expect = [](std::string_view bytes, const std::string& needle, BatchLimits lim = {}) {
    auto r = DecodeObjectBatch(bytes, lim);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect("nonsense", "does not start with");
  expect(good.substr(0, good.size() - 1), "truncated in the data of object 0");
  expect(good + "x", "1 trailing bytes");
  std::string bad_type = good;
  bad_type[12] = 9;
  expect(bad_type, "unknown type 9");
  expect(good, "larger than this ledger's result limit", BatchLimits{2, 10});
  expect(good, "holds 1 objects; the limit is 0", BatchLimits{100, 0});
}

TEST(ResultTest, AcceptedResultIsRecordedOnceAndVerifiesWithStockGit) {
  LedgerFixture f;
  Claimed c = SubmitAndClaim(f, f.w1);
  auto built = BuildResult(Input(f, c, f.w1), f.w1);
  ASSERT_TRUE(built.ok()) << built.status().message();
  // Self-contained checks pass on the batch alone.
  ResultReport rep = CheckResultCommit(BatchLookup(&built->objects, nullptr), built->commit_id);
  ASSERT_TRUE(rep.ok()) << rep.first_failure()->name << ": " << rep.first_failure()->detail;
  EXPECT_EQ(rep.parsed.tree_files.size(), 4u);

  auto wire = DecodeObjectBatch(EncodeObjectBatch(built->objects), {});
  ASSERT_TRUE(wire.ok());
  OpResult r = f.Report(*wire, built->commit_id);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_FALSE(r.existing);
  EXPECT_EQ(f.Ref(JobRef(c.job_hex, "result")), built->commit_id);
  EXPECT_EQ(RecordState(f.Record(c.job_hex), f.now), JobState::kSucceeded);

  // The outbox may resend after a lost acknowledgement: same answer, no change.
  r = f.Report(*wire, built->commit_id);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_TRUE(r.existing);

  // A different second result for the same job is refused: the job is terminal.
  ResultBuildInput again = Input(f, c, f.w1, "failed");
  auto built2 = BuildResult(again, f.w1);
  Decision o = f.Report(built2->objects, built2->commit_id).outcome;
  EXPECT_EQ(o.error, TransitionError::kTerminal) << o.message;
  f.Close();

  // Stock git: the objects we wrote by hand are well-formed and the commit
  // signature verifies with gpg.format=ssh and an allowed_signers file.
  auto fsck = testing::Run({"git", "--git-dir", f.path, "fsck", "--strict", "--no-dangling"});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
  std::string signers = f.dir.Join("allowed_signers");
  testing::WriteFile(signers, "w1 namespaces=\"git\" " + f.w1.public_key().ToOpenSsh() + "\n");
  auto verify = testing::Run({"git", "--git-dir", f.path, "-c", "gpg.format=ssh", "-c",
                     "gpg.ssh.allowedSignersFile=" + signers, "verify-commit", "-v", built->commit_id});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.err.find("Good \"git\" signature for w1"), std::string::npos) << verify.err;
  auto ls = testing::Run({"git", "--git-dir", f.path, "ls-tree", "-r", "--name-only", built->commit_id});
  EXPECT_EQ(ls.out, "outputs/deep/a.bin\noutputs/report.txt\npoe.json\nstderr\nstdout\n");
}

TEST(ResultTest, StaleHolderAfterTakeoverIsRefusedAndWritesNothing) {
  LedgerFixture f(false, 10'000);
  Claimed c = SubmitAndClaim(f, f.w1);
  auto stale = BuildResult(Input(f, c, f.w1), f.w1);
  ASSERT_TRUE(stale.ok());
  f.now += 10'000 + 1'000 + 1;  // past expiry and grace
  OpResult g2 = f.Claim(c.job_hex, f.w2, 2);
  ASSERT_TRUE(g2.outcome.ok()) << g2.outcome.message;
  Decision o = f.Report(stale->objects, stale->commit_id).outcome;
  EXPECT_EQ(o.error, TransitionError::kStaleOwner) << o.message;
  EXPECT_FALSE(f.Open()->HasObject(stale->commit_id));
  EXPECT_EQ(f.Ref(JobRef(c.job_hex, "result")), "");
  // The new holder's result is accepted.
  Claimed c2 = c;
  c2.lease_commit = g2.commit;
  c2.epoch = 2;
  auto fresh = BuildResult(Input(f, c2, f.w2), f.w2);
  o = f.Report(fresh->objects, fresh->commit_id).outcome;
  EXPECT_TRUE(o.ok()) << o.message;
  // And w1's stale result is still refused, now because the job is finished.
  o = f.Report(stale->objects, stale->commit_id).outcome;
  EXPECT_EQ(o.error, TransitionError::kTerminal) << o.message;
}

TEST(ResultTest, ResultWithinGraceAfterExpiryIsAccepted) {
  LedgerFixture f(false, 10'000);  // grace 1 s
  Claimed c = SubmitAndClaim(f, f.w1);
  auto built = BuildResult(Input(f, c, f.w1), f.w1);
  f.now += 10'500;  // expired, within grace, no takeover
  EXPECT_TRUE(f.Report(built->objects, built->commit_id).outcome.ok());
}

TEST(ResultTest, ForgedOrMisdirectedResultsAreRefusedWithTheirReason) {
  LedgerFixture f;
  Claimed c = SubmitAndClaim(f, f.w1);
  auto refuse = [&](const ResultBuildInput& in, const Ed25519PrivateKey& key, TransitionError want,
                    const std::string& needle) {
    auto b = BuildResult(in, key);
    ASSERT_TRUE(b.ok()) << b.status().message();
    Decision o = f.Report(b->objects, b->commit_id).outcome;
    EXPECT_EQ(o.error, want) << o.message;
    EXPECT_NE(o.message.find(needle), std::string::npos) << o.message;
    EXPECT_EQ(f.Ref(JobRef(c.job_hex, "result")), "");
    EXPECT_FALSE(f.Open()->HasObject(b->commit_id));
  };
  // Signed by w2 while claiming to be w1.
  refuse(Input(f, c, f.w1), f.w2, TransitionError::kUnauthorized, "attest_sig");
  // The lease parent is not the claim commit.
  ResultBuildInput wrong_parent = Input(f, c, f.w1);
  wrong_parent.lease_commit = c.job_commit;
  refuse(wrong_parent, f.w1, TransitionError::kStaleOwner, "is not the claim commit");
  // A worker the policy does not know.
  auto stranger = *GenerateEd25519Key("stranger");
  refuse(Input(f, c, stranger), stranger, TransitionError::kUnauthorized, "not allowed");
  // w2 holds no lease.
  refuse(Input(f, c, f.w2), f.w2, TransitionError::kStaleOwner, "stale owner");
  // A wrong epoch.
  ResultBuildInput epoch = Input(f, c, f.w1);
  epoch.poe.lease_epoch = 7;
  refuse(epoch, f.w1, TransitionError::kStaleOwner, "epoch 7");
  // A job the ledger does not have.
  ResultBuildInput other = Input(f, c, f.w1);
  other.poe.job_id = Blake3Tagged("another job");
  refuse(other, f.w1, TransitionError::kInvalid, "not in this ledger");
}

TEST(ResultTest, CheckFindsTamperingInTheBatch) {
  LedgerFixture f;
  Claimed c = SubmitAndClaim(f, f.w1);
  auto built = BuildResult(Input(f, c, f.w1), f.w1);
  // Re-sign nothing, change the commit message's Status trailer.
  std::vector<GitObject> objs = built->objects;
  std::string& commit = objs[0].data;
  size_t pos = commit.find("Status: succeeded");
  ASSERT_NE(pos, std::string::npos);
  commit.replace(pos, 17, "Status: failed");
  objs[0].id = GitObjectId(ObjectType::kCommit, commit);
  ResultReport rep = CheckResultCommit(BatchLookup(&objs, nullptr), objs[0].id);
  ASSERT_NE(rep.first_failure(), nullptr);
  EXPECT_EQ(rep.first_failure()->name, "poe_matches_trailers");
  // Commit signature also fails, reported as its own check.
  EXPECT_FALSE(rep.checks.back().ok);
  EXPECT_EQ(rep.checks.back().name, "commit_signature");
}

TEST(ResultTest, InputCommitTrailersNameTheInputsAndMustAgreeWithPoe) {
  LedgerFixture f;
  Claimed c = SubmitAndClaim(f, f.w1);
  ResultBuildInput in = Input(f, c, f.w1);
  const std::string c0(40, 'a'), c1(40, 'b');
  in.poe.inputs = {{0, "/srv/repos/app", "HEAD", c0}, {1, "https://git.example.com/lib", "", c1}};
  auto built = BuildResult(in, f.w1);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string& commit = built->objects[0].data;
  EXPECT_NE(commit.find("Input-Commit: 0 " + c0 + "\nInput-Commit: 1 " + c1 + "\n"), std::string::npos) << commit;
  std::vector<GitObject> objs = built->objects;
  ResultReport ok = CheckResultCommit(BatchLookup(&objs, nullptr), objs[0].id);
  EXPECT_EQ(ok.first_failure(), nullptr) << ok.first_failure()->detail;
  // A trailer that disagrees with poe.json is refused.
  std::string& data = objs[0].data;
  data.replace(data.find("Input-Commit: 1 " + c1), 16 + 40, "Input-Commit: 1 " + std::string(40, 'c'));
  objs[0].id = GitObjectId(ObjectType::kCommit, data);
  ResultReport bad = CheckResultCommit(BatchLookup(&objs, nullptr), objs[0].id);
  ASSERT_NE(bad.first_failure(), nullptr);
  EXPECT_EQ(bad.first_failure()->name, "poe_matches_trailers");
}

}  // namespace
}  // namespace gatos
