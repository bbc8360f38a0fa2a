// The auditor's workflow with stock git: a mirror kept with `git fetch`,
// `gatos verify --state` (incremental, rollback-proof), `gatos witness`, and
// the witness pushed back through the ledger's proc-receive hook, which
// checks it and records it in the log. Real git, real gatosd hooks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "gatos/audit/log_audit.h"
#include "gatos/crypto/keys.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/refs.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

bool Has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class WitnessCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = {{"HOME", dir_.path()},          {"GIT_CONFIG_NOSYSTEM", "1"},
            {"GIT_AUTHOR_NAME", "Alice"},   {"GIT_AUTHOR_EMAIL", "alice@example.com"},
            {"GIT_COMMITTER_NAME", "Alice"}, {"GIT_COMMITTER_EMAIL", "alice@example.com"}};
    ledger_ = dir_.Join("ledger.git");
    mirror_ = dir_.Join("mirror.git");
    ASSERT_EQ(Cmd({BinaryPath("gatosd"), "init", ledger_}).exit_code, 0);
    ASSERT_EQ(Cmd({BinaryPath("gatos"), "keygen", "-f", dir_.Join("alice")}).exit_code, 0);
    ASSERT_EQ(Cmd({BinaryPath("gatos"), "policy", "allow-submitter", "--ledger", ledger_, dir_.Join("alice.pub")})
                  .exit_code,
              0);
    work_ = dir_.Join("work");
    ASSERT_EQ(Cmd({"git", "init", "-q", work_}).exit_code, 0);
    Git({"config", "gpg.format", "ssh"});
    Git({"config", "user.signingkey", dir_.Join("alice")});
    auditor_ = *GenerateEd25519Key("auditor");
    ASSERT_TRUE(WriteKeyPair(dir_.Join("auditor"), auditor_).ok());
    state_ = dir_.Join("audit.state");
  }

  RunResult Cmd(const std::vector<std::string>& argv, const std::string& cwd = "") {
    RunOptions o;
    o.env = env_;
    o.cwd = cwd;
    return gatos::testing::Run(argv, o);
  }
  RunResult Git(std::vector<std::string> args) {
    args.insert(args.begin(), "git");
    return Cmd(args, work_);
  }
  RunResult Gatos(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("gatos"));
    return Cmd(args);
  }
  // Submits n signed jobs with stock git push.
  void PushJobs(int from, int n) {
    for (int i = from; i < from + n; ++i) {
      WriteFile(work_ + "/job.yaml", "command: [\"/bin/echo\", \"" + std::to_string(i) + "\"]\ntimeout: 30\n");
      Git({"checkout", "-q", "--orphan", "b" + std::to_string(i)});
      Git({"add", "job.yaml"});
      ASSERT_EQ(Git({"commit", "-q", "-S", "-m", "job " + std::to_string(i)}).exit_code, 0);
      std::string id = Cmd({BinaryPath("gatos"), "job", "id", work_ + "/job.yaml"}).out;
      id.pop_back();
      // The Job-Id trailer the ledger requires.
      ASSERT_EQ(Git({"commit", "-q", "-S", "--amend", "-m", "job " + std::to_string(i) + "\n\nJob-Id: " + id}).exit_code,
                0);
      RunResult p = Git({"push", "-q", LedgerPushPath(ledger_), "HEAD:refs/gatos/submit/j" + std::to_string(i)});
      ASSERT_EQ(p.exit_code, 0) << p.err;
    }
  }

  TempDir dir_;
  std::map<std::string, std::string> env_;
  std::string ledger_, mirror_, work_, state_;
  Ed25519PrivateKey auditor_ = *GenerateEd25519Key("placeholder");
};

