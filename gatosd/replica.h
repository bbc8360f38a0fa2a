// A replica of a replicated ledger (docs/replication.md): its election
// thread, the replicated write-ahead log it appends to as leader, and the
// follower's loop that applies that log to the local repository.
//
// Threads: the election thread (owned) runs Election against the KV bucket
// and publishes role and term in atomics; everything else is called from
// gatosd's main thread (the follower's loop, then, as leader, the ledger
// thread through WriterOptions::replicate).
#ifndef GATOS_GATOSD_REPLICA_H_
#define GATOS_GATOSD_REPLICA_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gatos/audit/verify.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/replica_id.h"
#include "gatos/ledger/wal.h"
#include "gatos/model/clock.h"
#include "gatos/model/election.h"
#include "gatos/model/record_parts.h"
#include "gatos/model/replica_status.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/kv_bucket.h"
#include "gatos/nats/record_stream.h"

namespace gatos::gatosd {

struct ReplicaOptions {
  std::string name;        // this replica (ValidReplicaName)
  std::string ledger_id;   // names the bucket and the stream (ReplicaLedgerId)
  ElectionOptions election;
  int replicas = 1;        // of the bucket and the stream: min(cluster size, 3)
  int64_t log_max_bytes = -1;  // the replicated log's retention (RecordStreamConfig::max_bytes)
};

class Replica {
 public:
  // Opens (creates) the bucket and the stream and starts the election
  // thread. `bus` must outlive the Replica.
  static Result<std::unique_ptr<Replica>> Start(Bus& bus, const ReplicaOptions& options);
  ~Replica();

  // Elected, and within the lease of its last successful keep: the
  // election thread can be blocked in a KV call that does not answer, so
  // the lease is checked here too, not only when that call returns.
  bool leading() const { return leading_.load() && SystemNowMs() < lease_until_ms_.load(); }
  uint64_t term() const { return term_.load(); }
  const std::string& name() const { return options_.name; }

  // Follower: applies every complete record after the local log head that
  // the stream holds, each checked first (CheckAndApplyRecord). Returns how
  // many were applied. A record that does not check is an error that stops
  // the follower (PermissionDenied, InvalidArgument, DataLoss: say it and
  // stop); Unavailable: retry.
  // With `wal`, applied records are made durable by it (CheckAndApplyRecord).
  // Returns after about `budget_ms` of applying even when the stream holds
  // more (the caller checkpoints, repacks and answers signals between
  // calls); at_end() says whether it reached the stream's end.
  Result<size_t> CatchUp(Ledger& ledger, const VerifyOptions& verify, WriteAheadLog* wal = nullptr,
                         int64_t budget_ms = 1000);
  bool at_end() const { return at_end_; }
  // How long the stream has been unreadable: since the first of the
  // CatchUp calls in a row that failed with Unavailable (0 when the last
  // one read it). A replica that cannot read the stream does not stand
  // for election: it could not catch up, so could not serve.
  int64_t unreadable_ms() const;
  // The stream's last sequence as the leader's fence (after a CatchUp that
  // reached it).
  Status ArmFence();
  // The leader's WriterOptions::replicate: appends the record fenced on the
  // last one; any failure steps this replica down and returns Unavailable.
  Status Append(int64_t seq, const std::string& record);
  // Stops leading now (the server could not go on as leader).
  void StepDown(const std::string& why);

  // For status and metrics.
  uint64_t applied_stream_seq() const { return cursor_.load(); }
  int64_t log_seq() const { return log_seq_.load(); }
  // How long since this replica last held every record the stream held (0
  // while it leads).
  int64_t lag_ms() const;

 private:
  Replica(ReplicaOptions options, std::unique_ptr<KvBucket> kv, std::unique_ptr<RecordStream> stream);
  // Where the first record after log sequence `local` starts in the
  // stream, by binary search over the parts' headers (log sequences only
  // grow along the stream); 0 when the stream does not allow it (a
  // message that is gone or does not decode): read from the start then.
  Result<uint64_t> Seek(int64_t local);
  Result<size_t> ApplyNew(Ledger& ledger, const VerifyOptions& verify, WriteAheadLog* wal, int64_t budget_ms);
  // A follower applies the records it read in groups of at most this many
  // (CheckAndApplyRecords): one sync and one run of the checks each.
  static constexpr size_t kMaxGroupRecords = 64;
  static constexpr size_t kMaxGroupBytes = 16 << 20;
  // The message at `seq` by a request (js_GetMsg), with those after it up
  // to the stream's last known sequence requested meanwhile, each on a
  // thread of its own: their round trips overlap.
  Result<std::optional<RecordStream::Stored>> ReadAhead(uint64_t seq);
  static constexpr size_t kReadAhead = 16;
  void ElectionLoop();
  // A follower's create of the leader key (election thread): only after
  // reading it absent at two tries in a row.
  Result<uint64_t> TryCreate(const std::string& value);
  int absent_reads_ = 0;
  // Why this follower lets another create the key it found gone, or
  // nullopt to create it (election thread): another follower has applied
  // more of the log (MoreCurrentPeer), and ttl_ms / 3 have not passed
  // since this one first stood aside.
  std::optional<std::string> StandAside();
  int64_t aside_since_ms_ = 0;  // 0: not standing aside
  // Logs what keeps this follower's creates of the leader key failing
  // (election thread).
  void SayCreateOutcome(const Result<uint64_t>& r);

  ReplicaOptions options_;
  std::unique_ptr<KvBucket> kv_;
  std::unique_ptr<RecordStream> stream_;
  std::mutex mu_;  // election_
  Election election_;
  std::atomic<bool> leading_{false};
  std::atomic<int64_t> lease_until_ms_{0};  // Election::lease_until_ms, published with leading_
  std::atomic<uint64_t> term_{0};
  std::atomic<bool> stop_{false};
  std::condition_variable stop_cv_;
  std::thread thread_;
  // The election thread's last failed create, for SayCreateOutcome.
  std::string create_failure_;
  bool create_failure_exists_ = false;
  int64_t create_failure_since_ms_ = 0;
  int64_t create_failure_said_ms_ = 0;
  // Follower: the next stream message to read and the parts joined so far.
  std::atomic<uint64_t> cursor_{0};  // the last stream sequence applied
  std::atomic<int64_t> log_seq_{0};
  std::atomic<int64_t> caught_up_ms_{0};  // the last CatchUp that reached the stream's end
  std::atomic<int64_t> unreadable_since_ms_{0};  // 0: the last CatchUp read the stream
  uint64_t next_read_ = 1;
  bool sought_ = false;
  bool at_end_ = false;  // the last CatchUp reached the stream's end
  RecordJoiner joiner_;
  uint64_t known_last_ = 0;  // the stream's last sequence when last asked
  bool last_read_hit_ = false;
  std::deque<std::pair<uint64_t, std::future<Result<std::optional<RecordStream::Stored>>>>> ahead_;
  // Leader: the stream sequence the next append expects, and the log
  // sequence appended last.
  uint64_t fence_ = 0;
  int64_t appended_seq_ = 0;
  const bool timing_;  // GATOS_REPLICA_TIMING: log each applied record's lag
  // GATOSD_FAULT_APPLY_DELAY_MS (tests): a follower waits that long before
  // applying each group of records, to stay behind.
  const int64_t apply_delay_ms_;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_REPLICA_H_
