// The signed result of a finished job, and the steps that make a result the
// ledger would refuse into a failed one that it accepts: every result built
// here is checked with the ledger's own CheckResultCommit.
#include "gatos/worker/result_assembly.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gatos/model/manifest.h"
#include "gatos/model/result_path.h"
#include "gatos/model/rpc.h"
#include "gatos/worker/poe_assembly.h"
#include "test_util.h"

namespace gatos::worker {
namespace {

namespace fs = std::filesystem;

class WorkerResultAssembly : public ::testing::Test {
 protected:
  WorkerResultAssembly()
      : key_(Ed25519PrivateKey::FromSeed(std::array<uint8_t, 32>{7}, "worker")),
        out_(dir_.Join("out")) {
    manifest_.command = {"/bin/sh", "-c"};
    manifest_.args = {"true"};
    manifest_.timeout_seconds = 60;
    manifest_json_ = CanonicalManifest(manifest_);
    job_hex_ = JobIdHexOfCanonical(manifest_json_);
    fs::create_directories(out_);
  }

  ResultContext Context(int64_t max_result_bytes = 4 << 20) const {
    ResultContext c;
    c.job_commit = std::string(40, '1');
    c.lease_commit = std::string(40, '2');
    c.max_result_bytes = max_result_bytes;
    c.committer_name = "gatos worker test";
    c.key = &key_;
    c.now_ms = 1'700'000'005'000;
    return c;
  }

  // A run that exited `code` with these streams, as the runner leaves it.
  Poe Ran(int code, std::vector<ResultFile>* files, const std::string& out = "out\n",
          const std::string& err = "") const {
    Poe p = StartPoe({key_.public_key().WorkerId(), "blake3:" + std::string(64, 'c'),
                      "gatos-worker 0.1.0", "linux-x86_64"},
                     job_hex_, 1, 1 << 20, 1'700'000'000'000);
    ExecResult x;
    x.exit_code = code;
    x.stdout_data = out;
    x.stderr_data = err;
    x.started_ms = 1'700'000'000'000;
    x.finished_ms = 1'700'000'001'000;
    RecordRun(x, false, &p, files);
    FinishPoe(1'700'000'001'000, &p, files);
    return p;
  }

  void Write(const std::string& rel, const std::string& data) {
    fs::create_directories(fs::path(out_ + "/" + rel).parent_path());
    testing::WriteFile(out_ + "/" + rel, data);
  }

  // The ledger's view of the result: the frame decoded and CheckResultCommit.
  ResultReport Check(const AssembledResult& r) const {
    nlohmann::json header;
    std::string_view batch;
    Status framed = rpc::DecodeFrame(r.frame, 4096, &header, &batch);
    EXPECT_TRUE(framed.ok()) << framed.message();
    EXPECT_EQ(header.value("commit", ""), r.commit_id);
    auto objects = DecodeObjectBatch(batch, BatchLimits{});
    EXPECT_TRUE(objects.ok()) << objects.status().message();
    objects_ = objects.ok() ? *objects : std::vector<GitObject>{};
    return CheckResultCommit(BatchLookup(&objects_, nullptr), r.commit_id);
  }

  // All objects of a result together, as the ledger counts them.
  size_t Bytes(const AssembledResult& r) const {
    EXPECT_TRUE(Check(r).ok());
    size_t bytes = 0;
    for (const auto& o : objects_) bytes += o.data.size();
    return bytes;
  }

  // A succeeded run without outputs: the smallest result with an attestation.
  size_t BaseBytes() {
    std::vector<ResultFile> files;
    Poe poe = Ran(0, &files);
    return Bytes(AssembleResult(Context(), poe, files, manifest_json_, ""));
  }

  static std::vector<std::string> Paths(const ResultReport& report) {
    std::vector<std::string> p;
    for (const auto& f : report.parsed.tree_files) p.push_back(f.path);
    return p;
  }

  Ed25519PrivateKey key_;
  Manifest manifest_;
  std::string manifest_json_;
  std::string job_hex_;
  testing::TempDir dir_;
  std::string out_;
  mutable std::vector<GitObject> objects_;
};

TEST_F(WorkerResultAssembly, ASucceededRunWithOutputsIsAResultTheLedgerAccepts) {
  Write("report.txt", "done\n");
  Write("sub/data.bin", "\x01\x02");
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult r = AssembleResult(Context(), poe, files, manifest_json_, out_);
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.poe.status, "succeeded");
  EXPECT_EQ(r.poe.reason, "");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok()) << report.first_failure()->name << ": "
                           << report.first_failure()->detail;
  EXPECT_EQ(Paths(report),
            (std::vector<std::string>{"attestation.intoto.json", "outputs/report.txt",
                                      "outputs/sub/data.bin", "stderr", "stdout"}));
  EXPECT_EQ(report.parsed.status, "succeeded");
  EXPECT_EQ(report.parsed.job_hex, job_hex_);
  EXPECT_EQ(report.parsed.epoch, 1);
  EXPECT_EQ(report.parsed.poe.exit_code, 0);
  EXPECT_EQ(report.parsed.parents,
            (std::vector<std::string>{std::string(40, '1'), std::string(40, '2')}));
}

