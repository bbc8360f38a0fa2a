// Torn mirrors: `git clone --mirror` of a ledger while jobs land, audited
// with `gatos verify --all` (docs/auditor-guide.md, section 1). git's ref
// advertisement is no snapshot, so a clone may hold refs newer or older
// than the log head it fetched. On an honest ledger every audit must exit
// 0 or 3 ("mirror is behind its refs: fetch again"), never with a tamper
// finding; and a copy made once the ledger is quiet verifies exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

bool Has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::string LogHead(const std::string& repo) {
  RunResult r = gatos::testing::Run({"git", "-C", repo, "rev-parse", "--verify", "-q", "refs/gatos/log"});
  return r.out;
}

TEST(TornMirrorTest, ClonesTakenWhileJobsLandAreNeverTamperFindings) {
  const int kJobs = std::getenv("GATOS_TORN_JOBS") ? std::atoi(std::getenv("GATOS_TORN_JOBS")) : 400;
  const int kClones = 10;
  Stack s;
  ASSERT_TRUE(s.Start());
  s.StartWorker(0, {"--sandbox", "off", "--concurrency", "4"});
  s.StartWorker(1, {"--sandbox", "off", "--concurrency", "4"});
  std::atomic<int> pushed{0};
  std::vector<std::string> ids;
  std::thread pusher([&] {
    for (int i = 0; i < kJobs; i += 50) {
      std::vector<std::string> yamls;
      for (int j = i; j < std::min(kJobs, i + 50); ++j) {
        yamls.push_back("command: [\"/bin/echo\", \"torn " + std::to_string(j) + "\"]\ntimeout: 60\n");
      }
      for (auto& id : s.PushJobs(yamls)) ids.push_back(id);
      pushed += static_cast<int>(yamls.size());
    }
  });
  int fetch_again = 0, clean = 0, torn = 0;
  std::string failures;
  for (int c = 0; c < kClones; ++c) {
    std::string clone = s.dir().Join("clone" + std::to_string(c) + ".git");
    if (gatos::testing::Run({"git", "clone", "-q", "--mirror", "file://" + s.ledger(), clone}).exit_code != 0) {
      failures += "git clone --mirror failed\n";
      continue;
    }
    // A fetch is not a snapshot: reproduce one that read its refs and its log
    // at different moments, as git's advertisement on a busy ledger can. The
    // log (or the job refs) of the clone come from a later batch than the rest.
    std::string log_at_clone = LogHead(clone);
    bool moved = PollFor(60000, [&] { return LogHead(s.ledger()) != log_at_clone; });
    if (moved) {
      std::string what = c % 2 ? "+refs/gatos/log:refs/gatos/log" : "+refs/gatos/jobs/*:refs/gatos/jobs/*";
      if (gatos::testing::Run({"git", "-C", clone, "fetch", "-q", "file://" + s.ledger(), what}).exit_code != 0) {
        failures += "git fetch failed\n";
        continue;
      }
      ++torn;
    }
    RunResult v = s.Gatos({"verify", "--repo", clone, "--all"}, 300);
    if (v.exit_code == 3) {
      ++fetch_again;
      EXPECT_TRUE(Has(v.err, "mirror is behind its refs: fetch again")) << v.err;
    } else if (v.exit_code == 0) {
      ++clean;
    } else {
      failures += "clone " + std::to_string(c) + " exit " + std::to_string(v.exit_code) + ":\n" + v.out + v.err;
    }
    EXPECT_FALSE(Has(v.out, "FAIL")) << v.out;
  }
  pusher.join();
  EXPECT_EQ(failures, "");
  EXPECT_GT(torn, 0) << "no batch landed while the clones were taken";
  EXPECT_GT(fetch_again, 0) << "torn copies were made; some must be behind";
  std::cout << "torn mirrors: " << clean << " verified, " << fetch_again << " fetch again, of " << kClones
            << " clones taken while " << kJobs << " jobs landed (" << torn << " made torn on purpose)\n";
  // Quiet now: every job finished, and a fresh copy verifies exactly.
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), ids.begin(), ids.end());
  for (const char* a : {"--ledger", "", "--timeout", "240"}) wait.push_back(a);
  wait[wait.size() - 3] = s.ledger();
  RunResult w = s.Gatos(wait, 300);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  std::string final_clone = s.dir().Join("final.git");
  ASSERT_EQ(gatos::testing::Run({"git", "clone", "-q", "--mirror", s.ledger(), final_clone}).exit_code, 0);
  RunResult v = s.Gatos({"verify", "--repo", final_clone, "--all"}, 300);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

}  // namespace
}  // namespace gatos::testing
