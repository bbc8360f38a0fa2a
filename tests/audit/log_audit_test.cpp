// The auditor's completeness proof (log_audit.h) over real ledgers written by
// the ledger's writer: the genuine ledger passes, and every way of hiding,
// re-running or rewriting history fails with its own check.
#include <gtest/gtest.h>

#include <filesystem>

#include "audit_fixture.h"
#include "git_repo.h"
#include "gatos/audit/log_audit.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/ledger/watch_positions.h"
#include "gatos/model/time_format.h"
#include "gatos/model/trigger.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/refs.h"
#include "gatos/model/transition.h"
#include "gatos/model/log_format.h"

namespace gatos::testing {
namespace {

constexpr int64_t kLease = 10'000;

void Customize(Policy* p) {
  p->settings.max_attempts = 2;
  p->settings.retry_base_ms = 1000;
  p->settings.retry_jitter_pct = 0;
  p->settings.retention_ms = 0;
}

// A ledger with every kind of history: A succeeded (renewed twice), B failed
// on attempt 1, was retried and failed for good on attempt 2, C is pending,
// D was taken over after its first lease ran out, E was cancelled, and a
// policy change in between.
struct History {
  LedgerFixture f{false, kLease, Customize};
  JobRun a, b, d;
  std::string c, e;
  std::string b_first_result;

