// The worker refuses a job's output names by the ledger's own rule
// (gatos/model/result_path.h CheckResultPath; its exact reasons are in
// tests/unit/result_path_test.cpp), with the ledger's words: for each name,
// the reason the worker gives equals the shared function's message, which is
// the reason the ledger's check of poe.json gives (ParsePoe, applied by
// CheckResultCommit) and the one the tree builder every result goes through
// gives (BuildTreeObjects).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gatos/git/result.h"
#include "gatos/model/blake3.h"
#include "gatos/model/poe.h"
#include "gatos/model/result_path.h"
#include "gatos/worker/output_collection.h"
#include "sample_poe.h"
#include "test_util.h"

namespace gatos::worker {
namespace {

// Names relative to the job's output directory, each made as a file there.
struct Row {
  std::string name;
  bool accepted;
};
const std::vector<Row>& Table() {
  static const std::vector<Row> rows = {
      {"report.txt", true},
      {".gitignore", true},
      {"dir/.github/workflow.yml", true},
      {"a.git/x", true},
      {"..x", true},
      {"caf\xC3\xA9", true},
      {".git/config", false},
      {".git/hooks/post-checkout", false},
      {"sub/.git", false},
      {"bad\xFFname", false},
      {"\xC0\xAF", false},
      {"half\xE2\x82", false},
  };
  return rows;
}

TEST(WorkerOutputRules, TheWorkerRefusesAJobsOutputNamesWithTheLedgersReason) {
  for (const Row& row : Table()) {
    const std::string path = "outputs/" + row.name;
    const Status rule = CheckResultPath(path);
    ASSERT_EQ(rule.ok(), row.accepted) << row.name << ": " << rule.message();

    // The worker, reading a real output directory.
    testing::TempDir dir;
    const std::string out = dir.Join("out");
    std::filesystem::create_directories(std::filesystem::path(out + "/" + row.name).parent_path());
    testing::WriteFile(out + "/" + row.name, "x");
    std::vector<ResultFile> files = {{"stdout", ""}, {"stderr", ""}};
    Status collected = CollectOutputs(out, OutputLimitsFor(1 << 20, 2), &files);
    if (row.accepted) {
      ASSERT_TRUE(collected.ok()) << row.name << ": " << collected.message();
      ASSERT_EQ(files.size(), 3u);
      EXPECT_EQ(files[2].path, path);
      EXPECT_EQ(files[2].data, "x");
    } else {
      EXPECT_EQ(collected.code(), StatusCode::kInvalidArgument) << row.name;
      EXPECT_EQ(collected.message(), rule.message() + "; no output file was kept");
      EXPECT_EQ(files.size(), 2u) << row.name;  // nothing was added
    }

    // The ledger, checking the poe.json of a result that lists the name.
    Result<std::string> poe = SerializePoe(SamplePoeListing(path));
    EXPECT_EQ(poe.ok(), row.accepted) << row.name;
    if (!row.accepted) {
      EXPECT_EQ(poe.status().message(), "poe.json: outputs[0].path: " + rule.message());
    }

    // The builder of every result tree.
    std::vector<GitObject> objects;
    Result<std::string> tree = BuildTreeObjects({{path, "x", false}}, &objects);
    EXPECT_EQ(tree.ok(), row.accepted) << row.name;
    if (!row.accepted) {
      EXPECT_EQ(tree.status().message(), rule.message());
    }
  }
}

}  // namespace
}  // namespace gatos::worker
