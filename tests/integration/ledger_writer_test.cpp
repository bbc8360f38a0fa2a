// The ledger's writer over a real git repository: the transitions (one state
// machine), the signed log that records them, the state index in the log's
// tree, and the ref view.
#include "gatos/ledger/writer.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>

#include <mutex>
#include <set>
#include <thread>

#include "gatos/crypto/signed_request.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/time_format.h"
#include "gatos/model/trailers.h"
#include "gatos/sys/dir_layout.h"
#include "ledger_fixture.h"
#include "log_reader.h"
#include "test_util.h"

namespace gatos {
namespace {

using Fixture = testing::LedgerFixture;
using testing::LogCommit;
using testing::ReadLog;

const char kJob[] = "command: [\"/bin/true\"]\ntimeout: 30\n";

std::string Yaml(int i) { return "command: [\"/bin/echo\", \"" + std::to_string(i) + "\"]\ntimeout: 5\n"; }

// The refs the log says exist: every batch replayed from the root.
std::map<std::string, std::string> Replay(const std::vector<LogCommit>& log) {
  std::map<std::string, std::string> refs;
  for (const auto& c : log) {
    for (const auto& e : c.entries) {
      if (e.ref.empty()) continue;
      EXPECT_EQ(refs.count(e.ref) ? refs[e.ref] : "", e.old_id) << e.ref << " in log " << c.info.seq;
      if (e.new_id.empty()) refs.erase(e.ref); else refs[e.ref] = e.new_id;
    }
  }
  return refs;
}

std::map<std::string, std::string> ActualRefs(Ledger& l) {
  std::map<std::string, std::string> out;
  auto names = l.ListRefs("refs/gatos/");
  for (const auto& name : *names) {
    if (name != kLogRef) out[name] = *l.ResolveRef(name);
  }
  return out;
}

TEST(LedgerWriterTest, SignedJobIsAdoptedOnceAndReSubmitIsANoOp) {
  Fixture f;
  auto j = f.JobCommit(kJob, &f.submitter);
  OpResult r = f.SubmitJob(j);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_FALSE(r.existing);
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
  EXPECT_EQ(f.Record(j.hex).submitter_hex, f.submitter.public_key().Hex());
  // A second commit with the same manifest names the same job: no-op.
  f.now += 1000;
  auto j2 = f.JobCommit(kJob, &f.submitter);
  EXPECT_NE(j2.commit, j.commit);
  int64_t seq = f.W().seq();
  r = f.SubmitJob(j2);
  ASSERT_TRUE(r.outcome.ok());
  EXPECT_TRUE(r.existing);
  EXPECT_EQ(f.W().seq(), seq);  // nothing written
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
}

TEST(LedgerWriterTest, UnsignedUntrustedMislabelledAndSymlinkedJobsAreRejected) {
  Fixture f;
  auto unsigned_job = f.JobCommit(kJob, nullptr);
  EXPECT_EQ(f.Check(unsigned_job).status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(f.Check(unsigned_job).status().message().find("not signed"), std::string::npos);
  auto stranger = *GenerateEd25519Key("mallory");
  auto untrusted = f.JobCommit(kJob, &stranger);
  EXPECT_NE(f.Check(untrusted).status().message().find("not an allowed submitter"), std::string::npos);
  auto wrong_trailer = f.JobCommit(kJob, &f.submitter, "blake3:" + std::string(64, '0'));
  EXPECT_EQ(f.Check(wrong_trailer).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.Check(wrong_trailer).status().message().find("Job-Id: blake3:" + unsigned_job.hex), std::string::npos);
  auto other_id = f.Check(f.JobCommit(kJob, &f.submitter), std::string(64, 'f'));
  EXPECT_NE(other_id.status().message().find("but the ref names job ffff"), std::string::npos);
  // job.yaml as a symbolic link whose target text is a valid manifest.
  auto link = f.JobCommit(kJob, &f.submitter);
  std::vector<GitObject> objs;
  GitObject blob = MakeObject(ObjectType::kBlob, kJob);
  auto tree = EncodeTree({{"job.yaml", blob.id, 0120000}});
  GitObject t = MakeObject(ObjectType::kTree, *tree);
  auto c = BuildCommitObject(t.id, {}, "link\n\nJob-Id: blake3:" + link.hex + "\n", "A", "a@b", f.now, &f.submitter);
  link.objects = {*c, t, blob};
  link.commit = c->id;
  auto st = f.Check(link);
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("symbolic link"), std::string::npos) << st.status().message();
  EXPECT_TRUE(f.Open()->ListRefs(kJobsPrefix)->empty());
}

TEST(LedgerWriterTest, DevModeAcceptsUnsignedJobs) {
  Fixture f(/*dev=*/true);
  EXPECT_TRUE(f.SubmitJob(f.JobCommit(kJob, nullptr)).outcome.ok());
}

TEST(LedgerWriterTest, ClaimRenewTakeoverAndFencing) {
  Fixture f;
  auto j = f.Submit(kJob);
  OpResult g1 = f.Claim(j.hex, f.w1);
  ASSERT_TRUE(g1.outcome.ok()) << g1.outcome.message;
  EXPECT_EQ(g1.record->epoch, 1);
  EXPECT_EQ(g1.record->expires_ms, f.now + 10'000);
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), g1.commit);
  EXPECT_EQ(f.Ref(ClaimRef(j.hex, f.w1.public_key().Hex())), g1.commit);
  // The grant: a lease commit naming the worker and the epoch, whose parent
  // is the job, then the job's objects. The lease commit is not signed (the
  // log commit that names it is; the reply carries the grant signature).
  ASSERT_EQ(g1.grant.size(), 4u);
  auto lc = *ParseRawCommit(g1.grant[0].data, g1.commit);
  EXPECT_EQ(lc.parents, std::vector<std::string>{j.commit});
  EXPECT_TRUE(lc.signature.empty());
  auto info = *ParseLeaseCommitMessage(lc.message);
  EXPECT_EQ(info.epoch, 1);
  EXPECT_EQ(info.worker_hex, f.w1.public_key().Hex());
  EXPECT_EQ(g1.grant[1].id, j.commit);

