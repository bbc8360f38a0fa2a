// view_fs_bench: what a job's view refs cost the file system (docs/benchmarks.md,
// section 9). Makes a bare repository in DIR, then writes the `job` ref of N
// new jobs through Ledger::SetViewRefs (the writer's own code: a directory per
// job, a lock file renamed into place), one job at a time, twice: with
// refs/gatos/jobs marked FS_TOPDIR_FL (as gatosd init does) and without. Then
// deletes the second set and writes it again, to show what freed inodes do to
// the next allocations. Prints microseconds per job. Never fails on a time.
//
//   view_fs_bench [--dir DIR] [--jobs N]       (default: a directory in /var/tmp, 3000)
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gatos/git/ledger.h"
#include "gatos/model/blake3.h"
#include "gatos/model/refs.h"
#include "gatos/sys/dir_layout.h"
#include "gatos/sys/flags.h"

namespace fs = std::filesystem;
using gatos::Ledger;

namespace {

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "view_fs_bench: %s\n", m.c_str());
  std::exit(1);
}

double WriteJobs(Ledger& ledger, const std::string& salt, int n) {
  const std::string value(40, 'a');
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    std::string hex = gatos::Blake3Tagged(salt + std::to_string(i)).substr(7);
    auto s = ledger.SetViewRefs({{gatos::kJobsPrefix + hex + "/job", value}});
    if (!s.ok()) Die(s.message());
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 3000;
  const std::vector<gatos::FlagSpec> specs = {{"dir", 0, true, false, "DIR"}, {"jobs", 0, true, false, "N"}};
  gatos::Flags flags;
  if (!flags.Parse({argv + 1, argv + argc}, specs) || !flags.positional().empty() ||
      !flags.GetInt("jobs", 1, 10'000'000, &n)) {
    std::fprintf(stderr, "view_fs_bench: %s\nusage: view_fs_bench %s\n", flags.error().c_str(),
                 gatos::FlagSynopsis(specs).c_str());
    return gatos::kExitUsage;
  }
  if (flags.help()) {
    std::printf("usage: view_fs_bench %s\n", gatos::FlagSynopsis(specs).c_str());
    return gatos::kExitOk;
  }
  std::string dir = flags.GetOr("dir", "/var/tmp/view_fs_bench." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  std::printf("view_fs_bench: %d jobs' view refs in %s\n", n, dir.c_str());
  for (bool topdir : {true, false}) {
    std::string repo = dir + (topdir ? "/topdir.git" : "/plain.git");
    std::string cmd = "git init -q --bare '" + repo + "'";
    if (std::system(cmd.c_str()) != 0) Die("git init failed");
    fs::create_directories(repo + "/refs/gatos/jobs");
    std::string why;
    if (topdir && !gatos::SpreadSubdirectories(repo + "/refs/gatos/jobs", &why)) {
      std::printf("  (cannot mark refs/gatos/jobs FS_TOPDIR_FL here: %s)\n", why.c_str());
    }
    auto ledger = Ledger::Open(repo);
    if (!ledger.ok()) Die(ledger.status().message());
    double first = WriteJobs(**ledger, "first", n);
    std::printf("  %-32s %8.1f us per job\n", topdir ? "FS_TOPDIR_FL, fresh" : "no flag, fresh", first);
    fs::remove_all(repo + "/refs/gatos/jobs", ec);
    fs::create_directories(repo + "/refs/gatos/jobs");
    if (topdir) (void)gatos::SpreadSubdirectories(repo + "/refs/gatos/jobs", &why);
    double again = WriteJobs(**ledger, "again", n);
    std::printf("  %-32s %8.1f us per job\n", topdir ? "FS_TOPDIR_FL, after deleting" : "no flag, after deleting",
                again);
  }
  fs::remove_all(dir, ec);
  return 0;
}
