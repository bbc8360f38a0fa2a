// view_fs_bench: what a job's view refs cost the file system (docs/benchmarks.md,
// section 1). Makes a bare repository in DIR, then writes the `job` ref of N
// new jobs through Ledger::SetViewRefs (the writer's own code: a directory per
// job, a lock file renamed into place), one job at a time, twice: with
// refs/gatos/jobs marked FS_TOPDIR_FL (as gatosd init does) and without. Then
// deletes the second set and writes it again, to show what freed inodes do to
// the next allocations. Prints microseconds per job. Never fails on a time.
//
//   view_fs_bench [--dir DIR] [--jobs N]       (default: a directory in /var/tmp, 3000)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gatos/blake3.h"
#include "gatos/dir_layout.h"
#include "gatos/ledger.h"
#include "gatos/refs.h"

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
  std::string dir;
  int n = 3000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--jobs" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: view_fs_bench [--dir DIR] [--jobs N]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (n <= 0) Die("--jobs must be positive");
  if (dir.empty()) dir = "/var/tmp/view_fs_bench." + std::to_string(::getpid());
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