  EXPECT_EQ(f.Claim(j.hex, f.w2, 2).outcome.error, TransitionError::kLostRace);
  f.now += 5000;
  OpResult r = f.Renew(j.hex, f.w1, 1);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(r.record->expires_ms, f.now + 10'000);
  EXPECT_EQ(ParseRawCommit(r.grant[0].data, r.commit)->parents, (std::vector<std::string>{j.commit, g1.commit}));
  EXPECT_EQ(f.Renew(j.hex, f.w2, 1).outcome.error, TransitionError::kStaleOwner);

  // Expiry by the ledger's clock, then takeover with epoch 2.
  f.now += 10'000;
  OpResult g2 = f.Claim(j.hex, f.w2, 2);
  ASSERT_TRUE(g2.outcome.ok()) << g2.outcome.message;
  EXPECT_EQ(g2.record->epoch, 2);
  Decision o = f.Renew(j.hex, f.w1, 1).outcome;
  EXPECT_EQ(o.error, TransitionError::kStaleOwner);
  EXPECT_NE(o.message.find("stale owner"), std::string::npos);
}

TEST(LedgerWriterTest, RequestsMustBeSignedByAnAllowedWorkerFreshAndNeverReplayed) {
  Fixture f;
  auto j = f.Submit(kJob);
  auto forged = f.Req(j.hex, f.w1, 1);
  forged.worker_hex = f.w2.public_key().Hex();  // signed by w1, claims to be w2
  EXPECT_EQ(f.Lease(forged).outcome.error, TransitionError::kUnauthorized);
  auto stranger = *GenerateEd25519Key("x");
  Decision o = f.Claim(j.hex, stranger).outcome;
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("not allowed"), std::string::npos);
  auto old = f.Req(j.hex, f.w1, 1);
  f.now += 61'000;
  o = f.Lease(old).outcome;
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("clock"), std::string::npos);
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), "");
  // A genuine claim, recorded by a bus listener and sent again after the
  // lease expired, is not a takeover by a worker that never asked.
  auto genuine = f.Req(j.hex, f.w1, 1);
  ASSERT_TRUE(f.Lease(genuine).outcome.ok());
  f.now += 10'001;
  o = f.Lease(genuine).outcome;
  EXPECT_EQ(o.error, TransitionError::kLostRace) << o.message;
  EXPECT_EQ(f.Record(j.hex).epoch, 1);
  // Same for a renew: replaying the last renew keeps no lease alive.
  f.now -= 10'000;
  auto renew = f.Req(j.hex, f.w1, 1, true);
  ASSERT_TRUE(f.Lease(renew).outcome.ok());
  EXPECT_EQ(f.Lease(renew).outcome.error, TransitionError::kUnauthorized);
}

TEST(LedgerWriterTest, CancelIsForTheSubmitterOrAnOperatorAndAbortsAPendingJob) {
  auto op = *GenerateEd25519Key("operator");
  Fixture f(false, 10'000, [&](Policy* p) {
    p->operators_text = "ops " + op.public_key().ToOpenSsh() + "\n";
    p->operators = *ParseAllowedSigners(p->operators_text, "ops");
  });
  auto j = f.Submit(kJob);
  auto j2 = f.Submit(Yaml(2));
  auto other_submitter = f.w2;  // any other key
  Decision o = f.User(j.hex, other_submitter, false).outcome;
  EXPECT_EQ(o.error, TransitionError::kUnauthorized);
  EXPECT_NE(o.message.find("only its submitter"), std::string::npos) << o.message;
  OpResult r = f.User(j.hex, f.submitter, false);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(RecordState(*r.record, f.now), JobState::kAborted);
  auto cc = *ParseUserRequestCommitMessage(f.Open()->ReadCommit(r.commit)->message);
  EXPECT_EQ(cc.requester_hex, f.submitter.public_key().Hex());
  EXPECT_EQ(f.Claim(j.hex, f.w1).outcome.error, TransitionError::kCancelled);
  EXPECT_TRUE(f.User(j.hex, f.submitter, false).existing);
  EXPECT_TRUE(f.User(j2.hex, op, false).outcome.ok());  // an operator may cancel any job
}

TEST(LedgerWriterTest, TwoClaimsOfOneJobInOneBatchTheFirstWins) {
  Fixture f;
  auto j = f.Submit(kJob);
  std::vector<Op> ops;
  ops.push_back(LeaseOp{f.Req(j.hex, f.w1, 1)});
  ops.push_back(LeaseOp{f.Req(j.hex, f.w2, 1)});
  int64_t seq = f.W().seq();
  auto results = f.W().Apply(ops);
  EXPECT_TRUE(results[0].outcome.ok());
  EXPECT_EQ(results[1].outcome.error, TransitionError::kLostRace);
  EXPECT_EQ(f.W().seq(), seq + 1);  // one log commit for the batch
  EXPECT_EQ(f.Record(j.hex).worker_hex, f.w1.public_key().Hex());
}

TEST(LedgerWriterTest, TheLogIsSignedContiguousReachableAndReplaysToTheRefs) {
  Fixture f;
  std::vector<std::string> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(f.Submit(Yaml(i)).hex);
  std::vector<Op> claims;
  for (int i = 0; i < 8; ++i) claims.push_back(LeaseOp{f.Req(jobs[i], i % 2 ? f.w1 : f.w2, 1)});
  auto results = f.W().Apply(claims);
  for (const auto& r : results) ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  ASSERT_TRUE(f.User(jobs[9], f.submitter, false).outcome.ok());
  f.Close();
  auto l = f.Open();
  auto log = ReadLog(*l);
  ASSERT_EQ(log.size(), 1u + 12 + 1 + 1);  // init, 12 submits, the claims, the cancel
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].info.seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(log[i].info.ledger_key_hex, f.ledger_key.public_key().Hex());
    EXPECT_FALSE(log[i].commit.signature.empty());
  }
  // Every commit the batch recorded is a parent of its log commit.
  const auto& batch = log[13];
  EXPECT_EQ(batch.entries.size(), 16u);  // lease + claims/<w> for each of 8 jobs
  std::set<std::string> parents(batch.commit.parents.begin() + 1, batch.commit.parents.end());
  for (const auto& r : results) EXPECT_TRUE(parents.count(r.commit));
  EXPECT_EQ(Replay(log), ActualRefs(*l));
  // git itself agrees the history is complete from the log alone.
  auto fsck = testing::Run({"git", "--git-dir", f.path, "fsck", "--strict", "--no-dangling"});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
  // Stock git verifies the log commits with the ledger key.
  std::string signers = f.dir.Join("ledger_signers");
  testing::WriteFile(signers, "ledger namespaces=\"git\" " + f.ledger_key.public_key().ToOpenSsh() + "\n");
  auto verify = testing::Run({"git", "--git-dir", f.path, "-c", "gpg.format=ssh", "-c",
                              "gpg.ssh.allowedSignersFile=" + signers, "verify-commit", log.back().id});
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
}

TEST(LedgerWriterTest, StateIndexAnswersAfterReopenAndCountsStates) {
  Fixture f;
  std::vector<std::string> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(f.Submit(Yaml(i)).hex);
  ASSERT_TRUE(f.Claim(jobs[0], f.w1).outcome.ok());
  ASSERT_TRUE(f.User(jobs[1], f.submitter, false).outcome.ok());
  f.Close();
  auto& w = f.W();
  EXPECT_EQ(w.stats().jobs, 6);
  EXPECT_EQ(w.stats().by_state[static_cast<size_t>(JobState::kPending)], 4);
  EXPECT_EQ(w.stats().by_state[static_cast<size_t>(JobState::kClaimed)], 1);
  EXPECT_EQ(w.stats().by_state[static_cast<size_t>(JobState::kAborted)], 1);
  EXPECT_EQ(w.live().size(), 5u);  // the aborted job is not live
  EXPECT_EQ(w.live().at(jobs[0]).worker_hex, f.w1.public_key().Hex());
  auto rec = LedgerView::Open(f.path).value()->Find(jobs[1]);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_FALSE((*rec)->cancel_commit.empty());
  // Paging over the index in id order.
  std::vector<std::string> ids;
  ASSERT_TRUE(w.index().ForEachJob("", [&](const JobRecord& r) {
    ids.push_back(r.job_hex);
    return true;
  }).ok());
  std::vector<std::string> sorted = jobs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(ids, sorted);
  std::vector<std::string> rest;
  ASSERT_TRUE(w.index().ForEachJob(sorted[2], [&](const JobRecord& r) {
    rest.push_back(r.job_hex);
    return true;
  }).ok());
  EXPECT_EQ(rest, std::vector<std::string>(sorted.begin() + 3, sorted.end()));
}

