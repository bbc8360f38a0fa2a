// A follower replica applies the leader's batch records only after the
// auditor's checks (replica_apply.h): genuine records land and the replica
// ends up identical to the leader; a forged one (signed by another key, or
// recording a transition the policy forbids) is refused with the reason,
// and nothing of it lands.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "audit_fixture.h"
#include "gatos/audit/log_audit.h"
#include "gatos/audit/replica_apply.h"
#include "gatos/ledger/wal.h"
#include "gatos/ledger/replica_id.h"
#include "gatos/model/log_format.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/record_stream.h"
#include "nats_server.h"
#include "replica.h"

namespace gatos::testing {
namespace {

constexpr int64_t kLease = 10'000;

// A leader whose writer hands each batch's record to `records`, and a
// follower repository cloned from the ledger before its first batch.
struct Replicated {
  LedgerFixture f{false, kLease};
  TempDir other;
  std::string follower;
  std::vector<std::string> records;

  Replicated() {
    follower = other.Join("follower.git");
    std::filesystem::copy(f.path, follower, std::filesystem::copy_options::recursive);
    f.writer_options.replicate = [this](int64_t seq, const std::string& record) {
      EXPECT_EQ(seq, static_cast<int64_t>(records.size()) + 2);  // sequence 1 is the ledger's creation
      records.push_back(record);
      return OkStatus();
    };
  }
  std::unique_ptr<Ledger> F() { return std::move(*Ledger::Open(follower)); }
  // records[i] with its log commit signed by w1 instead of the ledger key
  // ("" when it cannot be built). After Close.
  std::string SignedByAnotherKey(size_t i) {
    WalRecord rec = DecodeWalFile(records.at(i)).records.at(0);
    auto leader = f.Open();
    auto log = leader->ReadCommit(rec.log_id);
    if (!log.ok()) return "";
    auto forged = BuildCommitObject(log->tree, log->parents, log->message, "gatos ledger", "ledger@gatos.invalid",
                                    log->time_s * 1000, &f.w1);
    if (!forged.ok()) return "";
    std::vector<const GitObject*> objects;
    for (const auto& o : rec.objects) {
      if (o.id != rec.log_id) objects.push_back(&o);
    }
    objects.push_back(&*forged);
    return EncodeWalRecord(rec.seq, forged->id, objects);
  }
  // Three submits, each its own record, and the writer closed; the third
  // record with its log commit signed by w1 ("" when it cannot be built).
  std::string ThreeRecordsTheThirdForged() {
    for (int i = 1; i <= 3; ++i) SubmitPair(f, Yaml(i));
    f.Close();
    return records.size() == 3 ? SignedByAnotherKey(2) : "";
  }
  // Batches of several kinds: a job run with a renewal, two submits and a
  // submitter's request on the third; then the writer closed.
  void RecordSeveralKindsOfBatches() {
    RunJob(f, f.w1, {.yaml = Yaml(1), .renewals = 1});
    SubmitPair(f, Yaml(2));
    std::string e = SubmitPair(f, Yaml(3)).second;
    EXPECT_TRUE(f.User(e, f.submitter, false).outcome.ok());
    f.Close();
  }
  // Applies records[from, to) to the follower.
  void ApplyAll(size_t from = 0) {
    auto l = F();
    for (size_t i = from; i < records.size(); ++i) {
      auto r = CheckAndApplyRecord(*l, records[i], VerifyOptions{}, /*fsync=*/false);
      ASSERT_TRUE(r.ok()) << "record " << i << ": " << r.status().message();
    }
  }
};

std::string Problems(const LogAuditReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += p.check + ": " + p.detail + "\n";
  return s;
}

// Every ref under refs/gatos/ of a repository, by name.
std::map<std::string, std::string> GatosRefs(const std::string& path) {
  std::map<std::string, std::string> out;
  std::string text = Run({"git", "-C", path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/gatos/"}).out;
  std::istringstream in(text);
  std::string name, id;
  while (in >> name >> id) out[name] = id;
  return out;
}

TEST(ReplicaApplyTest, GenuineRecordsLandAndTheFollowerEqualsTheLeader) {
  Replicated r;
  r.RecordSeveralKindsOfBatches();
  ASSERT_GE(r.records.size(), 6u);
  r.ApplyAll();
  EXPECT_EQ(GatosRefs(r.follower), GatosRefs(r.f.path));
  auto l = r.F();
  auto report = AuditLog(*l, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << Problems(*report);
  // A record applied twice, or out of turn, is not the next one.
  auto again = CheckAndApplyRecord(*l, r.records.back(), VerifyOptions{}, false);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("is not the next one: the local log is at sequence"), std::string::npos)
      << again.status().message();
}

TEST(ReplicaApplyTest, ARecordSignedByAnotherKeyIsRefusedAndSaysWhy) {
  Replicated r;
  SubmitPair(r.f, Yaml(1));
  r.f.Close();
  ASSERT_EQ(r.records.size(), 1u);
  // The same batch, its log commit signed by w1 instead of the ledger key.
  WalFileContents c = DecodeWalFile(r.records[0]);
  ASSERT_EQ(c.records.size(), 1u);
  WalRecord rec = c.records[0];
  auto leader = r.f.Open();
  CommitInfo log = *leader->ReadCommit(rec.log_id);
  auto forged = BuildCommitObject(log.tree, log.parents, log.message, "gatos ledger", "ledger@gatos.invalid",
                                  log.time_s * 1000, &r.f.w1);
  ASSERT_TRUE(forged.ok());
  std::vector<const GitObject*> objects;
  for (const auto& o : rec.objects) {
    if (o.id != rec.log_id) objects.push_back(&o);
  }
  objects.push_back(&*forged);
  const std::string bytes = EncodeWalRecord(rec.seq, forged->id, objects);

  auto l = r.F();
  const std::string head = *l->ResolveRef(kLogRef);
  auto refused = CheckAndApplyRecord(*l, bytes, VerifyOptions{}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().message();
  EXPECT_NE(refused.status().message().find("log_signature"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("is not signed by the ledger key in force"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(*l->ResolveRef(kLogRef), head);  // nothing landed
  // The genuine record still applies.
  auto ok = CheckAndApplyRecord(*l, r.records[0], VerifyOptions{}, false);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

TEST(ReplicaApplyTest, ARecordOfATransitionThePolicyForbidsIsRefusedAndSaysWhy) {
  Replicated r;
  JobRun a = RunJob(r.f, r.f.w1, {.yaml = Yaml(1)});  // succeeded
  r.f.Close();
  r.ApplyAll();
  auto l = r.F();
  const std::string head = *l->ResolveRef(kLogRef);
  CommitInfo hc = *l->ReadCommit(head);
  LogCommitInfo info = *ParseLogMessage(hc.message);
  // Someone holding the ledger key records a second, genuinely
  // worker-signed result of the succeeded job as a retried attempt: the
  // policy never retries a success. The writer would never write it (it
  // decides with the same function), so the record is built by hand.
  r.f.now += 1000;
  JobRun again = BuildAndAccept(r.f, a, r.f.w1, {.yaml = Yaml(1), .status = "failed", .accept = false});
  GitObject batch = MakeObject(ObjectType::kBlob, EncodeBatch({{LogKind::kAttempt, a.job_hex,
                                                                JobRef(a.job_hex, "attempts/1"), "",
                                                                again.built.commit_id}}));
  std::vector<TreeEntry> entries = *l->ReadTree(hc.tree);
  for (auto& e : entries) {
    if (e.name == "batch") e.id = batch.id;
  }
  GitObject tree = MakeObject(ObjectType::kTree, *EncodeTree(entries));
  info.seq += 1;
  info.time_ms = r.f.now;
  auto log = BuildCommitObject(tree.id, {head, again.built.commit_id}, EncodeLogMessage(info), "gatos ledger",
                               "ledger@gatos.invalid", r.f.now, &r.f.ledger_key);
  ASSERT_TRUE(log.ok()) << log.status().message();
  std::vector<const GitObject*> objects = {&batch, &tree};
  for (const auto& o : again.built.objects) objects.push_back(&o);
  objects.push_back(&*log);
  const std::string forged = EncodeWalRecord(info.seq, log->id, objects);

  auto refused = CheckAndApplyRecord(*l, forged, VerifyOptions{}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().message();
  EXPECT_NE(refused.status().message().find("already had its final result"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("no attempt may follow it"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(*l->ResolveRef(kLogRef), head);  // nothing landed
  EXPECT_EQ(*l->ResolveRef(JobRef(a.job_hex, "attempts/1")), "");
  // The leader's next genuine batch applies after it.
  SubmitPair(r.f, Yaml(2));
  r.f.Close();
  r.ApplyAll(r.records.size() - 1);
  EXPECT_EQ(GatosRefs(r.follower), GatosRefs(r.f.path));
}

TEST(ReplicaApplyTest, ABatchOfAnOlderTermIsRefusedAndVerifyReportsIt) {
  Replicated r;
  int64_t term = 5;
  r.f.writer_options.term = [&term] { return term; };
  SubmitPair(r.f, Yaml(1));
  term = 3;  // a deposed leader's batch, as if no fence had stopped it
  SubmitPair(r.f, Yaml(2));
  r.f.Close();
  ASSERT_EQ(r.records.size(), 2u);
  auto leader = r.f.Open();
  CommitInfo head = *leader->ReadCommit(*leader->ResolveRef(kLogRef));
  EXPECT_NE(head.message.find("\nLedger-Term: 3\n"), std::string::npos) << head.message;
  EXPECT_EQ(ParseLogMessage(head.message)->term, 3);

  auto l = r.F();
  auto first = CheckAndApplyRecord(*l, r.records[0], VerifyOptions{}, false);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto refused = CheckAndApplyRecord(*l, r.records[1], VerifyOptions{}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().message();
  EXPECT_NE(refused.status().message().find("log_term: "), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("has Ledger-Term 3, after a batch of term 5"), std::string::npos)
      << refused.status().message();
  // gatos verify's replay finds it in the leader's repository too.
  auto report = AuditLog(*leader, {});
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->problems[0].check, "log_term") << Problems(*report);
}

// A job pushed with stock git: its objects are in the leader's repository
// already (the submit op carries none). The leader's record carries them,
// so the follower holds the job commit, its tree and its job.yaml; a
// record that names a job commit without them is refused, nothing landed.
TEST(ReplicaApplyTest, APushedJobTravelsWithItsObjectsAndARecordWithoutThemIsRefused) {
  Replicated r;
  LedgerFixture::Job j = r.f.JobCommit(Yaml(1), &r.f.submitter);
  std::vector<const GitObject*> pushed;
  for (const auto& o : j.objects) pushed.push_back(&o);
  ASSERT_TRUE(r.f.W().ledger().WriteObjectsPacked(pushed, /*fsync=*/false, /*remember=*/false).ok());
  auto check = r.f.Check(j);
  ASSERT_TRUE(check.ok()) << check.status().message();
  OpResult done = r.f.Apply(SubmitOp{*check, {}});
  ASSERT_TRUE(done.outcome.ok()) << done.outcome.message;
  r.f.Close();
  ASSERT_EQ(r.records.size(), 1u);
  WalRecord rec = DecodeWalFile(r.records[0]).records.at(0);
  std::set<std::string> carried;
  for (const auto& o : rec.objects) carried.insert(o.id);
  for (const auto& o : j.objects) EXPECT_TRUE(carried.count(o.id)) << "the record lacks " << o.id;

  // Without the job's objects: refused, saying which commit, and nothing lands.
  std::vector<const GitObject*> stripped;
  for (const auto& o : rec.objects) {
    bool job_object = false;
    for (const auto& x : j.objects) job_object |= x.id == o.id;
    if (!job_object) stripped.push_back(&o);
  }
  ASSERT_LT(stripped.size(), rec.objects.size());
  auto l = r.F();
  const std::string head = *l->ResolveRef(kLogRef);
  auto refused = CheckAndApplyRecord(*l, EncodeWalRecord(rec.seq, rec.log_id, stripped), VerifyOptions{}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().message();
  EXPECT_NE(refused.status().message().find("records job commit " + j.commit.substr(0, 12)), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("without its objects"), std::string::npos) << refused.status().message();
  EXPECT_EQ(*l->ResolveRef(kLogRef), head);
  EXPECT_FALSE(l->HasObject(j.commit));

  // The leader's record lands, with every object of the job.
  auto ok = CheckAndApplyRecord(*l, r.records[0], VerifyOptions{}, false);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  for (const auto& o : j.objects) EXPECT_TRUE(l->HasObject(o.id)) << o.id;
}

// A result pushed with stock git to the leader's front door: its commit,
// tree and files travel in the record too, and the follower holds them.
TEST(ReplicaApplyTest, APushedResultTravelsWithItsObjects) {
  Replicated r;
  JobRun run = RunJob(r.f, r.f.w1, {.yaml = Yaml(1), .accept = false});
  WriteObjects(r.f.W().ledger(), run.built.objects);
  ParsedResult parsed;
  Decision checked = CheckResultContent(LedgerLookup(&r.f.W().ledger()), run.built.commit_id, r.f.W().policy(), &parsed);
  ASSERT_TRUE(checked.ok()) << checked.message;
  OpResult done = r.f.Apply(ResultOp{parsed, {}});
  ASSERT_TRUE(done.outcome.ok()) << done.outcome.message;
  r.f.Close();
  r.ApplyAll();
  auto l = r.F();
  ASSERT_GE(run.built.objects.size(), 3u);
  for (const auto& o : run.built.objects) EXPECT_TRUE(l->HasObject(o.id)) << o.id;
  EXPECT_EQ(*l->ResolveRef(JobRef(run.job_hex, "result")), run.built.commit_id);
}

// A replicated ledger takes a pushed job commit without its history: its
// parents would be needed on every replica, and the record carries the
// commit and its tree only.
TEST(ReplicaApplyTest, APushedJobWithHistoryIsRefusedByAReplicatedLeader) {
  Replicated r;
  LedgerFixture::Job parent = r.f.JobCommit(Yaml(1), &r.f.submitter);
  auto m = ParseManifest(Yaml(2), "job.yaml");
  ASSERT_TRUE(m.ok());
  std::vector<GitObject> objects;
  auto tree = BuildTreeObjects({{"job.yaml", Yaml(2), false}}, &objects);
  ASSERT_TRUE(tree.ok());
  auto c = BuildCommitObject(*tree, {parent.commit}, "run it\n\nJob-Id: blake3:" + JobIdHex(*m) + "\n", "Alice",
                             "alice@example.com", r.f.now, &r.f.submitter);
  ASSERT_TRUE(c.ok());
  objects.insert(objects.begin(), *c);
  for (const auto& o : parent.objects) objects.push_back(o);
  std::vector<const GitObject*> pushed;
  for (const auto& o : objects) pushed.push_back(&o);
  ASSERT_TRUE(r.f.W().ledger().WriteObjectsPacked(pushed, false, false).ok());
  auto check = CheckJobCommit(BatchLookup(&objects, nullptr), c->id, "", r.f.W().policy(), r.f.now);
  ASSERT_TRUE(check.ok()) << check.status().message();
  OpResult refused = r.f.Apply(SubmitOp{*check, {}});
  EXPECT_EQ(refused.outcome.error, TransitionError::kInvalid) << refused.outcome.message;
  EXPECT_NE(refused.outcome.message.find("without its history"), std::string::npos) << refused.outcome.message;
  r.f.Close();
  EXPECT_TRUE(r.records.empty());
}

// A follower that is behind applies what it read as one group: one pack,
// one run of the checks, one write-ahead log sync, one move of the log ref.
// The result is the leader's refs, as record by record, and the replica's
// write-ahead log holds every record of the group.
TEST(ReplicaApplyTest, AGroupOfRecordsLandsAsTheyWouldOneByOne) {
  Replicated r;
  r.RecordSeveralKindsOfBatches();
  ASSERT_GE(r.records.size(), 6u);
  TempDir state;
  auto wal = WriteAheadLog::Open(state.path());
  ASSERT_TRUE(wal.ok()) << wal.status().message();
  auto l = r.F();
  // The first record alone, then all the others in one group.
  ASSERT_TRUE(CheckAndApplyRecord(*l, r.records[0], VerifyOptions{}, true, &*wal).ok());
  std::vector<std::string_view> rest(r.records.begin() + 1, r.records.end());
  auto applied = CheckAndApplyRecords(*l, rest, VerifyOptions{}, true, &*wal);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(applied->seq, static_cast<int64_t>(r.records.size()) + 1);
  EXPECT_GT(applied->transitions, 0u);
  EXPECT_EQ(GatosRefs(r.follower), GatosRefs(r.f.path));
  auto report = AuditLog(*l, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << Problems(*report);
  auto logged = wal->ReadAll();
  ASSERT_TRUE(logged.ok()) << logged.status().message();
  ASSERT_EQ(logged->size(), r.records.size());
  for (size_t i = 0; i < logged->size(); ++i) {
    EXPECT_EQ((*logged)[i].seq, static_cast<int64_t>(i) + 2);
    EXPECT_EQ((*logged)[i].log_id, DecodeWalFile(r.records[i]).records.at(0).log_id);
  }
}

// A record that does not check at the end of a group: nothing of the group
// lands, not even the genuine records before it; applied one by one, those
// land and the bad one is refused with its reason.
TEST(ReplicaApplyTest, ABadRecordInAGroupStopsTheWholeGroupFromLanding) {
  Replicated r;
  const std::string forged = r.ThreeRecordsTheThirdForged();
  ASSERT_EQ(r.records.size(), 3u);
  ASSERT_FALSE(forged.empty());

  auto l = r.F();
  const std::string head = *l->ResolveRef(kLogRef);
  const auto refs = GatosRefs(r.follower);
  auto refused = CheckAndApplyRecords(*l, {r.records[0], r.records[1], forged}, VerifyOptions{}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().message();
  EXPECT_NE(refused.status().message().find("log_signature"), std::string::npos) << refused.status().message();
  EXPECT_EQ(*l->ResolveRef(kLogRef), head);  // nothing landed
  EXPECT_EQ(GatosRefs(r.follower), refs);

  EXPECT_TRUE(CheckAndApplyRecord(*l, r.records[0], VerifyOptions{}, false).ok());
  EXPECT_TRUE(CheckAndApplyRecord(*l, r.records[1], VerifyOptions{}, false).ok());
  auto alone = CheckAndApplyRecord(*l, forged, VerifyOptions{}, false);
  EXPECT_EQ(alone.status().code(), StatusCode::kPermissionDenied) << alone.status().message();
  EXPECT_NE(alone.status().message().find("record 4 "), std::string::npos) << alone.status().message();
  EXPECT_EQ(ParseLogMessage(l->ReadCommit(*l->ResolveRef(kLogRef))->message)->seq, 3);
  // The genuine third batch applies; a group that starts before the head
  // is not the next one.
  auto genuine = CheckAndApplyRecords(*l, {r.records[2]}, VerifyOptions{}, false);
  EXPECT_TRUE(genuine.ok()) << genuine.status().message();
  auto out_of_turn = CheckAndApplyRecords(*l, {r.records[1], r.records[2]}, VerifyOptions{}, false);
  EXPECT_EQ(out_of_turn.status().code(), StatusCode::kFailedPrecondition);
}

// A follower (gatosd's Replica) reads three records from a real stream and
// applies them as one group; the last is forged. The group is refused, the
// follower applies the records one by one: the two genuine ones land, the
// forged one stops it with its reason and never lands.
TEST(ReplicaApplyTest, AFollowerLandsTheRecordsBeforeABadOneOfAGroupAndStopsOnIt) {
  Replicated r;
  const std::string forged = r.ThreeRecordsTheThirdForged();
  ASSERT_EQ(r.records.size(), 3u);
  ASSERT_FALSE(forged.empty());

  NatsServer server;
  ASSERT_TRUE(server.Start());
  BusOptions bo;
  bo.url = server.url();
  auto bus = Bus::Connect(bo);
  ASSERT_TRUE(bus.ok()) << bus.status().message();
  gatosd::ReplicaOptions ro;
  ro.name = "f1";
  ro.ledger_id = "0123456789abcdef";
  auto replica = gatosd::Replica::Start(**bus, ro);
  ASSERT_TRUE(replica.ok()) << replica.status().message();
  auto stream = RecordStream::Open(**bus, {WalStreamName(ro.ledger_id), WalSubject(ro.ledger_id), 1, 0, 120'000, 0});
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  uint64_t last = 0;
  for (int64_t i = 0; i < 3; ++i) {
    auto a = (*stream)->Append(i + 2, i == 2 ? forged : r.records[i], last);
    ASSERT_TRUE(a.ok()) << a.status().message();
    last = *a;
  }

  auto l = r.F();
  auto n = (*replica)->CatchUp(*l, VerifyOptions{});
  EXPECT_EQ(n.status().code(), StatusCode::kPermissionDenied) << n.status().message();
  EXPECT_NE(n.status().message().find("record 4 "), std::string::npos) << n.status().message();
  EXPECT_NE(n.status().message().find("log_signature"), std::string::npos) << n.status().message();
  EXPECT_EQ(ParseLogMessage(l->ReadCommit(*l->ResolveRef(kLogRef))->message)->seq, 3);
  EXPECT_EQ(*l->ResolveRef(kLogRef), DecodeWalFile(r.records[1]).records.at(0).log_id);
  EXPECT_EQ((*replica)->log_seq(), 3);
  // Asked again, it stops on the same record: nothing was skipped.
  auto again = (*replica)->CatchUp(*l, VerifyOptions{});
  EXPECT_EQ(again.status().code(), StatusCode::kPermissionDenied) << again.status().message();
  EXPECT_NE(again.status().message().find("record 4 "), std::string::npos) << again.status().message();
}

TEST(ReplicaApplyTest, GarbageIsNotARecord) {
  Replicated r;
  auto l = r.F();
  EXPECT_EQ(CheckAndApplyRecord(*l, "not a record", VerifyOptions{}, false).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos::testing
