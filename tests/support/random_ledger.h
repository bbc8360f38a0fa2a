// Random request sequences through the real ledger writer, then the
// auditor's replay of the log they produced: the differential test of the
// one transition function (gatos/model/transition.h). Every transition kind comes
// up: submits (and resubmits), claims and takeovers by several workers
// (right and wrong epochs), renewals by holders and by others, results of
// every status from holders and from stale owners (retries by the policy),
// cancels and re-runs (by the submitter and by a worker that may not),
// aborts, revocations (policy changes that drop and re-admit a worker),
// pruning, and a clock that moves so that leases expire and backoffs end.
//
// The writer decides each request with ApplyTransition; the replay decides
// each logged transition with it again and compares the records it reaches
// with the head's state index, exactly, and the refs with the repository.
// A run is good when the replay reports no problem.
//
// Shared by tests/audit/transition_differential_test.cpp (fixed seeds) and
// tests/fuzz/transition_fuzz.cpp (choices from the fuzzer's bytes). No gtest.
//
// Thread-safety: one run per thread, each in its own directory.
#ifndef GATOS_TESTS_SUPPORT_RANDOM_LEDGER_H_
#define GATOS_TESTS_SUPPORT_RANDOM_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "gatos/audit/log_audit.h"

namespace gatos::testing {

// Where a run's choices come from.
class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  // A value in [0, bound) (bound >= 1).
  virtual uint64_t Next(uint64_t bound) = 0;
  // No more choices: the run stops.
  virtual bool Exhausted() const { return false; }
};

// splitmix64 from a seed.
class SeededChoices : public ChoiceSource {
 public:
  explicit SeededChoices(uint64_t seed) : state_(seed) {}
  uint64_t Next(uint64_t bound) override;

 private:
  uint64_t state_;
};

// The fuzzer's bytes, two at a time.
class ByteChoices : public ChoiceSource {
 public:
  explicit ByteChoices(std::string_view bytes) : bytes_(bytes) {}
  uint64_t Next(uint64_t bound) override;
  bool Exhausted() const override { return pos_ + 2 > bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

struct RandomLedgerRun {
  std::string error;                      // setup or I/O trouble ("" = none)
  int steps = 0;
  int accepted = 0;                       // requests the writer accepted
  int refused = 0;                        // and refused (with their class)
  std::map<std::string, int> logged;      // transitions logged, by kind
  std::map<std::string, int> refusals;    // refusals, by error class
  int signed_leases = 0;                  // lease commits granted in the old form
  int unsigned_leases = 0;                // and in the current one
  LogAuditReport audit;                   // the replay of the whole log
};

// Runs up to `max_steps` random requests against a new ledger in `dir` (an
// empty directory), closes the writer, and audits the log. The first
// `old_form_steps` are written as ledgers were before lease commits went
// unsigned (each signed by the ledger key); then the writer is closed and
// opened again in the current form, as an upgraded gatosd would.
RandomLedgerRun RunRandomLedger(ChoiceSource& choose, int max_steps, const std::string& dir,
                                int old_form_steps = 0);

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_RANDOM_LEDGER_H_
