// gatos-scan as a job under a sandboxed worker: a batch of one job per
// repository, findings read back from the signed results, and no raw
// secret anywhere in the ledger or the logs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../scan/secrets_for_tests.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

TEST(ScanJobTest, BatchOfScanJobsFindsPlantedSecretsAndStoresNoneOfThem) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  std::string repos_dir = stack.dir().Join("repos");
  RunOptions ro;
  ro.env = stack.env();
  testing::Run({"mkdir", "-p", repos_dir}, ro);
  scan::testing::SecretMaker maker(7);
  std::vector<std::string> secrets;
  std::string list;
  for (int r = 0; r < 2; ++r) {
    std::string repo = repos_dir + "/repo" + std::to_string(r);
    ASSERT_EQ(testing::Run({"git", "init", "-q", "-b", "main", repo}, ro).exit_code, 0);
    std::string secret = r == 0 ? maker.Aws() : maker.GithubPat();
    secrets.push_back(secret);
    RunOptions in_repo = ro;
    in_repo.cwd = repo;
    // repo1 keeps the same secret through three versions of the file.
    for (int v = 1; v <= (r == 0 ? 1 : 3); ++v) {
      WriteFile(repo + "/config.env", "TOKEN=" + secret + "\nversion=" + std::to_string(v) + "\n");
      testing::Run({"git", "add", "."}, in_repo);
      ASSERT_EQ(testing::Run({"git", "commit", "-q", "-m", "config v" + std::to_string(v)}, in_repo).exit_code, 0);
    }
    // Delete it again: history still holds it.
    testing::Run({"git", "rm", "-q", "config.env"}, in_repo);
    testing::Run({"git", "commit", "-q", "-m", "remove config"}, in_repo);
    list += repo + "\n";
  }
  list += repos_dir + "/missing-repo\n";  // fails on its own; the others are not blocked
  WriteFile(stack.dir().Join("repos.txt"), list);
  WriteFile(stack.dir().Join("scan.yaml"),
            "command: [\"gatos-scan\"]\nargs: [\"--repo\", \"{{repo}}\"]\ntimeout: 120\n");
  // The worker runs jobs sandboxed; the repositories are bound read-only.
  stack.StartWorker(0, {"--ro-bind", repos_dir, "--concurrency", "2"});
  RunResult b = stack.Gatos({"batch", "submit", "--template", stack.dir().Join("scan.yaml"), "--repos",
                             stack.dir().Join("repos.txt"), "--ledger", stack.ledger(), "--sign-key",
                             stack.submitter_key()});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::string batch = TrimEnd(b.out);
  // Submitting the same batch again is a no-op with the same id.
  RunResult again = stack.Gatos({"batch", "submit", "--template", stack.dir().Join("scan.yaml"), "--repos",
                                 stack.dir().Join("repos.txt"), "--ledger", stack.ledger(), "--sign-key",
                                 stack.submitter_key()});
  EXPECT_EQ(TrimEnd(again.out), batch);
  EXPECT_NE(again.err.find("already existed"), std::string::npos) << again.err;

  RunResult st = stack.Gatos({"batch", "status", batch, "--ledger", stack.ledger(), "--wait", "--json"}, 200);
  json sj = json::parse(st.out);
  EXPECT_EQ(sj["total"], 3);
  EXPECT_EQ(sj["done"], 3);
  EXPECT_EQ(sj["succeeded"], 2) << st.out << stack.worker(0)->log();
  EXPECT_EQ(st.exit_code, 1);  // the missing repository's job failed
  int found = 0;
  for (const auto& row : sj["jobs"]) {
    std::string repo = row["repo"];
    if (repo.find("missing") != std::string::npos) {
      EXPECT_EQ(row["state"], "failed");
      continue;
    }
    RunResult f = stack.Gatos({"findings", row["job"], "--repo", stack.ledger(), "--json"});
    ASSERT_EQ(f.exit_code, 0) << f.err << "\njob stderr:\n"
                              << testing::Run({"git", "--git-dir", stack.ledger(), "show",
                                               "refs/gatos/jobs/" + std::string(row["job"]).substr(7) +
                                                   "/result:stderr"}).out;
    json fj = json::parse(f.out);
    const size_t versions = repo.back() == '0' ? 1 : 3;
    // Every location, and each distinct secret once with all of them.
    ASSERT_EQ(fj["findings"].size(), versions) << f.out;
    ASSERT_EQ(fj["secrets"].size(), 1u) << f.out;
    const json& secret = fj["secrets"][0];
    std::string rule = secret["rule"];
    EXPECT_EQ(rule, repo.back() == '0' ? "aws-access-token" : "github-pat");
    EXPECT_EQ(secret["location_count"], versions);
    EXPECT_EQ(secret["locations"].size(), versions);
    EXPECT_EQ(secret["paths"], json::array({"config.env"}));
    EXPECT_EQ(secret["at_tip"], false);  // deleted at the tip
    EXPECT_EQ(fj["findings"][0]["path"], "config.env");
    // The text view: one secret with its locations; --all lists each one.
    RunResult text = stack.Gatos({"findings", row["job"], "--repo", stack.ledger()});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    const std::string n = std::to_string(versions);
    EXPECT_NE(text.out.find("1 secret in " + n + (versions == 1 ? " location" : " locations")),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("no longer at any scanned tip"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("  in config.env\n"), std::string::npos) << text.out;
    RunResult all = stack.Gatos({"findings", row["job"], "--repo", stack.ledger(), "--all"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    size_t rows = 0;
    for (size_t at = all.out.find("  config.env:1  commit "); at != std::string::npos;
         at = all.out.find("  config.env:1  commit ", at + 1)) {
      ++rows;
    }
    EXPECT_EQ(rows, versions) << all.out;
    ++found;
  }
  EXPECT_EQ(found, 2);
  // No raw secret in any ledger object, in the worker's state or in any log.
  RunResult objects = testing::Run({"sh", "-c", "git --git-dir " + stack.ledger() +
                                                    " cat-file --batch-all-objects --batch; cat " +
                                                    stack.dir().path() + "/*.log"});
  for (const auto& s : secrets) {
    EXPECT_EQ(objects.out.find(s), std::string::npos) << "a raw secret reached the ledger or a log";
    RunResult grep = testing::Run({"grep", "-rqaF", s, stack.worker_state(0)});
    EXPECT_NE(grep.exit_code, 0) << "a raw secret is in the worker's state directory";
  }
}

}  // namespace
}  // namespace gatos::testing
