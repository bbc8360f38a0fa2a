// Opening the ledger's writer: replaying the write-ahead log a crash left,
// repairing the ref view from the log, loading the live jobs; and creating
// a new ledger's log (Initialize).
#include "gatos/ledger/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "checkpointer.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/ledger/wal.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/transition.h"
#include "gatos/sys/dir_layout.h"
#include "gatos/sys/file.h"
#include "view_writer.h"
#include "writer_internal.h"

namespace gatos {
using namespace writer_internal;  // NOLINT: this library's own internals

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
  // Dropped batches are in seq_ but not in the log.
  GATOS_RETURN_IF_ERROR(replication_failed_);
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

}  // namespace gatos
