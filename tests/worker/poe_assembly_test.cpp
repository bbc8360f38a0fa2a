// The proof of execution as the worker fills it in: what a run, a failure
// to start, an input that cannot be fetched and a cancel leave in it.
#include "gatos/worker/poe_assembly.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gatos::worker {
namespace {

const std::string kHex(64, 'a');

RunnerIdentity Runner() {
  return {"ed25519:" + std::string(64, 'b'), "blake3:" + std::string(64, 'c'), "gatos-worker 0.1.0",
          "linux-x86_64"};
}

Poe Started() { return StartPoe(Runner(), kHex, 3, 1024, 1'700'000'000'000); }

TEST(WorkerPoeAssembly, StartFillsWhatIsKnownAtTheClaim) {
  Poe p = Started();
  EXPECT_EQ(p.job_id, "blake3:" + kHex);
  EXPECT_EQ(p.worker_id, Runner().worker_id);
  EXPECT_EQ(p.lease_epoch, 3);
  EXPECT_EQ(p.runner_program, Runner().program);
  EXPECT_EQ(p.runner_version, "gatos-worker 0.1.0");
  EXPECT_EQ(p.runner_platform, "linux-x86_64");
  EXPECT_EQ(p.stdout_cap, 1024);
  EXPECT_EQ(p.started_at, "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(p.status, "");
  EXPECT_EQ(p.finished_at, "");
}

TEST(WorkerPoeAssembly, ARunRecordsItsExitTruncationTimesAndStreams) {
  ExecResult x;
  x.exit_code = 2;
  x.stdout_data = "out";
  x.stderr_data = "err";
  x.stdout_truncated = true;
  x.started_ms = 1'700'000'000'100;
  x.finished_ms = 1'700'000'001'250;
  Poe p = Started();
  std::vector<ResultFile> files;
  RecordRun(x, false, &p, &files);
  EXPECT_EQ(p.status, "failed");
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(p.signal, std::nullopt);
  EXPECT_FALSE(p.timed_out);
  EXPECT_TRUE(p.stdout_truncated);
  EXPECT_FALSE(p.stderr_truncated);
  EXPECT_EQ(p.started_at, "2023-11-14T22:13:20.100Z");
  EXPECT_EQ(p.finished_at, "2023-11-14T22:13:21.250Z");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "stdout");
  EXPECT_EQ(files[0].data, "out");
  EXPECT_EQ(files[1].path, "stderr");
  EXPECT_EQ(files[1].data, "err");
  // A run's failure has no reason: the ledger may retry it (policy.h).
}

TEST(WorkerPoeAssembly, ASignalIsRecordedAsTheSignalAndBubblewrapsCodeAsTheCode) {
  ExecResult killed;
  killed.signal = 9;
  Poe p = Started();
  std::vector<ResultFile> files;
  RecordRun(killed, false, &p, &files);
  EXPECT_EQ(p.signal, 9);
  EXPECT_EQ(p.exit_code, std::nullopt);
  ExecResult bwrap;
  bwrap.exit_code = 137;
  Poe q = Started();
  RecordRun(bwrap, false, &q, &files);
  EXPECT_EQ(q.status, "failed");
  EXPECT_EQ(q.exit_code, 137);
  EXPECT_EQ(q.signal, std::nullopt);
}

TEST(WorkerPoeAssembly, ATimeoutAndACancelSayWhatHappened) {
  ExecResult t;
  t.signal = 15;
  t.timed_out = true;
  Poe p = Started();
  std::vector<ResultFile> files;
  RecordRun(t, false, &p, &files);
  EXPECT_EQ(p.status, "timed-out");
  EXPECT_TRUE(p.timed_out);
  ExecResult c;
  c.signal = 15;
  c.stopped = true;
  Poe q = Started();
  RecordRun(c, true, &q, &files);
  EXPECT_EQ(q.status, "aborted");
  EXPECT_EQ(q.reason, "cancelled by the ledger");
}

TEST(WorkerPoeAssembly, ARunThatCouldNotBeSupervisedFailsWithTheReasonAndNoStreams) {
  Poe p = Started();
  std::vector<ResultFile> files;
  RecordRun(Result<ExecResult>(InternalError("the supervisor died")), false, &p, &files);
  EXPECT_EQ(p.status, "failed");
  EXPECT_EQ(p.reason, "supervising the job failed: the supervisor died");
  EXPECT_TRUE(files.empty());
}

TEST(WorkerPoeAssembly, FailuresBeforeTheRunHaveFinalReasons) {
  Poe p = Started();
  RecordStartFailure(NotFoundError("nosuch: not found in PATH"), &p);
  EXPECT_EQ(p.status, "failed");
  EXPECT_EQ(p.reason, "nosuch: not found in PATH");
  EXPECT_FALSE(p.transient);
  Poe q = Started();
  RecordUnreadableInputs(InvalidArgumentError("inputs[0]: bad url"), &q);
  EXPECT_EQ(q.status, "failed");
  EXPECT_EQ(q.reason, "the job's inputs cannot be read: inputs[0]: bad url");
  EXPECT_FALSE(q.transient);
}

TEST(WorkerPoeAssembly, InputFailuresAreMarkedTransientOrPermanent) {
  Poe p = Started();
  RecordInputFailure(UnavailableError("input 0: connection refused"), true, &p);
  EXPECT_EQ(p.status, "failed");
  EXPECT_TRUE(p.transient);
  EXPECT_EQ(p.reason, "input 0: connection refused [transient: may succeed when retried]");
  Poe q = Started();
  RecordInputFailure(NotFoundError("input 0: repository not found"), false, &q);
  EXPECT_EQ(q.status, "failed");
  EXPECT_FALSE(q.transient);
  EXPECT_EQ(q.reason, "input 0: repository not found [permanent: not retried by the worker]");
}

TEST(WorkerPoeAssembly, ALongInputFailureIsCutWithinTheReasonLimitOnACharacterBoundary) {
  Poe p = Started();
  // The two bytes of U+00E9 would end at byte 2001: the reason stops before it.
  RecordInputFailure(UnavailableError(std::string(1999, 'x') + "\xC3\xA9 tail"), true, &p);
  EXPECT_EQ(p.reason, std::string(1999, 'x'));
  EXPECT_TRUE(p.transient);
}

TEST(WorkerPoeAssembly, CancelsBeforeTheRunAreAborted) {
  Poe p = Started();
  RecordCancelled(CancelledAt::kBeforeStart, &p);
  EXPECT_EQ(p.status, "aborted");
  EXPECT_EQ(p.reason, "cancelled by the ledger before it started");
  Poe q = Started();
  RecordCancelled(CancelledAt::kWhileFetchingInputs, &q);
  EXPECT_EQ(q.status, "aborted");
  EXPECT_EQ(q.reason, "cancelled by the ledger while its inputs were fetched");
}

TEST(WorkerPoeAssembly, FinishAddsTheFinishTimeAndEmptyStreamsOnlyWhenMissing) {
  Poe p = Started();
  RecordCancelled(CancelledAt::kBeforeStart, &p);
  std::vector<ResultFile> files;
  FinishPoe(1'700'000'002'000, &p, &files);
  EXPECT_EQ(p.finished_at, "2023-11-14T22:13:22.000Z");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "stdout");
  EXPECT_EQ(files[0].data, "");
  EXPECT_EQ(files[1].path, "stderr");

  Poe ran = Started();
  ran.finished_at = "2023-11-14T22:13:21.000Z";
  std::vector<ResultFile> streams = {{"stdout", "x"}, {"stderr", "y"}};
  FinishPoe(1'700'000'009'000, &ran, &streams);
  EXPECT_EQ(ran.finished_at, "2023-11-14T22:13:21.000Z");
  EXPECT_EQ(streams[0].data, "x");
}

TEST(WorkerPoeAssembly, AnUndeliverableResultBecomesASmallFailedOneWithTheRunsFacts) {
  Poe reported = Started();
  reported.status = "succeeded";
  reported.exit_code = 0;
  reported.outputs = {{"outputs/big", 2'000'000, "blake3:" + std::string(64, 'd')}};
  Poe p = UndeliverablePoe(reported, 2'000'345, "maximum payload exceeded");
  EXPECT_EQ(p.status, "failed");
  EXPECT_TRUE(p.outputs.empty());
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.lease_epoch, 3);
  EXPECT_EQ(
      p.reason,
      "the result of 2000345 bytes could not be sent to the ledger: maximum payload exceeded");
}

}  // namespace
}  // namespace gatos::worker