TEST_F(WorkerResultAssembly, CapsAndTruncationMarksReachPoeJson) {
  std::vector<ResultFile> files;
  Poe poe = Ran(1, &files, std::string(100, 'o'), "e");
  poe.stdout_truncated = true;
  poe.stdout_cap = 100;
  AssembledResult r = AssembleResult(Context(), poe, files, manifest_json_, "");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.parsed.status, "failed");
  EXPECT_EQ(report.parsed.poe.stdout_cap, 100);
  EXPECT_TRUE(report.parsed.poe.stdout_truncated);
  EXPECT_FALSE(report.parsed.poe.stderr_truncated);
  EXPECT_EQ(report.parsed.poe.exit_code, 1);
  EXPECT_EQ(report.parsed.poe.reason, "");
}

TEST_F(WorkerResultAssembly, ATransientInputFailureKeepsItsMarkAndReason) {
  Poe poe = StartPoe({key_.public_key().WorkerId(), "blake3:" + std::string(64, 'c'), "v", "linux"},
                     job_hex_, 2, 1024, 1'700'000'000'000);
  RecordInputFailure(UnavailableError("input 0: connection refused"), true, &poe);
  std::vector<ResultFile> files;
  FinishPoe(1'700'000'000'500, &poe, &files);
  ResultContext c = Context();
  AssembledResult r = AssembleResult(c, poe, files, manifest_json_, out_);
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.parsed.status, "failed");
  EXPECT_TRUE(report.parsed.poe.transient);
  EXPECT_EQ(report.parsed.poe.reason,
            "input 0: connection refused [transient: may succeed when retried]");
  EXPECT_EQ(report.parsed.epoch, 2);
  EXPECT_EQ(Paths(report),
            (std::vector<std::string>{"attestation.intoto.json", "stderr", "stdout"}));
}

TEST_F(WorkerResultAssembly, AnOutputNameTheLedgerRefusesFailsTheJobWithTheLedgersReason) {
  Write(".git/config", "[core]\n");
  Write("fine.txt", "ok");
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files, "made\n");
  AssembledResult r = AssembleResult(Context(), poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_EQ(r.poe.reason,
            CheckResultPath("outputs/.git/config").message() + "; no output file was kept");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.parsed.poe.reason, r.poe.reason);
  EXPECT_EQ(report.parsed.poe.exit_code, 0);  // the run's facts stay
  EXPECT_EQ(Paths(report),
            (std::vector<std::string>{"attestation.intoto.json", "stderr", "stdout"}));
}

