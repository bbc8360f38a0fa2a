#include "gatos/ledger_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "gatos/dir_layout.h"
#include "gatos/encoding.h"
#include "gatos/file.h"
#include "gatos/ledger_commits.h"
#include "gatos/sshsig.h"
#include "gatos/transition.h"
#include "gatos/wal.h"

namespace gatos {
namespace {

constexpr char kViewsSyncedFile[] = "views-synced";
constexpr char kLockFile[] = "writer.lock";

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

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

// syncfs of the file system that holds `dir`: everything written there so
// far is on disk. Unavailable when it cannot be made so.
Status SyncFileSystem(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return UnavailableError("open " + dir + ": " + std::strerror(errno));
  int rc = ::syncfs(dfd);
  int err = errno;
  ::close(dfd);
  return rc == 0 ? OkStatus() : UnavailableError("syncfs " + dir + ": " + std::strerror(err));
}

// The writer's spool (Ledger::SetSpool): gatos/spool/00..63, spread over the
// file system's block groups, emptied of what a writer that died left.
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

}  // namespace

std::string LedgerStateDir(const std::string& ledger_dir) { return TrimDir(ledger_dir) + "/gatos"; }

struct LedgerWriter::Batch {
  int64_t now = 0;
  std::map<std::string, JobRecord> touched;
  std::map<std::string, std::optional<JobRecord>> before;
  std::vector<LogEntry> entries;
  std::vector<GitObject> objects;               // what the batch writes, in order (AddObject)
  std::unordered_map<std::string, size_t> object_at;  // id -> index in `objects`
  std::vector<std::string> new_commits;
  std::map<std::string, int64_t> counts;
  std::optional<Policy> new_policy;
  std::string new_policy_commit;
  std::optional<Ed25519PrivateKey> new_key;
  std::map<std::string, std::string> notes;  // other refs moved in this batch
  std::vector<size_t> changing;  // indexes of ops whose result depends on the commit
  size_t current = 0;
};

namespace {
// Retry backoff jitter. Seeded once per thread: a random_device per batch
// cost more than the rest of a small batch's bookkeeping.
std::mt19937_64& BatchRng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}
}  // namespace

void LedgerWriter::AddObject(Batch& b, GitObject&& o) {
  if (b.object_at.emplace(o.id, b.objects.size()).second) b.objects.push_back(std::move(o));
}

LedgerWriter::LedgerWriter(std::unique_ptr<Ledger> ledger, Ed25519PrivateKey key, WriterOptions options,
                           int lock_fd)
    : ledger_(std::move(ledger)),
      key_(std::move(key)),
      options_(std::move(options)),
      lock_fd_(lock_fd),
      index_(ledger_.get()) {}

// Writes the view refs of committed batches on a thread of its own, oldest
// first, and runs the callbacks queued after them. Consecutive batches that
// wait are written as one (the last value of each ref wins). It has its own
// repository handle: libgit2 handles belong to one thread.
class LedgerWriter::ViewWriter {
 public:
  ViewWriter(std::unique_ptr<Ledger> ledger, const WriterOptions* options)
      : ledger_(std::move(ledger)), options_(options), thread_([this] { Loop(); }) {}
  ~ViewWriter() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // drains the queue first
  }
  void Write(int64_t seq, std::vector<std::pair<std::string, std::string>> refs) {
    Push(Item{seq, std::move(refs), nullptr});
  }
  void Then(std::function<void()> fn) { Push(Item{0, {}, std::move(fn)}); }
  void Flush() {
    std::unique_lock<std::mutex> l(mu_);
    idle_cv_.wait(l, [this] { return q_.empty() && !busy_; });
  }

 private:
  struct Item {
    int64_t seq;
    std::vector<std::pair<std::string, std::string>> refs;
    std::function<void()> fn;
  };
  void Push(Item item) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  void Loop() {
    while (true) {
      std::map<std::string, std::string> refs;
      int64_t first = 0, last = 0;
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !q_.empty() || stop_; });
        if (q_.empty()) return;
        busy_ = true;
        while (!q_.empty() && !q_.front().fn) {
          for (auto& [ref, id] : q_.front().refs) refs[ref] = std::move(id);
          if (!first) first = q_.front().seq;
          last = q_.front().seq;
          q_.pop_front();
        }
        if (refs.empty() && !q_.empty()) {
          fn = std::move(q_.front().fn);
          q_.pop_front();
        }
      }
      if (!refs.empty()) {
        Status s = ledger_->SetViewRefs({refs.begin(), refs.end()});
        if (!s.ok()) {
          std::fprintf(stderr, "gatos: refs of log batches %lld..%lld not all written (%s); repaired at next start\n",
                       static_cast<long long>(first), static_cast<long long>(last), s.message().c_str());
        }
        Crash(*options_, "after-views");
      }
      if (fn) {
        try {
          fn();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "gatos: internal error after writing view refs: %s\n", e.what());
        }
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        busy_ = false;
      }
      idle_cv_.notify_all();
    }
  }

  std::unique_ptr<Ledger> ledger_;
  const WriterOptions* options_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Item> q_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

// Checkpoints in the background: when the write-ahead log's open file holds
// checkpoint_bytes, or checkpoint_ms after a batch, whichever comes first.
class LedgerWriter::Checkpointer {
 public:
  explicit Checkpointer(LedgerWriter* w) : w_(w), thread_([this] { Loop(); }) {}
  ~Checkpointer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // After each batch: `bytes` in the log's open file.
  void Written(uint64_t bytes) {
    bool wake;
    {
      std::lock_guard<std::mutex> l(mu_);
      const bool first = !pending_;
      if (first) since_ = std::chrono::steady_clock::now();
      pending_ = true;
      const bool full = bytes >= w_->options_.checkpoint_bytes;
      full_ |= full;
      wake = first || full;  // starts the timer, or checkpoints now
    }
    if (wake) cv_.notify_one();
  }

