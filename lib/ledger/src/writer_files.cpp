// The writer's files and small helpers (writer_internal.h): its lock, its
// spool, syncing its file system, reading a log commit's batch record.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "gatos/sys/dir_layout.h"
#include "writer_internal.h"

namespace gatos {
namespace writer_internal {

std::string TrimDir(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}

Result<std::string> ReadLogBatch(Ledger& ledger, const std::string& log_commit) {
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger.ReadCommit(log_commit));
  GATOS_ASSIGN_OR_RETURN(auto entries, ledger.ReadTree(c.tree));
  for (const auto& e : entries) {
    if (e.name == "batch") return ledger.ReadBlob(e.id, 256 << 20);
  }
  return DataLossError("log commit " + Short(log_commit) + " has no batch record");
}

void Crash(const WriterOptions& o, const char* point) {
  if (o.crash_at == point) {
    std::fprintf(stderr, "gatos: failpoint %s: killing this process\n", point);
    std::fflush(stderr);
    raise(SIGKILL);
  }
}

Result<int> TakeLock(const std::string& dir, int wait_ms) {
  std::string state = LedgerStateDir(dir);
  ::mkdir(state.c_str(), 0700);
  std::string path = state + "/" + kLockFile;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
      char buf[32] = {};
      ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
      while (!holder.empty() && holder.back() == '\n') holder.pop_back();
      return UnavailableError("the ledger " + dir + " is being written by another process (pid " + holder +
                              ", usually gatosd serve)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return fd;
}

Status SyncFileSystem(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return UnavailableError("open " + dir + ": " + std::strerror(errno));
  int rc = ::syncfs(dfd);
  int err = errno;
  ::close(dfd);
  return rc == 0 ? OkStatus() : UnavailableError("syncfs " + dir + ": " + std::strerror(err));
}

constexpr int kSpoolDirs = 64;
void PrepareSpool(const std::string& dir, Ledger* ledger) {
  const std::string root = dir + "/gatos/spool";
  ::mkdir(root.c_str(), 0700);
  std::string why;
  (void)SpreadSubdirectories(root, &why);
  std::vector<std::string> dirs;
  for (int i = 0; i < kSpoolDirs; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "/%02d", i);
    const std::string d = root + name;
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return;  // no spool: files go next to their final names
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) std::filesystem::remove(e.path(), ec);
    dirs.push_back(d);
  }
  (void)ledger->SetSpool(std::move(dirs));
}

std::mt19937_64& BatchRng() {
  // A random_device per batch cost more than the rest of a small batch's
  // bookkeeping.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

Result<std::pair<ObjectType, std::string>> LookupIn(Ledger& ledger, const std::vector<GitObject>& objects,
                                                    const std::unordered_map<std::string, size_t>& object_at,
                                                    const std::string& id) {
  if (auto it = object_at.find(id); it != object_at.end()) {
    const GitObject& o = objects[it->second];
    return std::make_pair(o.type, o.data);
  }
  return ledger.ReadRawObject(id);
}

}  // namespace writer_internal

std::string LedgerStateDir(const std::string& ledger_dir) { return writer_internal::TrimDir(ledger_dir) + "/gatos"; }

}  // namespace gatos