TEST_F(WorkerResultAssembly, OutputsOverTheLeasesLimitFailTheJobWithoutOutputs) {
  const int64_t limit = static_cast<int64_t>(BaseBytes()) + 1000;
  Write("huge", std::string(limit + 1, 'h'));
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult r = AssembleResult(Context(limit), poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_EQ(r.poe.reason, "outputs exceed this ledger's result limit of " + std::to_string(limit) +
                              " bytes; no output file was kept");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(Paths(report),
            (std::vector<std::string>{"attestation.intoto.json", "stderr", "stdout"}));
}

TEST_F(WorkerResultAssembly, AResultOverTheLimitIsBuiltAgainWithoutOutputs) {
  // The output fits the limit, but with poe.json, the attestation, trees and
  // the commit the whole result does not.
  const size_t limit = BaseBytes() + 1000;
  Write("out.bin", std::string(limit - 10, 'x'));
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult r =
      AssembleResult(Context(static_cast<int64_t>(limit)), poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_EQ(
      r.poe.reason.rfind("the result could not be reported as it was: the result would be ", 0), 0u)
      << r.poe.reason;
  EXPECT_NE(r.poe.reason.find("over this ledger's limit of " + std::to_string(limit) +
                              " bytes and 4096 objects"),
            std::string::npos)
      << r.poe.reason;
  EXPECT_EQ(r.poe.reason.find("dropped as well"), std::string::npos) << r.poe.reason;
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(Paths(report),
            (std::vector<std::string>{"attestation.intoto.json", "stderr", "stdout"}));
  EXPECT_LE(Bytes(r), limit);
}

TEST_F(WorkerResultAssembly, StreamsOverTheLimitLeaveTheSmallestResultThereIs) {
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files, std::string(6000, 'o'), std::string(10, 'e'));
  poe.stdout_truncated = true;
  AssembledResult r = AssembleResult(Context(5000), poe, files, manifest_json_, out_);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_EQ(
      r.poe.reason.rfind("the result could not be reported as it was: the result would be ", 0), 0u)
      << r.poe.reason;
  EXPECT_TRUE(r.poe.reason.ends_with(
      "; stdout, stderr and the provenance attestation were dropped as well"))
      << r.poe.reason;
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(Paths(report), (std::vector<std::string>{"stderr", "stdout"}));
  for (const auto& f : report.parsed.tree_files) EXPECT_EQ(f.size, 0u) << f.path;
  EXPECT_TRUE(report.parsed.poe.stdout_truncated);  // the run's own marks stay
}

TEST_F(WorkerResultAssembly, AsManyOutputFilesAsTheLedgerTakesAndNotOneMore) {
  // The ledger takes 4,096 files in a result; poe.json, stdout, stderr and
  // the attestation leave 4,092 for outputs (empty files: one blob for all).
  for (int i = 0; i < 4092; ++i) Write("f" + std::to_string(i), "");
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult r = AssembleResult(Context(), poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "succeeded") << r.poe.reason;
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok()) << report.first_failure()->name << ": "
                           << report.first_failure()->detail;
  EXPECT_EQ(report.parsed.tree_files.size(), 4095u);  // and poe.json

  Write("one-more", "");
  r = AssembleResult(Context(), poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_EQ(
      r.poe.reason,
      "more than 4092 output files (a result holds at most 4096 files); no output file was kept");
  report = Check(r);
  ASSERT_TRUE(report.ok()) << report.first_failure()->name << ": "
                           << report.first_failure()->detail;

  // Without an attestation there is room for one more.
  r = AssembleResult(Context(), poe, files, "", out_);
  EXPECT_EQ(r.poe.status, "succeeded") << r.poe.reason;
  report = Check(r);
  ASSERT_TRUE(report.ok()) << report.first_failure()->name << ": "
                           << report.first_failure()->detail;
  EXPECT_EQ(report.parsed.tree_files.size(), 4095u);
}

TEST_F(WorkerResultAssembly, TooManyObjectsForTheLedgerFailTheJobWithoutOutputs) {
  for (int i = 0; i < 6; ++i) Write("f" + std::to_string(i), "distinct " + std::to_string(i));
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  ResultContext c = Context();
  c.max_objects = 10;
  AssembledResult r = AssembleResult(c, poe, files, manifest_json_, out_);
  EXPECT_EQ(r.poe.status, "failed");
  EXPECT_NE(r.poe.reason.find(" objects, over this ledger's limit of 4194304 bytes and 10 objects"),
            std::string::npos)
      << r.poe.reason;
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_LE(objects_.size(), 10u);
}

TEST_F(WorkerResultAssembly, AnAttestationThatCannotBeMadeIsAWarningNotAFailure) {
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult r =
      AssembleResult(Context(), poe, files, "{\"not\":\"the job's manifest\"}", out_);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].rfind("no provenance attestation: ", 0), 0u) << r.warnings[0];
  EXPECT_EQ(r.poe.status, "succeeded");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(Paths(report), (std::vector<std::string>{"stderr", "stdout"}));
}

TEST_F(WorkerResultAssembly, AnUndeliverableResultsReplacementIsSmallAndAccepted) {
  Write("big", std::string(3000, 'b'));
  std::vector<ResultFile> files;
  Poe poe = Ran(0, &files);
  AssembledResult sent = AssembleResult(Context(), poe, files, manifest_json_, out_);
  Poe small = UndeliverablePoe(sent.poe, sent.frame.size(), "maximum payload exceeded");
  AssembledResult r = AssembleResult(Context(), small, {{"stdout", ""}, {"stderr", ""}}, "", "");
  ResultReport report = Check(r);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.parsed.status, "failed");
  EXPECT_EQ(report.parsed.poe.reason,
            "the result of " + std::to_string(sent.frame.size()) +
                " bytes could not be sent to the ledger: maximum payload exceeded");
  EXPECT_EQ(Paths(report), (std::vector<std::string>{"stderr", "stdout"}));
}

}  // namespace
}  // namespace gatos::worker