  History() {
    a = RunJob(f, f.w1, {.yaml = Yaml(1), .renewals = 2});
    // B: attempt 1 fails and is retried.
    b = RunJob(f, f.w2, {.yaml = Yaml(2), .status = "failed"});
    b_first_result = b.built.commit_id;
    EXPECT_EQ(f.Record(b.job_hex).attempt, 2);
    // A policy change (an operator) between the attempts.
    Policy p = f.W().policy();
    p.operators_text = "ops " + f.w2.public_key().ToOpenSsh() + "\n";
    p.operators = *ParseAllowedSigners(p.operators_text, "operators");
    EXPECT_TRUE(f.Apply(PolicyOp{p, "gatos: allow an operator", std::nullopt}).outcome.ok());
    f.now += 2'000;  // past the backoff
    JobRun b2;
    b2.job_commit = b.job_commit;
    b2.job_hex = b.job_hex;
    EXPECT_TRUE(ClaimInto(f, b.job_hex, f.w1, &b2.grant).ok());
    b = BuildAndAccept(f, std::move(b2), f.w1, {.yaml = Yaml(2), .status = "failed"});
    EXPECT_FALSE(f.Record(b.job_hex).result_commit.empty());
    c = SubmitPair(f, Yaml(3)).second;
    // D: w1's lease runs out, w2 takes over and reports.
    d.job_hex = SubmitPair(f, Yaml(4)).second;
    d.job_commit = f.Record(d.job_hex).job_commit;
    EXPECT_TRUE(ClaimInto(f, d.job_hex, f.w1, &d.grant).ok());
    f.now += kLease + 5'000;
    EXPECT_TRUE(ClaimInto(f, d.job_hex, f.w2, &d.grant).ok());
    d = BuildAndAccept(f, std::move(d), f.w2, {.yaml = Yaml(4)});
    e = SubmitPair(f, Yaml(5)).second;
    EXPECT_TRUE(f.User(e, f.submitter, false).outcome.ok());
    f.Close();
  }
  std::unique_ptr<Ledger> L() { return f.Open(); }
};

LogAuditReport Audit(Ledger& l, LogAuditOptions o = {}) {
  auto r = AuditLog(l, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : LogAuditReport{};
}

std::string Problems(const LogAuditReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += p.check + ": " + p.detail + "\n";
  return s;
}

// The first problem with this check, or nullptr.
const LogProblem* Find(const LogAuditReport& r, const std::string& check) {
  for (const auto& p : r.problems) {
    if (p.check == check) return &p;
  }
  return nullptr;
}

bool Has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

void SetRef(Ledger& l, const std::string& ref, const std::string& id) {
  auto old = l.ResolveRef(ref);
  ASSERT_TRUE(old.ok());
  Status s = l.UpdateRefs({{ref, *old, id}}, "tamper");
  ASSERT_TRUE(s.ok()) << s.message();
}

// A log commit on top of the head, as someone holding `key` could write it:
// the head's tree with `batch` as its batch record.
std::string AppendLogCommit(Ledger& l, const Ed25519PrivateKey& key, const std::string& batch, int64_t seq_delta,
                            const std::vector<std::string>& extra_parents, int64_t time_ms,
                            const std::string& ledger_key_hex = "") {
  std::string head = *l.ResolveRef(kLogRef);
  CommitInfo c = *l.ReadCommit(head);
  LogCommitInfo info = *ParseLogMessage(c.message);
  std::vector<TreeEntry> entries = *l.ReadTree(c.tree);
  std::string blob = *l.WriteBlob(batch);
  for (auto& e : entries) {
    if (e.name == "batch") e.id = blob;
  }
  std::string tree = *l.WriteTree(entries);
  info.seq += seq_delta;
  info.time_ms = time_ms;
  if (!ledger_key_hex.empty()) info.ledger_key_hex = ledger_key_hex;
  std::vector<std::string> parents = {head};
  parents.insert(parents.end(), extra_parents.begin(), extra_parents.end());
  auto id = l.WriteCommit(tree, parents, EncodeLogMessage(info), &key, "gatos ledger", "ledger@gatos.invalid", time_ms);
  EXPECT_TRUE(id.ok()) << id.status().message();
  SetRef(l, kLogRef, *id);
  return *id;
}

TEST(LogAuditTest, GenuineLedgerPassesAndShowsEveryAttempt) {
  History h;
  auto l = h.L();
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_FALSE(r.incremental);
  EXPECT_EQ(r.from_seq, 1);
  EXPECT_EQ(r.commits, static_cast<size_t>(r.seq));
  EXPECT_EQ(r.results, 4u);  // A, B attempt 1, B attempt 2, D
  EXPECT_EQ(r.jobs_touched, 5u);
  EXPECT_EQ(r.by_kind["attempt"], 1);
  EXPECT_EQ(r.by_kind["takeover"], 1);
  EXPECT_EQ(r.by_kind["renew"], 2);
  EXPECT_EQ(r.by_kind["policy"], 1);
  EXPECT_EQ(r.by_kind["cancel"], 1);
  EXPECT_GT(r.refs_checked, 15u);
  ASSERT_EQ(r.reruns.size(), 2u);  // B (two attempts) and D (two epochs)
  for (const JobRuns& j : r.reruns) {
    ASSERT_EQ(j.runs.size(), 2u);
    if (j.job_hex == h.b.job_hex) {
      EXPECT_EQ(j.runs[0].attempt, 1);
      EXPECT_EQ(j.runs[0].status, "failed");
      EXPECT_EQ(j.runs[0].result_commit, h.b_first_result);
      EXPECT_FALSE(j.runs[0].final);
      EXPECT_EQ(j.runs[1].attempt, 2);
      EXPECT_EQ(j.runs[1].status, "failed");
      EXPECT_TRUE(j.runs[1].final);
    } else {
      EXPECT_EQ(j.job_hex, h.d.job_hex);
      EXPECT_EQ(j.runs[0].epoch, 1);
      EXPECT_EQ(j.runs[0].status, "");  // w1 never reported
      EXPECT_EQ(j.runs[1].epoch, 2);
      EXPECT_EQ(j.runs[1].worker_hex, h.f.w2.public_key().Hex());
      EXPECT_EQ(j.runs[1].status, "succeeded");
    }
  }
  // The pinned ledger key.
  LogAuditOptions pinned;
  pinned.verify.ledger_key = h.f.ledger_key.public_key();
  EXPECT_TRUE(Audit(*l, pinned).ok());
  pinned.verify.ledger_key = h.f.w1.public_key();
  LogAuditReport wrong = Audit(*l, pinned);
  ASSERT_NE(Find(wrong, "log_signature"), nullptr) << Problems(wrong);
  EXPECT_TRUE(Has(Find(wrong, "log_signature")->detail, "not the pinned key"));
}

TEST(LogAuditTest, DeletedFailedJobIsReportedRefByRef) {
  History h;
  auto l = h.L();
  auto refs = *l->ListRefs(std::string(kJobsPrefix) + h.b.job_hex + "/");
  ASSERT_GE(refs.size(), 5u);  // job, lease, claims x2, result, attempts/1
  for (const auto& r : refs) SetRef(*l, r, "");
  LogAuditReport r = Audit(*l);
  EXPECT_FALSE(r.ok());
  size_t missing = 0;
  for (const auto& p : r.problems) {
    EXPECT_EQ(p.check, "ref_missing") << p.detail;
    EXPECT_EQ(p.job_hex, h.b.job_hex);
    EXPECT_TRUE(Has(p.detail, "deleted outside the log"));
    ++missing;
  }
  EXPECT_EQ(missing, refs.size());
  EXPECT_TRUE(Has(Problems(r), JobRef(h.b.job_hex, "attempts/1") + " is missing"));
}

TEST(LogAuditTest, DeletedResultAndLeaseAreMissing) {
  History h;
  auto l = h.L();
  SetRef(*l, JobRef(h.a.job_hex, "result"), "");
  SetRef(*l, JobRef(h.a.job_hex, "lease"), "");
  LogAuditReport r = Audit(*l);
  ASSERT_EQ(r.problems.size(), 2u) << Problems(r);
  EXPECT_EQ(r.problems[0].check, "ref_missing");
  EXPECT_EQ(r.problems[0].ref, JobRef(h.a.job_hex, "lease"));
  EXPECT_EQ(r.problems[1].ref, JobRef(h.a.job_hex, "result"));
}

TEST(LogAuditTest, MovedAndExtraRefsAreNamed) {
  History h;
  auto l = h.L();
  // A's result replaced by B's (a genuine commit, of another job).
  SetRef(*l, JobRef(h.a.job_hex, "result"), h.d.built.commit_id);
  // A claim ref nobody logged, and a whole job.
  SetRef(*l, ClaimRef(h.c, h.f.w2.public_key().Hex()), h.a.grant.lease_commit);
  auto [commit, hex] = WriteJobCommit(h.f, *l, Yaml(99), &h.f.submitter);
  SetRef(*l, JobRef(hex, "job"), commit);
  LogAuditReport r = Audit(*l);
  ASSERT_NE(Find(r, "ref_moved"), nullptr) << Problems(r);
  EXPECT_EQ(Find(r, "ref_moved")->ref, JobRef(h.a.job_hex, "result"));
  EXPECT_TRUE(Has(Find(r, "ref_moved")->detail, "moved outside the log"));
  std::string all = Problems(r);
  EXPECT_TRUE(Has(all, "ref_extra: " + ClaimRef(h.c, h.f.w2.public_key().Hex())));
  EXPECT_EQ(r.problems.size(), 2u) << all;
  // A signed job commit under its own id is what a later submission would
  // write: from the clone alone, a mirror fetched before the log caught up.
  // It is not verified (refs_behind: fetch again), and not a tamper finding.
  EXPECT_EQ(r.refs_behind, 1u);
  EXPECT_EQ(r.behind_refs, std::vector<std::string>{JobRef(hex, "job")});
  // The same job commit under another job's ref contradicts the log.
  SetRef(*l, JobRef(h.c, "job"), commit);
  LogAuditReport r2 = Audit(*l);
  ASSERT_NE(Find(r2, "ref_moved"), nullptr) << Problems(r2);
  EXPECT_TRUE(Has(Problems(r2), "ref_moved: " + JobRef(h.c, "job")));
}

// A mirror's refs are in packed-refs (git clone --mirror), and a loose ref
// stands over a packed one of the same name: the comparison of every ref
// reads them as git does, and reports the same as for loose refs.
TEST(LogAuditTest, PackedRefsAreComparedAsLooseOnesAndALooseRefOverridesThem) {
  History h;
  auto l = h.L();
  const std::string loose = LogAuditReportToJson(Audit(*l)).dump();
  gatos::testing::Git(gatos::testing::TestGitEnv(l->path()), {"--git-dir=" + l->path(), "pack-refs", "--all"});
  ASSERT_TRUE(std::filesystem::exists(l->path() + "/packed-refs"));
  l = h.L();
  LogAuditReport packed = Audit(*l);
  EXPECT_TRUE(packed.ok()) << Problems(packed);
  EXPECT_GT(packed.refs_checked, 10u);
  EXPECT_EQ(LogAuditReportToJson(packed).dump(), loose);
  // A loose ref over the packed one: A's result replaced by another job's.
  SetRef(*l, JobRef(h.a.job_hex, "result"), h.d.built.commit_id);
  // A packed ref deleted.
  SetRef(*l, JobRef(h.a.job_hex, "lease"), "");
  LogAuditReport r = Audit(*l);
  ASSERT_EQ(r.problems.size(), 2u) << Problems(r);
  EXPECT_EQ(r.problems[0].check, "ref_moved");
  EXPECT_EQ(r.problems[0].ref, JobRef(h.a.job_hex, "result"));
  EXPECT_EQ(r.problems[1].check, "ref_missing");
  EXPECT_EQ(r.problems[1].ref, JobRef(h.a.job_hex, "lease"));
}

TEST(LogAuditTest, TruncatedLogLeavesRefsAheadOfItToFetchAgain) {
  History h;
  auto l = h.L();
  // Back to the commit before the last batch (E's cancel). From the clone
  // alone this is a mirror that fetched the log before that batch and the
  // refs after it: the cancel ref is behind (fetch again), not verified and
  // not a tamper finding. A log rolled back for good is caught by --state
  // and by witnesses (IncrementalVerifiesOnlyWhatIsNewAndCatchesARewrite).
  std::string head = *l->ResolveRef(kLogRef);
  SetRef(*l, kLogRef, l->ReadCommit(head)->parents[0]);
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_EQ(r.refs_behind, 1u);
  EXPECT_EQ(r.behind_refs, std::vector<std::string>{JobRef(h.e, "cancel")});
  // A cancel commit of another job there is contradicted by the log.
  SetRef(*l, JobRef(h.c, "cancel"), *l->ResolveRef(JobRef(h.e, "cancel")));
  LogAuditReport bad = Audit(*l);
  ASSERT_NE(Find(bad, "ref_extra"), nullptr) << Problems(bad);
  EXPECT_EQ(Find(bad, "ref_extra")->ref, JobRef(h.c, "cancel"));
  SetRef(*l, JobRef(h.c, "cancel"), "");
  // A log cut off below its root.
  SetRef(*l, kLogRef, head);
}

TEST(LogAuditTest, LogCommitSignedByAnotherKey) {
  History h;
  auto l = h.L();
  std::string head = *l->ResolveRef(kLogRef);
  AppendLogCommit(*l, h.f.w1, "", 1, {}, h.f.now + 1000);
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "log_signature");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_TRUE(Has(p->detail, "is not signed by the ledger key in force " + h.f.ledger_key.public_key().WorkerId()));
  EXPECT_TRUE(Has(p->detail, "signed by " + h.f.w1.public_key().WorkerId()));
}

TEST(LogAuditTest, SequenceGap) {
  History h;
  auto l = h.L();
  AppendLogCommit(*l, h.f.ledger_key, "", 2, {}, h.f.now + 1000);
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "log_seq");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_TRUE(Has(p->detail, "sequence numbers are missing (a gap)")) << p->detail;
}

TEST(LogAuditTest, ForgedAttemptAfterSuccessIsRefused) {
  History h;
  auto l = h.L();
  // A second, genuinely worker-signed result for A (which succeeded),
  // logged by someone with the ledger key as a retried attempt.
  JobRun again = h.a;
  h.f.now += 1000;
  again = BuildAndAccept(h.f, std::move(again), h.f.w1, {.yaml = Yaml(1), .status = "failed", .accept = false});
  WriteObjects(*l, again.built.objects);
  std::string batch = EncodeBatch({{LogKind::kAttempt, h.a.job_hex, JobRef(h.a.job_hex, "attempts/1"), "",
                                    again.built.commit_id}});
  AppendLogCommit(*l, h.f.ledger_key, batch, 1, {again.built.commit_id}, h.f.now);
  SetRef(*l, JobRef(h.a.job_hex, "attempts/1"), again.built.commit_id);
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "transition");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_EQ(p->job_hex, h.a.job_hex);
  EXPECT_TRUE(Has(p->detail, "already had its final result")) << p->detail;
  EXPECT_TRUE(Has(p->detail, "no attempt may follow it")) << p->detail;
}

