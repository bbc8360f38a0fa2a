// The ledger writer: a batch of operations applied, committed as one signed
// log commit (write-ahead log, pack, log ref), and its ref view written. What
// each operation does is in writer_transitions.cpp; opening and recovery in
// writer_recovery.cpp; the view and checkpoint threads in view_writer.h and
// checkpointer.h.
#include "gatos/ledger/writer.h"

#include <fcntl.h>
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
#include "gatos/sys/file.h"
#include "view_writer.h"
#include "writer_internal.h"

namespace gatos {
using namespace writer_internal;  // NOLINT: this library's own internals

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
  pipeline_.reset();  // batches not acknowledged are dropped: never in the local log
  CompleteBatch();
  views_.reset();  // every committed batch's views written
  checkpointer_.reset();
  if (wal_ && failed().ok()) {
    Status s = Checkpoint();  // a clean close leaves the write-ahead log empty
    if (!s.ok()) std::fprintf(stderr, "gatos: final checkpoint failed (%s); the next open replays the write-ahead log\n", s.message().c_str());
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void LedgerWriter::AfterViews(std::function<void()> fn, std::function<void(const Status&)> on_fail) {
  if (!unacked_.empty()) {
    unacked_.back().viewed.emplace_back(std::move(fn), std::move(on_fail));
    return;
  }
  CompleteBatch();
  if (views_) {
    views_->Then(std::move(fn));
  } else {
    fn();
  }
}

void LedgerWriter::AfterDurable(std::function<void(const Status&)> fn) {
  if (unacked_.empty()) {
    fn(OkStatus());
  } else {
    unacked_.back().durable.push_back(std::move(fn));
  }
}

Status LedgerWriter::AppendToWal(const Tail& t) {
  std::vector<const GitObject*> all;
  all.reserve(t.objects.size());
  for (const auto& o : t.objects) all.push_back(&o);
  std::lock_guard<std::mutex> l(wal_mu_);
  Crash(options_, "before-wal");
  GATOS_RETURN_IF_ERROR(wal_->Append(t.seq, t.log_id, all));
  Crash(options_, "after-wal");
  // Open until its log ref is written: a checkpoint waits for that.
  tail_open_ = true;
  tail_thread_ = std::this_thread::get_id();
  return OkStatus();
}

void LedgerWriter::FailUnacknowledged(const Status& why) {
  if (replication_failed_.ok()) replication_failed_ = why;
  std::deque<Unacknowledged> dropped = std::move(unacked_);
  unacked_.clear();
  for (auto& u : dropped) {
    for (auto& fn : u.durable) fn(replication_failed_);
    for (auto& [fn, on_fail] : u.viewed) {
      if (on_fail) on_fail(replication_failed_);
    }
  }
}

Status LedgerWriter::Acknowledge() {
  if (!pipeline_) return replication_failed_;
  const int64_t acked = pipeline_->acknowledged();
  while (!unacked_.empty() && unacked_.front().tail.seq <= acked) {
    Unacknowledged u = std::move(unacked_.front());
    unacked_.pop_front();
    CompleteBatch();  // the batch before: its pack and log ref first
    PhaseTimer timer;
    Status s = AppendToWal(u.tail);
    timer.Mark("acknowledged-wal");
    if (!s.ok()) {
      // The stream holds it, this replica does not: it gets it back from
      // the stream when it follows again.
      const int64_t seq = u.tail.seq;
      unacked_.push_front(std::move(u));
      FailUnacknowledged(UnavailableError("log batch " + std::to_string(seq) +
                                          " is in the replicated log but not in the local write-ahead log (" +
                                          s.message() + "); this replica stops leading"));
      return replication_failed_;
    }
    tail_ = std::move(u.tail);
    for (auto& fn : u.durable) fn(OkStatus());
    if (!u.viewed.empty()) {
      CompleteBatch();
      for (auto& [fn, on_fail] : u.viewed) {
        if (views_) {
          views_->Then(std::move(fn));
        } else {
          fn();
        }
      }
    }
  }
  if (Status f = pipeline_->failure(); !f.ok()) FailUnacknowledged(f);
  return replication_failed_;
}

Status LedgerWriter::WaitForRoom(std::chrono::milliseconds wait) {
  if (pipeline_ && !unacked_.empty() && unacked_.size() >= static_cast<size_t>(options_.replicate_window)) {
    (void)pipeline_->WaitFor(unacked_.front().tail.seq, wait);
  }
  return Acknowledge();
}

Status LedgerWriter::DrainReplication() {
  while (pipeline_ && !unacked_.empty() && replication_failed_.ok()) {
    if (!pipeline_->WaitFor(unacked_.back().tail.seq, std::chrono::seconds(1)) && !pipeline_->failure().ok()) break;
    (void)Acknowledge();
  }
  return Acknowledge();
}

void LedgerWriter::FlushViews() {
  (void)DrainReplication();
  CompleteBatch();
  if (views_) views_->Flush();
}


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

Result<std::optional<JobRecord>> LedgerWriter::Find(const std::string& job_hex) {
  auto it = live_.find(job_hex);
  if (it != live_.end()) return std::optional<JobRecord>(it->second);
  return index_.Get(job_hex);
}

std::vector<OpResult> LedgerWriter::Apply(std::vector<Op>& ops, BatchStats* stats) {
  CompleteBatch();  // the batch before: its pack and log ref first
  auto t_apply = std::chrono::steady_clock::now();
  std::vector<OpResult> results(ops.size());
  if (pipeline_) {
    // Room for this batch among the unacknowledged ones; what the stream
    // acknowledged meanwhile becomes durable first.
    while (replication_failed_.ok() && unacked_.size() >= static_cast<size_t>(options_.replicate_window)) {
      (void)WaitForRoom(std::chrono::milliseconds(1000));
    }
    (void)Acknowledge();
  }
  if (Status f = failed(); !f.ok() || !replication_failed_.ok()) {
    if (f.ok()) f = replication_failed_;
    Decision stopped = Decision::FromStatus(f);
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
    Decision fail = Decision::FromStatus(s);
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
        if constexpr (std::is_same_v<T, FireOp>) DoFire(b, o, r);
      },
      op);
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
  if (options_.term) info.term = options_.term();
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
  const bool pipelined = options_.replicate && options_.replicate_window > 0 && durable_in_wal &&
                         options_.deferred_tail && views_;
  if (pipelined) {
    // Pipelined: handed to the appender; durable (in the local log) and
    // answered in Acknowledge, once the stream acknowledged it and every
    // batch before it.
    std::vector<const GitObject*> all;
    all.reserve(t.objects.size());
    for (const auto& o : t.objects) all.push_back(&o);
    if (!pipeline_) {
      AppendPipeline::AppendFn append = options_.replicate;
      if (options_.crash_at == "appended-ahead") {
        // Failpoint: die once the stream acknowledged a record that nobody
        // was answered for, with the next record decided and not sent.
        append = [this, replicate = options_.replicate](int64_t seq, const std::string& record) {
          Status s = replicate(seq, record);
          if (s.ok() && pipeline_->outstanding() >= 2) Crash(options_, "appended-ahead");
          return s;
        };
      }
      pipeline_ = std::make_unique<AppendPipeline>(std::move(append), options_.on_replicated);
    }
    Status s = pipeline_->Submit(info.seq, EncodeWalRecord(info.seq, t.log_id, all));
    if (!s.ok()) {
      index_.DropPending();
      return UnavailableError(s.message());
    }
    timer.Mark("submitted");
  } else if (options_.replicate) {
    // Replicated: committed once the stream holds the record, before it is
    // in the local log (a replica that loses its disk gets it back from
    // the stream).
    std::vector<const GitObject*> all;
    all.reserve(t.objects.size());
    for (const auto& o : t.objects) all.push_back(&o);
    Status s = options_.replicate(info.seq, EncodeWalRecord(info.seq, t.log_id, all));
    if (!s.ok()) {
      index_.DropPending();
      return s;
    }
    timer.Mark("replicate");
  }
  if (durable_in_wal && !pipelined) {
    Status s = AppendToWal(t);
    if (!s.ok()) {
      index_.DropPending();
      return s;
    }
    timer.Mark("wal");
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
    for (const auto& [ref, id] : b.notes) note_refs_[ref] = id;
    if (stats) {
      stats->objects = written;
      stats->seq = seq_;
      stats->log_commit = head_;
      stats->entries = b.entries;
      stats->records = std::move(b.touched);
    }
  };
  if (pipelined) {
    remember(/*copy=*/true);
    adopt();
    unacked_.push_back(Unacknowledged{std::move(t), {}, {}});
    return OkStatus();
  }
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

}  // namespace gatos
