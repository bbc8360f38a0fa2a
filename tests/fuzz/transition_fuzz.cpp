// libFuzzer target: the differential test of the one transition function
// (gatos/model/transition.h) driven by the fuzzer's bytes instead of a seed
// (tests/support/random_ledger.h): random requests through the real ledger
// writer, then the auditor's replay of the log. Invariant: the replay
// reaches the writer's records and refs, with no problem.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "random_ledger.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char tmpl[] = "/tmp/gatos-transition-fuzz-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (!dir) abort();
  gatos::testing::ByteChoices choose(std::string_view(reinterpret_cast<const char*>(data), size));
  gatos::testing::RandomLedgerRun run = gatos::testing::RunRandomLedger(choose, 200, dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!run.error.empty()) {
    std::fprintf(stderr, "setup: %s\n", run.error.c_str());
    abort();
  }
  if (!run.audit.problems.empty()) {
    for (const auto& p : run.audit.problems) std::fprintf(stderr, "%s: %s\n", p.check.c_str(), p.detail.c_str());
    abort();  // the writer and the replay disagree
  }
  return 0;
}