 private:
  void Loop() {
    const auto period = std::chrono::milliseconds(std::max(1, w_->options_.checkpoint_ms));
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (pending_ && !full_) {
        cv_.wait_until(l, since_ + period, [this] { return stop_ || full_; });
      } else if (!pending_) {
        cv_.wait(l, [this] { return stop_ || pending_; });
        continue;
      }
      if (stop_) return;
      pending_ = full_ = false;
      l.unlock();
      Status s = w_->Checkpoint();
      if (!s.ok()) std::fprintf(stderr, "gatos: checkpoint of the write-ahead log failed (retried): %s\n", s.message().c_str());
      l.lock();
      if (!s.ok() && !pending_) {
        pending_ = true;
        since_ = std::chrono::steady_clock::now();
      }
    }
  }

  LedgerWriter* w_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, full_ = false;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;  // last
};

Status LedgerWriter::Checkpoint() {
  if (!wal_) return OkStatus();
  {
    // The thread that left a tail open writes it first; any other waits for
    // it below.
    std::unique_lock<std::mutex> l(wal_mu_);
    const bool own = tail_open_ && tail_thread_ == std::this_thread::get_id();
    l.unlock();
    if (own) CompleteBatch();
  }
  std::vector<std::string> files;
  {
    // Every batch in a closed file is in the repository too (the ledger
    // thread writes both under wal_mu_); a sync from now covers them all.
    std::unique_lock<std::mutex> l(wal_mu_);
    wal_cv_.wait(l, [this] { return !tail_open_; });
    files = wal_->Rotate();
  }
  if (files.empty()) return OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  Status s = SyncFileSystem(ledger_->path());
  if (s.ok()) s = wal_->Drop(files);
  if (std::getenv("GATOS_WRITER_TIMING")) {
    std::fprintf(stderr, "writer: checkpoint of %zu file(s) in %lldus\n", files.size(),
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - t0).count()));
  }
  if (!s.ok()) {
    std::lock_guard<std::mutex> l(wal_mu_);
    wal_->Keep(std::move(files));  // dropped by the next checkpoint
  }
  return s;
}

Status LedgerWriter::failed() const {
  std::lock_guard<std::mutex> l(wal_mu_);
  return failed_;
}