TEST(LedgerWriterTest, AViewLeftBehindByACrashIsRepairedFromTheLog) {
  Fixture f;
  auto j = f.Submit(kJob);
  ASSERT_TRUE(f.Claim(j.hex, f.w1).outcome.ok());
  std::string lease = f.Ref(JobRef(j.hex, "lease"));
  f.Close();
  // A crash after the log ref moved but before the view refs were written
  // (or a power loss that lost them).
  auto l = f.Open();
  ASSERT_TRUE(l->SetViewRefs({{JobRef(j.hex, "lease"), ""}, {ClaimRef(j.hex, f.w1.public_key().Hex()), ""}}).ok());
  testing::WriteFile(f.path + "/gatos/views-synced", "1\n");
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), "");
  f.W();  // opening the writer repairs the view
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), lease);
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
}

// A sync of the view refs that fails never leaves a mark saying it
// succeeded: after the failure and a crash that loses the refs written since
// the last good sync, the next open repairs them from the log.
TEST(LedgerWriterTest, AFailedViewSyncWritesNoMarkAndTheViewsAreRepairedAfterACrash) {
  Fixture f;
  f.W();
  f.Close();
  const std::string mark_path = f.path + "/gatos/views-synced";
  const std::string mark = testing::ReadFile(mark_path);
  ASSERT_FALSE(mark.empty());
  f.writer_options.crash_at = "fail-syncfs";
  auto j = f.Submit(kJob);
  ASSERT_TRUE(f.Claim(j.hex, f.w1).outcome.ok());
  const std::string lease = f.Ref(JobRef(j.hex, "lease"));
  ASSERT_FALSE(lease.empty());
  Status s = f.W().SyncViews();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(testing::ReadFile(mark_path), mark) << "a failed sync moved the mark";
  f.Close();
  // The crash: the view refs written since the last good sync are gone.
  auto l = f.Open();
  ASSERT_TRUE(l->SetViewRefs({{JobRef(j.hex, "job"), ""},
                              {JobRef(j.hex, "lease"), ""},
                              {ClaimRef(j.hex, f.w1.public_key().Hex()), ""}})
                  .ok());
  ASSERT_EQ(f.Ref(JobRef(j.hex, "lease")), "");
  f.writer_options.crash_at.clear();
  f.W();  // opening the writer repairs the views and marks them synced
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), lease);
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
  EXPECT_NE(testing::ReadFile(mark_path), mark);
}

// A writer SIGKILLed while it held refs/gatos/log.lock (the lock written,
// not yet renamed over the log ref) leaves the lock behind; the next writer
// removes it (it holds the writer lock, so nobody else moves the log) and
// goes on, instead of refusing every batch.
TEST(LedgerWriterTest, ALogLockLeftByAKilledWriterDoesNotStopTheNext) {
  Fixture f;
  auto j = f.Submit(kJob);
  f.Close();
  auto l = f.Open();
  const std::string head = f.Ref("refs/gatos/log");
  testing::WriteFile(f.path + "/refs/gatos/log.lock", std::string(40, 'e') + "\n");
  auto claim = f.Claim(j.hex, f.w1);  // opens the writer again
  ASSERT_TRUE(claim.outcome.ok()) << claim.outcome.message;
  EXPECT_NE(f.Ref("refs/gatos/log"), head);
  EXPECT_FALSE(std::filesystem::exists(f.path + "/refs/gatos/log.lock"));
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
}

TEST(LedgerWriterTest, OneWriterAtATime) {
  Fixture f;
  f.W();
  auto second = LedgerWriter::Open(f.path, f.ledger_key, {});
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("another process"), std::string::npos);
  f.Close();
  EXPECT_TRUE(LedgerWriter::Open(f.path, f.ledger_key, {}).ok());
}

TEST(LedgerWriterTest, FinishedJobsArePrunedAfterTheRetentionAndStillAnswer) {
  Fixture f(false, 10'000, [](Policy* p) { p->settings.retention_ms = 60'000; });
  auto j = f.Submit(kJob);
  ASSERT_TRUE(f.User(j.hex, f.submitter, false).outcome.ok());
  EXPECT_EQ(f.Apply(PruneOp{j.hex}).outcome.error, TransitionError::kInvalid);  // too early
  f.now += 60'000;
  OpResult r = f.Apply(PruneOp{j.hex});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(f.Open()->ListRefs(JobRef(j.hex, ""))->size(), 0u);
  EXPECT_EQ(RecordState(f.Record(j.hex), f.now), JobState::kAborted);
  EXPECT_EQ(f.W().stats().pruned, 1);
  auto l = f.Open();
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
}

TEST(LedgerWriterTest, RevokingAWorkerEndsItsLeasesAtOnce) {
  Fixture f;
  auto j = f.Submit(kJob);
  ASSERT_TRUE(f.Claim(j.hex, f.w1).outcome.ok());
  Policy next = f.W().policy();
  ASSERT_TRUE(PolicyRevoke(&next, "worker", f.w1.public_key()).ok());
  OpResult r = f.Apply(PolicyOp{next, "revoke w1\n", std::nullopt});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(r.revoked_jobs, std::vector<std::string>{j.hex});
  EXPECT_TRUE(LeaseExpired(f.Record(j.hex), f.now));
  EXPECT_EQ(f.Renew(j.hex, f.w1, 1).outcome.error, TransitionError::kUnauthorized);
  EXPECT_TRUE(f.Claim(j.hex, f.w2, 2).outcome.ok());  // offered again at once
  EXPECT_EQ(f.Ref(kPolicyRef), r.commit);
}

