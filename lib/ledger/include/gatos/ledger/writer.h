// LedgerWriter: the one writer of a ledger (docs/ledger-format.md, "The log";
// PROTOCOL sections 10-12).
//
// Every change to the ledger goes through Apply, one batch at a time: each
// operation is checked against the current records (two claims of one job
// in a batch: the first wins), the commits the ledger signs are built in
// memory, and the batch becomes ONE log commit on refs/gatos/log (signed with
// the ledger key, Log-Seq + 1, parents: the previous log commit and every
// commit the batch recorded) whose tree holds the batch record and the state
// index (state_index.h). All new objects go into one pack; the log ref moves
// with fsync (the commit point); the refs under refs/gatos/jobs/ and
// refs/gatos/policy are then rewritten as a view of the log, without fsync,
// and repaired from the log when a writer opens the ledger after a crash.
// An operation's result is returned only once its batch is durable.
//
// One writer per ledger: Open takes an exclusive lock (flock on
// <ledger>/gatos/writer.lock) held for the writer's lifetime; gatosd holds it
// while it serves, and hooks or the CLI take it only when gatosd is not
// running (local_client.h).
//
// Thread-safety: NOT thread-safe; one thread owns the writer and its Ledger.
#ifndef GATOS_LEDGER_WRITER_H_
#define GATOS_LEDGER_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/append_pipeline.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/ledger/state_index.h"
#include "gatos/model/clock.h"
#include "gatos/model/job_record.h"
#include "gatos/model/log_format.h"
#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"
#include "gatos/model/status.h"

