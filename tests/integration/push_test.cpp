// Jobs submitted with stock `git push` into a ledger made by `gatosd init`,
// through its front door (<ledger>/push): the hooks accept good jobs
// (recorded in the ledger's log; the push itself creates no ref) and refuse
// bad pushes with a visible reason, leaving every ref as it was. No gatosd
// runs here: the hook takes the writer lock itself.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/writer.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

const char kJob[] = "command: [\"/bin/echo\", \"hi\"]\ntimeout: 30\n";

class PushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = {{"HOME", dir_.path()}, {"GIT_CONFIG_NOSYSTEM", "1"},
            {"GIT_AUTHOR_NAME", "Alice"}, {"GIT_AUTHOR_EMAIL", "alice@example.com"},
            {"GIT_COMMITTER_NAME", "Alice"}, {"GIT_COMMITTER_EMAIL", "alice@example.com"}};
    ledger_ = dir_.Join("ledger.git");
    ASSERT_EQ(Cmd({BinaryPath("gatosd"), "init", ledger_}).exit_code, 0);
    ASSERT_EQ(Cmd({BinaryPath("gatos"), "keygen", "-f", dir_.Join("alice")}).exit_code, 0);
    ASSERT_EQ(Cmd({BinaryPath("gatos"), "policy", "allow-submitter", "--ledger", ledger_,
                   dir_.Join("alice.pub")}).exit_code, 0);
    work_ = dir_.Join("work");
    ASSERT_EQ(Cmd({"git", "init", "-q", work_}).exit_code, 0);
    Git({"config", "gpg.format", "ssh"});
    Git({"config", "user.signingkey", dir_.Join("alice")});
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
  std::string JobId(const std::string& yaml) {
    WriteFile(dir_.Join("tmp.yaml"), yaml);
    std::string out = Cmd({BinaryPath("gatos"), "job", "id", dir_.Join("tmp.yaml")}).out;
    return out.substr(0, out.size() - 1);
  }
  // Commits job.yaml on an orphan branch; returns the commit id.
  std::string Commit(const std::string& yaml, bool sign = true, std::string trailer = "") {
    WriteFile(work_ + "/job.yaml", yaml);
    Git({"checkout", "-q", "--orphan", "b" + std::to_string(n_++)});
    Git({"add", "job.yaml"});
    if (trailer.empty()) trailer = "Job-Id: " + JobId(yaml);
    std::vector<std::string> args = {"commit", "-q", "-m", "a job", "-m", trailer};
    if (sign) args.push_back("-S");
    RunResult r = Git(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Git({"rev-parse", "HEAD"}).out.substr(0, 40);
  }
  RunResult Push(const std::string& refspec) { return Git({"push", LedgerPushPath(ledger_), refspec}); }
  // Straight to the ledger, not through its front door.
  RunResult PushToLedger(const std::string& refspec) { return Git({"push", ledger_, refspec}); }
  std::string FrontDoorRefs() {
    return Cmd({"git", "--git-dir", LedgerPushPath(ledger_), "for-each-ref", "--format=%(refname)"}).out;
  }
  std::string LedgerRefs() {
    return Cmd({"git", "--git-dir", ledger_, "for-each-ref", "--format=%(refname) %(objectname)"}).out;
  }

  TempDir dir_;
  std::map<std::string, std::string> env_;
  std::string ledger_, work_;
  int n_ = 0;
};

TEST_F(PushTest, SignedJobPushedToSubmitRefBecomesAJobAndRePushIsANoOp) {
  std::string id = JobId(kJob);
  std::string hex = id.substr(7);
  std::string c1 = Commit(kJob);
  RunResult r = Push("HEAD:refs/gatos/submit/hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("remote: gatos: accepted job " + id), std::string::npos) << r.err;
  std::string refs = LedgerRefs();
  EXPECT_NE(refs.find("refs/gatos/jobs/" + hex + "/job " + c1), std::string::npos) << refs;
  EXPECT_EQ(refs.find("refs/gatos/submit/"), std::string::npos) << refs;
  // The same manifest again, in a new commit: accepted as a no-op.
  Commit(kJob);
  r = Push("HEAD:refs/gatos/submit/hello-again");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("job " + id + " already exists; nothing to do"), std::string::npos) << r.err;
  EXPECT_EQ(LedgerRefs(), refs);
}