TEST(LedgerWriterTest, KeyRotationIsSignedByTheOldKeyAndTheNewKeySignsFromThen) {
  Fixture f;
  auto next_key = *GenerateEd25519Key("ledger2");
  OpResult r = f.Apply(PolicyOp{f.W().policy(), "rotate\n", next_key});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  auto l = f.Open();
  auto policy_commit = *l->ReadCommit(r.commit);
  auto sig = ParseSshSignature(policy_commit.signature);
  EXPECT_EQ(sig->key, f.ledger_key.public_key());  // introduced by the old key
  EXPECT_EQ(l->ReadPolicyAt(r.commit)->ledger_key, next_key.public_key());
  f.Submit(kJob);  // the next log commit
  auto head = *l->ReadCommit(*l->ResolveRef(kLogRef));
  EXPECT_EQ(ParseSshSignature(head.signature)->key, next_key.public_key());
  f.Close();
  EXPECT_EQ(LedgerWriter::Open(f.path, f.ledger_key, {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(LedgerWriter::Open(f.path, next_key, {}).ok());
}


// gatosd authenticates the next requests on its decoder thread while the
// ledger thread applies the batch before (Prepare, then Finish), and merges
// prepared batches that waited into one log batch (AppendPrepared). The
// replies must be exactly those of handling all requests at once, batch
// requests and refused ones included, in one log commit.
TEST(LedgerWriterTest, TheServiceSweepPrunesFinishedJobsOnceTheirRetentionEnds) {
  Fixture f(false, 10'000, [](Policy* p) { p->settings.retention_ms = 60'000; });
  JobService service(&f.W(), ServiceOptions{});
  std::vector<std::string> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(f.Submit(Yaml(i)).hex);
    ASSERT_TRUE(f.User(jobs.back(), f.submitter, false).outcome.ok());
  }
  const std::string live = f.Submit(Yaml(3)).hex;  // pending: never pruned
  service.Sweep();
  EXPECT_EQ(f.W().stats().pruned, 0) << "inside the retention";
  f.now += 60'000;
  service.Sweep();
  EXPECT_EQ(f.W().stats().pruned, 3);
  auto l = f.Open();
  for (const auto& j : jobs) {
    EXPECT_TRUE(l->ListRefs(JobRef(j, ""))->empty()) << j;
    EXPECT_EQ(RecordState(f.Record(j), f.now), JobState::kAborted);
  }
  EXPECT_FALSE(l->ListRefs(JobRef(live, ""))->empty());
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
}

// A log batch's commit lists every commit the batch adopts, and a job's
// proof bundle carries its batches: a sweep fires kMaxFiresPerPass at most
// per log batch. A catch-up (`all`) of a 300-tick outage continues over
// sweeps, 200 schedules due at once are two batches, and every tick fires
// once.
TEST(LedgerWriterTest, ASweepFiresAtMostKMaxFiresPerPassPerLogBatch) {
  Fixture f;
  auto add = [&](const std::string& name, CatchUp rule) {
    ScheduleSpec spec;
    spec.name = name;
    spec.every_ms = 1000;
    spec.catch_up = rule;
    spec.job = *ParseManifest(kJob, "job.yaml");
    auto objects = BuildScheduleCommit(spec, "active", "", f.submitter, f.now);
    ASSERT_TRUE(objects.ok()) << objects.status().ToString();
    OpResult r = f.Apply(NoteOp{LogKind::kSchedule, std::string(kSchedulePrefix) + name, false, *objects});
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  };
  add("behind", CatchUp::kAll);
  JobService service(&f.W(), ServiceOptions{});
  f.now += 300'000 + 400;  // 300 ticks due, most of them older than the grace
  const uint64_t seq0 = f.W().seq();
  for (int sweep = 0; sweep < 4; ++sweep) service.Sweep();
  const uint64_t seq1 = f.W().seq();
  // 128 + 128 + 44: three batches, then nothing left to fire.
  EXPECT_EQ(seq1 - seq0, 3u);
  for (int i = 0; i < 200; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "s%03d", i);
    add(name, CatchUp::kNone);
  }
  f.now += 1000;
  const uint64_t seq2 = f.W().seq();
  JobService restarted(&f.W(), ServiceOptions{});  // reads the schedules added behind the first one's back
  restarted.Sweep();
  // 200 on-time ticks and the catch-up's next one: two batches.
  EXPECT_EQ(f.W().seq() - seq2, 2u);
  f.Close();
  auto l = f.Open();
  size_t fires = 0;
  for (const auto& c : ReadLog(*l)) {
    if (c.info.seq <= seq0) continue;
    EXPECT_LE(c.commit.parents.size(), 1 + kMaxFiresPerPass) << "log " << c.info.seq;
    if (c.info.seq > seq1 && c.info.seq <= seq2) continue;  // the schedules added
    fires += c.commit.parents.size() - 1;
  }
  EXPECT_EQ(fires, 300u + 1 + 200);
  // The catch-up's chain of fires: each tick of the outage once, in order.
  std::vector<int64_t> ticks;
  for (std::string at = l->ResolveRef(std::string(kFirePrefix) + "behind").value_or(""); !at.empty();) {
    auto c = l->ReadCommit(at);
    ASSERT_TRUE(c.ok()) << at;
    auto m = ParseCommitMessage(c->message);
    ASSERT_TRUE(m.ok());
    auto tick = ParseRfc3339Millis(FindTrailer(m->trailers, "Fired-At").value_or(""));
    ASSERT_TRUE(tick.ok()) << c->message;
    ticks.insert(ticks.begin(), *tick);
    at = c->parents.size() > 1 ? c->parents[1] : "";  // the schedule's commit, then the previous fire
  }
  ASSERT_EQ(ticks.size(), 301u);
  for (size_t i = 1; i < ticks.size(); ++i) ASSERT_EQ(ticks[i] - ticks[i - 1], 1000) << i;
}

// FS_TOPDIR_FL of `dir`, or nullopt when the file system has no flags.
std::optional<bool> TopDirFlag(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  if (!ok) return std::nullopt;
  return (flags & FS_TOPDIR_FL) != 0;
}

TEST(LedgerWriterTest, JobRefDirectoriesAreSpreadAndTheirParentOutlivesPruning) {
  Fixture f(false, 10'000, [](Policy* p) { p->settings.retention_ms = 60'000; });
  f.W();
  const std::string jobs_dir = f.path + "/refs/gatos/jobs";
  ASSERT_TRUE(std::filesystem::is_directory(jobs_dir));
  struct statfs fs;
  ASSERT_EQ(::statfs(jobs_dir.c_str(), &fs), 0);
  std::string why;
  if (fs.f_type == EXT4_SUPER_MAGIC) {
    // ext4 (this project's machines, without a journal): marked by the
    // writer when it opened, unless the file system has a journal.
    EXPECT_EQ(TopDirFlag(jobs_dir), std::optional<bool>(FileSystemOf(jobs_dir) != DirFileSystem::kExt4Journaled));
    EXPECT_TRUE(SpreadSubdirectories(jobs_dir, &why)) << why;
  } else if (!TopDirFlag(jobs_dir).has_value()) {
    // A file system without inode flags (tmpfs): refused, and said where.
    EXPECT_FALSE(SpreadSubdirectories(jobs_dir, &why));
    EXPECT_NE(why.find(jobs_dir), std::string::npos) << why;
  }
  auto j = f.Submit(kJob);
  ASSERT_TRUE(f.User(j.hex, f.submitter, false).outcome.ok());
  f.now += 60'000;
  ASSERT_TRUE(f.Apply(PruneOp{j.hex}).outcome.ok());
  EXPECT_FALSE(std::filesystem::exists(jobs_dir + "/" + j.hex));
  EXPECT_TRUE(std::filesystem::is_directory(jobs_dir)) << "the last job's pruning keeps refs/gatos/jobs";
  EXPECT_FALSE(SpreadSubdirectories(f.path + "/no-such-dir", &why));
  EXPECT_NE(why.find("no-such-dir"), std::string::npos) << why;
}