namespace gatos {

class WriteAheadLog;  // gatos/ledger/wal.h

struct WriterOptions {
  bool fsync = true;          // durable batches (off only for experiments)
  ClockFn clock = SystemNowMs;
  int lock_wait_ms = 0;       // how long Open waits for another writer to finish
  // Failpoints for crash tests ("before-wal", "after-wal", "after-pack",
  // "after-log-ref", "after-views"): the process SIGKILLs itself at that
  // point of the next batch. "appended-ahead" (pipelined replication):
  // once the stream acknowledged a record while the next is waiting to be
  // sent. "fail-pack": writing a batch's pack fails.
  // "fail-syncfs": SyncViews' syncfs fails.
  std::string crash_at;
  // The view refs of a committed batch are written by a thread of the
  // writer's own, in batch order, while the caller goes on with the next
  // batch; AfterViews runs what must wait for them (gatosd's replies).
  // Without it (the default) Apply returns with the views written.
  bool async_views = false;
  // With fsync: a batch is durable once its record is in the write-ahead
  // log (gatos/wal, one fdatasync); the pack and the log ref follow without
  // syncs and a background checkpoint (syncfs) makes them durable in bulk
  // when the log holds checkpoint_bytes or checkpoint_ms after a batch.
  // Off: every batch syncs its pack and log ref itself (six syncs).
  bool wal = true;
  uint64_t checkpoint_bytes = 16u << 20;
  int checkpoint_ms = 2000;
  // With the write-ahead log and async_views: Apply returns as soon as the
  // batch's record is durable in the write-ahead log, its state already the
  // writer's (reads see it); the batch's pack and log ref are written by
  // CompleteBatch, which the caller runs once it has sent what may leave
  // before them (gatosd: job offers and the workers' claim and renew
  // replies), and which every later call that needs them runs first.
  bool deferred_tail = false;
  // A replicated ledger's leader (docs/replication.md): every batch's
  // record (docs/ledger-format.md section 7a) goes to `replicate` before
  // the local write-ahead log, and the batch is committed only when it
  // returns OK (the stream acknowledged the record). Otherwise the batch
  // fails as a failed append would: nothing of it is kept, and its
  // requests get the returned status's class (Unavailable: retry, at the
  // next leader). Empty (single-node mode): no cost.
  std::function<Status(int64_t seq, const std::string& record)> replicate;
  // With replicate, the write-ahead log, deferred_tail and async_views:
  // appends are pipelined (gatos/ledger/append_pipeline.h). Apply returns
  // once the batch's record is handed to the writer's appender thread, its
  // state already the writer's, and the caller decides the next batches
  // while the stream acknowledges; at most `replicate_window` batches are
  // unacknowledged (WaitForRoom, and Apply itself, wait beyond that).
  // Nothing of a batch leaves before its acknowledgement: it reaches the
  // local write-ahead log in Acknowledge, and AfterDurable / AfterViews run
  // only then. The first failed append fails every unacknowledged batch
  // (their callbacks get the failure) and every later one. 0: each Commit
  // waits for its own append.
  int replicate_window = 0;
  // With replicate_window: called on the appender's thread after each
  // acknowledgement or the failure, so the caller runs Acknowledge soon.
  std::function<void()> on_replicated;
  // With replicate: the leader's election term, written as each log
  // commit's Ledger-Term trailer.
  std::function<int64_t()> term;
  // Lease commits signed one by one with the ledger key, as ledgers written
  // before grants were signed per reply did (the auditor still accepts
  // them): only for tests of that. Workers check the reply's grant
  // signature either way.
  bool sign_lease_commits = false;
};

// ---- operations ----
struct SubmitOp {
  JobCommitCheck check;            // CheckJobCommit, already done by the caller
  std::vector<GitObject> objects;  // the commit's objects when not yet in the repository
};
struct LeaseOp {
  LeaseRequest req;  // signature checked by the caller (VerifyLeaseRequest)
};
struct ResultOp {
  ParsedResult result;             // CheckResultContent, already done by the caller
  std::vector<GitObject> objects;  // the result's objects when not yet in the repository
};
struct UserOp {  // cancel or re-run, signature checked by the caller
  bool retry = false;
  std::string job_hex;
  std::string requester_hex;
  int64_t attempt = 0;  // re-run: the attempt it opens
  int64_t requested_at_ms = 0;
  std::string sig_hex;
};
struct PruneOp {
  std::string job_hex;
};
struct AbortOp {  // a cancelled job whose lease ran out
  std::string job_hex;
};
struct PolicyOp {
  Policy policy;  // the new policy (settings and lists)
  std::string message;
  // A key rotation: the new policy names this key's public half as the
  // ledger key; the commit is signed by the current key, and the writer
  // signs with the new key from then on.
  std::optional<Ed25519PrivateKey> new_ledger_key;
};
// A record the ledger keeps outside the jobs (batch records, witnesses):
// moves `ref` to `commit`, logged as `kind`. With create_only, a ref that
// exists already makes the op a no-op (existing).
struct NoteOp {
  LogKind kind = LogKind::kBatch;
  std::string ref;
  bool create_only = true;
  std::vector<GitObject> objects;  // commit first
};
// A tick of a schedule (docs/scheduling.md, "Firing"): the ledger builds
// and signs the fire commit (schedule_fire.h) and adopts its job, moving
// refs/gatos/fires/<name>; refused when the schedule's ref is no longer at
// `schedule.commit` (paused, removed or changed) or the tick is not after
// the schedule's last fire; a tick fired already is a no-op (existing).
// A trigger's fire (`move`) is fired at the batch time, its job pinned to
// the moved ref's commit (schedule_fire.h).
struct FireOp {
  ScheduleCommit schedule;  // CheckScheduleCommit of the schedule's ref
  int64_t tick_ms = 0;
  std::optional<TriggerMove> move;
};
using Op = std::variant<SubmitOp, LeaseOp, ResultOp, UserOp, PruneOp, AbortOp, PolicyOp, NoteOp, FireOp>;

struct OpResult {
  Decision outcome;
  bool existing = false;  // a no-op: the job, result or cancel was already recorded
  std::string job_hex;
  std::string commit;     // the commit the operation recorded (lease, cancel, result, job, policy)
  std::optional<JobRecord> record;  // the job's record after the batch
  std::vector<GitObject> grant;     // lease ops: lease commit, job commit, job tree, job.yaml blob
  std::vector<GitObject> notice;    // renew of a cancelled job: the cancel commit
  bool retried = false;             // a result op whose attempt will be retried
  std::vector<std::string> revoked_jobs;  // policy op: leases ended by a revocation
};

struct BatchStats {
  size_t ops = 0;
  size_t changes = 0;   // transitions recorded
  size_t objects = 0;   // objects written
  int64_t seq = 0;      // the log commit's sequence (0 = nothing written)
  std::string log_commit;        // its id
  std::vector<LogEntry> entries;  // what it recorded
  std::map<std::string, JobRecord> records;  // the record of every job it changed, as committed
};

class LedgerWriter {
 public:
  // Opens the ledger at `dir` as its writer: takes the writer lock
  // (Unavailable naming the holder when another writer has it after
  // lock_wait_ms), reads the log head, repairs the ref view if a crash left
  // it behind, and loads the live jobs. FailedPrecondition when the ledger
  // has no log (not created by this version's gatosd init).
  static Result<std::unique_ptr<LedgerWriter>> Open(const std::string& dir, Ed25519PrivateKey key,
                                                    WriterOptions options = {});
  // Creates the log of a fresh ledger: policy commit and log commit 1.
  // AlreadyExists when the ledger has a log.
  static Status Initialize(const std::string& dir, const Policy& policy, const Ed25519PrivateKey& key,
                           int64_t now_ms);
  ~LedgerWriter();

