// gatos checkpoint / proof / verify --bundle / witness --checkpoint as a user
// runs them, over real ledgers built in-process, and the independent Python
// verifier (tests/audit/tlog_py/gatos_tlog.py) reading what the CLI wrote.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "audit_fixture.h"
#include "gatos/audit/log_tree.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/sys/file.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

RunResult Gatos(const std::vector<std::string>& args) {
  const char* bin = std::getenv("GATOS_TEST_GATOS_BIN");
  std::vector<std::string> argv = {bin && *bin ? bin : BinaryPath("gatos")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

// Debian's interpreter: python3-cryptography imports only there.
RunResult Python(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   std::string(GATOS_SOURCE_DIR) + "/tests/audit/tlog_py/gatos_tlog.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

bool Contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

struct ProofLedger {
  LedgerFixture f;
  JobRun a = RunJob(f, f.w1, {.yaml = Yaml(1), .renewals = 1});
  JobRun b = RunJob(f, f.w2, {.yaml = Yaml(2), .status = "failed"});
  std::string pending = SubmitPair(f, Yaml(3)).second;
  std::string ledger_pub = f.dir.Join("ledger.pub");

  ProofLedger() {
    f.Close();
    // Where gatosd keeps the ledger key (LoadLedgerKey).
    EXPECT_TRUE(WriteKeyPair(f.path + "/gatos/ledger_key", f.ledger_key).ok());
    WriteFile(ledger_pub, f.ledger_key.public_key().ToOpenSsh() + "\n");
  }
  std::string Path(const std::string& name) { return f.dir.Join(name); }
};

TEST(ProofCliTest, ProofOfAResultVerifiesOfflineWithGatosAndWithAnIndependentVerifier) {
  ProofLedger t;
  RunResult cp = Gatos({"checkpoint", "--ledger", t.f.path});
  ASSERT_EQ(cp.exit_code, 0) << cp.out << cp.err;
  EXPECT_TRUE(Contains(cp.out, "gatos/ledger/")) << cp.out;
  EXPECT_TRUE(Contains(cp.out, "\n\n\xE2\x80\x94 gatos/ledger/")) << cp.out;

  std::string bundle = t.Path("a.bundle");
  RunResult p = Gatos({"proof", "blake3:" + t.a.job_hex, "--repo", t.f.path, "-o", bundle});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  auto size = ReadFileToString(bundle, 1 << 20);
  ASSERT_TRUE(size.ok());
  EXPECT_LT(size->size(), 64u * 1024);

  RunResult v = Gatos({"verify", "--bundle", bundle, "--ledger-key", t.ledger_pub});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_TRUE(Contains(v.out, "ok blake3:" + t.a.job_hex + " succeeded by " + t.f.w1.public_key().WorkerId()))
      << v.out;
  RunResult vj = Gatos({"verify", "--bundle", bundle, "--ledger-key", t.ledger_pub, "--json"});
  ASSERT_EQ(vj.exit_code, 0) << vj.out;
  json j = json::parse(vj.out);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["status"], "succeeded");

  RunResult py = Python({"bundle", bundle, "--ledger-key", t.ledger_pub});
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_TRUE(Contains(py.out, "ok blake3:" + t.a.job_hex + " succeeded")) << py.out;
  RunResult pt = Python({"tree", "--repo", t.f.path, "--checkpoint", t.f.path + "/gatos/tlog/checkpoint",
                         "--ledger-key", t.ledger_pub});
  EXPECT_EQ(pt.exit_code, 0) << pt.out << pt.err;

  // A job without a result has no bundle, and says why.
  RunResult none = Gatos({"proof", t.pending, "--repo", t.f.path});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(Contains(none.err, "has no final result")) << none.err;
  // A wrong ledger key is refused by both verifiers.
  std::string other = t.Path("other.pub");
  WriteFile(other, t.f.w2.public_key().ToOpenSsh() + "\n");
  RunResult wrong = Gatos({"verify", "--bundle", bundle, "--ledger-key", other});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_TRUE(Contains(wrong.out, "FAIL " + bundle + " checkpoint: ")) << wrong.out;
  RunResult pywrong = Python({"bundle", bundle, "--ledger-key", other});
  EXPECT_EQ(pywrong.exit_code, 1);
  EXPECT_TRUE(Contains(pywrong.out, "FAIL checkpoint")) << pywrong.out;
}

TEST(ProofCliTest, WitnessesCosignFromTheirOwnCloneAndTheQuorumIsEnforced) {
  ProofLedger t;
  ASSERT_EQ(Gatos({"checkpoint", "--ledger", t.f.path}).exit_code, 0);
  std::string clone = t.Path("witness.git");
  ASSERT_EQ(gatos::testing::Run({"git", "clone", "-q", "--mirror", t.f.path, clone}).exit_code, 0);
  std::string wkey = t.Path("witness_key");
  ASSERT_TRUE(WriteKeyPair(wkey, *GenerateEd25519Key("witness")).ok());
  std::string state = t.Path("witness.state");
  RunResult w = Gatos({"witness", "--checkpoint", t.f.path + "/gatos/tlog/checkpoint", "--repo", clone, "--key", wkey,
                       "--ledger-key", t.ledger_pub, "--name", "witness.example/w1", "--state", state, "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  json wj = json::parse(w.out);
  std::string vkey = wj["witness_vkey"];
  EXPECT_EQ(vkey.rfind("witness.example/w1+", 0), 0u) << vkey;
  std::string cosigned = t.Path("cosigned.note");
  WriteFile(cosigned, wj["checkpoint"].get<std::string>());
  RunResult add = Gatos({"checkpoint", "--ledger", t.f.path, "--add-cosignatures", cosigned});
  ASSERT_EQ(add.exit_code, 0) << add.err;

  std::string bundle = t.Path("a.bundle");
  ASSERT_EQ(Gatos({"proof", t.a.job_hex, "--repo", t.f.path, "-o", bundle}).exit_code, 0);
  RunResult ok = Gatos({"verify", "--bundle", bundle, "--ledger-key", t.ledger_pub, "--witness-key", vkey,
                        "--min-witnesses", "1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_TRUE(Contains(ok.out, "1 witness cosignature(s)")) << ok.out;
  RunResult py = Python({"bundle", bundle, "--ledger-key", t.ledger_pub, "--witness-key", vkey, "--min-witnesses", "1"});
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;

  // A second witness that never cosigned: below a quorum of two.
  auto k2 = *GenerateEd25519Key("w2");
  std::string vkey2 = FormatNoteVerifierKey(MakeNoteVerifierKey("witness.example/w2", kNoteTypeCosignatureV1, k2.public_key()));
  RunResult low = Gatos({"verify", "--bundle", bundle, "--ledger-key", t.ledger_pub, "--witness-key", vkey,
                         "--witness-key", vkey2, "--min-witnesses", "2"});
  EXPECT_EQ(low.exit_code, 1);
  EXPECT_TRUE(Contains(low.out, "witness_quorum: 1 of the given witnesses cosigned")) << low.out;
  RunResult pylow = Python({"bundle", bundle, "--ledger-key", t.ledger_pub, "--witness-key", vkey, "--witness-key",
                            vkey2, "--min-witnesses", "2"});
  EXPECT_EQ(pylow.exit_code, 1);
  EXPECT_TRUE(Contains(pylow.out, "FAIL witness_quorum")) << pylow.out;
}

TEST(ProofCliTest, AWitnessRefusesACheckpointInconsistentWithTheOneItCosignedBefore) {
  ProofLedger t;
  ASSERT_EQ(Gatos({"checkpoint", "--ledger", t.f.path}).exit_code, 0);
  std::string clone = t.Path("witness.git");
  ASSERT_EQ(gatos::testing::Run({"git", "clone", "-q", "--mirror", t.f.path, clone}).exit_code, 0);
  std::string wkey = t.Path("witness_key");
  ASSERT_TRUE(WriteKeyPair(wkey, *GenerateEd25519Key("witness")).ok());
  std::string state = t.Path("witness.state");
  auto cosign = [&](const std::string& checkpoint) {
    return Gatos({"witness", "--checkpoint", checkpoint, "--repo", clone, "--key", wkey, "--ledger-key",
                  t.ledger_pub, "--state", state});
  };
  ASSERT_EQ(cosign(t.f.path + "/gatos/tlog/checkpoint").exit_code, 0);
  // The ledger (it holds its key) signs a checkpoint of a different history
  // of the same size and more: the witness's clone refuses it.
  Checkpoint forged = *ParseCheckpointText(ParseNote(*ReadFileToString(t.f.path + "/gatos/tlog/checkpoint", 1 << 20))->text);
  forged.size += 1;
  forged.root = MerkleLeafHash("another history");
  std::string forged_path = t.Path("forged.note");
  WriteFile(forged_path, SignCheckpoint(forged, t.f.ledger_key));
  // Its clone is fetched up to the forged size's worth of entries.
  t.f.writer.reset();
  RunJob(t.f, t.f.w1, {.yaml = Yaml(9)});
  t.f.Close();
  ASSERT_EQ(gatos::testing::Run({"git", "-C", clone, "fetch", "-q", t.f.path, "+refs/gatos/*:refs/gatos/*"}).exit_code, 0);
  RunResult r = cosign(forged_path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "different history")) << r.err;
  // An honest newer checkpoint is consistent with the old one and is cosigned.
  ASSERT_EQ(Gatos({"checkpoint", "--ledger", t.f.path}).exit_code, 0);
  RunResult honest = cosign(t.f.path + "/gatos/tlog/checkpoint");
  EXPECT_EQ(honest.exit_code, 0) << honest.err;
  // And a true but older checkpoint after it is refused (a rollback).
  auto tree = LogTree::Open(LogTree::DirFor(clone));
  ASSERT_TRUE(tree.ok());
  Checkpoint old{forged.origin, 1, *tree->Root(1), {}};
  WriteFile(forged_path, SignCheckpoint(old, t.f.ledger_key));
  RunResult older = cosign(forged_path);
  EXPECT_EQ(older.exit_code, 1);
  EXPECT_TRUE(Contains(older.err, "older than the one seen before")) << older.err;
}

TEST(ProofCliTest, VerifyStateWithCheckpointsCatchesARewrittenLog) {
  ProofLedger t;
  ASSERT_EQ(Gatos({"checkpoint", "--ledger", t.f.path}).exit_code, 0);
  std::string cp1 = t.Path("cp1.note");
  WriteFile(cp1, *ReadFileToString(t.f.path + "/gatos/tlog/checkpoint", 1 << 20));
  std::string clone = t.Path("audit.git");
  ASSERT_EQ(gatos::testing::Run({"git", "clone", "-q", "--mirror", t.f.path, clone}).exit_code, 0);
  std::string state = t.Path("audit.state");
  RunResult first = Gatos({"verify", "--repo", clone, "--state", state, "--checkpoint", cp1,
                           "--ledger-key", t.ledger_pub});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_TRUE(ReadFileToString(state + ".checkpoint", 1 << 20).ok());

  // The ledger's host drops its last batch (the pending job's submission)
  // with its ref, writes another history, then signs a checkpoint of it (it
  // holds the key): a history that replays cleanly on its own.
  auto l = t.f.Open();
  std::string head = *l->ResolveRef(kLogRef);
  std::string back = l->ReadCommit(head)->parents[0];
  std::string job_ref = JobRef(t.pending, "job");
  ASSERT_TRUE(l->UpdateRefs({{std::string(kLogRef), head, back}, {job_ref, *l->ResolveRef(job_ref), ""}},
                            "rewrite")
                  .ok());
  t.f.writer_options.wal = false;
  RunJob(t.f, t.f.w2, {.yaml = Yaml(50)});
  RunJob(t.f, t.f.w2, {.yaml = Yaml(51)});
  t.f.Close();
  TempDir forger;
  auto tree = *LogTree::Open(forger.Join("tlog"));
  auto fl = t.f.Open();
  ASSERT_TRUE(tree.Update(*fl).ok());
  Checkpoint cp{LedgerOrigin(tree.Entry(0)->first), tree.size(), *tree.Root(tree.size()), {}};
  std::string cp2 = t.Path("cp2.note");
  WriteFile(cp2, SignCheckpoint(cp, t.f.ledger_key));

  // An auditor that kept only the checkpoint (a fresh clone, a fresh state)
  // finds that the new history does not extend the one it saw.
  std::string clone2 = t.Path("audit2.git");
  ASSERT_EQ(gatos::testing::Run({"git", "clone", "-q", "--mirror", t.f.path, clone2}).exit_code, 0);
  std::string state2 = t.Path("audit2.state");
  WriteFile(state2 + ".checkpoint", *ReadFileToString(state + ".checkpoint", 1 << 20));
  RunResult r = Gatos({"verify", "--repo", clone2, "--state", state2, "--checkpoint", cp2,
                       "--ledger-key", t.ledger_pub});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "not consistent with the checkpoint seen before")) << r.out;
  EXPECT_TRUE(Contains(r.out, "the log was rewritten")) << r.out;
  EXPECT_FALSE(ReadFileToString(state2, 1 << 20).ok());  // nothing recorded
}

}  // namespace
}  // namespace gatos::testing
