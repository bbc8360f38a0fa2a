#include "gatos/ledger/maintenance.h"

#include <dirent.h>

#include <chrono>
#include <cstring>

namespace gatos {
namespace {

std::vector<std::string> RepackArgv(const std::string& dir) {
  // nice: the ledger's own work comes first. No bitmaps: the ledger is not a
  // busy fetch server, and writing them would cost every repack. -n: no
  // update-server-info (info/refs for dumb HTTP), which lists every ref:
  // minutes of directory reads with a million jobs' loose refs.
  // pack.window=0: no delta search. The ledger's packs hold small objects
  // written once; searching deltas for them was most of a repack's CPU (4.0 s
  // against 0.8 s for rolling 1,209 batch packs of 2,000 jobs into one, for
  // 14 MB against 24 MB of pack) and competed with the ledger for the CPUs.
  // docs/operations.md says how to trade the CPU back for disk offline.
  return {"nice", "-n", "10", "git", "-C", dir, "-c", "repack.writeBitmaps=false", "-c", "pack.window=0",
          "repack", "-d", "-n", "-q", "--geometric=2"};
}

SpawnOptions Options() {
  SpawnOptions o;
  o.env = Environment::CurrentWith({{"GIT_CONFIG_NOSYSTEM", "1"}});
  o.out = Stdio::Null();
  o.err = Stdio::Pipe();
  return o;
}

}  // namespace

size_t CountPacks(const std::string& ledger_dir) {
  DIR* d = ::opendir((ledger_dir + "/objects/pack").c_str());
  if (!d) return 0;
  size_t n = 0;
  while (dirent* e = ::readdir(d)) {
    size_t len = std::strlen(e->d_name);
    if (len > 5 && std::strcmp(e->d_name + len - 5, ".pack") == 0) ++n;
  }
  ::closedir(d);
  return n;
}

bool Repacker::running() {
  if (!started_) return false;
  if (proc_.running()) return true;
  started_ = false;
  return false;
}

bool Repacker::MaybeStart() {
  if (running() || CountPacks(dir_) <= threshold_) return false;
  auto p = Process::Spawn(RepackArgv(dir_), [] {
    SpawnOptions o = Options();
    o.err = Stdio::Null();
    return o;
  }());
  if (!p.ok()) return false;
  proc_ = std::move(*p);
  started_ = true;
  return true;
}

Status Repacker::Wait() {
  if (!started_) return OkStatus();
  ExitStatus st = proc_.Wait();
  started_ = false;
  if (!st.ok()) return InternalError("git repack in " + dir_ + " ended with " + st.ToString());
  return OkStatus();
}

Status RepackNow(const std::string& ledger_dir) {
  GATOS_ASSIGN_OR_RETURN(Captured c, RunAndCapture(RepackArgv(ledger_dir), Options()));
  // git's own words stay out of gatosd's log (they may quote what a push
  // brought); the command says how to see them.
  if (!c.status.ok()) {
    return InternalError("git repack in " + ledger_dir + " ended with " + c.status.ToString() +
                         "; run 'git -C " + ledger_dir + " repack -d' by hand to see why");
  }
  return OkStatus();
}

}  // namespace gatos