  // Applies a batch. results[i] belongs to ops[i]. When writing the batch
  // fails, every operation that would have changed something gets kRetry (or
  // kInternal) and nothing is changed.
  std::vector<OpResult> Apply(std::vector<Op>& ops, BatchStats* stats = nullptr);

  // ---- reads (current state) ----
  Result<std::optional<JobRecord>> Find(const std::string& job_hex);
  // Jobs not finished (pending or claimed), by id.
  const std::map<std::string, JobRecord>& live() const { return live_; }
  const IndexStats& stats() const { return stats_; }
  const Policy& policy() const { return policy_; }
  const std::string& policy_commit() const { return policy_commit_; }
  const Ed25519PublicKey& ledger_key() const { return key_.public_key(); }
  const Ed25519PrivateKey& ledger_private_key() const { return key_; }
  int64_t seq() const { return seq_; }
  const std::string& head() const { return head_; }
  int64_t Now() const { return options_.clock(); }
  Ledger& ledger() { return *ledger_; }
  StateIndex& index() { return index_; }

  // Makes every batch so far durable in the repository itself (syncfs) and
  // empties the write-ahead log. Runs in the background on its own; at
  // close; callable any time.
  Status Checkpoint();
  // Not OK once a batch is durable in the write-ahead log but could not be
  // written to the repository: every later batch fails with this, and the
  // writer must be closed and opened again (which replays the log).
  Status failed() const;

  // Records that every view ref up to the current sequence is on disk
  // (after syncfs): a later Open replays only batches after it.
  Status SyncViews();

  // With async_views: runs `fn` on the view thread once the view refs of
  // every batch committed so far are written (failed writes are logged and
  // repaired from the log at the next start). Without: runs it now.
  // With pipelined replication, `fn` waits for the acknowledgement of every
  // batch committed so far too; `on_fail` (if any) runs in its place on the
  // ledger thread when one of them is never acknowledged.
  void AfterViews(std::function<void()> fn, std::function<void(const Status&)> on_fail = nullptr);
  // Runs `fn` on this thread once every batch committed so far is durable:
  // now, except with pipelined replication, where it runs in the
  // Acknowledge that makes the last of them durable (with the failure when
  // one is never acknowledged).
  void AfterDurable(std::function<void(const Status&)> fn);
  // Pipelined replication (replicate_window): the batches the stream
  // acknowledged since the last call are appended, in order, to the local
  // write-ahead log, and what waited for them runs. Not OK once an append
  // failed: then every unacknowledged batch was dropped (its callbacks got
  // the failure) and every later batch fails; the writer's state holds the
  // dropped batches, so it must be closed (a follower's start repairs the
  // repository from its write-ahead log and the stream).
  Status Acknowledge();
  // Waits up to `wait` while replicate_window batches are unacknowledged,
  // then runs Acknowledge.
  Status WaitForRoom(std::chrono::milliseconds wait);
  // Waits until no batch is unacknowledged (or an append failed), then
  // runs Acknowledge.
  Status DrainReplication();
  size_t unacknowledged() const { return unacked_.size(); }
  // Stops the appender thread (after DrainReplication: nothing is left to
  // send); on_replicated is not called after it returns.
  void StopAppending() { pipeline_.reset(); }
  // Waits until the view refs of every committed batch are written.
  void FlushViews();
  // With deferred_tail: writes the last batch's pack and log ref and hands
  // its view refs to the view thread (nothing to do when they are written).
  // A failure makes failed() not OK, as a failed Apply would.
  void CompleteBatch();

 private:
  LedgerWriter(std::unique_ptr<Ledger> ledger, Ed25519PrivateKey key, WriterOptions options, int lock_fd);
  Status Load();
  Status RepairViews();