// The ledger's job directories are spread over ext4's block groups only
// where that pays: ext4 without a journal. Real file systems, loop-mounted.
TEST(LedgerWriterTest, JobRefDirectoriesAreSpreadOnlyOnExt4WithoutAJournal) {
  ASSERT_EQ(::geteuid(), 0u) << "mounting loop file systems needs root (CI runs as root)";
  testing::TempDir tmp;
  struct Mounted {
    std::string dir;
    ~Mounted() {
      if (!dir.empty()) testing::Run({"umount", dir});
    }
  };
  for (bool journal : {true, false}) {
    const std::string img = tmp.Join(journal ? "j.img" : "nj.img");
    const std::string mnt = tmp.Join(journal ? "j" : "nj");
    std::filesystem::create_directories(mnt);
    ASSERT_EQ(testing::Run({"truncate", "-s", "64M", img}).exit_code, 0);
    std::vector<std::string> mkfs = {"mkfs.ext4", "-q", "-F"};
    if (!journal) mkfs.insert(mkfs.end(), {"-O", "^has_journal"});
    mkfs.push_back(img);
    testing::RunResult made = testing::Run(mkfs);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    testing::RunResult mounted = testing::Run({"mount", "-o", "loop", img, mnt});
    ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
    Mounted guard{mnt};
    EXPECT_EQ(FileSystemOf(mnt), journal ? DirFileSystem::kExt4Journaled : DirFileSystem::kExt4NoJournal);
    const std::string jobs = mnt + "/jobs";
    std::filesystem::create_directories(jobs);
    std::string why;
    // A directory marked before (a ledger made by an earlier version) is
    // put right too.
    ASSERT_TRUE(SpreadSubdirectories(jobs, &why)) << why;
    EXPECT_TRUE(LayOutPerJobDirectories(jobs, &why)) << why;
    EXPECT_EQ(TopDirFlag(jobs), std::optional<bool>(!journal)) << (journal ? "journaled" : "no journal");
    // The writer lays out its ledger's refs/gatos/jobs the same way.
    const std::string ledger = mnt + "/ledger.git";
    ASSERT_TRUE(Ledger::InitRepository(ledger).ok());
    std::filesystem::create_directories(ledger + "/refs/gatos/jobs");
    ASSERT_TRUE(SpreadSubdirectories(ledger + "/refs/gatos/jobs", &why)) << why;
    auto key = GenerateEd25519Key("ledger");
    ASSERT_TRUE(key.ok());
    Policy policy;
    policy.ledger_key = key->public_key();
    Status init = LedgerWriter::Initialize(ledger, policy, *key, 1);
    ASSERT_TRUE(init.ok()) << init.message();
    {
      auto w = LedgerWriter::Open(ledger, *key);
      ASSERT_TRUE(w.ok()) << w.status().message();
    }
    EXPECT_EQ(TopDirFlag(ledger + "/refs/gatos/jobs"), std::optional<bool>(!journal));
  }
  EXPECT_EQ(FileSystemOf("/dev/shm"), DirFileSystem::kOther);
}

// A batch's pack and the log ref's next value share one spool directory and
// one sync of it (six syncs per commit instead of seven): the pack's
// directory syncs are handed to the ref move, the spool's first (the order
// in which a crash cannot leave the pack under two names with one link
// counted), and the ref move takes them whether it succeeds or not.
TEST(LedgerWriterTest, APacksDirectorySyncsAreDeferredSpoolFirstToTheRefMoveThatPublishesIt) {
  testing::TempDir dir;
  const std::string path = dir.Join("repo.git");
  ASSERT_TRUE(Ledger::InitRepository(path).ok());
  auto l = Ledger::Open(path);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const std::string spool = dir.Join("spool");
  ASSERT_TRUE(std::filesystem::create_directory(spool));
  ASSERT_TRUE((*l)->SetSpool({spool}));

  GitObject blob = MakeObject(ObjectType::kBlob, "deferred\n");
  Ledger::DeferredSyncs d;
  ASSERT_TRUE((*l)->WriteObjectsPacked({&blob}, true, true, &d).ok());
  EXPECT_EQ(d.spool, spool);
  ASSERT_EQ(d.dirs.size(), 2u);
  EXPECT_EQ(d.dirs[0], spool) << "the directory the pack left is synced first";
  EXPECT_EQ(d.dirs[1], path + "/objects/pack");
  EXPECT_TRUE(std::filesystem::is_empty(spool)) << "the pack and its index were renamed out of the spool";
  auto back = (*l)->ReadBlob(blob.id, 1 << 10);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, "deferred\n");

  ASSERT_TRUE((*l)->CasRef("refs/gatos/deferred", "", blob.id, true, &d).ok());
  EXPECT_TRUE(d.dirs.empty());
  EXPECT_EQ(*(*l)->ResolveRef("refs/gatos/deferred"), blob.id);
  EXPECT_TRUE(std::filesystem::is_empty(spool)) << "the ref's value was linked out of the spool";

  // A move that fails its compare-and-swap still takes the pack's syncs.
  GitObject blob2 = MakeObject(ObjectType::kBlob, "second\n");
  Ledger::DeferredSyncs d2;
  ASSERT_TRUE((*l)->WriteObjectsPacked({&blob2}, true, true, &d2).ok());
  ASSERT_EQ(d2.dirs.size(), 2u);
  Status moved = (*l)->CasRef("refs/gatos/deferred", "", blob2.id, true, &d2);
  EXPECT_EQ(moved.code(), StatusCode::kAborted) << moved.message();
  EXPECT_TRUE(d2.dirs.empty());
  EXPECT_EQ(*(*l)->ResolveRef("refs/gatos/deferred"), blob.id);

  // Without fsync nothing is deferred.
  GitObject blob3 = MakeObject(ObjectType::kBlob, "third\n");
  Ledger::DeferredSyncs d3;
  ASSERT_TRUE((*l)->WriteObjectsPacked({&blob3}, false, true, &d3).ok());
  EXPECT_TRUE(d3.dirs.empty());
  EXPECT_TRUE(d3.spool.empty());
}

