// Jobs submitted with stock `git push` into a ledger made by `gatosd init`:
// the hooks accept good jobs and refuse bad pushes with a visible reason,
// leaving every ref as it was.
#include <gtest/gtest.h>

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
  RunResult Push(const std::string& refspec) { return Git({"push", ledger_, refspec}); }
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

TEST_F(PushTest, SignedJobPushedToItsCanonicalRef) {
  std::string hex = JobId(kJob).substr(7);
  std::string c = Commit(kJob);
  RunResult r = Push("HEAD:refs/gatos/jobs/" + hex + "/job");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(LedgerRefs().find("refs/gatos/jobs/" + hex + "/job " + c), std::string::npos);
  // Pushing the same commit again: git itself says nothing changed.
  r = Push("HEAD:refs/gatos/jobs/" + hex + "/job");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("Everything up-to-date"), std::string::npos) << r.err;
}

struct RejectCase {
  const char* name;
  std::string message;  // expected in the push output
};

TEST_F(PushTest, EachRejectionIsVisibleAndLeavesTheLedgerUnchanged) {
  std::string before = LedgerRefs();
  std::string hex = JobId(kJob).substr(7);
  auto expect_rejected = [&](const std::string& refspec, const std::string& message) {
    RunResult r = Push(refspec);
    EXPECT_NE(r.exit_code, 0) << refspec;
    EXPECT_NE(r.err.find("remote: gatos: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "want: " << message << "\ngot: " << r.err;
    EXPECT_NE(r.err.find("pre-receive hook declined"), std::string::npos) << r.err;
    EXPECT_EQ(LedgerRefs(), before) << refspec;
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
  // Job-id in the ref name does not match job.yaml.
  Commit(kJob);
  expect_rejected("HEAD:refs/gatos/jobs/" + std::string(64, 'a') + "/job",
                  "but the ref names job aaaa");
  // Missing Job-Id trailer.
  Commit(kJob, true, "Signed-off-by: Alice <alice@example.com>");
  expect_rejected("HEAD:refs/gatos/submit/x", "must end with the trailer 'Job-Id: blake3:" + hex);
  // Refs a submitter may not write.
  Commit(kJob);
  expect_rejected("HEAD:refs/gatos/jobs/" + hex + "/lease", "written by the ledger only");
  expect_rejected("HEAD:refs/gatos/jobs/" + hex + "/claims/" + std::string(64, 'b'),
                  "written by the ledger only");
  expect_rejected("HEAD:refs/gatos/jobs/" + hex + "/result", "a result commit has exactly 2 parents");
  expect_rejected("+HEAD:refs/gatos/policy", "gatos policy");  // forced: past the client-side check
  expect_rejected("HEAD:refs/heads/main", "push job commits to refs/gatos/submit/");
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
