// The worker's collection of a job's outputs: the result's limits (files,
// depth, bytes), what is skipped, and that nothing is kept on a refusal.
#include "gatos/worker/output_collection.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace gatos::worker {
namespace {

namespace fs = std::filesystem;

class WorkerOutputCollection : public ::testing::Test {
 protected:
  WorkerOutputCollection() : out_(dir_.Join("out")) { fs::create_directories(out_); }
  void Write(const std::string& rel, const std::string& data) {
    fs::create_directories(fs::path(out_ + "/" + rel).parent_path());
    testing::WriteFile(out_ + "/" + rel, data);
  }
  static std::vector<std::string> Paths(const std::vector<ResultFile>& files) {
    std::vector<std::string> p;
    for (const auto& f : files) p.push_back(f.path);
    std::sort(p.begin(), p.end());
    return p;
  }
  testing::TempDir dir_;
  std::string out_;
};

TEST(WorkerOutputLimits, TheFileLimitLeavesRoomForTheOtherFilesAndPoeJson) {
  OutputLimits l = OutputLimitsFor(4 << 20, 2);
  EXPECT_EQ(l.max_bytes, 4u << 20);
  EXPECT_EQ(l.result_max_files, 4096u);
  EXPECT_EQ(l.result_max_depth, 16u);
  EXPECT_EQ(l.max_files, 4096u - 3);
  EXPECT_EQ(OutputLimitsFor(100, 5000).max_files, 0u);
  EXPECT_EQ(OutputLimitsFor(-1, 2).max_bytes, 0u);
}

TEST_F(WorkerOutputCollection, AMissingDirectoryHasNoOutputs) {
  std::vector<ResultFile> files;
  Status s = CollectOutputs(dir_.Join("nosuch"), OutputLimitsFor(1 << 20, 0), &files);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(files.empty());
}

TEST_F(WorkerOutputCollection, RegularFilesBecomeOutputsWithTheirBytes) {
  Write("report.txt", "hello");
  Write("a/b/c.bin", std::string("\0\1\2", 3));
  Write("empty", "");
  std::vector<ResultFile> files = {{"stdout", "o"}};
  ASSERT_TRUE(CollectOutputs(out_, OutputLimitsFor(1 << 20, 1), &files).ok());
  EXPECT_EQ(Paths(files), (std::vector<std::string>{"outputs/a/b/c.bin", "outputs/empty",
                                                    "outputs/report.txt", "stdout"}));
  for (const auto& f : files) {
    if (f.path == "outputs/a/b/c.bin") {
      EXPECT_EQ(f.data, std::string("\0\1\2", 3));
    } else if (f.path == "outputs/report.txt") {
      EXPECT_EQ(f.data, "hello");
    }
    EXPECT_FALSE(f.executable);
  }
}

TEST_F(WorkerOutputCollection, SymlinksFifosAndEmptyDirectoriesAreSkipped) {
  testing::WriteFile(dir_.Join("secret"), "outside");
  Write("kept", "k");
  fs::create_symlink(dir_.Join("secret"), out_ + "/link-to-file");
  fs::create_directories(dir_.Join("elsewhere"));
  testing::WriteFile(dir_.Join("elsewhere/x"), "outside too");
  fs::create_directory_symlink(dir_.Join("elsewhere"), out_ + "/link-to-dir");
  ASSERT_EQ(mkfifo((out_ + "/fifo").c_str(), 0600), 0);
  fs::create_directories(out_ + "/empty-dir");
  std::vector<ResultFile> files;
  ASSERT_TRUE(CollectOutputs(out_, OutputLimitsFor(1 << 20, 0), &files).ok());
  EXPECT_EQ(Paths(files), std::vector<std::string>{"outputs/kept"});
}

TEST_F(WorkerOutputCollection, MoreFilesThanTheLimitLeavesEveryOutputOut) {
  for (int i = 0; i < 4; ++i) Write("f" + std::to_string(i), "x");
  OutputLimits l = OutputLimitsFor(1 << 20, 0);
  l.max_files = 3;
  std::vector<ResultFile> files = {{"stdout", ""}};
  Status s = CollectOutputs(out_, l, &files);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "more than 3 output files (a result holds at most 4096 files); no output file was kept");
  EXPECT_EQ(files.size(), 1u);
  l.max_files = 4;
  EXPECT_TRUE(CollectOutputs(out_, l, &files).ok());
  EXPECT_EQ(files.size(), 5u);
}

TEST_F(WorkerOutputCollection, MoreBytesThanTheLimitLeavesEveryOutputOut) {
  Write("a", std::string(600, 'a'));
  Write("b", std::string(400, 'b'));
  std::vector<ResultFile> files;
  EXPECT_TRUE(CollectOutputs(out_, OutputLimitsFor(1000, 0), &files).ok());
  EXPECT_EQ(files.size(), 2u);
  files.clear();
  Status s = CollectOutputs(out_, OutputLimitsFor(999, 0), &files);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "outputs exceed this ledger's result limit of 999 bytes; no output file was kept");
  EXPECT_TRUE(files.empty());
}

TEST_F(WorkerOutputCollection, DirectoriesDeeperThanAResultTreeLeaveEveryOutputOut) {
  // outputs/ is depth 1, so outputs/d1/.../d15 is a tree at depth 16: the
  // deepest the ledger takes.
  std::string ok_path;
  for (int i = 1; i <= 15; ++i) ok_path += "d" + std::to_string(i) + "/";
  Write(ok_path + "file", "x");
  std::vector<ResultFile> files;
  Status s = CollectOutputs(out_, OutputLimitsFor(1 << 20, 0), &files);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Paths(files), std::vector<std::string>{"outputs/" + ok_path + "file"});
  // One more level, even without a file in it, is refused.
  fs::create_directories(out_ + "/" + ok_path + "d16");
  files.clear();
  s = CollectOutputs(out_, OutputLimitsFor(1 << 20, 0), &files);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "outputs are nested deeper than the 16 levels a result tree may have; no output file "
            "was kept");
  EXPECT_TRUE(files.empty());
}

}  // namespace
}  // namespace gatos::worker