LedgerWriter::~LedgerWriter() {
  CompleteBatch();
  views_.reset();  // every committed batch's views written
  checkpointer_.reset();
  if (wal_ && failed().ok()) {
    Status s = Checkpoint();  // a clean close leaves the write-ahead log empty
    if (!s.ok()) std::fprintf(stderr, "gatos: final checkpoint failed (%s); the next open replays the write-ahead log\n", s.message().c_str());
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void LedgerWriter::AfterViews(std::function<void()> fn) {
  CompleteBatch();
  if (views_) {
    views_->Then(std::move(fn));
  } else {
    fn();
  }
}

void LedgerWriter::FlushViews() {
  CompleteBatch();
  if (views_) views_->Flush();
}

namespace {
struct PhaseTimer {
  bool on = std::getenv("GATOS_WRITER_TIMING") != nullptr;
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
  std::string line;
  void Mark(const char* what) {
    if (!on) return;
    auto n = std::chrono::steady_clock::now();
    line += std::string(what) + "=" + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(n - t).count()) + "us ";
    t = n;
  }
  ~PhaseTimer() {
    if (on) std::fprintf(stderr, "writer: %s\n", line.c_str());
  }
};
}  // namespace

void LedgerWriter::CompleteBatch() {
  if (!tail_) return;
  Tail t = std::move(*tail_);
  tail_.reset();
  PhaseTimer timer;
  Status s = WriteTail(t, /*sync_repo=*/false, [&timer](const char* what) { timer.Mark(what); });
  if (!s.ok()) (void)Stop(t.seq, s);
}

Status LedgerWriter::Stop(int64_t seq, const Status& why) {
  Status failed;
  {
    std::lock_guard<std::mutex> l(wal_mu_);
    failed_ = InternalError("log batch " + std::to_string(seq) +
                            " is in the write-ahead log but could not be written to the repository (" +
                            why.message() + "); the ledger's writer stopped: restart it to write the batch");
    tail_open_ = false;
    failed = failed_;
  }
  wal_cv_.notify_all();
  std::fprintf(stderr, "gatos: %s\n", failed.message().c_str());
  return failed;
}

Status LedgerWriter::WriteTail(Tail& t, bool sync_repo, const std::function<void(const char*)>& mark) {
  std::vector<const GitObject*> all;
  all.reserve(t.objects.size());
  for (const auto& o : t.objects) all.push_back(&o);
  Ledger::DeferredSyncs deferred;
  Status s = options_.crash_at == "fail-pack"
                 ? InternalError("failpoint fail-pack: the pack was not written")
                 : ledger_->WriteObjectsPacked(all, sync_repo, /*remember=*/false, &deferred);
  if (!s.ok()) return s;
  mark("pack");
  Crash(options_, "after-pack");
  s = ledger_->CasRef(kLogRef, t.old_head, t.log_id, sync_repo, &deferred);
  if (!s.ok()) {
    if (s.code() == StatusCode::kAborted) {
      s = InternalError("refs/gatos/log moved under the writer (" + s.message() +
                        "); another process wrote the ledger without its lock");
    }
    return s;
  }
  if (wal_) {
    uint64_t wal_bytes = 0;
    {
      std::lock_guard<std::mutex> l(wal_mu_);
      wal_bytes = wal_->open_bytes();
      tail_open_ = false;
    }
    wal_cv_.notify_all();
    if (checkpointer_) checkpointer_->Written(wal_bytes);
  }
  mark("log-ref");
  Crash(options_, "after-log-ref");
  // The batch is durable. The view refs follow; if this fails the next Open
  // repairs them from the log.
  if (views_) {
    views_->Write(t.seq, std::move(t.view));
  } else {
    Status vs = ledger_->SetViewRefs(t.view);
    if (!vs.ok()) std::fprintf(stderr, "gatos: refs of log batch %lld not all written (%s); repaired at next start\n",
                               static_cast<long long>(t.seq), vs.message().c_str());
    Crash(options_, "after-views");
  }
  mark("views");
  return OkStatus();
}

namespace {

// Writes every batch left in the write-ahead log to the repository as
// durable packs, moves refs/gatos/log forward to the last one (never back:
// a file a checkpoint deleted can come back after a crash, and the log ref
// is then already past it), syncs, and empties the log.
Status ReplayWal(Ledger& ledger, WriteAheadLog& wal) {
  GATOS_ASSIGN_OR_RETURN(std::vector<WalRecord> records, wal.ReadAll());
  const std::vector<std::string> files = wal.Files();
  if (records.empty()) return wal.Drop(files);
  std::vector<const GitObject*> ptrs;  // one pack for them all (an object once)
  for (const WalRecord& r : records) {
    for (const auto& o : r.objects) ptrs.push_back(&o);
  }
  GATOS_RETURN_IF_ERROR(ledger.WriteObjectsPacked(ptrs, /*fsync=*/true, /*remember=*/false));
  const WalRecord& last = records.back();
  std::string head;
  int64_t head_seq = -1;
  if (auto h = ledger.ResolveRef(kLogRef); h.ok()) {
    head = *h;
    if (!head.empty()) {
      if (auto c = ledger.ReadCommit(head); c.ok()) {
        if (auto info = ParseLogMessage(c->message); info.ok()) head_seq = info->seq;
      }
    }
  } else {
    // What the crash left of the ref's file is not a ref: it goes.
    const std::string file = ledger.path() + "/" + kLogRef;
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("delete " + file);
  }
  if (head_seq < last.seq) {
    GATOS_RETURN_IF_ERROR(ledger.CasRef(kLogRef, head, last.log_id, /*fsync=*/true));
    std::fprintf(stderr, "gatos: log batches %lld..%lld written from the write-ahead log (left by a writer that stopped)\n",
                 static_cast<long long>(std::max<int64_t>(head_seq + 1, records.front().seq)),
                 static_cast<long long>(last.seq));
  }
  // Also what the stopped writer left unsynced when the log ref was already
  // at or past the last record: only then can the records go.
  GATOS_RETURN_IF_ERROR(SyncFileSystem(ledger.path()));
  return wal.Drop(files);
}

}  // namespace

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Open(const std::string& dir_in, Ed25519PrivateKey key,
                                                         WriterOptions options) {
  std::string dir = TrimDir(dir_in);
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  GATOS_ASSIGN_OR_RETURN(int fd, TakeLock(dir, options.lock_wait_ms));
  // A writer killed while it held refs/gatos/log.lock (between writing the
  // lock and renaming it over the ref) leaves it behind, and every batch
  // after would fail. Only the holder of the writer lock — now us — moves
  // the log, so such a lock is stale: the log is what it was before it.
  const std::string log_lock = dir + "/" + kLogRef + ".lock";
  if (::unlink(log_lock.c_str()) == 0) {
    std::fprintf(stderr, "gatos: removed %s left by a writer that died mid-batch; that batch was not recorded\n",
                 log_lock.c_str());
  }
  // Each job's ref directory lands in a block group of its own choosing,
  // unless the file system has a journal (dir_layout.h); best effort, as
  // the file system allows.
  const std::string jobs_dir = dir + "/" + std::string(kJobsPrefix, sizeof(kJobsPrefix) - 2);
  ::mkdir(jobs_dir.c_str(), 0755);
  std::string why;
  (void)LayOutPerJobDirectories(jobs_dir, &why);
  PrepareSpool(dir, ledger.get());
  // The log ref's old value is freed off the ledger thread: on a file system
  // mounted with `discard`, ext4 without a journal waits for the device in
  // the rename that frees it (~0.3 ms per batch here). Also for the view
  // refs this handle writes when there is no view thread.
  ledger->CloseReplacedInBackground();
  std::unique_ptr<WriteAheadLog> wal;
  {
    // Batches a crash left only in the write-ahead log are written to the
    // repository first (also when this writer will not use the log).
    auto opened = WriteAheadLog::Open(LedgerStateDir(dir));
    if (!opened.ok()) {
      ::close(fd);
      return opened.status();
    }
    wal = std::make_unique<WriteAheadLog>(std::move(*opened));
    Status replayed = ReplayWal(*ledger, *wal);
    if (!replayed.ok()) {
      ::close(fd);
      return replayed;
    }
    if (!options.fsync || !options.wal) wal.reset();
  }
  std::unique_ptr<LedgerWriter> w(new LedgerWriter(std::move(ledger), std::move(key), std::move(options), fd));
  GATOS_RETURN_IF_ERROR(w->Load());
  GATOS_RETURN_IF_ERROR(w->RepairViews());
  if (wal) {
    w->wal_ = std::move(wal);
    w->checkpointer_ = std::make_unique<Checkpointer>(w.get());
  }
  if (w->options_.async_views) {
    GATOS_ASSIGN_OR_RETURN(auto view_ledger, Ledger::Open(dir));
    view_ledger->CloseReplacedInBackground();  // renewals replace, prunes delete
    w->views_ = std::make_unique<ViewWriter>(std::move(view_ledger), &w->options_);
  }
  return w;
}

Status LedgerWriter::Load() {
  GATOS_ASSIGN_OR_RETURN(head_, ledger_->ResolveRef(kLogRef));
  if (head_.empty()) {
    return FailedPreconditionError(ledger_->path() + " has no " + std::string(kLogRef) +
                                   "; it was not created by 'gatosd init' of this version");
  }
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_->ReadCommit(head_));
  auto info = ParseLogMessage(c.message);
  if (!info.ok()) return DataLossError("log head " + Short(head_) + ": " + info.status().message());
  seq_ = info->seq;
  policy_commit_ = info->policy_commit;
  index_.Reset(c.tree);
  GATOS_ASSIGN_OR_RETURN(policy_, ledger_->ReadPolicyAt(policy_commit_));
  if (policy_.ledger_key != key_.public_key()) {
    return FailedPreconditionError("the ledger key " + key_.public_key().WorkerId() +
                                   " is not the key of this ledger's policy (" + policy_.ledger_key.WorkerId() +
                                   "); was the key rotated? use the current key");
  }
  GATOS_ASSIGN_OR_RETURN(stats_, index_.Stats());
  live_.clear();
  return index_.ForEachLive([this](const JobRecord& r) {
    live_[r.job_hex] = r;
    return OkStatus();
  });
}

