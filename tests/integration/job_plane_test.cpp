// The job state machine over a real git ledger (libgit2 on a temp bare repo).
#include "gatos/job_plane.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "gatos/encoding.h"
#include "gatos/trailers.h"
#include "ledger_fixture.h"
#include "test_util.h"

namespace gatos {
namespace {

using testing::TempDir;

using Fixture = testing::LedgerFixture;

const char kJob[] = "command: [\"/bin/true\"]\ntimeout: 30\n";

TEST(JobPlaneTest, SignedJobIsAdoptedOnceAndReSubmitIsANoOp) {
  Fixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  auto [commit, hex] = f.JobCommit(*l, kJob, &f.submitter);
  std::string got;
  bool existing = true;
  Outcome o = jp->AdoptJob(commit, &got, &existing);
  ASSERT_TRUE(o.ok()) << o.message;
  EXPECT_EQ(got, hex);
  EXPECT_FALSE(existing);
  EXPECT_EQ(*l->ResolveRef(JobRef(hex, "job")), commit);
  // A second commit with the same manifest names the same job: no-op.
  f.now += 1000;
  auto [commit2, hex2] = f.JobCommit(*l, kJob, &f.submitter);
  EXPECT_NE(commit2, commit);
  ASSERT_TRUE(jp->AdoptJob(commit2, &got, &existing).ok());
  EXPECT_TRUE(existing);
  EXPECT_EQ(*l->ResolveRef(JobRef(hex, "job")), commit);
}

TEST(JobPlaneTest, UnsignedUntrustedAndMislabelledJobsAreRejected) {
  Fixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  std::string hex;
  bool existing;
  auto unsigned_job = f.JobCommit(*l, kJob, nullptr);
  Outcome o = jp->AdoptJob(unsigned_job.first, &hex, &existing);
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("not signed"), std::string::npos) << o.message;
  auto stranger = *GenerateEd25519Key("mallory");
  auto untrusted = f.JobCommit(*l, kJob, &stranger);
  o = jp->AdoptJob(untrusted.first, &hex, &existing);
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("not an allowed submitter"), std::string::npos) << o.message;
  auto wrong_trailer = f.JobCommit(*l, kJob, &f.submitter, "blake3:" + std::string(64, '0'));
  o = jp->AdoptJob(wrong_trailer.first, &hex, &existing);
  EXPECT_EQ(o.error, TransitionError::kInvalid);
  EXPECT_NE(o.message.find("Job-Id: blake3:" + unsigned_job.second), std::string::npos) << o.message;
  auto checked = jp->CheckJobCommit(*l, unsigned_job.first, unsigned_job.second);
  EXPECT_EQ(checked.status().code(), StatusCode::kPermissionDenied);
  auto bad_ref = jp->CheckJobCommit(*l, f.JobCommit(*l, kJob, &f.submitter).first, std::string(64, 'f'));
  EXPECT_EQ(bad_ref.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_ref.status().message().find("but the ref names job ffff"), std::string::npos);
  // Nothing reached the jobs namespace.
  EXPECT_TRUE(l->ListRefs(kJobsPrefix)->empty());
}

TEST(JobPlaneTest, DevModeAcceptsUnsignedJobs) {
  Fixture f(/*dev=*/true);
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  auto [commit, hex] = f.JobCommit(*l, kJob, nullptr);
  std::string got;
  bool existing;
  EXPECT_TRUE(jp->AdoptJob(commit, &got, &existing).ok());
}