TEST_F(PushTest, AcceptedPushIsRecordedInTheLogWhileGatosdIsDown) {
  std::string id = JobId(kJob);
  Commit(kJob);
  RunResult r = Push("HEAD:refs/gatos/submit/hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("gatosd is not running: recorded in the log"), std::string::npos) << r.err;
  RunResult batch = Cmd({"git", "--git-dir", ledger_, "show", "refs/gatos/log:batch"});
  EXPECT_EQ(batch.out.rfind("submit " + id.substr(7) + " refs/gatos/jobs/", 0), 0u) << batch.out;
}

TEST_F(PushTest, TheLedgersOwnRefsAreRefusedThroughTheFrontDoorAndHiddenInTheLedger) {
  std::string hex = JobId(kJob).substr(7);
  std::string before = LedgerRefs();
  Commit(kJob);
  for (const std::string& ref : {"refs/gatos/jobs/" + hex + "/job", "refs/gatos/jobs/" + hex + "/lease",
                                 std::string("refs/gatos/log"), std::string("refs/gatos/policy")}) {
    RunResult r = Push("+HEAD:" + ref);
    EXPECT_NE(r.exit_code, 0) << ref;
    EXPECT_NE(r.err.find("refs under refs/gatos/ are written by the ledger only"), std::string::npos)
        << ref << ": " << r.err;
    r = PushToLedger("+HEAD:" + ref);
    EXPECT_NE(r.exit_code, 0) << ref;
    EXPECT_NE(r.err.find("deny updating a hidden ref"), std::string::npos) << ref << ": " << r.err;
  }
  EXPECT_EQ(LedgerRefs(), before);
  EXPECT_EQ(FrontDoorRefs(), "");
}

// A push straight to the ledger still records the job (as a push through the
// front door would), and says where pushes should go.
TEST_F(PushTest, APushStraightToTheLedgerWorksAndPointsToTheFrontDoor) {
  std::string id = JobId(kJob);
  Commit(kJob);
  RunResult r = PushToLedger("HEAD:refs/gatos/submit/direct");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accepted job " + id), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: push to " + LedgerPushPath(ledger_) + " instead"), std::string::npos) << r.err;
  EXPECT_NE(LedgerRefs().find("refs/gatos/jobs/" + id.substr(7) + "/job "), std::string::npos);
}

// One push of many jobs while gatosd is down: the hook takes the writer
// lock once and records them all in one log batch, and the pusher sees each
// job's id.
TEST_F(PushTest, APushOfManyJobsIsRecordedInOneLogBatch) {
  std::vector<std::string> args = {"push", LedgerPushPath(ledger_)};
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    std::string yaml = "command: [\"/bin/echo\", \"many " + std::to_string(i) + "\"]\ntimeout: 5\n";
    ids.push_back(JobId(yaml));
    Commit(yaml);
    args.push_back("b" + std::to_string(n_ - 1) + ":refs/gatos/submit/many-" + std::to_string(i));
  }
  RunResult r = Git(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t at = 0;
  for (const auto& id : ids) {  // in the order of the push's commands
    size_t found = r.err.find("accepted job " + id, at);
    ASSERT_NE(found, std::string::npos) << id << ": " << r.err;
    at = found;
  }
  RunResult batch = Cmd({"git", "--git-dir", ledger_, "show", "refs/gatos/log:batch"});
  int submits = 0;
  std::istringstream lines(batch.out);
  for (std::string line; std::getline(lines, line);) submits += line.rfind("submit ", 0) == 0;
  EXPECT_EQ(submits, 20) << batch.out;
  std::string refs = LedgerRefs();
  for (const auto& id : ids) EXPECT_NE(refs.find("refs/gatos/jobs/" + id.substr(7) + "/job "), std::string::npos) << id;
  EXPECT_EQ(FrontDoorRefs(), "");
}