Status LedgerWriter::RepairViews() {
  // The last batch whose view refs are known to be on disk. Without the
  // mark (or with one that does not read), every batch is checked.
  int64_t synced = 0;
  {
    Result<std::string> mark = ReadFileToString(LedgerStateDir(ledger_->path()) + "/" + kViewsSyncedFile, 64);
    if (!mark.ok() && mark.status().code() != StatusCode::kNotFound) return mark.status();
    if (mark.ok()) {
      std::string text = *mark;
      while (!text.empty() && text.back() == '\n') text.pop_back();
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), synced);
      if (ec != std::errc() || end != text.data() + text.size() || synced < 0) synced = 0;
    }
  }
  if (synced >= seq_) return OkStatus();
  // Batches after the last sync, oldest first.
  std::vector<std::string> commits;
  std::string cur = head_;
  int64_t seq = seq_;
  while (!cur.empty() && seq > synced) {
    commits.push_back(cur);
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_->ReadCommit(cur));
    cur = c.parents.empty() ? "" : c.parents[0];
    --seq;
  }
  std::map<std::string, std::string> want;  // ref -> final value of the replayed batches
  std::vector<std::string> order;
  for (auto it = commits.rbegin(); it != commits.rend(); ++it) {
    GATOS_ASSIGN_OR_RETURN(std::string text, ReadLogBatch(*ledger_, *it));
    auto entries = DecodeBatch(text);
    if (!entries.ok()) return DataLossError("log commit " + Short(*it) + ": " + entries.status().message());
    for (const LogEntry& e : *entries) {
      if (e.ref.empty()) continue;
      if (!want.count(e.ref)) order.push_back(e.ref);
      want[e.ref] = e.new_id;
    }
  }
  std::vector<std::pair<std::string, std::string>> fix;
  for (const auto& ref : order) {
    GATOS_ASSIGN_OR_RETURN(std::string current, ledger_->ResolveRef(ref));
    if (current != want[ref]) fix.emplace_back(ref, want[ref]);
  }
  GATOS_ASSIGN_OR_RETURN(std::string pol, ledger_->ResolveRef(kPolicyRef));
  if (pol != policy_commit_) fix.emplace_back(kPolicyRef, policy_commit_);
  if (!fix.empty()) {
    std::fprintf(stderr, "gatos: repaired %zu ref(s) from the log (batches %lld..%lld)\n", fix.size(),
                 static_cast<long long>(synced + 1), static_cast<long long>(seq_));
    GATOS_RETURN_IF_ERROR(ledger_->SetViewRefs(fix));
  }
  // Repaired; if they cannot be marked synced, the next open checks again.
  if (Status s = SyncViews(); !s.ok()) {
    std::fprintf(stderr, "gatos: cannot mark the view refs synced (%s); the next open checks them again\n",
                 s.message().c_str());
  }
  return OkStatus();
}

Status LedgerWriter::SyncViews() {
  FlushViews();
  if (options_.fsync) {
    // A mark that says the views are on disk is written only once they are:
    // after a failed sync and a crash, the next open repairs them.
    Status synced = options_.crash_at == "fail-syncfs" ? UnavailableError("syncfs " + ledger_->path() + ": failpoint")
                                                       : SyncFileSystem(ledger_->path());
    GATOS_RETURN_IF_ERROR(synced);
  }
  return WriteFileAtomically(LedgerStateDir(ledger_->path()) + "/" + kViewsSyncedFile,
                             std::to_string(seq_) + "\n", 0644, options_.fsync);
}

Status LedgerWriter::Initialize(const std::string& dir_in, const Policy& policy, const Ed25519PrivateKey& key,
                                int64_t now_ms) {
  std::string dir = TrimDir(dir_in);
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  GATOS_ASSIGN_OR_RETURN(std::string head, ledger->ResolveRef(kLogRef));
  if (!head.empty()) return AlreadyExistsError(dir + " already has a log");
  GATOS_ASSIGN_OR_RETURN(int fd, TakeLock(dir, 0));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  GATOS_ASSIGN_OR_RETURN(auto objects, BuildPolicyCommit(policy, "", "gatos: initial policy", key, now_ms));
  const std::string policy_commit = objects.front().id;
  objects.push_back(MakeObject(ObjectType::kTree, ""));  // the empty tree ledger commits use
  StateIndex index(ledger.get());
  index.Reset("");
  std::vector<LogEntry> entries = {{LogKind::kInit, "", kPolicyRef, "", policy_commit}};
  GATOS_ASSIGN_OR_RETURN(std::string root, index.Build({}, EncodeBatch(entries), IndexStats{}, &objects));
  LogCommitInfo info;
  info.seq = 1;
  info.ledger_key_hex = key.public_key().Hex();
  info.policy_commit = policy_commit;
  info.time_ms = now_ms;
  info.counts["init"] = 1;
  GATOS_ASSIGN_OR_RETURN(GitObject log, BuildCommitObject(root, {policy_commit}, EncodeLogMessage(info),
                                                          kLedgerCommitterName, kLedgerCommitterEmail, now_ms, &key));
  objects.push_back(log);
  std::vector<const GitObject*> ptrs;
  for (const auto& o : objects) ptrs.push_back(&o);
  GATOS_RETURN_IF_ERROR(ledger->WriteObjectsPacked(ptrs, true));
  GATOS_RETURN_IF_ERROR(ledger->CasRef(kLogRef, "", log.id, true));
  GATOS_RETURN_IF_ERROR(ledger->SetViewRefs({{kPolicyRef, policy_commit}}));
  return WriteFileAtomically(LedgerStateDir(dir) + "/" + kViewsSyncedFile, "1\n");
}

