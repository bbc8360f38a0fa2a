// The gatos CLI as a user runs it: real process, real files.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace gatos::testing {
namespace {

const char kAdrExample[] =
    "command: [\"/usr/bin/env\", \"bash\", \"-lc\"]\n"
    "args: [\"echo\", \"hello\"]\n"
    "timeout: 30\n"
    "env: { GREETING: \"hello\" }\n";
const char kAdrJobId[] = "blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc";

RunResult Gatos(const std::vector<std::string>& args, const RunOptions& opts = {}) {
  std::vector<std::string> argv = {BinaryPath("gatos")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, opts);
}

TEST(CliTest, JobIdPrintsOnlyTheIdOfTheAdrExample) {
  TempDir dir;
  WriteFile(dir.Join("job.yaml"), kAdrExample);
  RunResult r = Gatos({"job", "id", dir.Join("job.yaml")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kAdrJobId) + "\n");
  EXPECT_EQ(r.err, "");
}

TEST(CliTest, ShippedExampleHasTheAdrJobId) {
  RunResult r = Gatos({"job", "id", SourcePath("examples/hello.yaml")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kAdrJobId) + "\n");
}

TEST(CliTest, JobCanonPrintsTheHashedBytes) {
  TempDir dir;
  WriteFile(dir.Join("job.yaml"), kAdrExample);
  RunResult r = Gatos({"job", "canon", dir.Join("job.yaml")});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out,
            R"({"args":["echo","hello"],"command":["/usr/bin/env","bash","-lc"],"env":{"GREETING":"hello"},"timeout":30})");
}

TEST(CliTest, JobIdReadsStdin) {
  RunOptions o;
  o.stdin_data = kAdrExample;
  RunResult r = Gatos({"job", "id", "-"}, o);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kAdrJobId) + "\n");
}

TEST(CliTest, InvalidManifestExitsTwoWithOneLinePerProblemAndNoId) {
  TempDir dir;
  WriteFile(dir.Join("bad.yaml"), "command: []\ntimeout: PT1.5S\ncolour: blue\n");
  RunResult r = Gatos({"job", "id", dir.Join("bad.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.out.find("blake3:"), std::string::npos);
  // Three problems, three lines, each naming the file and line.
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 3u) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:3:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("colour"), std::string::npos) << r.err;
}

TEST(CliTest, MissingFileAndBadUsageExitTwo) {
  RunResult missing = Gatos({"job", "id", "/nonexistent/job.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/job.yaml"), std::string::npos) << missing.err;
  RunResult two = Gatos({"job", "id", "a.yaml", "b.yaml"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("exactly one FILE"), std::string::npos);
  RunResult flag = Gatos({"job", "id", "--bogus", "a.yaml"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("unknown option '--bogus'"), std::string::npos);
  RunResult cmd = Gatos({"frobnicate"});
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_NE(cmd.err.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(CliTest, EveryCommandHasHelp) {
  for (std::vector<std::string> c : {std::vector<std::string>{"job", "id"},
                                     {"job", "canon"}, {"job", "validate"}, {"keygen"},
                                     {"key", "show"}}) {
    c.push_back("--help");
    RunResult r = Gatos(c);
    EXPECT_EQ(r.exit_code, 0) << c[0];
    EXPECT_EQ(r.out.rfind("usage: gatos " + c[0], 0), 0u) << r.out;
  }
  RunResult top = Gatos({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("keygen"), std::string::npos);
}

// gatosd serve's election settings: validated before anything starts, the
// error naming the flags (and the same keys in gatosd.yaml).
TEST(CliTest, GatosdElectionSettingsThatCannotWorkAreRefusedNamingTheirFlags) {
  TempDir dir;
  auto serve = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("gatosd"), "serve", "--ledger", dir.Join("none.git")};
    argv.insert(argv.end(), args.begin(), args.end());
    return gatos::testing::Run(argv);
  };
  RunResult r = serve({"--replicated", "--election-ttl-ms", "1000", "--election-keep-ms", "900"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("election-keep-ms"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("keep + margin must be less than the TTL"), std::string::npos) << r.err;
  r = serve({"--replicated", "--election-try-ms", "5000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("election-try-ms"), std::string::npos) << r.err;
  r = serve({"--election-ttl-ms", "5000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("need --replicated"), std::string::npos) << r.err;
  r = serve({"--replicated", "--append-window", "65"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("append-window"), std::string::npos) << r.err;
  WriteFile(dir.Join("gatosd.yaml"), "replicated: true\nelection-ttl-ms: 2000\nelection-margin-ms: 1900\n");
  r = serve({"--config", dir.Join("gatosd.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("election-margin-ms"), std::string::npos) << r.err;
}

TEST(CliTest, KeygenWritesOpenSshPairWithPrivateMode0600) {
  TempDir dir;
  std::string key = dir.Join("worker");
  RunResult r = Gatos({"keygen", "-f", key, "-C", "w1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), std::string("ed25519:").size() + 64 + 1);
  EXPECT_EQ(r.out.rfind("ed25519:", 0), 0u);
  struct stat st;
  ASSERT_EQ(stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string pub = ReadFile(key + ".pub");
  EXPECT_EQ(pub.rfind("ssh-ed25519 ", 0), 0u);
  EXPECT_NE(pub.find(" w1"), std::string::npos);
  // `key show` agrees on the id from either file.
  EXPECT_EQ(Gatos({"key", "show", key}).out, r.out);
  EXPECT_EQ(Gatos({"key", "show", key + ".pub"}).out, r.out);
  // Never overwrites.
  RunResult again = Gatos({"keygen", "-f", key});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find(key), std::string::npos) << again.err;
}

TEST(CliTest, ValidateReportsEachFile) {
  TempDir dir;
  WriteFile(dir.Join("ok.yaml"), kAdrExample);
  WriteFile(dir.Join("bad.json"), R"({"command":["x"],"timeout":-1})");
  RunResult r = Gatos({"job", "validate", dir.Join("ok.yaml"), dir.Join("bad.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, dir.Join("ok.yaml") + ": ok " + kAdrJobId + "\n");
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gatos::testing
