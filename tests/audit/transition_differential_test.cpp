// The differential test of the one transition function (gatos/model/transition.h):
// random request sequences through the real ledger writer, then the
// auditor's replay of the log they produced must reach exactly the records
// the writer keeps (the head's state index) and the refs it wrote, with no
// problem. Fixed seeds here; tests/fuzz/transition_fuzz.cpp drives the same
// run from a fuzzer's bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "random_ledger.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

std::string Problems(const LogAuditReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += p.check + ": " + p.detail + "\n";
  return s;
}

TEST(TransitionDifferential, TheReplayReachesTheWritersRecordsAndRefs) {
  constexpr int kSeeds = 24;
  constexpr int kSteps = 120;
  std::map<std::string, int> logged, refusals;
  int accepted = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    SeededChoices choose(static_cast<uint64_t>(seed));
    RandomLedgerRun run = RunRandomLedger(choose, kSteps, dir.path());
    ASSERT_EQ(run.error, "");
    EXPECT_EQ(run.steps, kSteps);
    EXPECT_TRUE(run.audit.problems.empty()) << Problems(run.audit);
    EXPECT_GT(run.audit.commits, 0);
    accepted += run.accepted;
    for (const auto& [k, n] : run.logged) logged[k] += n;
    for (const auto& [k, n] : run.refusals) refusals[k] += n;
  }
  // The runs covered every transition kind and every refusal class the
  // rules have, or the test would prove little.
  for (const char* kind : {"submit", "claim", "takeover", "renew", "result", "attempt", "cancel", "retry", "abort",
                           "revoke", "prune", "policy"}) {
    EXPECT_GT(logged[kind], 0) << "no " << kind << " was logged";
  }
  for (const char* error : {"lost_race", "stale_owner", "terminal", "cancelled", "invalid", "unauthorized"}) {
    EXPECT_GT(refusals[error], 0) << "no request was refused as " << error;
  }
  EXPECT_GT(accepted, kSeeds * 10);
}

// A ledger written before lease commits went unsigned (each signed by the
// ledger key), then carried on by the current writer: its replay accepts
// both forms, in one log.
TEST(TransitionDifferential, ALedgerWrittenInTheOldFormAndUpgradedStillVerifies) {
  constexpr int kSeeds = 6;
  constexpr int kSteps = 120;
  int signed_leases = 0, unsigned_leases = 0;
  for (int seed = 101; seed < 101 + kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    SeededChoices choose(static_cast<uint64_t>(seed));
    RandomLedgerRun run = RunRandomLedger(choose, kSteps, dir.path(), kSteps / 2);
    ASSERT_EQ(run.error, "");
    EXPECT_TRUE(run.audit.problems.empty()) << Problems(run.audit);
    signed_leases += run.signed_leases;
    unsigned_leases += run.unsigned_leases;
  }
  EXPECT_GT(signed_leases, 0);
  EXPECT_GT(unsigned_leases, 0);
}

}  // namespace
}  // namespace gatos::testing
