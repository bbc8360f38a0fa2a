// `gatos hooks install`: the commit-msg hook that gives a stock-git commit of
// job.yaml its Job-Id trailer, and refuses an invalid manifest. Real git.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_util.h"

namespace gatos::testing {
namespace {

class HooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ro_.env = {{"HOME", dir_.path()},           {"GIT_CONFIG_NOSYSTEM", "1"},
               {"GIT_AUTHOR_NAME", "Alice"},    {"GIT_AUTHOR_EMAIL", "alice@example.com"},
               {"GIT_COMMITTER_NAME", "Alice"}, {"GIT_COMMITTER_EMAIL", "alice@example.com"}};
    repo_ = dir_.Join("work");
    ASSERT_EQ(testing::Run({"git", "init", "-q", repo_}, ro_).exit_code, 0);
    in_repo_ = ro_;
    in_repo_.cwd = repo_;
  }
  RunResult Git(std::vector<std::string> args) {
    args.insert(args.begin(), "git");
    return testing::Run(args, in_repo_);
  }
  RunResult Gatos(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("gatos"));
    return testing::Run(args, in_repo_);
  }
  // The commit's message exactly (--format=%B adds a newline of its own).
  std::string Message() {
    std::string m = Git({"log", "-1", "--format=%B"}).out;
    if (!m.empty()) m.pop_back();
    return m;
  }

  TempDir dir_;
  RunOptions ro_, in_repo_;
  std::string repo_;
};

TEST_F(HooksTest, ACommitOfAValidJobGetsItsJobIdTrailer) {
  RunResult install = testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_}, ro_);
  ASSERT_EQ(install.exit_code, 0) << install.err;
  struct stat st;
  ASSERT_EQ(::stat((repo_ + "/.git/hooks/commit-msg").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);

  WriteFile(repo_ + "/job.yaml", "command: [\"/bin/echo\", \"hi\"]\ntimeout: 30\n");
  std::string id = Gatos({"job", "id", "job.yaml"}).out;
  while (!id.empty() && id.back() == '\n') id.pop_back();
  ASSERT_EQ(id.rfind("blake3:", 0), 0u) << id;
  ASSERT_EQ(Git({"add", "job.yaml"}).exit_code, 0);
  RunResult c = Git({"commit", "-q", "-m", "run echo"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(Message(), "run echo\n\nJob-Id: " + id + "\n");

  // A wrong trailer written by hand is corrected; the job changed (commit -a).
  WriteFile(repo_ + "/job.yaml", "command: [\"/bin/echo\", \"bye\"]\ntimeout: 30\n");
  std::string id2 = Gatos({"job", "id", "job.yaml"}).out;
  while (!id2.empty() && id2.back() == '\n') id2.pop_back();
  ASSERT_NE(id2, id);
  c = Git({"commit", "-q", "-a", "-m", "run echo bye\n\nJob-Id: " + id});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(Message(), "run echo bye\n\nJob-Id: " + id2 + "\n");
}

TEST_F(HooksTest, AnInvalidManifestIsRefusedWithTheReason) {
  ASSERT_EQ(testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_}, ro_).exit_code,
            0);
  WriteFile(repo_ + "/job.yaml", "command: [\"/bin/true\"]\ntimeout: P1M\nbogus: 1\n");
  ASSERT_EQ(Git({"add", "job.yaml"}).exit_code, 0);
  RunResult c = Git({"commit", "-q", "-m", "broken"});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("job.yaml is not a valid job manifest; commit refused"), std::string::npos)
      << c.err;
  EXPECT_NE(c.err.find("bogus"), std::string::npos) << c.err;
  EXPECT_NE(Git({"rev-parse", "--verify", "-q", "HEAD"}).exit_code, 0);  // nothing was committed
}

TEST_F(HooksTest, CommitsWithoutAJobAreLeftAloneAndForeignHooksKept) {
  ASSERT_EQ(testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_}, ro_).exit_code,
            0);
  WriteFile(repo_ + "/README", "no job here\n");
  ASSERT_EQ(Git({"add", "README"}).exit_code, 0);
  ASSERT_EQ(Git({"commit", "-q", "-m", "docs"}).exit_code, 0);
  EXPECT_EQ(Message(), "docs\n");
  // Installing again is fine (our own hook); someone else's is not replaced.
  EXPECT_EQ(testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_}, ro_).exit_code,
            0);
  WriteFile(repo_ + "/.git/hooks/commit-msg", "#!/bin/sh\nexit 0\n", 0755);
  RunResult again = testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_}, ro_);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("was not installed by gatos"), std::string::npos) << again.err;
  EXPECT_EQ(ReadFile(repo_ + "/.git/hooks/commit-msg"), "#!/bin/sh\nexit 0\n");
  EXPECT_EQ(testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", repo_, "--force"}, ro_)
                .exit_code,
            0);
  RunResult bad =
      testing::Run({BinaryPath("gatos"), "hooks", "install", "--repo", dir_.Join("nowhere")}, ro_);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not a git repository"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace gatos::testing