  struct Batch;
  // Adds an object the batch writes (once per id).
  static void AddObject(Batch& b, GitObject&& o);
  // A replicated leader: the objects of `commit` (pushed with stock git, so
  // in this repository only) the batch does not write already, read from
  // the repository (or from `carried`, what the request brought), for its
  // record to carry them to the followers.
  Result<std::vector<GitObject>> PushedObjects(const Batch& b, const std::string& commit, bool job,
                                               const std::vector<GitObject>* carried = nullptr);
  void ApplyOne(Batch& b, Op& op, OpResult* r);
  const Policy& BatchPolicy(const Batch& b) const;
  void DoSubmit(Batch& b, SubmitOp& op, OpResult* r);
  void DoLease(Batch& b, LeaseOp& op, OpResult* r);
  void DoResult(Batch& b, ResultOp& op, OpResult* r);
  void DoUser(Batch& b, UserOp& op, OpResult* r);
  void DoPrune(Batch& b, PruneOp& op, OpResult* r);
  void DoAbort(Batch& b, AbortOp& op, OpResult* r);
  void DoPolicy(Batch& b, PolicyOp& op, OpResult* r);
  void DoNote(Batch& b, NoteOp& op, OpResult* r);
  void DoFire(Batch& b, FireOp& op, OpResult* r);
  // A ref outside the jobs as the batch sees it so far.
  Result<std::string> NoteRef(Batch& b, const std::string& ref);
  Status Commit(Batch& b, BatchStats* stats);
  // A batch's writes after its record: the pack, the log ref, the view refs.
  // Commit writes them at once, or leaves them to CompleteBatch with
  // deferred_tail.
  struct Tail {
    int64_t seq = 0;
    std::string old_head, log_id;
    std::vector<GitObject> objects;
    std::vector<std::pair<std::string, std::string>> view;
  };
  // `sync_repo`: the pack and the log ref synced (no write-ahead log);
  // `mark` names each phase done (GATOS_WRITER_TIMING).
  Status WriteTail(Tail& t, bool sync_repo, const std::function<void(const char*)>& mark);
  // A batch in the write-ahead log that cannot be written to the repository
  // stops the writer (failed()); returns that status.
  Status Stop(int64_t seq, const Status& why);
  // A batch's record into the local write-ahead log (the commit point).
  Status AppendToWal(const Tail& t);
  void FailUnacknowledged(const Status& why);
  std::optional<Tail> tail_;
  std::thread::id tail_thread_;  // the thread that left it open (under wal_mu_)

  class ViewWriter;
  std::unique_ptr<ViewWriter> views_;  // with async_views; destroyed (drained) first
  class Checkpointer;
  std::unique_ptr<Checkpointer> checkpointer_;  // with the write-ahead log; stopped next
  // The write-ahead log. A batch holds wal_mu_ from its record to its log
  // ref, so a checkpoint's Rotate never splits one; failed_ under it too.
  // A deferred tail (deferred_tail) is open from its record to its log ref
  // without holding it: a checkpoint waits on wal_cv_ until it is closed.
  std::unique_ptr<WriteAheadLog> wal_;
  mutable std::mutex wal_mu_;
  std::condition_variable wal_cv_;
  bool tail_open_ = false;
  Status failed_;

  std::unique_ptr<Ledger> ledger_;
  Ed25519PrivateKey key_;
  WriterOptions options_;
  int lock_fd_;
  StateIndex index_;
  std::string head_;  // log commit id
  int64_t seq_ = 0;
  Policy policy_;
  std::string policy_commit_;
  IndexStats stats_;
  std::map<std::string, JobRecord> live_;
  // Refs outside the jobs (schedules, fires) as this writer last wrote or
  // read them (NoteRef), so a fire need not wait for the view writer.
  std::map<std::string, std::string> note_refs_;

  // Pipelined replication: the batches handed to the appender and not yet
  // acknowledged, in order, each with what waits for it.
  struct Unacknowledged {
    Tail tail;
    std::vector<std::function<void(const Status&)>> durable;
    std::vector<std::pair<std::function<void()>, std::function<void(const Status&)>>> viewed;
  };
  std::deque<Unacknowledged> unacked_;
  std::unique_ptr<AppendPipeline> pipeline_;  // destroyed first (declared last)
  Status replication_failed_;
};

// A read-only view of a ledger at its current log head, for the CLI and the
// auditor: no lock, safe while a writer runs (it reads committed objects).
class LedgerView {
 public:
  // NotFound when `dir` is not a ledger; FailedPrecondition when it has no log.
  static Result<std::unique_ptr<LedgerView>> Open(const std::string& dir);
  Result<std::optional<JobRecord>> Find(const std::string& job_hex) { return index_.Get(job_hex); }
  StateIndex& index() { return index_; }
  Ledger& ledger() { return *ledger_; }
  const std::string& head() const { return head_; }
  int64_t seq() const { return seq_; }
  const std::string& policy_commit() const { return policy_commit_; }
  Result<Policy> ReadPolicy() { return ledger_->ReadPolicyAt(policy_commit_); }

 private:
  explicit LedgerView(std::unique_ptr<Ledger> ledger) : ledger_(std::move(ledger)), index_(ledger_.get()) {}
  std::unique_ptr<Ledger> ledger_;
  StateIndex index_;
  std::string head_;
  int64_t seq_ = 0;
  std::string policy_commit_;
};

// <ledger>/gatos, where the ledger keeps its key, lock, socket and sync mark.
std::string LedgerStateDir(const std::string& ledger_dir);

}  // namespace gatos

#endif  // GATOS_LEDGER_WRITER_H_