// The writer frees what it replaces or deletes off its own threads: CasRef
// and SetViewRefs keep the old file (or removed directory) open and hand it
// to a closer thread. Refs move exactly as without it, and nothing stays
// open once the handle is gone.
TEST(LedgerWriterTest, ReplacedAndDeletedRefFilesAreClosedOffThreadAndNoDescriptorLeaks) {
  testing::TempDir dir;
  const std::string path = dir.Join("repo.git");
  ASSERT_TRUE(Ledger::InitRepository(path).ok());
  auto l = Ledger::Open(path);
  ASSERT_TRUE(l.ok()) << l.status().message();
  (*l)->CloseReplacedInBackground();
  std::vector<GitObject> blobs;
  for (int i = 0; i < 3; ++i) blobs.push_back(MakeObject(ObjectType::kBlob, "value " + std::to_string(i) + "\n"));
  std::vector<const GitObject*> all;
  for (const auto& b : blobs) all.push_back(&b);
  ASSERT_TRUE((*l)->WriteObjectsPacked(all, false).ok());
  const std::string ref = "refs/gatos/closed";
  ASSERT_TRUE((*l)->CasRef(ref, "", blobs[0].id, false).ok());
  ASSERT_TRUE((*l)->CasRef(ref, blobs[0].id, blobs[1].id, false).ok());
  ASSERT_TRUE((*l)->CasRef(ref, blobs[1].id, blobs[2].id, true).ok());
  Status stale = (*l)->CasRef(ref, blobs[1].id, blobs[0].id, false);
  EXPECT_EQ(stale.code(), StatusCode::kAborted) << stale.message();
  EXPECT_EQ(*(*l)->ResolveRef(ref), blobs[2].id);
  // View refs: created, replaced, deleted with their emptied directories.
  const std::string job = "refs/gatos/jobs/" + std::string(64, 'a');
  ASSERT_TRUE((*l)->SetViewRefs({{job + "/job", blobs[0].id}, {job + "/claims/w", blobs[0].id}}).ok());
  ASSERT_TRUE((*l)->SetViewRefs({{job + "/job", blobs[1].id}}).ok());
  EXPECT_EQ(*(*l)->ResolveRef(job + "/job"), blobs[1].id);
  ASSERT_TRUE((*l)->SetViewRefs({{job + "/job", ""}, {job + "/claims/w", ""}}).ok());
  EXPECT_FALSE(std::filesystem::exists(path + "/" + job)) << "the job's emptied directories are removed";
  EXPECT_TRUE(std::filesystem::is_directory(path + "/refs/gatos/jobs"));
  l->reset();
  // Every descriptor of what was replaced or removed is closed.
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    EXPECT_EQ(target.find(path), std::string::npos) << e.path() << " -> " << target;
  }
  auto again = Ledger::Open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->ResolveRef(ref), blobs[2].id);
  EXPECT_EQ(*(*again)->ResolveRef(job + "/job"), "");
}

std::set<std::string> PackFiles(const std::string& ledger) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(ledger + "/objects/pack")) out.insert(e.path().string());
  return out;
}

// A power loss keeps the write-ahead log (synced) and may lose what the
// writer wrote to the repository after it (not synced until a checkpoint).
// Simulated on a copy of the ledger taken while the writer runs: the packs
// of its batches deleted, the log ref's file garbage. The next writer writes
// every batch again from the log, and the ledger is whole.
TEST(LedgerWriterTest, BatchesWhoseRepositoryWritesWereLostAreWrittenAgainFromTheWriteAheadLog) {
  Fixture f;
  f.writer_options.checkpoint_ms = 3'600'000;  // no checkpoint during the test
  f.W();
  const std::set<std::string> before = PackFiles(f.path);
  std::vector<Fixture::Job> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(f.Submit(Yaml(i)));
  ASSERT_TRUE(f.Claim(jobs[0].hex, f.w1).outcome.ok());
  const int64_t seq = f.W().seq();
  const std::string head = f.W().head();
  EXPECT_FALSE(testing::WalHasNoRecordFiles(f.path + "/gatos/wal"));

  const std::string copy = f.dir.Join("after-power-loss.git");
  std::filesystem::copy(f.path, copy, std::filesystem::copy_options::recursive);
  int lost = 0;
  for (const auto& p : PackFiles(copy)) {
    if (!before.count(f.path + "/objects/pack/" + std::filesystem::path(p).filename().string())) {
      std::filesystem::remove(p);
      ++lost;
    }
  }
  EXPECT_GE(lost, 8) << "the four batches' packs and indexes";
  testing::WriteFile(copy + "/refs/gatos/log", std::string("\0\0\0garbage\n", 11));
  {
    auto broken = Ledger::Open(copy);
    ASSERT_TRUE(broken.ok());
    EXPECT_FALSE((*broken)->ResolveRef(kLogRef).ok() && (*broken)->ReadCommit(head).ok());
  }

  auto w = LedgerWriter::Open(copy, f.ledger_key, WriterOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->seq(), seq);
  EXPECT_EQ((*w)->head(), head);
  for (int i = 0; i < 3; ++i) {
    auto rec = (*w)->Find(jobs[i].hex);
    ASSERT_TRUE(rec.ok() && rec->has_value()) << i;
    EXPECT_EQ(JobStateName(RecordedState(**rec)), std::string(i == 0 ? "claimed" : "pending")) << i;
  }
  EXPECT_TRUE(testing::WalHasNoRecordFiles(copy + "/gatos/wal")) << "replayed, synced and emptied";
  auto fsck = testing::Run({"git", "--git-dir", copy, "fsck", "--connectivity-only", "--no-dangling"}, {});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.err;
  // The log reads back whole, signed and contiguous, and its refs replay.
  auto log = ReadLog((*w)->ledger());
  EXPECT_EQ(static_cast<int64_t>(log.size()), seq);
  w->reset();

  // The original writer closes cleanly: its last checkpoint empties the log.
  f.Close();
  EXPECT_TRUE(testing::WalHasNoRecordFiles(f.path + "/gatos/wal"));
}