Result<std::optional<JobRecord>> LedgerWriter::Find(const std::string& job_hex) {
  auto it = live_.find(job_hex);
  if (it != live_.end()) return std::optional<JobRecord>(it->second);
  return index_.Get(job_hex);
}

// ---- the batch ----

namespace {

// Looks an object up in the batch's new objects, then in the repository.
Result<std::pair<ObjectType, std::string>> LookupIn(Ledger& ledger, const std::vector<GitObject>& objects,
                                                    const std::unordered_map<std::string, size_t>& object_at,
                                                    const std::string& id) {
  if (auto it = object_at.find(id); it != object_at.end()) {
    const GitObject& o = objects[it->second];
    return std::make_pair(o.type, o.data);
  }
  return ledger.ReadRawObject(id);
}

}  // namespace

std::vector<OpResult> LedgerWriter::Apply(std::vector<Op>& ops, BatchStats* stats) {
  CompleteBatch();  // the batch before: its pack and log ref first
  auto t_apply = std::chrono::steady_clock::now();
  std::vector<OpResult> results(ops.size());
  if (Status f = failed(); !f.ok()) {
    Outcome stopped = Outcome::FromStatus(f);
    stopped.message = "the ledger could not record this batch: " + f.message();
    for (auto& r : results) r.outcome = stopped;
    if (stats) stats->ops = ops.size();
    return results;
  }
  Batch b;
  b.now = options_.clock();
  for (size_t i = 0; i < ops.size(); ++i) {
    b.current = i;
    size_t before = b.entries.size();
    ApplyOne(b, ops[i], &results[i]);
    if (b.entries.size() != before) b.changing.push_back(i);
  }
  if (stats) {
    stats->ops = ops.size();
    stats->changes = b.entries.size();
  }
  if (b.entries.empty()) return results;
  if (std::getenv("GATOS_WRITER_TIMING")) {
    std::fprintf(stderr, "writer: %zu ops decided in %lldus\n", ops.size(),
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - t_apply).count()));
  }
  Status s = Commit(b, stats);
  if (!s.ok()) {
    Outcome fail = Outcome::FromStatus(s);
    if (fail.error == TransitionError::kInternal || fail.error == TransitionError::kRetry) {
      fail.message = "the ledger could not record this batch: " + s.message();
    }
    for (size_t i : b.changing) {
      results[i] = OpResult{};
      results[i].outcome = fail;
    }
  }
  return results;
}

void LedgerWriter::ApplyOne(Batch& b, Op& op, OpResult* r) {
  std::visit(
      [&](auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, SubmitOp>) DoSubmit(b, o, r);
        if constexpr (std::is_same_v<T, LeaseOp>) DoLease(b, o, r);
        if constexpr (std::is_same_v<T, ResultOp>) DoResult(b, o, r);
        if constexpr (std::is_same_v<T, UserOp>) DoUser(b, o, r);
        if constexpr (std::is_same_v<T, PruneOp>) DoPrune(b, o, r);
        if constexpr (std::is_same_v<T, AbortOp>) DoAbort(b, o, r);
        if constexpr (std::is_same_v<T, PolicyOp>) DoPolicy(b, o, r);
        if constexpr (std::is_same_v<T, NoteOp>) DoNote(b, o, r);
      },
      op);
}

namespace {

// The record of a job as the batch sees it so far.
Result<std::optional<JobRecord>> Current(LedgerWriter& w, std::map<std::string, JobRecord>& touched,
                                         const std::string& job_hex) {
  auto it = touched.find(job_hex);
  if (it != touched.end()) return std::optional<JobRecord>(it->second);
  return w.Find(job_hex);
}

}  // namespace

#define GATOS_BATCH_RECORD(b, job, rec_var, r)                                              \
  std::optional<JobRecord> rec_var;                                                         \
  {                                                                                         \
    auto cur = Current(*this, b.touched, job);                                              \
    if (!cur.ok()) {                                                                        \
      r->outcome = Outcome::FromStatus(cur.status());                                       \
      return;                                                                               \
    }                                                                                       \
    rec_var = std::move(*cur);                                                              \
  }

namespace {

void RecordTransition(std::map<std::string, JobRecord>& touched,
                      std::map<std::string, std::optional<JobRecord>>& before, std::vector<LogEntry>& entries,
                      std::map<std::string, int64_t>& counts, LogKind kind, const std::optional<JobRecord>& old,
                      const JobRecord& now_rec) {
  const std::string& job = now_rec.job_hex;
  if (!before.count(job)) before[job] = old;
  for (LogEntry& e : TransitionEntries(kind, old, now_rec)) entries.push_back(std::move(e));
  touched[job] = now_rec;
  ++counts[std::string(LogKindName(kind))];
}

}  // namespace

namespace {

// The transition's outcome as a reply: its error class and message.
void Refuse(const Decision& d, OpResult* r) { r->outcome = Outcome::Error(d.error, d.message); }

}  // namespace

const Policy& LedgerWriter::BatchPolicy(const Batch& b) const {
  return b.new_policy ? *b.new_policy : policy_;  // a policy change earlier in the batch counts
}