TEST(JobPlaneTest, ClaimRenewTakeoverAndFencing) {
  Fixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  auto [commit, hex] = f.Submit(*l, *jp, kJob);

  LeaseGrant g1;
  Outcome o = jp->Claim(f.Req(hex, f.w1), &g1);
  ASSERT_TRUE(o.ok()) << o.message;
  EXPECT_EQ(g1.epoch, 1);
  EXPECT_EQ(g1.expires_ms, f.now + 10'000);
  EXPECT_EQ(*l->ResolveRef(JobRef(hex, "lease")), g1.lease_commit);
  EXPECT_EQ(*l->ResolveRef(ClaimRef(hex, f.w1.public_key().Hex())), g1.lease_commit);
  // The lease commit names worker, epoch and expiry, and its parent is the job.
  auto lc = *l->ReadCommit(g1.lease_commit);
  EXPECT_EQ(lc.parents, std::vector<std::string>{commit});
  EXPECT_FALSE(lc.signature.empty());
  auto msg = *ParseCommitMessage(lc.message);
  EXPECT_EQ(*FindTrailer(msg.trailers, "Lease-Epoch"), "1");
  EXPECT_EQ(*FindTrailer(msg.trailers, "Worker-Id"), f.w1.public_key().WorkerId());

  LeaseGrant g;
  o = jp->Claim(f.Req(hex, f.w2), &g);
  EXPECT_EQ(o.error, TransitionError::kLostRace);

  f.now += 5000;
  LeaseGrant g1b;
  ASSERT_TRUE(jp->Renew(f.Req(hex, f.w1, 1), &g1b).ok());
  EXPECT_EQ(g1b.expires_ms, f.now + 10'000);
  EXPECT_EQ(l->ReadCommit(g1b.lease_commit)->parents,
            (std::vector<std::string>{commit, g1.lease_commit}));
  EXPECT_EQ(jp->Renew(f.Req(hex, f.w2, 1), &g).error, TransitionError::kStaleOwner);

  // Expiry by the ledger's clock, then takeover with epoch 2.
  f.now += 10'000;
  LeaseGrant g2;
  o = jp->Claim(f.Req(hex, f.w2), &g2);
  ASSERT_TRUE(o.ok()) << o.message;
  EXPECT_EQ(g2.epoch, 2);
  o = jp->Renew(f.Req(hex, f.w1, 1), &g);
  EXPECT_EQ(o.error, TransitionError::kStaleOwner);
  EXPECT_NE(o.message.find("stale owner"), std::string::npos);
}

TEST(JobPlaneTest, RequestsMustBeSignedByAnAllowedWorkerAndFresh) {
  Fixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  auto [commit, hex] = f.Submit(*l, *jp, kJob);
  LeaseGrant g;
  auto forged = f.Req(hex, f.w1);
  forged.worker_hex = f.w2.public_key().Hex();  // signed by w1, claims to be w2
  EXPECT_EQ(jp->Claim(forged, &g).error, TransitionError::kUnauthorized);
  auto stranger = *GenerateEd25519Key("x");
  Outcome o = jp->Claim(f.Req(hex, stranger), &g);
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("not allowed"), std::string::npos);
  auto old = f.Req(hex, f.w1);
  f.now += 61'000;
  o = jp->Claim(old, &g);
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("clock"), std::string::npos);
  EXPECT_EQ(*l->ResolveRef(JobRef(hex, "lease")), "");
}

TEST(JobPlaneTest, CancelPendingAbortsAndBlocksClaims) {
  Fixture f;
  auto l = f.Open();
  auto jp = f.Plane(l.get());
  auto [commit, hex] = f.Submit(*l, *jp, kJob);
  bool already;
  ASSERT_TRUE(jp->Cancel(hex, f.submitter.public_key().Hex(), &already).ok());
  EXPECT_FALSE(already);
  EXPECT_EQ(DeriveView(*l->ReadJob(hex), f.now).state, JobState::kAborted);
  LeaseGrant g;
  EXPECT_EQ(jp->Claim(f.Req(hex, f.w1), &g).error, TransitionError::kCancelled);
  ASSERT_TRUE(jp->Cancel(hex, f.submitter.public_key().Hex(), &already).ok());
  EXPECT_TRUE(already);
}

// Many claimants in separate threads, each with its own repository handle
// (as separate processes would have): exactly one lease per job.
TEST(JobPlaneTest, ConcurrentClaimantsGetExactlyOneLeasePerJob) {
  Fixture f;
  std::vector<std::string> jobs;
  {
    auto l = f.Open();
    auto jp = f.Plane(l.get());
    for (int i = 0; i < 40; ++i) {
      std::string yaml = "command: [\"/bin/echo\", \"" + std::to_string(i) + "\"]\ntimeout: 5\n";
      jobs.push_back(f.Submit(*l, *jp, yaml).second);
    }
  }
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> won(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto l = f.Open();
      auto jp = f.Plane(l.get());
      const Ed25519PrivateKey& w = t % 2 ? f.w1 : f.w2;
      for (const auto& job : jobs) {
        LeaseGrant g;
        Outcome o = jp->Claim(f.Req(job, w), &g);
        if (o.ok()) {
          ++wins;
          won[t].push_back(job);
        } else {
          EXPECT_TRUE(o.error == TransitionError::kLostRace || o.error == TransitionError::kRetry)
              << o.message;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> unique;
  for (const auto& v : won) unique.insert(v.begin(), v.end());
  EXPECT_EQ(wins.load(), static_cast<int>(unique.size()));  // no job won twice
  auto l = f.Open();
  for (const auto& job : jobs) {
    auto snap = l->ReadJob(job);
    ASSERT_TRUE(snap.ok());
    if (snap->lease) {
      EXPECT_EQ(snap->lease->epoch, 1);
    }
  }
}

}  // namespace
}  // namespace gatos
