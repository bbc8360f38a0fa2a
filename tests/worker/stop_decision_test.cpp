// What a stopped job becomes: every combination of a lost lease, a cancel
// and a stop.
#include "gatos/worker/stop_decision.h"

#include <gtest/gtest.h>

namespace gatos::worker {
namespace {

TEST(WorkerStopDecision, ALostLeaseIsDiscardedWhateverElseHappened) {
  for (bool cancelled : {false, true}) {
    for (bool stopped : {false, true}) {
      EXPECT_EQ(DisposeOfRun(true, cancelled, stopped), RunDisposition::kDiscardLeaseLost)
          << cancelled << stopped;
    }
  }
}

TEST(WorkerStopDecision, AStopWithoutACancelIsTheShutdownAndIsDiscarded) {
  EXPECT_EQ(DisposeOfRun(false, false, true), RunDisposition::kDiscardShutdown);
}

TEST(WorkerStopDecision, ACancelledJobIsReportedAborted) {
  EXPECT_EQ(DisposeOfRun(false, true, true), RunDisposition::kReport);
  EXPECT_EQ(DisposeOfRun(false, true, false), RunDisposition::kReport);  // before it started
}

TEST(WorkerStopDecision, ARunThatWasNotStoppedIsReported) {
  EXPECT_EQ(DisposeOfRun(false, false, false), RunDisposition::kReport);
}

TEST(WorkerStopDecision, AnyStopThatArrivedBeforeTheCommandStopsItAtOnce) {
  EXPECT_FALSE(StopBeforeItRuns(false, false, false));
  EXPECT_TRUE(StopBeforeItRuns(true, false, false));
  EXPECT_TRUE(StopBeforeItRuns(false, true, false));
  EXPECT_TRUE(StopBeforeItRuns(false, false, true));
}

TEST(WorkerStopDecision, RunningJobsGetTenSecondsAtShutdown) { EXPECT_EQ(kShutdownGraceMs, 10000); }

}  // namespace
}  // namespace gatos::worker