TEST(LogAuditTest, ForgedRetryBeyondThePolicy) {
  History h;
  auto l = h.L();
  // D succeeded at epoch 2; a forged log records its result as a retried
  // attempt instead: the policy never retries a success.
  std::string head = *l->ResolveRef(kLogRef);
  // Rewrite the batch that recorded D's result, as a ledger-key holder could.
  std::string cur = head;
  while (true) {
    auto batch = l->ReadFileAtCommit(cur, "batch", 1 << 20);
    if (batch.ok() && Has(*batch, "result " + h.d.job_hex)) break;
    cur = l->ReadCommit(cur)->parents[0];
  }
  CommitInfo result_batch = *l->ReadCommit(cur);
  SetRef(*l, kLogRef, result_batch.parents[0]);
  std::string batch = EncodeBatch({{LogKind::kAttempt, h.d.job_hex, JobRef(h.d.job_hex, "attempts/1"), "",
                                    h.d.built.commit_id}});
  AppendLogCommit(*l, h.f.ledger_key, batch, 1, {h.d.built.commit_id}, result_batch.time_s * 1000 + 999);
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "retry_policy");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_TRUE(Has(p->detail, "allows no retry of a succeeded attempt 1")) << p->detail;
}

TEST(LogAuditTest, IncrementalVerifiesOnlyWhatIsNewAndCatchesARewrite) {
  History h;
  auto l = h.L();
  LogAuditReport full = Audit(*l);
  ASSERT_TRUE(full.ok()) << Problems(full);
  AuditState st = full.state();
  EXPECT_EQ(st.ledger_root, full.ledger_root);
  // Nothing new: nothing replayed.
  LogAuditOptions o;
  o.since = st;
  LogAuditReport none = Audit(*l, o);
  EXPECT_TRUE(none.ok()) << Problems(none);
  EXPECT_EQ(none.commits, 0u);
  EXPECT_EQ(none.transitions, 0u);
  // Three new jobs, one run to a result, and a renewal of nothing else.
  JobRun n1 = RunJob(h.f, h.f.w1, {.yaml = Yaml(10)});
  SubmitPair(h.f, Yaml(11));
  SubmitPair(h.f, Yaml(12));
  h.f.Close();
  LogAuditReport inc = Audit(*l, o);
  EXPECT_TRUE(inc.ok()) << Problems(inc);
  EXPECT_TRUE(inc.incremental);
  EXPECT_EQ(inc.from_seq, st.seq + 1);
  EXPECT_EQ(inc.commits, 5u);       // submit, claim, result, submit, submit
  EXPECT_EQ(inc.transitions, 5u);
  EXPECT_EQ(inc.results, 1u);
  EXPECT_EQ(inc.jobs_touched, 3u);
  EXPECT_EQ(inc.ledger_root, full.ledger_root);
  // A ref of a job the new transitions touched, moved: caught incrementally.
  SetRef(*l, JobRef(n1.job_hex, "result"), h.a.built.commit_id);
  LogAuditReport moved = Audit(*l, o);
  ASSERT_NE(Find(moved, "ref_moved"), nullptr) << Problems(moved);
  SetRef(*l, JobRef(n1.job_hex, "result"), n1.built.commit_id);
  // Roll the log back below the recorded head: refused.
  AuditState later = inc.state();
  std::string head = *l->ResolveRef(kLogRef);
  SetRef(*l, kLogRef, l->ReadCommit(head)->parents[0]);
  o.since = later;
  LogAuditReport back = Audit(*l, o);
  const LogProblem* p = Find(back, "log_rewritten");
  ASSERT_NE(p, nullptr) << Problems(back);
  EXPECT_TRUE(Has(p->detail, "rolled back")) << p->detail;
  // Rewritten: a different commit at the recorded sequence.
  SetRef(*l, kLogRef, head);
  AppendLogCommit(*l, h.f.ledger_key, "", 0, {}, h.f.now);  // same seq as head, another commit
  LogAuditReport rewritten = Audit(*l, o);
  p = Find(rewritten, "log_rewritten");
  ASSERT_NE(p, nullptr) << Problems(rewritten);
  EXPECT_TRUE(Has(p->detail, "the log was rewritten")) << p->detail;
}

