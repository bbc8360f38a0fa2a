// The status of a run from what the launcher reports: every case, in the
// order they are decided.
#include "gatos/worker/run_status.h"

#include <gtest/gtest.h>

#include <optional>

namespace gatos::worker {
namespace {

ExecResult Exited(int code) {
  ExecResult r;
  r.exit_code = code;
  return r;
}

ExecResult Killed(int signal) {
  ExecResult r;
  r.signal = signal;
  return r;
}

TEST(WorkerRunStatus, ExitZeroSucceeded) {
  EXPECT_EQ(StatusOfRun(Exited(0), false), (RunStatus{"succeeded", ""}));
}

TEST(WorkerRunStatus, AnyOtherExitCodeFailed) {
  for (int code : {1, 2, 126, 127, 255})
    EXPECT_EQ(StatusOfRun(Exited(code), false), (RunStatus{"failed", ""})) << code;
}

TEST(WorkerRunStatus, ASignalFailed) {
  EXPECT_EQ(StatusOfRun(Killed(9), false), (RunStatus{"failed", ""}));
  EXPECT_EQ(StatusOfRun(Killed(15), false), (RunStatus{"failed", ""}));
}

TEST(WorkerRunStatus, BubblewrapsExitCode128PlusNIsAPlainFailure) {
  // bwrap reports a job killed by SIGKILL as exit code 137, not as a signal.
  EXPECT_EQ(StatusOfRun(Exited(128 + 9), false), (RunStatus{"failed", ""}));
  EXPECT_EQ(StatusOfRun(Exited(128 + 15), false), (RunStatus{"failed", ""}));
}

TEST(WorkerRunStatus, NeitherExitCodeNorSignalFailed) {
  EXPECT_EQ(StatusOfRun(ExecResult{}, false), (RunStatus{"failed", ""}));
}

TEST(WorkerRunStatus, TimedOutWinsOverHowTheProcessEnded) {
  ExecResult r = Killed(15);
  r.timed_out = true;
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"timed-out", ""}));
  r = Exited(0);  // exited 0 on SIGTERM
  r.timed_out = true;
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"timed-out", ""}));
  r = Exited(128 + 9);
  r.timed_out = true;
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"timed-out", ""}));
}

TEST(WorkerRunStatus, StoppedAndCancelledIsAbortedWhateverElseHappened) {
  for (ExecResult r : {Exited(0), Exited(1), Killed(9), Exited(137)}) {
    r.stopped = true;
    EXPECT_EQ(StatusOfRun(r, true), (RunStatus{"aborted", "cancelled by the ledger"}));
    r.timed_out = true;
    EXPECT_EQ(StatusOfRun(r, true), (RunStatus{"aborted", "cancelled by the ledger"}));
  }
}

TEST(WorkerRunStatus, ACancelThatCameAfterTheRunEndedChangesNothing) {
  // Not stopped: the job ended by itself before the cancel reached it.
  EXPECT_EQ(StatusOfRun(Exited(0), true), (RunStatus{"succeeded", ""}));
  EXPECT_EQ(StatusOfRun(Exited(3), true), (RunStatus{"failed", ""}));
  ExecResult t = Killed(15);
  t.timed_out = true;
  EXPECT_EQ(StatusOfRun(t, true), (RunStatus{"timed-out", ""}));
}

}  // namespace
}  // namespace gatos::worker

namespace gatos::worker {
namespace {

// A job a limit ended is failed with the limit's reason, even when its
// timeout fired meanwhile or it exited 0 (its shell survived a killed child).
TEST(WorkerRunStatus, ALimitHitIsAFailureNamingTheLimitAndWinsOverTheTimeout) {
  ExecResult r = Killed(9);
  r.limits = JobLimits{256, 64, 0, 64};
  r.limit_hit = "memory";
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"failed", "killed: memory limit 256 MB"}));
  r.timed_out = true;
  r.limit_hit = "pids";
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"failed", "process limit 64 reached"}));
  r = Exited(0);
  r.limits = JobLimits{0, 0, 0, 64};
  r.limit_hit = "disk";
  EXPECT_EQ(StatusOfRun(r, false), (RunStatus{"failed", "disk limit 64 MB reached"}));
  r.stopped = true;  // cancelled: still aborted
  EXPECT_EQ(StatusOfRun(r, true).status, "aborted");
}

}  // namespace
}  // namespace gatos::worker