// The checkpoint thread empties the write-ahead log on its own: a while
// after a batch, or at once when the log's file reaches checkpoint_bytes.
TEST(LedgerWriterTest, CheckpointsEmptyTheWriteAheadLogAfterATimeOrASize) {
  // Woken by each deletion in the directory (inotify, watched before the
  // first look, so none is missed), for at most `ms`.
  auto wal_empty_within = [](const std::string& dir, int ms) {
    const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0 || ::inotify_add_watch(fd, dir.c_str(), IN_DELETE | IN_MOVED_FROM) < 0) {
      ADD_FAILURE() << "inotify on " << dir << ": " << std::strerror(errno);
      if (fd >= 0) ::close(fd);
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    bool empty;
    while (!(empty = testing::WalHasNoRecordFiles(dir))) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
        char events[4096];
        while (::read(fd, events, sizeof events) > 0) {
        }
      }
    }
    ::close(fd);
    return empty;
  };
  {
    Fixture f;
    f.writer_options.checkpoint_ms = 50;
    f.writer_options.checkpoint_bytes = uint64_t{1} << 40;
    f.Submit(Yaml(1));
    EXPECT_TRUE(wal_empty_within(f.path + "/gatos/wal", 20'000)) << "by time";
    f.Submit(Yaml(2));  // and again: the timer restarts with the next batch
    EXPECT_TRUE(wal_empty_within(f.path + "/gatos/wal", 20'000)) << "by time, twice";
  }
  {
    Fixture f;
    f.writer_options.checkpoint_ms = 3'600'000;
    f.writer_options.checkpoint_bytes = 1;
    f.Submit(Yaml(3));
    EXPECT_TRUE(wal_empty_within(f.path + "/gatos/wal", 20'000)) << "by size";
    Fixture g;
    g.writer_options.checkpoint_ms = 3'600'000;
    g.Submit(Yaml(4));
    EXPECT_FALSE(testing::WalHasNoRecordFiles(g.path + "/gatos/wal")) << "neither: the record stays until a checkpoint";
    g.Close();
    EXPECT_TRUE(testing::WalHasNoRecordFiles(g.path + "/gatos/wal")) << "a clean close checkpoints";
  }
}

// A batch in the write-ahead log that cannot be written to the repository
// stops the writer: its next batch would reuse the sequence. The next open
// writes the batch, which therefore counts as recorded.
TEST(LedgerWriterTest, AWriterThatCannotWriteABatchAfterLoggingItStopsAndTheNextOpenWritesIt) {
  Fixture f;
  const int64_t seq = f.W().seq();
  f.Close();
  f.writer_options.crash_at = "fail-pack";
  Fixture::Job j = f.JobCommit(Yaml(1), &f.submitter);
  OpResult r = f.SubmitJob(j);
  EXPECT_FALSE(r.outcome.ok());
  EXPECT_NE(r.outcome.message.find("write-ahead log"), std::string::npos) << r.outcome.message;
  EXPECT_FALSE(f.W().failed().ok());
  Fixture::Job k = f.JobCommit(Yaml(2), &f.submitter);
  OpResult r2 = f.SubmitJob(k);
  EXPECT_FALSE(r2.outcome.ok());
  EXPECT_EQ(r2.outcome.message, r.outcome.message) << "every later batch is refused the same way";
  EXPECT_EQ(f.W().seq(), seq);
  f.Close();
  EXPECT_FALSE(testing::WalHasNoRecordFiles(f.path + "/gatos/wal")) << "no checkpoint after a failure";
  f.writer_options.crash_at.clear();
  EXPECT_EQ(f.W().seq(), seq + 1);
  auto rec = f.W().Find(j.hex);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ(f.Ref("refs/gatos/jobs/" + j.hex + "/job"), j.commit);
  auto none = f.W().Find(k.hex);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(f.W().failed().ok());
}

// Closes the writer: `last`, submitted just before, has its job ref on disk
// and the log replays to exactly the refs there.
void ExpectWrittenByClose(Fixture& f, const Fixture::Job& last) {
  f.Close();
  auto l = f.Open();
  EXPECT_EQ(l->ResolveRef(JobRef(last.hex, "job")).value_or("?"), last.commit);
  EXPECT_EQ(Replay(ReadLog(*l)), ActualRefs(*l));
}

TEST(LedgerWriterTest, AsyncViewsAreOnDiskBeforeTheCallbacksQueuedAfterThem) {
  Fixture f;
  f.async_views = true;
  struct Seen {
    std::string job, lease, want_job, want_lease;
  };
  std::mutex mu;
  std::vector<Seen> seen;
  for (int i = 0; i < 20; ++i) {
    auto j = f.Submit(Yaml(i));
    OpResult c = f.Claim(j.hex, f.w1);
    ASSERT_TRUE(c.outcome.ok()) << c.outcome.message;
    // Runs on the writer's view thread, after the refs of both batches.
    f.W().AfterViews([&, hex = j.hex, job = j.commit, lease = c.commit] {
      auto l = f.Open();
      std::lock_guard<std::mutex> g(mu);
      seen.push_back({l->ResolveRef(JobRef(hex, "job")).value_or("?"),
                      l->ResolveRef(JobRef(hex, "lease")).value_or("?"), job, lease});
    });
  }
  f.W().FlushViews();
  ASSERT_EQ(seen.size(), 20u);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.job, s.want_job);
    EXPECT_EQ(s.lease, s.want_lease);
  }
  // A batch whose views are still queued when the writer closes is written.
  ExpectWrittenByClose(f, f.Submit(Yaml(100)));
}

// gatosd's writer (deferred_tail): Apply returns once the batch is in the
// write-ahead log, the writer's state already the batch's; the pack, the log
// ref and the view refs follow in CompleteBatch, or first thing in the next
// call that needs them.
TEST(LedgerWriterTest, ADeferredTailIsWrittenByCompleteBatchOrTheNextBatch) {
  Fixture f;
  f.async_views = true;
  f.writer_options.deferred_tail = true;
  const std::string head0 = f.W().head();
  auto j = f.Submit(Yaml(1));
  // The writer reads its own state; the repository does not have it yet.
  auto rec = f.W().Find(j.hex);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ((*rec)->job_commit, j.commit);
  EXPECT_NE(f.W().head(), head0);
  EXPECT_EQ(f.Ref(kLogRef), head0) << "the log ref moves in CompleteBatch";
  EXPECT_NE(f.Ref(JobRef(j.hex, "job")), j.commit);
  f.W().CompleteBatch();
  EXPECT_EQ(f.Ref(kLogRef), f.W().head());
  f.W().FlushViews();
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
  // A claim in the state the deferred batch left, then another batch: the
  // claim's tail is written before the next batch's record.
  OpResult c = f.Claim(j.hex, f.w1);
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.message;
  const std::string claim_head = f.W().head();
  EXPECT_NE(f.Ref(kLogRef), claim_head);
  auto k = f.Submit(Yaml(2));
  EXPECT_EQ(f.Ref(kLogRef), claim_head) << "the next Apply wrote the claim's tail first";
  f.W().FlushViews();
  EXPECT_EQ(f.Ref(kLogRef), f.W().head());
  EXPECT_EQ(f.Ref(JobRef(j.hex, "lease")), c.commit);
  EXPECT_EQ(f.Ref(JobRef(k.hex, "job")), k.commit);
  // A checkpoint on the writer's own thread writes the open tail first
  // (instead of waiting for itself).
  f.Submit(Yaml(4));
  EXPECT_NE(f.Ref(kLogRef), f.W().head());
  EXPECT_TRUE(f.W().Checkpoint().ok());
  EXPECT_EQ(f.Ref(kLogRef), f.W().head());
  // Closing writes the last tail.
  auto m = f.Submit(Yaml(3));
  EXPECT_NE(f.Ref(kLogRef), f.W().head());
  ExpectWrittenByClose(f, m);
}

// A deferred tail that cannot be written stops the writer like a failed
// batch; the batch is in the write-ahead log, so the next open writes it.
TEST(LedgerWriterTest, ADeferredTailThatCannotBeWrittenStopsTheWriterAndTheNextOpenWritesIt) {
  Fixture f;
  f.async_views = true;
  f.writer_options.deferred_tail = true;
  const int64_t seq = f.W().seq();
  f.Close();
  f.writer_options.crash_at = "fail-pack";
  Fixture::Job j = f.JobCommit(Yaml(1), &f.submitter);
  OpResult r = f.SubmitJob(j);
  EXPECT_TRUE(r.outcome.ok()) << "durable in the write-ahead log: " << r.outcome.message;
  EXPECT_TRUE(f.W().failed().ok());
  f.W().CompleteBatch();
  EXPECT_FALSE(f.W().failed().ok());
  EXPECT_NE(f.W().failed().message().find("write-ahead log"), std::string::npos) << f.W().failed().message();
  Fixture::Job k = f.JobCommit(Yaml(2), &f.submitter);
  OpResult r2 = f.SubmitJob(k);
  EXPECT_FALSE(r2.outcome.ok()) << "every later batch is refused";
  f.Close();
  f.writer_options.crash_at.clear();
  EXPECT_EQ(f.W().seq(), seq + 1);
  auto rec = f.W().Find(j.hex);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
  auto none = f.W().Find(k.hex);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// A replicated leader's log with appends the test releases one by one, and
// one sequence that fails (fenced by another leader).
class HeldStream {
 public:
  Status Append(int64_t seq, const std::string&) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return released_ >= seq; });
    if (seq == fail_at) return UnavailableError("fenced: another leader appended");
    return OkStatus();
  }
  void Release(int64_t upto) {
    std::lock_guard<std::mutex> l(mu_);
    released_ = upto;
    cv_.notify_all();
  }
  int64_t fail_at = -1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t released_ = 0;
};

void Pipelined(Fixture& f, HeldStream* stream) {
  f.async_views = true;
  f.writer_options.deferred_tail = true;
  f.writer_options.replicate_window = 4;
  f.writer_options.replicate = [stream](int64_t seq, const std::string& r) { return stream->Append(seq, r); };
}

// Pipelined appends: the next batches are decided and signed while the
// stream has not acknowledged the last; nothing of a batch (its local log
// record, what AfterDurable and AfterViews run) comes before its
// acknowledgement, and acknowledgements come in order.
TEST(LedgerWriterTest, PipelinedBatchesAreDurableAndAnsweredOnlyOnceTheStreamAcknowledgedThem) {
  Fixture f;
  HeldStream stream;
  Pipelined(f, &stream);
  const int64_t seq0 = f.W().seq();
  const std::string head0 = f.W().head();
  std::vector<std::string> durable, viewed;
  std::mutex mu;
  auto j = f.Submit(Yaml(1));
  f.W().AfterDurable([&](const Status& s) { durable.push_back(s.ok() ? "j" : "failed j"); });
  f.W().AfterViews([&] { std::lock_guard<std::mutex> l(mu); viewed.push_back("j"); });
  auto k = f.Submit(Yaml(2));
  f.W().AfterDurable([&](const Status& s) { durable.push_back(s.ok() ? "k" : "failed k"); });
  EXPECT_EQ(f.W().seq(), seq0 + 2) << "the second batch was decided on the first, unacknowledged";
  EXPECT_EQ(f.W().unacknowledged(), 2u);
  ASSERT_TRUE(f.W().Acknowledge().ok());
  EXPECT_TRUE(durable.empty());
  EXPECT_EQ(f.Ref(kLogRef), head0);
  stream.Release(seq0 + 1);
  ASSERT_TRUE(testing::PollFor(30000, [&] {
    (void)f.W().Acknowledge();
    return f.W().unacknowledged() == 1;
  }));
  EXPECT_EQ(durable, std::vector<std::string>{"j"});
  stream.Release(seq0 + 2);
  ASSERT_TRUE(f.W().DrainReplication().ok());
  EXPECT_EQ(durable, (std::vector<std::string>{"j", "k"}));
  f.W().FlushViews();
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(viewed, std::vector<std::string>{"j"});
  }
  EXPECT_EQ(f.Ref(JobRef(j.hex, "job")), j.commit);
  f.Close();
  EXPECT_EQ(f.W().seq(), seq0 + 2);
  EXPECT_EQ(f.Ref(JobRef(k.hex, "job")), k.commit);
}