TEST(LogAuditTest, ReRunAfterRewindingTheLogIsCaughtByTheStateFile) {
  // The attack the log alone cannot show: the host rewinds refs/gatos/log to
  // before A's result, lets the job run again, and keeps the new history
  // consistent. A full replay of the new log passes; an auditor that
  // recorded the earlier head does not. (No retries: the failure is final.)
  LedgerFixture f{false, kLease};
  JobRun a;
  std::tie(a.job_commit, a.job_hex) = SubmitPair(f, Yaml(1));
  ASSERT_TRUE(ClaimInto(f, a.job_hex, f.w1, &a.grant).ok());
  std::string before_result = f.W().head();
  a = BuildAndAccept(f, std::move(a), f.w1, {.yaml = Yaml(1), .status = "failed", .accept = true});
  f.Close();
  auto l = f.Open();
  LogAuditReport seen = Audit(*l);
  ASSERT_TRUE(seen.ok()) << Problems(seen);
  // Rewind and re-run.
  SetRef(*l, kLogRef, before_result);
  f.now += kLease + 5'000;
  JobRun again;
  again.job_commit = a.job_commit;
  again.job_hex = a.job_hex;
  ASSERT_TRUE(ClaimInto(f, a.job_hex, f.w2, &again.grant).ok());
  again = BuildAndAccept(f, std::move(again), f.w2, {.yaml = Yaml(1)});
  f.Close();
  LogAuditReport fresh = Audit(*l);
  EXPECT_TRUE(fresh.ok()) << Problems(fresh);  // a consistent forgery
  LogAuditOptions o;
  o.since = seen.state();
  LogAuditReport caught = Audit(*l, o);
  const LogProblem* p = Find(caught, "log_rewritten");
  ASSERT_NE(p, nullptr) << Problems(caught);
  EXPECT_TRUE(Has(p->detail, "the log was rewritten")) << p->detail;
}

TEST(LogAuditTest, WitnessesAgreeOrProveAFork) {
  History h;
  auto l = h.L();
  LogAuditReport r = Audit(*l);
  ASSERT_TRUE(r.ok());
  Ed25519PrivateKey alice = *GenerateEd25519Key("auditor-a");
  Ed25519PrivateKey bob = *GenerateEd25519Key("auditor-b");
  WitnessStatement w{r.ledger_root, r.seq, r.head, "", h.f.now};
  GitObject wa = *BuildWitnessCommit(w, alice);
  WriteObjects(*l, {wa});
  SetRef(*l, WitnessPushRef(alice.public_key().Hex()), wa.id);
  LogAuditOptions o;
  o.witnesses = true;
  LogAuditReport good = Audit(*l, o);
  EXPECT_TRUE(good.ok()) << Problems(good);
  ASSERT_EQ(good.witnesses.size(), 1u);
  EXPECT_TRUE(good.witnesses[0].ok);
  EXPECT_EQ(good.witnesses[0].key_hex, alice.public_key().Hex());
  // Bob was shown another commit at the same sequence.
  WitnessStatement other = w;
  other.log_commit = h.a.built.commit_id;
  GitObject wb = *BuildWitnessCommit(other, bob);
  WriteObjects(*l, {wb});
  SetRef(*l, WitnessPushRef(bob.public_key().Hex()), wb.id);
  LogAuditReport forked = Audit(*l, o);
  EXPECT_TRUE(forked.forked);
  std::string all = Problems(forked);
  EXPECT_TRUE(Has(all, "forked_history: two witnesses disagree at sequence " + std::to_string(r.seq))) << all;
  EXPECT_TRUE(Has(all, "the ledger showed different histories")) << all;
  // A witness signed by a key other than the one it names.
  std::string forged = wa.data;
  size_t at = forged.find("Witness-Key: ed25519:") + 21;
  forged.replace(at, 64, bob.public_key().Hex());
  GitObject fo = Commit(forged);
  WriteObjects(*l, {fo});
  SetRef(*l, WitnessPushRef(bob.public_key().Hex()), fo.id);
  LogAuditReport bad = Audit(*l, o);
  ASSERT_NE(Find(bad, "witness_invalid"), nullptr) << Problems(bad);
}

TEST(LogAuditTest, RotationRevocationAndPruningReplay) {
  LedgerFixture f{false, kLease, [](Policy* p) { p->settings.retention_ms = 1000; }};
  JobRun a = RunJob(f, f.w1, {.yaml = Yaml(1)});
  // w2 holds a lease when the policy stops allowing it: the lease is revoked.
  auto [c_commit, c] = SubmitPair(f, Yaml(2));
  LeaseGrant g;
  ASSERT_TRUE(ClaimInto(f, c, f.w2, &g).ok());
  Policy p = f.W().policy();
  p.workers_text = "w1 " + f.w1.public_key().ToOpenSsh() + "\n";
  p.workers = *ParseAllowedSigners(p.workers_text, "workers");
  OpResult revoked = f.Apply(PolicyOp{p, "gatos: revoke w2", std::nullopt});
  ASSERT_TRUE(revoked.outcome.ok()) << revoked.outcome.message;
  ASSERT_EQ(revoked.revoked_jobs.size(), 1u);
  // The ledger key rotates; later batches are signed by the new key.
  Ed25519PrivateKey next = *GenerateEd25519Key("ledger-2");
  ASSERT_TRUE(f.Apply(PolicyOp{p, "gatos: rotate the ledger key", next}).outcome.ok());
  f.now += 2000;
  OpResult pruned = f.Apply(PruneOp{a.job_hex});
  ASSERT_TRUE(pruned.outcome.ok()) << pruned.outcome.message;
  JobRun b = RunJob(f, f.w1, {.yaml = Yaml(3)});
  f.Close();
  auto l = f.Open();
  EXPECT_TRUE(l->ListRefs(std::string(kJobsPrefix) + a.job_hex + "/")->empty());
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_EQ(r.by_kind["revoke"], 1);
  EXPECT_EQ(r.by_kind["prune"], 1);
  EXPECT_EQ(r.by_kind["policy"], 2);
  EXPECT_EQ(r.results, 2u);
  // A log commit after the rotation signed with the retired key.
  AppendLogCommit(*l, f.ledger_key, "", 1, {}, f.now + 1000, next.public_key().Hex());
  LogAuditReport old_key = Audit(*l);
  const LogProblem* bad = Find(old_key, "log_signature");
  ASSERT_NE(bad, nullptr) << Problems(old_key);
  EXPECT_TRUE(Has(bad->detail, "not signed by the ledger key in force " + next.public_key().WorkerId())) << bad->detail;
}