TEST_F(WitnessCliTest, MirrorStateWitnessPushAndFetch) {
  PushJobs(0, 3);
  ASSERT_EQ(Cmd({"git", "clone", "-q", "--mirror", ledger_, mirror_}).exit_code, 0);

  // First run: the whole log, and the state file is written.
  RunResult first = Gatos({"verify", "--repo", mirror_, "--state", state_, "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  json j = json::parse(first.out);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["incremental"], false);
  EXPECT_EQ(j["by_kind"]["submit"], 3);
  int64_t seq = j["seq"];
  std::string root = j["ledger"];

  // More jobs; the mirror follows with git fetch; only they are replayed.
  PushJobs(3, 2);
  ASSERT_EQ(Cmd({"git", "fetch", "-q"}, mirror_).exit_code, 0);
  RunResult second = Gatos({"verify", "--repo", mirror_, "--state", state_, "--json"});
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  j = json::parse(second.out);
  EXPECT_EQ(j["incremental"], true);
  EXPECT_EQ(j["from_seq"], seq + 1);
  EXPECT_EQ(j["transitions"], 2);
  EXPECT_EQ(j["jobs_touched"], 2);
  EXPECT_EQ(j["ledger"], root);

  // The witness: signed, stored in the mirror, pushed back through the hook.
  RunResult w = Gatos({"witness", "--repo", mirror_, "--key", dir_.Join("auditor"), "--state", state_, "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  json wj = json::parse(w.out);
  std::string hex = auditor_.public_key().Hex();
  EXPECT_EQ(wj["ref"], WitnessPushRef(hex));
  EXPECT_EQ(wj["seq"], seq + 2);
  std::string witness = wj["witness"];
  RunResult verify_commit = Cmd({"git", "cat-file", "-p", witness}, mirror_);
  EXPECT_TRUE(Has(verify_commit.out, "Witness-Log-Seq: " + std::to_string(seq + 2))) << verify_commit.out;
  RunResult push = Cmd({"git", "push", LedgerPushPath(ledger_), WitnessPushRef(hex)}, mirror_);
  ASSERT_EQ(push.exit_code, 0) << push.err;
  EXPECT_TRUE(Has(push.err, "gatos: witness " + witness.substr(0, 12) + " recorded at " + WitnessRef(hex))) << push.err;
  // Recorded by the ledger, in its log, under its own ref; nothing at the push target.
  RunResult ref = Cmd({"git", "rev-parse", WitnessRef(hex)}, ledger_);
  EXPECT_EQ(ref.out, witness + "\n");
  EXPECT_NE(Cmd({"git", "rev-parse", "--verify", "-q", WitnessPushRef(hex)}, ledger_).exit_code, 0);
  RunResult whole = Gatos({"verify", "--repo", ledger_, "--all", "--log-only", "--witnesses"});
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_TRUE(Has(whole.out, "ok witness " + WitnessRef(hex))) << whole.out;

  // The mirror fetches the witness batch: one transition, kind witness.
  ASSERT_EQ(Cmd({"git", "fetch", "-q"}, mirror_).exit_code, 0);
  RunResult third = Gatos({"verify", "--repo", mirror_, "--state", state_, "--json", "--witnesses"});
  ASSERT_EQ(third.exit_code, 0) << third.out << third.err;
  j = json::parse(third.out);
  EXPECT_EQ(j["transitions"], 1);
  EXPECT_EQ(j["by_kind"]["witness"], 1);

  // A witness of a commit this ledger's log does not have at that sequence
  // is refused by the hook, with the reason.
  WitnessStatement lie{root, seq, std::string(40, 'e'), "", 1'800'000'000'000};
  GitObject bad = *BuildWitnessCommit(lie, auditor_);
  std::string path = dir_.Join("bad.commit");
  WriteFile(path, bad.data);
  RunResult h = Cmd({"git", "hash-object", "-t", "commit", "-w", path}, mirror_);
  ASSERT_EQ(h.out, bad.id + "\n") << h.err;
  RunResult refused = Cmd({"git", "push", LedgerPushPath(ledger_), bad.id + ":" + WitnessPushRef(hex)}, mirror_);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(Has(refused.err, "but this ledger's log has")) << refused.err;
  // Pushed under another key's name: refused by the pre-receive check.
  Ed25519PrivateKey other = *GenerateEd25519Key("other");
  RunResult wrong = Cmd({"git", "push", LedgerPushPath(ledger_), witness + ":" + WitnessPushRef(other.public_key().Hex())}, mirror_);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_TRUE(Has(wrong.err, "the witness is signed by ed25519:" + hex)) << wrong.err;

  // The ledger rewinds its log: the mirror's next fetch is caught.
  RunResult head = Cmd({"git", "rev-parse", "refs/gatos/log~2"}, ledger_);
  ASSERT_EQ(Cmd({"git", "update-ref", "refs/gatos/log", head.out.substr(0, 40)}, ledger_).exit_code, 0);
  ASSERT_EQ(Cmd({"git", "fetch", "-q"}, mirror_).exit_code, 0);
  RunResult rolled = Gatos({"verify", "--repo", mirror_, "--state", state_});
  EXPECT_EQ(rolled.exit_code, 1) << rolled.out;
  EXPECT_TRUE(Has(rolled.out, "FAIL log log_rewritten")) << rolled.out;
  EXPECT_TRUE(Has(rolled.out, "rolled back")) << rolled.out;
  // The witness proves it too, without the state file.
  RunResult proof = Gatos({"verify", "--repo", mirror_, "--all", "--log-only", "--witnesses"});
  EXPECT_EQ(proof.exit_code, 1);
  EXPECT_TRUE(Has(proof.out, "FAIL log forked_history")) << proof.out;
}

// `gatos mirror` records the log heads around its fetch; `gatos verify` then
// lets the refs that the batches of that window moved show any value they
// held in it (a fetch is not a snapshot), and compares every other ref
// exactly. A torn fetch is made here by hand: the mirror loses the refs of
// the last batch, as a fetch that read them just before gatosd wrote them.
TEST_F(WitnessCliTest, MirrorSettlesOnlyTheRefsOfBatchesThatLandedDuringItsFetch) {
  PushJobs(0, 2);
  RunResult m = Gatos({"mirror", ledger_, mirror_, "--json"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  json j = json::parse(m.out);
  std::string head = Cmd({"git", "-C", ledger_, "rev-parse", "refs/gatos/log"}).out;
  head.pop_back();
  EXPECT_EQ(j["log_after"], head);
  EXPECT_EQ(j["seq_before"], j["seq_after"]) << "nothing landed while fetching";
  auto rec = ParseMirrorRecord(ReadFile(mirror_ + "/gatos-mirror"));
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->log_after, head);

  RunResult clean = Gatos({"verify", "--repo", mirror_, "--all"});
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_FALSE(Has(clean.out, "settling")) << clean.out;

  // The job refs the last batch created, and one an earlier batch created.
  std::string batch = Cmd({"git", "-C", mirror_, "show", "refs/gatos/log:batch"}).out;
  std::string last_ref, earlier_ref;
  for (const std::string& line : Lines(Cmd({"git", "-C", mirror_, "for-each-ref", "--format=%(refname)",
                                             "refs/gatos/jobs/"})
                                           .out)) {
    if (line.size() < 5 || line.substr(line.size() - 4) != "/job") continue;
    (Has(batch, line) ? last_ref : earlier_ref) = line;
  }
  ASSERT_FALSE(last_ref.empty()) << batch;
  ASSERT_FALSE(earlier_ref.empty()) << batch;
  std::string earlier_commit = Cmd({"git", "-C", mirror_, "rev-parse", earlier_ref}).out;
  earlier_commit.pop_back();

  // The last batch's ref not fetched yet: settling, not a failure.
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "update-ref", "-d", last_ref}).exit_code, 0);
  RunResult torn = Gatos({"verify", "--repo", mirror_, "--all", "--log-only"});
  EXPECT_EQ(torn.exit_code, 0) << torn.out << torn.err;
  EXPECT_TRUE(Has(torn.out, "(1 settling: moved by batches after sequence " + std::to_string(rec->seq_before - 1)))
      << torn.out;
  RunResult torn_json = Gatos({"verify", "--repo", mirror_, "--all", "--log-only", "--json"});
  EXPECT_EQ(json::parse(torn_json.out)["refs_settling"], 1) << torn_json.out;

  // A value the ref never held in the window is a failure, window or not.
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "update-ref", last_ref, earlier_commit}).exit_code, 0);
  RunResult moved = Gatos({"verify", "--repo", mirror_, "--all", "--log-only"});
  EXPECT_EQ(moved.exit_code, 1) << moved.out;
  EXPECT_TRUE(Has(moved.out, "FAIL log ref_moved")) << moved.out;
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "update-ref", "-d", last_ref}).exit_code, 0);

  // A ref of a batch before the window is compared exactly.
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "update-ref", "-d", earlier_ref}).exit_code, 0);
  RunResult old = Gatos({"verify", "--repo", mirror_, "--all", "--log-only"});
  EXPECT_EQ(old.exit_code, 1) << old.out;
  EXPECT_TRUE(Has(old.out, "FAIL log ref_missing: " + earlier_ref)) << old.out;

  // Without the record (a mirror kept with plain git fetch) the torn ref
  // fails too, and verify says how to fetch a consistent mirror.
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "update-ref", earlier_ref, earlier_commit}).exit_code, 0);
  ASSERT_EQ(std::rename((mirror_ + "/gatos-mirror").c_str(), (mirror_ + "/gatos-mirror.off").c_str()), 0);
  RunResult plain = Gatos({"verify", "--repo", mirror_, "--all", "--log-only"});
  EXPECT_EQ(plain.exit_code, 1) << plain.out;
  EXPECT_TRUE(Has(plain.out, "FAIL log ref_missing: " + last_ref)) << plain.out;
  EXPECT_TRUE(Has(plain.out, "gatos mirror")) << plain.out;

  // A record of another log head (the log was fetched since) is void. The
  // log fetched just now is ahead of the refs: a plain fetch's torn copy,
  // "fetch again" (exit 3), not a tamper finding.
  ASSERT_EQ(std::rename((mirror_ + "/gatos-mirror.off").c_str(), (mirror_ + "/gatos-mirror").c_str()), 0);
  PushJobs(2, 1);
  ASSERT_EQ(Cmd({"git", "-C", mirror_, "fetch", "-q", ledger_, "+refs/gatos/log:refs/gatos/log"}).exit_code, 0);
  RunResult stale = Gatos({"verify", "--repo", mirror_, "--all", "--log-only"});
  EXPECT_EQ(stale.exit_code, 3) << stale.out << stale.err;
  EXPECT_TRUE(Has(stale.err, "note: ")) << stale.err;
  EXPECT_TRUE(Has(stale.err, "mirror is behind its refs: fetch again")) << stale.err;
  EXPECT_FALSE(Has(stale.out, "FAIL")) << stale.out;

  // And mirroring again makes it whole.
  RunResult again = Gatos({"mirror", ledger_, mirror_});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(Has(again.out, "mirrored ")) << again.out;
  RunResult whole = Gatos({"verify", "--repo", mirror_, "--all"});
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_TRUE(Has(whole.out, "3 jobs: 0 results verified, 3 without a result, 0 failed")) << whole.out;

  // Not a ledger: a clear error, and no directory left behind.
  RunResult bad = Gatos({"mirror", dir_.Join("nowhere"), dir_.Join("m2")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Has(bad.err, "is it a gatos ledger")) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("m2")));
}

TEST_F(WitnessCliTest, UsageErrors) {
  RunResult no_key = Gatos({"witness", "--repo", ledger_});
  EXPECT_EQ(no_key.exit_code, 2);
  EXPECT_TRUE(Has(no_key.err, "--key KEY is required")) << no_key.err;
  WriteFile(state_, "not a state file\n");
  RunResult bad_state = Gatos({"verify", "--repo", ledger_, "--state", state_});
  EXPECT_EQ(bad_state.exit_code, 2);
  EXPECT_TRUE(Has(bad_state.err, "--state " + state_ + ": line 1")) << bad_state.err;
  RunResult named = Gatos({"verify", "--repo", ledger_, "--log-only", std::string(64, 'a')});
  EXPECT_EQ(named.exit_code, 2);
}

}  // namespace
}  // namespace gatos::testing
