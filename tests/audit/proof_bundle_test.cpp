// The log's Merkle tree (log_tree.h), checkpoints and proof bundles
// (proof_bundle.h) over real ledgers written by the ledger's writer: a
// genuine bundle verifies offline, and each way of forging one is refused
// with its own check.
#include <tuple>

#include <gtest/gtest.h>

#include "audit_fixture.h"
#include "gatos/audit/log_tree.h"
#include "gatos/audit/proof_bundle.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/model/log_format.h"

namespace gatos::testing {
namespace {

// Every log commit, oldest first, read the slow way.
std::vector<std::string> LogCommits(Ledger& l) {
  std::vector<std::string> out;
  std::string cur = *l.ResolveRef(kLogRef);
  while (true) {
    auto c = l.ReadCommit(cur);
    EXPECT_TRUE(c.ok());
    out.insert(out.begin(), cur);
    if (ParseLogMessage(c->message)->seq == 1) break;
    cur = c->parents[0];
  }
  return out;
}

MerkleHash SlowRoot(Ledger& l, size_t n) {
  CompactMerkleRange r;
  auto commits = LogCommits(l);
  for (size_t i = 0; i < n; ++i) r.Append(MerkleLeafHash(l.ReadRawObject(commits[i])->second));
  return r.Root();
}

struct Signed {
  LedgerFixture f;
  JobRun a, b;
  std::string pending;
  std::unique_ptr<Ledger> ledger;
  std::unique_ptr<LogTree> tree;
  std::string checkpoint;