TEST(WitnessFormatTest, RoundTripAndStrictness) {
  Ed25519PrivateKey k = *GenerateEd25519Key("auditor");
  WitnessStatement w{std::string(40, 'a'), 42, std::string(40, 'b'), k.public_key().Hex(), 1'800'000'000'000};
  std::string m = FormatWitnessMessage(w);
  auto back = ParseWitnessMessage(m);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, w);
  EXPECT_FALSE(ParseWitnessMessage(m + "Extra: x\n").ok());
  std::string other_title = m;
  other_title.replace(other_title.find(" at 42 "), 7, " at 43 ");
  EXPECT_FALSE(ParseWitnessMessage(other_title).ok());
  GitObject c = *BuildWitnessCommit(w, k);
  std::vector<GitObject> objs = {c};
  auto checked = CheckWitnessCommit(BatchLookup(&objs, nullptr), c.id);
  ASSERT_TRUE(checked.ok()) << checked.status().message();
  EXPECT_EQ(checked->seq, 42);
}

TEST(AuditStateTest, RoundTripAndStrictness) {
  AuditState s{std::string(40, 'a'), std::string(40, 'b'), 7, 1'800'000'000'123};
  std::string text = EncodeAuditState(s);
  auto back = ParseAuditState(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(ParseAuditState(text + "x").ok());
  EXPECT_FALSE(ParseAuditState(text.substr(0, text.size() - 1)).ok());
  std::string zero = text;
  zero.replace(zero.find("seq 7"), 5, "seq 0");
  EXPECT_EQ(ParseAuditState(zero).status().message(), "line 4: expected a positive sequence number");
}

TEST(MirrorRecordTest, RoundTripAndStrictness) {
  MirrorRecord m{std::string(40, 'a'), 7, std::string(40, 'b'), 9, 1'800'000'000'123};
  std::string text = EncodeMirrorRecord(m);
  EXPECT_EQ(text.rfind("gatos-mirror 1\nlog-before ", 0), 0u) << text;
  auto back = ParseMirrorRecord(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, m);
  EXPECT_FALSE(ParseMirrorRecord(text + "x").ok());
  EXPECT_FALSE(ParseMirrorRecord(text.substr(0, text.size() - 1)).ok());
  // The log only grows: a record whose head went back is refused.
  MirrorRecord back_in_time = m;
  back_in_time.seq_after = 6;
  EXPECT_EQ(ParseMirrorRecord(EncodeMirrorRecord(back_in_time)).status().message(),
            "line 5: seq-after is before seq-before (the log only grows)");
  std::string bad_hex = text;
  bad_hex.replace(bad_hex.find("log-after ") + 10, 1, "A");
  EXPECT_EQ(ParseMirrorRecord(bad_hex).status().message(), "line 4: expected a 40-hex commit id");
  // An audit state file is not a mirror record.
  EXPECT_EQ(ParseMirrorRecord(EncodeAuditState({std::string(40, 'a'), std::string(40, 'b'), 7, 0})).status().message(),
            "line 1: expected \"gatos-mirror ...\"");
}

}  // namespace
}  // namespace gatos::testing

namespace gatos::testing {
namespace {

// Results checked ahead of the replay on several threads (each once) give
// the very report the replay alone gives, for a genuine ledger and for one
// whose refs were tampered with; and the replay reads fewer objects itself.
TEST(LogAuditTest, ParallelVerifyGivesTheSameReportAsOneThread) {
  History h;
  for (int i = 0; i < 12; ++i) RunJob(h.f, i % 2 ? h.f.w1 : h.f.w2, {.yaml = Yaml(100 + i)});
  auto l = h.L();
  auto report = [&](size_t threads) {
    LogAuditOptions o;
    o.threads = threads;
    o.witnesses = true;
    return LogAuditReportToJson(Audit(*l, o)).dump();
  };
  std::string one = report(1);
  EXPECT_EQ(report(2), one);
  EXPECT_EQ(report(4), one);
  EXPECT_NE(one.find("\"results\":"), std::string::npos);
  // Tampered: a result moved, a failed job's refs deleted.
  SetRef(*l, JobRef(h.a.job_hex, "result"), h.d.built.commit_id);
  auto refs = l->ListRefs(std::string(kJobsPrefix) + h.b.job_hex + "/");
  ASSERT_TRUE(refs.ok());
  for (const auto& r : *refs) SetRef(*l, r, "");
  std::string bad = report(1);
  EXPECT_NE(bad, one);
  EXPECT_EQ(report(2), bad);
}

}  // namespace
}  // namespace gatos::testing

namespace gatos::testing {
namespace {

// The per-job pass on several threads: the same summary, job by job.
TEST(LogAuditTest, PerJobPassOnSeveralThreadsGivesTheSameSummary) {
  History h;
  for (int i = 0; i < 9; ++i) RunJob(h.f, i % 2 ? h.f.w1 : h.f.w2, {.yaml = Yaml(200 + i)});
  auto l = h.L();
  SetRef(*l, JobRef(h.a.job_hex, "result"), h.d.built.commit_id);  // one failing job too
  auto summary = [&](size_t threads) {
    VerifyOptions o;
    o.threads = threads;
    size_t calls = 0;
    o.progress = [&calls](size_t, size_t) { ++calls; };
    auto s = VerifyAll(*l, o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    EXPECT_GT(calls, 0u);
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : s->jobs) j.push_back(AuditReportToJson(r));
    return std::to_string(s->verified) + "/" + std::to_string(s->failed) + "/" +
           std::to_string(s->without_result) + " " + j.dump();
  };
  std::string one = summary(1);
  EXPECT_NE(one.find("\"ok\":false"), std::string::npos);
  EXPECT_EQ(summary(2), one);
  EXPECT_EQ(summary(3), one);
}

// ---- schedules: fires (docs/auditor-guide.md, "Schedules") ----

// A ledger with schedule `tick` (every second, recorded by alice) that
// fired `ticks` (offsets in seconds after the schedule commit).
struct Fired {
  LedgerFixture f;
  ScheduleCommit sc;
  std::vector<std::string> jobs;  // the fired jobs, in order
  std::vector<int64_t> at;        // their ticks