// A push costs the same at any ledger size: receive-pack advertises none of
// the ledger's refs (counted on the wire with GIT_TRACE_PACKET), and reads
// none either (git's own ref tracing, GIT_TRACE_REFS, lists every ref a git
// process iterates): the front door holds no refs. A push straight to the
// ledger advertises none but reads them all.
TEST_F(PushTest, APushReadsAndAdvertisesNoJobRefsAfterAThousandJobs) {
  {
    auto key = LoadLedgerKey(ledger_);
    ASSERT_TRUE(key.ok()) << key.status().message();
    auto w = LedgerWriter::Open(ledger_, *key);
    ASSERT_TRUE(w.ok()) << w.status().message();
    Policy dev = (*w)->policy();
    dev.settings.dev_mode = true;
    std::vector<Op> policy_op;
    policy_op.push_back(PolicyOp{dev, "dev for the test\n", std::nullopt});
    ASSERT_TRUE((*w)->Apply(policy_op)[0].outcome.ok());
    std::vector<Op> ops;
    for (int i = 0; i < 1000; ++i) {
      std::string yaml = "command: [\"/bin/echo\", \"" + std::to_string(i) + "\"]\ntimeout: 5\n";
      std::vector<GitObject> objects;
      auto tree = BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
      auto m = ParseManifest(yaml, "job.yaml");
      auto c = BuildCommitObject(*tree, {}, "j\n\nJob-Id: blake3:" + JobIdHex(*m) + "\n", "a", "a@b", 1, nullptr);
      objects.insert(objects.begin(), *c);
      auto check = CheckJobCommit(BatchLookup(&objects, nullptr), c->id, "", (*w)->policy(), SystemNowMs());
      ASSERT_TRUE(check.ok()) << check.status().message();
      ops.push_back(SubmitOp{*check, objects});
    }
    for (const auto& r : (*w)->Apply(ops)) ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  }
  ASSERT_GE(LedgerRefs().size(), 1000u * 100);  // the job refs exist (fetch serves them)
  Commit(kJob);
  std::string trace = dir_.Join("packet.trace"), refs_trace = dir_.Join("refs.trace");
  env_["GIT_TRACE_PACKET"] = trace;
  env_["GIT_TRACE_REFS"] = refs_trace;
  env_["GIT_TRACE"] = refs_trace + ".commands";  // which git read them, on failure
  RunResult r = Push("HEAD:refs/gatos/submit/one-more");
  env_.erase("GIT_TRACE_PACKET");
  env_.erase("GIT_TRACE");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every ref a git process of the push walked over ("iterator_advance:
  // <ref>"), the pusher's own included.
  auto job_refs_read = [](const std::string& path) {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      n += line.find("iterator_advance: refs/gatos/jobs/") != std::string::npos;
    }
    return n;
  };
  EXPECT_EQ(job_refs_read(refs_trace), 0) << Cmd({"grep", "-h", "trace: \\(built-in\\|run_command\\)", refs_trace + ".commands"}).out;
  Commit("command: [\"/bin/echo\", \"direct\"]\ntimeout: 5\n");
  std::string direct_trace = dir_.Join("refs-direct.trace");
  env_["GIT_TRACE_REFS"] = direct_trace;
  RunResult direct = PushToLedger("HEAD:refs/gatos/submit/direct");
  env_.erase("GIT_TRACE_REFS");
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_GE(job_refs_read(direct_trace), 1000);
  std::ifstream in(trace);
  std::string line;
  int advertised = 0, job_refs = 0;
  while (std::getline(in, line)) {
    if (line.find("packet:") == std::string::npos || line.find("git< ") == std::string::npos) continue;
    if (line.find(" refs/") != std::string::npos || line.find("capabilities^{}") != std::string::npos) ++advertised;
    if (line.find("refs/gatos/jobs/") != std::string::npos) ++job_refs;
  }
  EXPECT_EQ(job_refs, 0);
  EXPECT_LE(advertised, 1) << "receive-pack advertised refs to a push";
}