// A failed append (fenced, or the stream gone): the batches after the last
// acknowledged one are dropped, their callbacks get the failure, every
// later batch fails, and the repository keeps exactly the acknowledged
// ones (the leader that dies or steps down with appends in flight loses
// nothing it acknowledged and keeps nothing it did not).
TEST(LedgerWriterTest, AFailedAppendDropsEveryUnacknowledgedBatchAndKeepsTheAcknowledgedOnes) {
  Fixture f;
  HeldStream stream;
  Pipelined(f, &stream);
  const int64_t seq0 = f.W().seq();
  stream.fail_at = seq0 + 2;
  std::vector<std::string> durable, refused;
  auto j = f.Submit(Yaml(1));
  f.W().AfterDurable([&](const Status& s) { durable.push_back(s.ok() ? "j" : "failed j"); });
  auto k = f.Submit(Yaml(2));
  f.W().AfterDurable([&](const Status& s) { durable.push_back(s.ok() ? "k" : "failed k"); });
  f.W().AfterViews([&] { refused.push_back("k answered"); },
                   [&](const Status& s) { refused.push_back("k: " + s.message()); });
  auto m = f.Submit(Yaml(3));
  f.W().AfterDurable([&](const Status& s) { durable.push_back(s.ok() ? "m" : "failed m"); });
  stream.Release(seq0 + 3);
  Status s = f.W().DrainReplication();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("fenced"), std::string::npos) << s.message();
  EXPECT_EQ(durable, (std::vector<std::string>{"j", "failed k", "failed m"}));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("fenced"), std::string::npos) << refused[0];
  Fixture::Job n = f.JobCommit(Yaml(4), &f.submitter);
  OpResult r = f.SubmitJob(n);
  EXPECT_FALSE(r.outcome.ok()) << "every later batch is refused";
  EXPECT_FALSE(f.W().SyncViews().ok()) << "no mark of views the log does not hold";
  f.Close();
  f.writer_options.replicate = nullptr;
  EXPECT_EQ(f.W().seq(), seq0 + 1);
  auto rec = f.W().Find(j.hex);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  for (const auto& dropped : {k.hex, m.hex, n.hex}) {
    auto none = f.W().Find(dropped);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value()) << dropped;
  }
}

TEST(LedgerWriterTest, PreparedBatchesMergedAnswerAsOneBatch) {
  Fixture f;
  JobService service(&f.W(), ServiceOptions{});
  std::vector<Fixture::Job> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(f.JobCommit(Yaml(i), &f.submitter));
    ASSERT_TRUE(f.SubmitJob(jobs.back()).outcome.ok());
  }
  auto claim = [&](const Ed25519PrivateKey& k, int i) {
    return rpc::Dump(rpc::LeaseRequestJson(SignLeaseRequest(k, jobs[static_cast<size_t>(i)].hex, 1, f.now, false)));
  };
  std::vector<ServiceRequest> first = {{rpc::kClaim, claim(f.w1, 0), 0},
                                       {rpc::kClaimBatch, "not a batch frame", 0}};
  std::vector<ServiceRequest> second = {{rpc::kClaimBatch, rpc::EncodeBatch({claim(f.w2, 1), claim(f.w2, 2)}), 0},
                                        {rpc::kClaim, claim(f.w2, 0), 0}};
  int64_t seq = f.W().seq();
  PreparedBatch p = service.Prepare(first);
  AppendPrepared(&p, service.Prepare(second));
  ASSERT_EQ(p.spans.size(), 4u);
  std::vector<std::string> replies = service.Finish(std::move(p));
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(f.W().seq(), seq + 1) << "one log batch for both prepared batches";
  auto j0 = nlohmann::json::parse(replies[0]);
  EXPECT_TRUE(j0.value("ok", false)) << replies[0];
  auto bad = nlohmann::json::parse(replies[1]);
  EXPECT_FALSE(bad.value("ok", true)) << replies[1];
  auto entries = rpc::DecodeBatch(replies[2]);
  ASSERT_TRUE(entries.ok()) << replies[2];
  ASSERT_EQ(entries->size(), 2u);
  for (std::string_view e : *entries) EXPECT_TRUE(nlohmann::json::parse(e).value("ok", false)) << e;
  // w2's claim of job 0 comes after w1's in the merged batch: refused.
  auto late = nlohmann::json::parse(replies[3]);
  EXPECT_FALSE(late.value("ok", true)) << replies[3];
  EXPECT_EQ(f.W().live().at(jobs[0].hex).worker_hex, f.w1.public_key().Hex());
}

}  // namespace
}  // namespace gatos