  explicit Fired(std::vector<int> ticks) {
    ScheduleSpec spec;
    spec.name = "tick";
    spec.every_ms = 1000;
    spec.catch_up = CatchUp::kAll;
    spec.job = *ParseManifest("command: [\"true\"]\ntimeout: 10\n", "job.yaml");
    auto objects = BuildScheduleCommit(spec, "active", "", f.submitter, f.now);
    EXPECT_TRUE(objects.ok());
    sc = *CheckScheduleCommit(BatchLookup(&*objects, nullptr), objects->front().id);
    OpResult r = f.Apply(NoteOp{LogKind::kSchedule, std::string(kSchedulePrefix) + "tick", false, *objects});
    EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
    const int64_t start = f.now;
    for (int t : ticks) {
      const int64_t tick = start + t * 1000;
      f.now = tick + 150;
      r = f.Apply(FireOp{sc, tick});
      EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
      EXPECT_FALSE(r.existing);
      jobs.push_back(r.job_hex);
      at.push_back(tick);
    }
  }

  // Someone with the ledger key logs a fire of `tick` after the last one,
  // past the writer's checks; the replay's report on the result. *job: the
  // forged fire's job.
  LogAuditReport ForgeFire(int64_t tick, std::string* job) {
    const std::string previous = f.Ref(std::string(kFirePrefix) + "tick");
    auto fobjects = BuildFireCommit(sc, tick, previous, f.ledger_key);
    EXPECT_TRUE(fobjects.ok());
    f.Close();
    auto l = f.Open();
    WriteObjects(*l, *fobjects);
    JobRecord rec;
    rec.job_hex = JobIdHex(FiredManifest(sc.spec, tick));
    rec.job_commit = fobjects->front().id;
    rec.submitter_hex = f.submitter.public_key().Hex();
    AppendLogCommit(*l, f.ledger_key, EncodeBatch(FireEntries(std::nullopt, rec, "tick", previous)), 1,
                    {rec.job_commit}, tick + 100);
    *job = rec.job_hex;
    return Audit(*l);
  }
};

TEST(LogAuditTest, FiresReplayAndATickFiresOnce) {
  Fired h({1, 2, 3});
  // The same tick again is the same job: a no-op; an older tick is refused.
  OpResult again = h.f.Apply(FireOp{h.sc, h.at[2]});
  EXPECT_TRUE(again.outcome.ok());
  EXPECT_TRUE(again.existing);
  OpResult older = h.f.Apply(FireOp{h.sc, h.at[1] - 0});
  EXPECT_TRUE(older.outcome.ok() && older.existing);  // fired already: the same job
  h.f.now += 1;
  OpResult skipped_back = h.f.Apply(FireOp{h.sc, h.at[0] - 1000});
  EXPECT_FALSE(skipped_back.outcome.ok());
  EXPECT_TRUE(Has(skipped_back.outcome.message, "is not after its last fire")) << skipped_back.outcome.message;
  // The chain of fires and the job commits.
  EXPECT_EQ(h.f.Ref(std::string(kFirePrefix) + "tick"), h.f.Record(h.jobs[2]).job_commit);
  h.f.Close();
  auto l = h.f.Open();
  auto fire = ParseFireCommit(LedgerLookup(l.get()), h.f.Record(h.jobs[2]).job_commit);
  ASSERT_TRUE(fire.ok()) << fire.status().message();
  EXPECT_EQ(fire->schedule, "tick");
  EXPECT_EQ(fire->tick_ms, h.at[2]);
  EXPECT_EQ(fire->schedule_commit, h.sc.commit);
  EXPECT_EQ(fire->previous_fire, h.f.Record(h.jobs[1]).job_commit);
  EXPECT_EQ(fire->signer_hex, h.f.ledger_key.public_key().Hex());
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_EQ(r.fires, 3u);
  EXPECT_EQ(r.by_kind["fire"], 3);
  EXPECT_TRUE(r.missed_ticks.empty());
  // The per-job pass accepts a fired job's ledger signature.
  auto job = VerifyJob(*l, h.jobs[0], {});
  ASSERT_TRUE(job.ok());
  for (const auto& c : job->checks) {
    if (c.name == "job_signature") EXPECT_TRUE(c.ok) << c.detail;
  }
}

TEST(LogAuditTest, TicksThatDidNotFireAreMissedAWarningNotAProblem) {
  Fired h({1, 5});
  h.f.now = h.at[1] + 20'000;  // the last batch: 20 s after the last fire
  EXPECT_TRUE(h.f.Apply(FireOp{h.sc, h.at[1] + 20'000}).outcome.ok());
  h.f.Close();
  auto l = h.f.Open();
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  ASSERT_EQ(r.missed_ticks.size(), 1u);
  EXPECT_EQ(r.missed_ticks[0].schedule, "tick");
  EXPECT_EQ(r.missed_ticks[0].count, 3 + 19);  // 2..4, then the 19 ticks before the last fire
  EXPECT_EQ(r.missed_ticks[0].first_ms, h.at[0] + 1000);
}

TEST(LogAuditTest, FireDeletedFromTheRefsIsMissing) {
  Fired h({1, 2, 3});
  const std::string second = h.f.Record(h.jobs[1]).job_commit;
  h.f.Close();
  auto l = h.f.Open();
  SetRef(*l, JobRef(h.jobs[1], "job"), "");
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "ref_missing");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_EQ(p->ref, JobRef(h.jobs[1], "job"));
  // The chain's head too.
  SetRef(*l, JobRef(h.jobs[1], "job"), second);
  SetRef(*l, std::string(kFirePrefix) + "tick", "");
  r = Audit(*l);
  p = Find(r, "ref_missing");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_EQ(p->ref, std::string(kFirePrefix) + "tick");
}

TEST(LogAuditTest, FireWithoutAScheduleIsRefused) {
  Fired h({1});
  // Someone with the ledger key logs a fire of a schedule the log never
  // recorded: signed, well formed, and its own chain.
  ScheduleCommit ghost = h.sc;
  ghost.spec.name = "ghost";
  auto sobjects = BuildScheduleCommit(ghost.spec, "active", "", h.f.submitter, h.f.now);
  ASSERT_TRUE(sobjects.ok());
  ghost.commit = sobjects->front().id;
  const int64_t tick = h.at[0] + 2000;
  auto fobjects = BuildFireCommit(ghost, tick, "", h.f.ledger_key);
  ASSERT_TRUE(fobjects.ok());
  h.f.Close();
  auto l = h.f.Open();
  WriteObjects(*l, *sobjects);
  WriteObjects(*l, *fobjects);
  JobRecord rec;
  rec.job_hex = JobIdHex(FiredManifest(ghost.spec, tick));
  rec.job_commit = fobjects->front().id;
  rec.submitter_hex = h.f.submitter.public_key().Hex();
  AppendLogCommit(*l, h.f.ledger_key, EncodeBatch(FireEntries(std::nullopt, rec, "ghost", "")), 1,
                  {rec.job_commit}, tick + 100);
  SetRef(*l, JobRef(rec.job_hex, "job"), rec.job_commit);
  SetRef(*l, std::string(kFirePrefix) + "ghost", rec.job_commit);
  LogAuditReport r = Audit(*l);
  const LogProblem* p = Find(r, "fire");
  ASSERT_NE(p, nullptr) << Problems(r);
  EXPECT_EQ(p->job_hex, rec.job_hex);
  EXPECT_TRUE(Has(p->detail, "which the log does not record")) << p->detail;
}

// A forged fire after the schedule's pause, and one between two ticks.
TEST(LogAuditTest, FireOfAPausedScheduleOrOffTheScheduleIsRefused) {
  for (bool pause : {true, false}) {
  Fired h({1});
  const int64_t tick = pause ? h.at[0] + 2000 : h.at[0] + 2500;
  if (pause) {
    auto paused = BuildScheduleCommit(h.sc.spec, "paused", h.sc.commit, h.f.submitter, h.f.now);
    ASSERT_TRUE(paused.ok());
    OpResult pr = h.f.Apply(NoteOp{LogKind::kSchedule, std::string(kSchedulePrefix) + "tick", false, *paused});
    ASSERT_TRUE(pr.outcome.ok()) << pr.outcome.message;
    // The ledger itself refuses to fire it: the schedule moved.
    OpResult refused = h.f.Apply(FireOp{h.sc, h.at[0] + 1000});
    EXPECT_EQ(refused.outcome.error, TransitionError::kLostRace) << refused.outcome.message;
  }
  {
    std::string job;
    LogAuditReport r = h.ForgeFire(tick, &job);
    const LogProblem* p = Find(r, "fire");
    ASSERT_NE(p, nullptr) << Problems(r);
    EXPECT_TRUE(Has(p->detail, pause ? "names schedule commit " + h.sc.commit.substr(0, 12) + ", but tick is at"
                                     : "is not a tick of schedule tick"))
        << p->detail;
  }
  }
}

// The policy lowers its timeout ceiling below the template's: the ledger
// refuses to fire, and a fire forged with the ledger key anyway is refused
// by the replay, which checks each fired job against the policy in force.
TEST(LogAuditTest, FireOfAJobThePolicyInForceForbidsIsRefused) {
  Fired h({1});  // the template's timeout: 10 s
  Policy p = h.f.W().policy();
  p.settings.max_timeout_seconds = 5;
  ASSERT_TRUE(h.f.Apply(PolicyOp{p, "gatos: set max_timeout_seconds", std::nullopt}).outcome.ok());
  const int64_t tick = h.at[0] + 1000;
  h.f.now = tick + 150;
  OpResult refused = h.f.Apply(FireOp{h.sc, tick});
  EXPECT_EQ(refused.outcome.error, TransitionError::kInvalid) << refused.outcome.message;
  EXPECT_TRUE(Has(refused.outcome.message, "the policy in force refuses the job it would fire: job.yaml: timeout"))
      << refused.outcome.message;
  std::string job;
  LogAuditReport r = h.ForgeFire(tick, &job);
  const LogProblem* problem = Find(r, "fire");
  ASSERT_NE(problem, nullptr) << Problems(r);
  EXPECT_EQ(problem->job_hex, job);
  EXPECT_TRUE(Has(problem->detail, "the policy in force refuses its job: job.yaml: timeout: 10 s")) << problem->detail;
}

// ---- triggers: fires of moved refs (docs/scheduling.md, "Triggers") ----

// A ledger with trigger `app` (watching refs/heads/main of kUrl, recorded
// by alice), its baseline (main at c0) and one fire (main moved to c1),
// as gatosd writes them.
struct Triggered {
  static constexpr char kUrl[] = "/srv/repos/app";
  LedgerFixture f;
  ScheduleCommit sc;
  std::string c0 = std::string(40, 'a'), c1 = std::string(40, 'b'), c2 = std::string(40, 'c');
  std::string job;  // the fired job

  std::string Positions(const std::map<std::string, std::string>& refs) {
    WatchPositions p{sc.commit, {{kUrl, refs}}};
    auto objects = BuildWatchCommit("app", p, f.Ref(std::string(kWatchPrefix) + "app"), f.ledger_key, f.now);
    EXPECT_TRUE(objects.ok());
    OpResult r = f.Apply(NoteOp{LogKind::kWatch, std::string(kWatchPrefix) + "app", false, *objects});
    EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
    return r.commit;
  }

  Triggered() {
    ScheduleSpec spec;
    spec.name = "app";
    spec.watch = {{kUrl, {"refs/heads/main"}}};
    spec.poll_ms = 1000;
    spec.job = *ParseManifest("command: [\"true\"]\ntimeout: 10\ninputs:\n  - {kind: git, url: /srv/repos/app, ref: main}\n",
                              "job.yaml");
    auto objects = BuildScheduleCommit(spec, "active", "", f.submitter, f.now);
    EXPECT_TRUE(objects.ok());
    sc = *CheckScheduleCommit(BatchLookup(&*objects, nullptr), objects->front().id);
    OpResult r = f.Apply(NoteOp{LogKind::kSchedule, std::string(kSchedulePrefix) + "app", false, *objects});
    EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
    f.now += 1000;
    Positions({{"refs/heads/main", c0}});
    f.now += 1000;
    r = f.Apply(FireOp{sc, 0, TriggerMove{kUrl, "refs/heads/main", c1}});
    EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
    EXPECT_FALSE(r.existing);
    job = r.job_hex;
    Positions({{"refs/heads/main", c1}});
  }

  // A fire commit as someone holding the ledger key could write it: the
  // trailers say `mv`, the job is `manifest`; logged after the last fire.
  std::string Forge(const Manifest& manifest, const TriggerMove& mv) {
    const std::string previous = f.Ref(std::string(kFirePrefix) + "app");
    const int64_t at = f.now + 1000;
    std::vector<GitObject> objects;
    auto tree = BuildTreeObjects({{"job.yaml", ManifestJson(manifest).dump() + "\n", false}}, &objects);
    EXPECT_TRUE(tree.ok());
    CommitMessage msg;
    msg.body = "gatos: fire app";
    msg.trailers = {{"Job-Id", "blake3:" + JobIdHex(manifest)}, {kScheduleTrailer, "app"},
                    {kFiredAtTrailer, FormatRfc3339Millis(at)}, {kTriggerUrlTrailer, mv.url},
                    {kTriggerRefTrailer, mv.ref}, {kTriggerCommitTrailer, mv.commit}};
    auto c = BuildCommitObject(*tree, {sc.commit, previous}, FormatCommitMessage(msg), "gatos ledger",
                               "ledger@gatos.invalid", at, &f.ledger_key);
    EXPECT_TRUE(c.ok());
    objects.insert(objects.begin(), *c);
    f.Close();
    auto l = f.Open();
    WriteObjects(*l, objects);
    JobRecord rec;
    rec.job_hex = JobIdHex(manifest);
    rec.job_commit = c->id;
    rec.submitter_hex = f.submitter.public_key().Hex();
    AppendLogCommit(*l, f.ledger_key, EncodeBatch(FireEntries(std::nullopt, rec, "app", previous)), 1,
                    {rec.job_commit}, at + 100);
    SetRef(*l, JobRef(rec.job_hex, "job"), rec.job_commit);
    SetRef(*l, std::string(kFirePrefix) + "app", rec.job_commit);
    LogAuditReport r = Audit(*l);
    const LogProblem* p = Find(r, "fire");
    return p ? p->detail : "no fire problem: " + Problems(r);
  }
};

TEST(LogAuditTest, TriggerFiresReplayAndAMoveFiresOnce) {
  Triggered h;
  // The same move again is the same job: a no-op.
  OpResult again = h.f.Apply(FireOp{h.sc, 0, TriggerMove{Triggered::kUrl, "refs/heads/main", h.c1}});
  EXPECT_TRUE(again.outcome.ok() && again.existing) << again.outcome.message;
  // The fired job pins the watched input to the commit.
  h.f.Close();
  auto l = h.f.Open();
  auto fire = ParseFireCommit(LedgerLookup(l.get()), h.f.Ref(std::string(kFirePrefix) + "app"));
  ASSERT_TRUE(fire.ok()) << fire.status().message();
  ASSERT_TRUE(fire->move.has_value());
  EXPECT_EQ(fire->move->commit, h.c1);
  EXPECT_EQ((*fire->manifest.inputs)[0]["commit"], h.c1);
  EXPECT_EQ((*fire->manifest.inputs)[0]["ref"], "refs/heads/main");
  EXPECT_EQ((*fire->manifest.inputs)[1]["nonce"], "refs/heads/main@" + h.c1);
  LogAuditReport r = Audit(*l);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_EQ(r.fires, 1u);
  EXPECT_EQ(r.by_kind["watch"], 2);
}

// Fires someone holding the ledger key logs that gatosd would not: a job
// not pinned to the commit its trailers name, a ref the trigger does not
// watch, and a "move" to where the recorded positions already had the ref.
TEST(LogAuditTest, TamperedTriggerFireIsRefused) {
  {
    Triggered h;
    Manifest pinned_elsewhere = TriggeredManifest(h.sc.spec.job, "app", Triggered::kUrl, "refs/heads/main", h.c0);
    std::string why = h.Forge(pinned_elsewhere, {Triggered::kUrl, "refs/heads/main", h.c2});
    EXPECT_TRUE(Has(why, "is not the template of schedule app pinned to refs/heads/main at " + h.c2.substr(0, 12)))
        << why;
  }
  {
    Triggered h;
    TriggerMove mv{Triggered::kUrl, "refs/heads/evil", h.c2};
    std::string why = h.Forge(TriggeredManifest(h.sc.spec.job, "app", mv.url, mv.ref, mv.commit), mv);
    EXPECT_TRUE(Has(why, "refs/heads/evil matches no ref pattern")) << why;
  }
  {
    // The move fired already, logged a second time.
    Triggered h;
    TriggerMove mv{Triggered::kUrl, "refs/heads/main", h.c1};
    std::string why = h.Forge(TriggeredManifest(h.sc.spec.job, "app", mv.url, mv.ref, mv.commit), mv);
    EXPECT_TRUE(Has(why, "fired again")) << why;
  }
  {
    // The positions record main at c0 (recorded, not fired: a baseline
    // under this schedule commit would be): a fire of main at c0 is no move.
    Triggered h;
    h.Positions({{"refs/heads/main", h.c0}});
    TriggerMove mv{Triggered::kUrl, "refs/heads/main", h.c0};
    std::string why = h.Forge(TriggeredManifest(h.sc.spec.job, "app", mv.url, mv.ref, mv.commit), mv);
    EXPECT_TRUE(Has(why, "was recorded at " + h.c0.substr(0, 12) + " already")) << why;
  }
}

// gatos verify --all: the per-job pass after the replay does not verify
// again the signatures of the results the replay checked, and reports the
// same; a result the replay did not check (not in the log) is verified in
// full.
TEST(LogAuditTest, PerJobPassAfterTheReplayReportsTheSameWithoutVerifyingTwice) {
  History h;
  for (int i = 0; i < 6; ++i) RunJob(h.f, i % 2 ? h.f.w1 : h.f.w2, {.yaml = Yaml(300 + i)});
  auto l = h.L();
  // A result of another job moved in (checked by the replay), and one the
  // log never recorded: the worker's commit with its message changed after
  // signing (its signature no longer verifies).
  SetRef(*l, JobRef(h.a.job_hex, "result"), h.d.built.commit_id);
  std::string data = h.d.built.objects.front().data;
  size_t at = data.find("gatos: result of job");
  ASSERT_NE(at, std::string::npos);
  data.replace(at, 20, "gatos: result of Job");
  std::vector<GitObject> forged = {Commit(data)};
  ForceResult(*l, h.d.job_hex, forged, forged.front().id);
  auto per_job = [&](std::shared_ptr<const ReplayVerified> verified) {
    VerifyOptions o;
    o.replay_verified = std::move(verified);
    auto s = VerifyAll(*l, o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : s->jobs) j.push_back(AuditReportToJson(r));
    return j.dump();
  };
  auto verified = std::make_shared<ReplayVerified>();
  LogAuditOptions o;
  o.verified = verified.get();
  LogAuditReport log = Audit(*l, o);
  EXPECT_EQ(verified->results.size(), log.results);
  EXPECT_TRUE(verified->results.count(h.d.built.commit_id));
  EXPECT_FALSE(verified->results.count(forged.front().id));
  std::string alone = per_job(nullptr);
  EXPECT_NE(alone.find("commit signature: "), std::string::npos);  // does not verify
  EXPECT_EQ(per_job(verified), alone);
  // The record is what is skipped: one that named the forged commit would
  // let its bad signature pass (which is why only the replay fills it).
  auto wrong = std::make_shared<ReplayVerified>(*verified);
  wrong->results.insert(forged.front().id);
  EXPECT_NE(per_job(wrong), alone);
}


}  // namespace
}  // namespace gatos::testing