struct RejectCase {
  const char* name;
  std::string message;  // expected in the push output
};

TEST_F(PushTest, EachRejectionIsVisibleAndLeavesTheLedgerUnchanged) {
  std::string before = LedgerRefs();
  std::string hex = JobId(kJob).substr(7);
  std::string log_before = Cmd({"git", "--git-dir", ledger_, "rev-parse", "refs/gatos/log"}).out;
  auto expect_rejected = [&](const std::string& refspec, const std::string& message) {
    RunResult r = Push(refspec);
    EXPECT_NE(r.exit_code, 0) << refspec;
    EXPECT_NE(r.err.find("remote: gatos: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "want: " << message << "\ngot: " << r.err;
    EXPECT_NE(r.err.find("pre-receive hook declined"), std::string::npos) << r.err;
    EXPECT_EQ(LedgerRefs(), before) << refspec;
    EXPECT_EQ(Cmd({"git", "--git-dir", ledger_, "rev-parse", "refs/gatos/log"}).out, log_before);
  };
  // Unsigned.
  Commit(kJob, /*sign=*/false);
  expect_rejected("HEAD:refs/gatos/submit/x", "the job commit is not signed");
  // Signed by a key the policy does not list.
  ASSERT_EQ(Cmd({BinaryPath("gatos"), "keygen", "-f", dir_.Join("mallory")}).exit_code, 0);
  Git({"config", "user.signingkey", dir_.Join("mallory")});
  Commit(kJob);
  expect_rejected("HEAD:refs/gatos/submit/x", "which is not an allowed submitter");
  Git({"config", "user.signingkey", dir_.Join("alice")});
  // Bad manifest: the user sees file, line and field.
  Commit("command: [\"/bin/true\"]\ntimeout: P1Y\n", true, "Job-Id: blake3:" + std::string(64, '0'));
  expect_rejected("HEAD:refs/gatos/submit/x", "job.yaml:2:");
  // Missing Job-Id trailer.
  Commit(kJob, true, "Signed-off-by: Alice <alice@example.com>");
  expect_rejected("HEAD:refs/gatos/submit/x", "must end with the trailer 'Job-Id: blake3:" + hex);
  // A symbolic link as job.yaml, whose target text is a valid manifest.
  Git({"checkout", "-q", "--orphan", "link"});
  Git({"rm", "-q", "-rf", "--cached", "."});
  WriteFile(work_ + "/target.yaml", kJob);
  std::remove((work_ + "/job.yaml").c_str());
  ASSERT_EQ(::symlink(kJob, (work_ + "/job.yaml").c_str()), 0);
  Git({"add", "job.yaml"});
  Git({"commit", "-q", "-S", "-m", "link", "-m", "Job-Id: blake3:" + hex});
  expect_rejected("HEAD:refs/gatos/submit/x", "job.yaml must be a regular file");
  std::remove((work_ + "/job.yaml").c_str());
  // Refs a submitter may not write, and results that are not results.
  Commit(kJob);
  expect_rejected("HEAD:refs/gatos/results/" + hex, "a result commit has exactly 2 parents");
  expect_rejected("HEAD:refs/gatos/results/nothex", "refs/gatos/results/<job id");
  expect_rejected("HEAD:refs/gatos/other", "written by the ledger only");
  expect_rejected("HEAD:refs/heads/main", "push job commits to refs/gatos/submit/");
}

// A push of many refs is checked on several threads (32 refs or more per
// extra thread): the verdicts still name exactly the bad refs, in push order,
// and nothing of the push reaches the ledger.
TEST_F(PushTest, APushOfManyJobsWithBadOnesNamesEachAndChangesNothing) {
  std::string before = LedgerRefs();
  std::vector<std::string> args = {"push", LedgerPushPath(ledger_)};
  const std::set<int> unsigned_ones = {7, 33, 38};
  for (int i = 0; i < 40; ++i) {
    std::string yaml = "command: [\"/bin/echo\", \"mixed " + std::to_string(i) + "\"]\ntimeout: 5\n";
    Commit(yaml, /*sign=*/unsigned_ones.count(i) == 0);
    args.push_back("b" + std::to_string(n_ - 1) + ":refs/gatos/submit/mixed-" + std::to_string(i));
  }
  RunResult r = Git(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("push rejected (3 of 40 refs)"), std::string::npos) << r.err;
  size_t at = 0;
  for (int i : unsigned_ones) {
    size_t found = r.err.find("gatos: refs/gatos/submit/mixed-" + std::to_string(i) + ": the job commit is not signed", at);
    ASSERT_NE(found, std::string::npos) << i << ": " << r.err;
    at = found;
  }
  int named = 0;
  for (size_t p = r.err.find("is not signed"); p != std::string::npos; p = r.err.find("is not signed", p + 1)) ++named;
  EXPECT_EQ(named, 3) << r.err;
  EXPECT_EQ(LedgerRefs(), before);
  EXPECT_EQ(FrontDoorRefs(), "");
}

TEST_F(PushTest, DevLedgerAcceptsUnsignedJobs) {
  std::string dev = dir_.Join("dev.git");
  RunResult init = Cmd({BinaryPath("gatosd"), "init", dev, "--dev"});
  ASSERT_EQ(init.exit_code, 0);
  EXPECT_NE(init.out.find("UNSIGNED"), std::string::npos);
  Commit(kJob, /*sign=*/false);
  RunResult r = Git({"push", dev, "HEAD:refs/gatos/submit/x"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accepted job"), std::string::npos);
}

}  // namespace
}  // namespace gatos::testing

namespace gatos::testing {
namespace {

// Job resource limits at push: a manifest that asks more than the policy's
// maximum is refused with the reason; values that are not positive
// integers are refused by the parser, with file, line and field.
TEST_F(PushTest, ResourcesAboveThePolicysMaximumOrNotIntegersAreRefused) {
  RunResult set =
      Cmd({BinaryPath("gatos"), "policy", "set", "--ledger", ledger_, "max_job_memory_mb=1024",
           "job_memory_mb=256", "job_pids=64", "job_disk_mb=64"});
  ASSERT_EQ(set.exit_code, 0) << set.out << set.err;
  std::string before = LedgerRefs();
  auto refused = [&](const std::string& yaml, const std::string& message) {
    Commit(yaml);
    RunResult r = Push("HEAD:refs/gatos/submit/x");
    EXPECT_NE(r.exit_code, 0) << yaml;
    EXPECT_NE(r.err.find(message), std::string::npos) << "want: " << message << "\ngot: " << r.err;
    EXPECT_EQ(LedgerRefs(), before);
  };
  const std::string head = "command: [\"/bin/true\"]\ntimeout: 5\n";
  refused(head + "resources: {memory_mb: 4096}\n",
          "job.yaml: resources.memory_mb: 4096 is over this ledger's maximum of 1024 "
          "(max_job_memory_mb)");
  refused(head + "resources: {memory_mb: -5}\n",
          "job.yaml:3:24: resources.memory_mb: -5 is negative");
  refused(head + "resources: {pids: 2.5}\n", "resources.pids: 2.5 is not a whole number");
  refused(head + "resources: {disk_mb: \"64\"}\n", "resources.disk_mb: \"64\" is quoted");
  refused(head + "resources: {pids: 18446744073709551617}\n",
          "resources.pids: 18446744073709551617 is over");
  // Within the maximum: accepted.
  Commit(head + "resources: {memory_mb: 1024, pids: 10}\n");
  RunResult ok = Push("HEAD:refs/gatos/submit/y");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace gatos::testing