void LedgerWriter::DoSubmit(Batch& b, SubmitOp& op, OpResult* r) {
  const std::string job = op.check.job_hex;
  r->job_hex = job;
  GATOS_BATCH_RECORD(b, job, rec, r);
  AppliedTransition a;
  Decision d = ApplyTransition(job, rec, SubmitTransition{job, op.check.commit, op.check.signer_key_hex},
                               {&BatchPolicy(b), b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  r->commit = a.record.job_commit;
  r->record = a.record;
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  for (auto& o : op.objects) AddObject(b, std::move(o));
  b.new_commits.push_back(a.record.job_commit);
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
}

void LedgerWriter::DoLease(Batch& b, LeaseOp& op, OpResult* r) {
  const LeaseRequest& req = op.req;
  r->job_hex = req.job_hex;
  GATOS_BATCH_RECORD(b, req.job_hex, rec, r);
  const Policy& pol = BatchPolicy(b);
  const TransitionRules rules{&pol, b.now};
  // The plan first (claim or takeover, the lease it replaces), then the
  // lease commit that records it, then the transition with its id.
  LeaseTransition t{req.renew, req.worker_hex, req.epoch, req.requested_at_ms, ""};
  AppliedTransition plan;
  Decision d = ApplyTransition(req.job_hex, rec, t, rules, &plan);
  if (!d.ok()) return Refuse(d, r);
  const PolicySettings& ps = pol.settings;
  LeaseCommitInfo info;
  info.kind = std::string(LogKindName(plan.kind));
  info.job_hex = req.job_hex;
  info.worker_hex = req.worker_hex;
  info.epoch = req.epoch;
  info.expires_ms = plan.record.expires_ms;
  info.attempt = rec->attempt;
  info.requested_at_ms = req.requested_at_ms;
  info.request_sig_hex = req.sig_hex;
  info.lease_ms = ps.lease_ms;
  info.output_cap_bytes = ps.output_cap_bytes;
  info.max_result_bytes = ps.max_result_bytes;
  info.allow_network = ps.allow_network;
  std::vector<std::string> parents = {rec->job_commit};
  if (!plan.replaced_lease.empty()) parents.push_back(plan.replaced_lease);
  auto commit = BuildCommitObject(kEmptyTreeId, parents, FormatLeaseCommitMessage(info), kLedgerCommitterName,
                                  kLedgerCommitterEmail, b.now, &key_);
  if (!commit.ok()) {
    r->outcome = Outcome::FromStatus(commit.status());
    return;
  }
  t.lease_commit = commit->id;
  AppliedTransition a;
  d = ApplyTransition(req.job_hex, rec, t, rules, &a);
  if (!d.ok()) return Refuse(d, r);
  // The grant: the signed lease commit and what the worker needs to check
  // that job.yaml is the job it names.
  r->grant.push_back(*commit);
  if (!req.renew) {
    auto job_obj = LookupIn(*ledger_, b.objects, b.object_at, rec->job_commit);
    auto raw = job_obj.ok() ? ParseRawCommit(job_obj->second, rec->job_commit) : Result<RawCommit>(job_obj.status());
    auto tree = raw.ok() ? LookupIn(*ledger_, b.objects, b.object_at, raw->tree) : Result<std::pair<ObjectType, std::string>>(raw.status());
    auto entries = tree.ok() ? ParseTree(tree->second, raw->tree) : Result<std::vector<TreeEntry>>(tree.status());
    if (!entries.ok()) {
      r->outcome = Outcome::Error(TransitionError::kInternal, "cannot read job " + Short(req.job_hex) +
                                                                   "'s commit: " + entries.status().message());
      return;
    }
    r->grant.push_back({ObjectType::kCommit, job_obj->second, rec->job_commit});
    r->grant.push_back({ObjectType::kTree, tree->second, raw->tree});
    for (const auto& e : *entries) {
      if (e.name != "job.yaml") continue;
      auto blob = LookupIn(*ledger_, b.objects, b.object_at, e.id);
      if (!blob.ok()) {
        r->outcome = Outcome::Error(TransitionError::kInternal, "cannot read job.yaml of " + Short(req.job_hex));
        return;
      }
      r->grant.push_back({ObjectType::kBlob, blob->second, e.id});
    }
  } else if (!rec->cancel_commit.empty()) {
    auto c = LookupIn(*ledger_, b.objects, b.object_at, rec->cancel_commit);
    if (c.ok()) r->notice.push_back({ObjectType::kCommit, c->second, rec->cancel_commit});
  }
  b.new_commits.push_back(commit->id);
  AddObject(b, std::move(*commit));
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->commit = a.record.lease_commit;
  r->record = a.record;
}

void LedgerWriter::DoResult(Batch& b, ResultOp& op, OpResult* r) {
  const ParsedResult& p = op.result;
  r->job_hex = p.job_hex;
  GATOS_BATCH_RECORD(b, p.job_hex, rec, r);
  r->record = rec;
  const Policy& pol = BatchPolicy(b);
  // The backoff, should the result open another attempt (the policy's
  // range, less a random part: retries of many jobs do not come in step).
  const int64_t backoff = rec ? DrawRetryBackoffMs(pol.settings, rec->attempt + 1, BatchRng()()) : 0;
  AppliedTransition a;
  Decision d = ApplyTransition(p.job_hex, rec,
                               ResultTransition{p.commit_id, p.worker_hex, p.epoch, p.parents, p.status,
                                                p.poe.reason, p.poe.transient, backoff},
                               {&pol, b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  r->commit = p.commit_id;
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  r->retried = a.kind == LogKind::kAttempt;
  for (auto& o : op.objects) AddObject(b, std::move(o));
  b.new_commits.push_back(p.commit_id);
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoUser(Batch& b, UserOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  r->record = rec;
  const TransitionRules rules{&BatchPolicy(b), b.now};
  auto transition = [&](const std::string& commit) -> Transition {
    if (op.retry) return RetryTransition{op.requester_hex, op.attempt, commit};
    return CancelTransition{op.requester_hex, commit};
  };
  AppliedTransition plan;
  Decision d = ApplyTransition(op.job_hex, rec, transition(""), rules, &plan);
  if (!d.ok()) return Refuse(d, r);
  if (plan.unchanged) {  // cancelled already
    r->existing = true;
    r->commit = rec->cancel_commit;
    return;
  }
  UserRequestCommitInfo info;
  info.retry = op.retry;
  info.job_hex = op.job_hex;
  info.requester_hex = op.requester_hex;
  info.recorded_at_ms = b.now;
  info.requested_at_ms = op.requested_at_ms;
  info.request_sig_hex = op.sig_hex;
  if (op.retry) info.attempt = op.attempt;
  std::vector<std::string> parents = {rec->job_commit};
  if (op.retry) parents.push_back(rec->result_commit);
  auto commit = BuildCommitObject(kEmptyTreeId, parents, FormatUserRequestCommitMessage(info), kLedgerCommitterName,
                                  kLedgerCommitterEmail, b.now, &key_);
  if (!commit.ok()) {
    r->outcome = Outcome::FromStatus(commit.status());
    return;
  }
  AppliedTransition a;
  d = ApplyTransition(op.job_hex, rec, transition(commit->id), rules, &a);
  if (!d.ok()) return Refuse(d, r);
  // A cancel of a running job: its holder is told, with the signed commit.
  if (!op.retry && LeaseLive(*rec, b.now)) r->notice.push_back(*commit);
  b.new_commits.push_back(commit->id);
  r->commit = commit->id;
  AddObject(b, std::move(*commit));
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoPrune(Batch& b, PruneOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  r->record = rec;
  AppliedTransition a;
  Decision d = ApplyTransition(op.job_hex, rec, PruneTransition{}, {&BatchPolicy(b), b.now}, &a);
  if (!d.ok()) return Refuse(d, r);
  if (a.unchanged) {
    r->existing = true;
    return;
  }
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoAbort(Batch& b, AbortOp& op, OpResult* r) {
  r->job_hex = op.job_hex;
  GATOS_BATCH_RECORD(b, op.job_hex, rec, r);
  AppliedTransition a;
  if (!ApplyTransition(op.job_hex, rec, AbortTransition{}, {&BatchPolicy(b), b.now}, &a).ok()) {
    r->existing = true;  // nothing to abort (any more)
    r->record = rec;
    return;
  }
  RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, rec, a.record);
  r->record = a.record;
}

void LedgerWriter::DoPolicy(Batch& b, PolicyOp& op, OpResult* r) {
  Policy next = op.policy;
  next.ledger_key = op.new_ledger_key ? op.new_ledger_key->public_key()
                                      : (b.new_key ? b.new_key->public_key() : key_.public_key());
  const std::string parent = b.new_policy ? b.new_policy_commit : policy_commit_;
  // A rotation's policy commit is signed by the key in force before it.
  const Ed25519PrivateKey& signer = b.new_key ? *b.new_key : key_;
  auto objects = BuildPolicyCommit(next, parent, op.message, signer, b.now);
  if (!objects.ok()) {
    r->outcome = Outcome::FromStatus(objects.status());
    return;
  }
  std::string commit = objects->front().id;
  b.entries.push_back({LogKind::kPolicy, "", kPolicyRef, parent, commit});
  ++b.counts["policy"];
  b.new_commits.push_back(commit);
  for (auto& o : *objects) AddObject(b, std::move(o));
  b.new_policy = next;
  b.new_policy_commit = commit;
  if (op.new_ledger_key) b.new_key = op.new_ledger_key;
  r->commit = commit;
  // Leases of workers the new policy no longer allows end now: their jobs
  // are offered again, and their later requests and results are refused.
  std::vector<std::string> candidates;
  for (const auto& [job, live] : live_) candidates.push_back(job);
  for (const auto& [job, cur] : b.touched) {
    if (!live_.count(job)) candidates.push_back(job);
  }
  std::vector<std::string> revoked;
  for (const std::string& job : candidates) {
    std::optional<JobRecord> old = b.touched.count(job) ? b.touched[job] : live_[job];
    AppliedTransition a;
    if (!ApplyTransition(job, old, RevokeTransition{}, {&next, b.now}, &a).ok()) continue;
    RecordTransition(b.touched, b.before, b.entries, b.counts, a.kind, old, a.record);
    revoked.push_back(job);
  }
  r->revoked_jobs = std::move(revoked);
}

void LedgerWriter::DoNote(Batch& b, NoteOp& op, OpResult* r) {
  if (op.objects.empty() || op.objects.front().type != ObjectType::kCommit ||
      op.ref.compare(0, 11, "refs/gatos/") != 0 || op.ref.compare(0, std::strlen(kJobsPrefix), kJobsPrefix) == 0) {
    r->outcome = Outcome::Error(TransitionError::kInvalid, "not a record the ledger keeps");
    return;
  }
  std::string current;
  auto it = b.notes.find(op.ref);
  if (it != b.notes.end()) {
    current = it->second;
  } else {
    FlushViews();  // the ref as the batches before this one left it
    auto v = ledger_->ResolveRef(op.ref);
    if (!v.ok()) {
      r->outcome = Outcome::FromStatus(v.status());
      return;
    }
    current = *v;
  }
  const std::string commit = op.objects.front().id;
  r->commit = commit;
  if (current == commit || (op.create_only && !current.empty())) {
    r->existing = true;
    r->commit = current;
    return;
  }
  b.entries.push_back({op.kind, "", op.ref, current, commit});
  ++b.counts[std::string(LogKindName(op.kind))];
  b.notes[op.ref] = commit;
  b.new_commits.push_back(commit);
  for (auto& o : op.objects) AddObject(b, std::move(o));
}

Status LedgerWriter::Commit(Batch& b, BatchStats* stats) {
  PhaseTimer timer;
  // Stats and index changes.
  IndexStats st = stats_;
  std::vector<StateIndex::Change> changes;
  changes.reserve(b.touched.size());
  for (const auto& [job, rec] : b.touched) {
    const std::optional<JobRecord>& old = b.before[job];
    bool was_live = old && !IsTerminal(RecordedState(*old));
    bool live = !IsTerminal(RecordedState(rec));
    if (old) {
      --st.by_state[static_cast<size_t>(RecordedState(*old))];
      if (old->pruned_ms) --st.pruned;
    } else {
      ++st.jobs;
    }
    ++st.by_state[static_cast<size_t>(RecordedState(rec))];
    if (rec.pruned_ms) ++st.pruned;
    changes.push_back({&rec, live, was_live});
  }
  std::vector<GitObject> index_objects;
  auto root = index_.Build(changes, EncodeBatch(b.entries), st, &index_objects);
  if (!root.ok()) {
    index_.DropPending();
    return root.status();
  }
  LogCommitInfo info;
  info.seq = seq_ + 1;
  info.ledger_key_hex = key_.public_key().Hex();
  info.policy_commit = b.new_policy ? b.new_policy_commit : policy_commit_;
  info.time_ms = b.now;
  info.counts = b.counts;
  std::vector<std::string> parents = {head_};
  {
    std::set<std::string> seen = {head_};
    for (const auto& c : b.new_commits) {
      if (seen.insert(c).second) parents.push_back(c);
    }
  }
  timer.Mark("index");
  auto log = BuildCommitObject(*root, parents, EncodeLogMessage(info), kLedgerCommitterName, kLedgerCommitterEmail,
                               b.now, &key_);
  timer.Mark("log-commit");
  if (!log.ok()) {
    index_.DropPending();
    return log.status();
  }
  Tail t;
  t.seq = info.seq;
  t.old_head = head_;
  t.log_id = log->id;
  t.objects.reserve(b.objects.size() + index_objects.size() + 1);
  for (auto& o : b.objects) t.objects.push_back(std::move(o));
  const size_t index_from = t.objects.size();
  for (auto& o : index_objects) t.objects.push_back(std::move(o));
  const size_t index_to = t.objects.size();
  t.objects.push_back(std::move(*log));
  for (const auto& e : b.entries) {
    if (!e.ref.empty()) t.view.emplace_back(e.ref, e.new_id);
  }
  // What a later request reads back (jobs, leases, results, records, the log
  // commit) joins the handle's recent objects; the index's trees stay out:
  // the index keeps the directories it wrote, parsed.
  auto remember = [&](bool copy) {
    for (size_t i = 0; i < t.objects.size(); ++i) {
      GitObject& o = t.objects[i];
      if (i >= index_from && i < index_to && o.type == ObjectType::kTree) continue;
      ledger_->Remember(copy ? GitObject(o) : std::move(o));
    }
  };
  // With the write-ahead log the batch is durable once its record is
  // (the commit point); the repository's writes follow without syncs, and
  // a checkpoint syncs them. Without it, the log ref's durable move is the
  // commit point, after the pack's.
  const bool durable_in_wal = wal_ != nullptr;
  const bool sync_repo = options_.fsync && !durable_in_wal;
  if (durable_in_wal) {
    std::vector<const GitObject*> all;
    all.reserve(t.objects.size());
    for (const auto& o : t.objects) all.push_back(&o);
    std::lock_guard<std::mutex> l(wal_mu_);
    Crash(options_, "before-wal");
    Status s = wal_->Append(info.seq, t.log_id, all);
    if (!s.ok()) {
      index_.DropPending();
      return s;
    }
    timer.Mark("wal");
    Crash(options_, "after-wal");
    // Open until its log ref is written: a checkpoint waits for that.
    tail_open_ = true;
    tail_thread_ = std::this_thread::get_id();
  }
  // The batch is the writer's state from now on.
  const std::string log_id = t.log_id;
  const size_t written = t.objects.size();
  auto adopt = [&] {
    head_ = log_id;
    seq_ = info.seq;
    index_.Commit(*root);
    stats_ = st;
    for (const auto& [job, rec] : b.touched) {
      if (IsTerminal(RecordedState(rec))) {
        live_.erase(job);
      } else {
        live_[job] = rec;
      }
    }
    if (b.new_policy) {
      policy_ = *b.new_policy;
      policy_commit_ = b.new_policy_commit;
    }
    if (b.new_key) key_ = *b.new_key;
    if (stats) {
      stats->objects = written;
      stats->seq = seq_;
      stats->log_commit = head_;
      stats->entries = b.entries;
      stats->records = std::move(b.touched);
    }
  };
  if (durable_in_wal && options_.deferred_tail && views_) {
    // Durable already: the pack, the log ref and the view refs follow in
    // CompleteBatch. Until then reads find the batch's objects among the
    // handle's recent ones (the index's trees in the index itself).
    remember(/*copy=*/true);
    tail_ = std::move(t);
    adopt();
    return OkStatus();
  }
  Status s = WriteTail(t, sync_repo, [&timer](const char* what) { timer.Mark(what); });
  if (!s.ok()) {
    index_.DropPending();
    // In the write-ahead log already, the batch would reuse its sequence.
    return durable_in_wal ? Stop(info.seq, s) : s;
  }
  remember(/*copy=*/false);
  adopt();
  return OkStatus();
}

// ---- LedgerView ----

Result<std::unique_ptr<LedgerView>> LedgerView::Open(const std::string& dir) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(TrimDir(dir)));
  std::unique_ptr<LedgerView> v(new LedgerView(std::move(ledger)));
  GATOS_ASSIGN_OR_RETURN(v->head_, v->ledger_->ResolveRef(kLogRef));
  if (v->head_.empty()) {
    return FailedPreconditionError(dir + " has no " + std::string(kLogRef) +
                                   "; it was not created by 'gatosd init' of this version");
  }
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, v->ledger_->ReadCommit(v->head_));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo info, ParseLogMessage(c.message));
  v->seq_ = info.seq;
  v->policy_commit_ = info.policy_commit;
  v->index_.Reset(c.tree);
  return v;
}

}  // namespace gatos