  Signed() {
    a = RunJob(f, f.w1, {.yaml = Yaml(1), .renewals = 2});
    f.now += 1000;
    b = RunJob(f, f.w2, {.yaml = Yaml(2), .status = "failed"});
    f.now += 1000;
    pending = SubmitPair(f, Yaml(3)).second;
    f.Close();
    ledger = f.Open();
    tree = std::make_unique<LogTree>(*LogTree::Open(LogTree::DirFor(f.path)));
    Status s = tree->Update(*ledger);
    EXPECT_TRUE(s.ok()) << s.message();
    checkpoint = Sign(f.ledger_key);
  }
  std::string Sign(const Ed25519PrivateKey& key) {
    Checkpoint cp{LedgerOrigin(tree->Entry(0)->first), tree->size(), *tree->Root(tree->size()), {}};
    return SignCheckpoint(cp, key);
  }
  ProofBundle Bundle(const std::string& job_hex) {
    auto b = BuildProofBundle(*ledger, *tree, job_hex, checkpoint);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return *b;
  }
  BundleVerifyOptions Options() {
    BundleVerifyOptions o;
    o.ledger_key = f.ledger_key.public_key();
    return o;
  }
};

// What a verifier reads: the bundle as written and parsed back (object ids
// are recomputed from their bytes).
BundleReport Check(const ProofBundle& b, const BundleVerifyOptions& o) {
  auto parsed = ParseProofBundle(EncodeProofBundle(b));
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  if (!parsed.ok()) return {};
  return VerifyProofBundle(*parsed, o);
}

std::string FailedCheck(const BundleReport& r) { return r.first_failure() ? r.first_failure()->name : "none"; }

TEST(LogTreeTest, TheTreeIsTheRfc6962TreeOfTheLogCommitsKeptIncrementally) {
  LedgerFixture f;
  TempDir other;
  auto incremental = *LogTree::Open(other.Join("tlog"));
  for (int i = 0; i < 40; ++i) {
    RunJob(f, i % 2 ? f.w1 : f.w2, {.yaml = Yaml(i)});
    f.now += 10;
    if (i % 7 == 0) {
      auto l = f.Open();
      ASSERT_TRUE(incremental.Update(*l).ok());
    }
  }
  f.Close();
  auto l = f.Open();
  ASSERT_TRUE(incremental.Update(*l).ok());
  auto full = *LogTree::Open(LogTree::DirFor(f.path));
  ASSERT_TRUE(full.Update(*l).ok());
  size_t n = LogCommits(*l).size();
  ASSERT_EQ(full.size(), n);
  ASSERT_GT(n, 100u);  // three log commits per job at least, so partial tiles at two levels
  EXPECT_EQ(*full.Root(n), SlowRoot(*l, n));
  EXPECT_EQ(*incremental.Root(n), SlowRoot(*l, n));
  EXPECT_EQ(*full.Root(57), SlowRoot(*l, 57));
  // Reopened from its files alone, the tree answers the same proofs.
  auto reopened = *LogTree::Open(other.Join("tlog"));
  EXPECT_EQ(reopened.size(), n);
  for (uint64_t i : {uint64_t{0}, uint64_t{55}, n - 1}) {
    auto p = reopened.InclusionProof(i, n);
    ASSERT_TRUE(p.ok());
    auto entry = reopened.Entry(i);
    ASSERT_TRUE(entry.ok());
    EXPECT_TRUE(VerifyMerkleInclusion(i, n, MerkleLeafHash(l->ReadRawObject(entry->first)->second), *p,
                                      *full.Root(n))
                    .ok());
  }
  auto c = reopened.ConsistencyProof(33, n);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(VerifyMerkleConsistency(33, n, *c, SlowRoot(*l, 33), *full.Root(n)).ok());
  EXPECT_EQ(TlogTilePath(0, 1234067, 0), "tile/0/x001/x234/067");
  EXPECT_EQ(TlogTilePath(1, 5, 17), "tile/1/005.p/17");
}

TEST(LogTreeTest, TilePathsFromTheNetworkParseOnlyInTheirOneSpelling) {
  int level = -1, width = -1;
  uint64_t index = 0;
  for (auto [l, n, w] : {std::tuple{0, uint64_t{0}, 0}, {0, uint64_t{1234067}, 0}, {1, uint64_t{5}, 17},
                         {63, uint64_t{999}, 255}, {2, uint64_t{1000}, 1}}) {
    const std::string p = TlogTilePath(l, n, w);
    ASSERT_TRUE(ParseTlogTilePath(p, &level, &index, &width)) << p;
    EXPECT_EQ(std::tuple(level, index, width), std::tuple(l, n, w)) << p;
  }
  for (const char* bad : {"", "tile", "tile/0", "tile/0/", "tile/0/1", "tile/0/0001", "tile/00/000",
                          "tile/64/000", "tile/0/x000/001", "tile/0/001/", "tile/0/001.p/0", "tile/0/001.p/256",
                          "tile/0/001.p/017", "tile/0/001.p", "tile/0/../001", "tile/0/x001/x00a/067",
                          "tile/0/x999/x999/x999/x999/x999/x999/x999/000", "tile/-1/000", "tile/entries/000"}) {
    EXPECT_FALSE(ParseTlogTilePath(bad, &level, &index, &width)) << bad;
  }
}

TEST(LogTreeTest, ARewrittenOrRolledBackLogIsRefused) {
  Signed s;
  std::vector<std::string> commits = LogCommits(*s.ledger);
  // Roll the log back by two batches, then let the writer add a different one.
  ASSERT_TRUE(s.ledger->UpdateRefs({{std::string(kLogRef), commits.back(), commits[commits.size() - 3]}}, "test").ok());
  auto again = *LogTree::Open(LogTree::DirFor(s.f.path));
  Status rolled = again.Update(*s.ledger);
  EXPECT_EQ(rolled.code(), StatusCode::kDataLoss);
  EXPECT_NE(rolled.message().find("rolled back"), std::string::npos) << rolled.message();
  s.f.writer_options.wal = false;
  RunJob(s.f, s.f.w1, {.yaml = Yaml(77)});
  RunJob(s.f, s.f.w1, {.yaml = Yaml(78)});
  s.f.Close();
  auto l = s.f.Open();
  Status rewritten = again.Update(*l);
  EXPECT_EQ(rewritten.code(), StatusCode::kDataLoss);
  EXPECT_NE(rewritten.message().find("rewritten"), std::string::npos) << rewritten.message();
  // A witness that kept only the old checkpoint catches it too: no
  // consistency proof from the new log leads to the old root.
  auto fresh = *LogTree::Open(TempDir().Join("t"));
  ASSERT_TRUE(fresh.Update(*l).ok());
  auto old_cp = *ParseCheckpointText(ParseNote(s.checkpoint)->text);
  ASSERT_GT(fresh.size(), old_cp.size);
  auto proof = fresh.ConsistencyProof(old_cp.size, fresh.size());
  ASSERT_TRUE(proof.ok());
  Status v = VerifyMerkleConsistency(old_cp.size, fresh.size(), *proof, old_cp.root, *fresh.Root(fresh.size()));
  EXPECT_EQ(v.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.message().find("rewritten"), std::string::npos) << v.message();
}

TEST(ProofBundleTest, AGenuineBundleVerifiesOfflineAndIsSmall) {
  Signed s;
  ProofBundle b = s.Bundle(s.a.job_hex);
  EXPECT_EQ(b.result_commit, s.a.built.commit_id);
  std::string text = EncodeProofBundle(b);
  EXPECT_LT(text.size(), 64u * 1024) << "bundle of " << text.size() << " bytes";
  BundleReport r = Check(b, s.Options());
  EXPECT_TRUE(r.ok()) << FailedCheck(r) << ": " << (r.first_failure() ? r.first_failure()->detail : "");
  EXPECT_EQ(r.result_status, "succeeded");
  EXPECT_EQ(r.worker_id, s.f.w1.public_key().WorkerId());
  std::set<std::string> names;
  for (const auto& c : r.checks) names.insert(c.name);
  for (const char* want : {"checkpoint", "witness_quorum", "inclusion_job", "inclusion_result", "inclusion_head",
                           "log_entry_job", "log_entry_result", "log_entry_head", "job_record", "job_id",
                           "attest_sig", "commit_signature", "tree_matches_outputs", "result_parent_job"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  // A failed job's final result is proved the same way.
  EXPECT_TRUE(Check(s.Bundle(s.b.job_hex), s.Options()).ok());
  // A job without a result has no bundle.
  auto none = BuildProofBundle(*s.ledger, *s.tree, s.pending, s.checkpoint);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ProofBundleTest, AlteredResultIsRefused) {
  Signed s;
  ProofBundle b = s.Bundle(s.a.job_hex);
  // The worker's stdout, changed after the fact.
  std::string stdout_id;
  for (const auto& o : b.objects) {
    if (o.id != b.result_commit) continue;
    auto tree = ParseRawCommit(o.data, o.id)->tree;
    for (const auto& t : b.objects) {
      if (t.id != tree) continue;
      auto entries = ParseTree(t.data, t.id);
      ASSERT_TRUE(entries.ok());
      for (const auto& e : *entries) {
        if (e.name == "stdout") stdout_id = e.id;
      }
    }
  }
  ASSERT_FALSE(stdout_id.empty());
  for (auto& o : b.objects) {
    if (o.id == stdout_id) o.data += "tampered\n";
  }
  BundleReport r = Check(b, s.Options());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(FailedCheck(r), "tree");  // the stdout the tree names is not the one in the bundle
  EXPECT_NE(r.first_failure()->detail.find(stdout_id), std::string::npos) << r.first_failure()->detail;
  // Another result commit (the other job's) put in its place.
  ProofBundle swapped = s.Bundle(s.a.job_hex);
  swapped.result_commit = s.b.built.commit_id;
  for (const auto& o : s.Bundle(s.b.job_hex).objects) swapped.objects.push_back(o);
  BundleReport r2 = Check(swapped, s.Options());
  ASSERT_EQ(FailedCheck(r2), "log_entry_result");
  EXPECT_NE(r2.first_failure()->detail.find("does not record the result"), std::string::npos);
}

TEST(ProofBundleTest, InclusionProofOfAnotherLeafIsRefused) {
  Signed s;
  ProofBundle b = s.Bundle(s.a.job_hex);
  ProofBundleEntry* job = nullptr;
  ProofBundleEntry* res = nullptr;
  for (auto& e : b.entries) {
    if (e.role == "job") job = &e;
    if (e.role == "result") res = &e;
  }
  ASSERT_TRUE(job && res);
  ASSERT_NE(job->index, res->index);
  ProofBundle wrong = b;
  for (auto& e : wrong.entries) {
    if (e.role == "result") e.proof = job->proof;  // the job entry's path for the result's leaf
  }
  BundleReport r = Check(wrong, s.Options());
  EXPECT_EQ(FailedCheck(r), "inclusion_result");
  EXPECT_NE(r.first_failure()->detail.find("signed root"), std::string::npos) << r.first_failure()->detail;
  ProofBundle moved = b;
  for (auto& e : moved.entries) {
    if (e.role == "result") e.index = job->index;  // claims to be another entry
  }
  EXPECT_EQ(FailedCheck(Check(moved, s.Options())), "inclusion_result");
}

TEST(ProofBundleTest, CheckpointSignedByAnotherKeyIsRefused) {
  Signed s;
  s.checkpoint = s.Sign(s.f.w2);  // a key that is not the ledger's
  ProofBundle b = s.Bundle(s.a.job_hex);
  BundleReport r = Check(b, s.Options());
  EXPECT_EQ(FailedCheck(r), "checkpoint");
  EXPECT_NE(r.first_failure()->detail.find("not signed by the ledger key"), std::string::npos)
      << r.first_failure()->detail;
}

TEST(ProofBundleTest, CosignaturesBelowTheQuorumAreRefused) {
  Signed s;
  auto k1 = *GenerateEd25519Key("witness1");
  auto k2 = *GenerateEd25519Key("witness2");
  auto v1 = MakeNoteVerifierKey("witness.example/1", kNoteTypeCosignatureV1, k1.public_key());
  auto v2 = MakeNoteVerifierKey("witness.example/2", kNoteTypeCosignatureV1, k2.public_key());
  Note n = *ParseNote(s.checkpoint);
  n.sigs.push_back(CosignNoteText(v1.name, k1, n.text, 1'800'000'000));
  s.checkpoint = FormatNote(n);
  ProofBundle b = s.Bundle(s.a.job_hex);
  BundleVerifyOptions o = s.Options();
  o.witnesses = {v1, v2};
  o.min_witnesses = 1;
  BundleReport one = Check(b, o);
  EXPECT_TRUE(one.ok()) << FailedCheck(one);
  EXPECT_EQ(one.cosigners, std::vector<std::string>{v1.name});
  o.min_witnesses = 2;
  BundleReport r = Check(b, o);
  EXPECT_EQ(FailedCheck(r), "witness_quorum");
  EXPECT_NE(r.first_failure()->detail.find("1 of the given witnesses cosigned"), std::string::npos)
      << r.first_failure()->detail;
}

TEST(ProofBundleTest, ParsingIsStrict) {
  Signed s;
  std::string good = EncodeProofBundle(s.Bundle(s.a.job_hex));
  EXPECT_TRUE(ParseProofBundle(good).ok());
  EXPECT_FALSE(ParseProofBundle("{}").ok());
  EXPECT_FALSE(ParseProofBundle("[1]").ok());
  auto j = nlohmann::json::parse(good);
  auto extra = j;
  extra["x"] = 1;
  EXPECT_FALSE(ParseProofBundle(extra.dump()).ok());
  auto dup = j;
  dup["entries"].push_back(dup["entries"][0]);
  EXPECT_FALSE(ParseProofBundle(dup.dump()).ok());
  auto fmt = j;
  fmt["bundle"] = "gatos-proof-bundle/v2";
  EXPECT_FALSE(ParseProofBundle(fmt.dump()).ok());
}

}  // namespace
}  // namespace gatos::testing
