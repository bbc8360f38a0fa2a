#include "replica.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <system_error>
#include <thread>

#include "gatos/audit/replica_apply.h"
#include "gatos/ledger/wal.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"
#include "gatos/sys/file.h"
#include "gatos/sys/log.h"

namespace gatos::gatosd {

Replica::Replica(ReplicaOptions options, std::unique_ptr<KvBucket> kv, std::unique_ptr<RecordStream> stream)
    : options_(std::move(options)),
      kv_(std::move(kv)),
      stream_(std::move(stream)),
      election_(options_.name, options_.election, SystemNowMs),
      timing_(std::getenv("GATOS_REPLICA_TIMING") != nullptr),
      apply_delay_ms_([] {
        const char* v = std::getenv("GATOSD_FAULT_APPLY_DELAY_MS");
        return v ? std::max<int64_t>(0, std::strtoll(v, nullptr, 10)) : 0;
      }()) {}

Result<std::unique_ptr<Replica>> Replica::Start(Bus& bus, const ReplicaOptions& options) {
  if (!ValidReplicaName(options.name)) {
    return InvalidArgumentError("replica name '" + options.name + "': use 1-64 of [A-Za-z0-9_.-]");
  }
  GATOS_RETURN_IF_ERROR(CheckElectionOptions(options.election));
  // The election's calls wait a third of the TTL at most (not the Bus's
  // 5 s): a keep that got no answer is then retried inside its lease.
  GATOS_ASSIGN_OR_RETURN(auto kv, KvBucket::Open(bus, {LeaderBucketName(options.ledger_id), options.election.ttl_ms,
                                                       options.replicas, true,
                                                       std::max<int64_t>(250, options.election.ttl_ms / 3)}));
  RecordStreamConfig sc;
  sc.stream = WalStreamName(options.ledger_id);
  sc.subject = WalSubject(options.ledger_id);
  sc.replicas = options.replicas;
  sc.max_bytes = options.log_max_bytes;
  GATOS_ASSIGN_OR_RETURN(auto stream, RecordStream::Open(bus, sc));
  std::unique_ptr<Replica> r(new Replica(options, std::move(kv), std::move(stream)));
  r->thread_ = std::thread([p = r.get()] { p->ElectionLoop(); });
  return r;
}

Replica::~Replica() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Replica::lag_ms() const {
  if (leading_) return 0;
  const int64_t at = caught_up_ms_.load();
  return at == 0 ? SystemNowMs() : std::max<int64_t>(0, SystemNowMs() - at);
}

void Replica::ElectionLoop() {
  uint64_t seen_changes = 0;
  int64_t next_status_ms = 0;
  std::unique_lock<std::mutex> l(mu_);
  auto publish = [&] {
    lease_until_ms_ = election_.lease_until_ms();
    leading_ = election_.leading();
    term_ = election_.term();
    if (election_.changes() != seen_changes) {
      seen_changes = election_.changes();
      Log("replica " + options_.name + ": " + election_.last_change());
    }
  };
  while (!stop_) {
    Election::Action a = election_.Next();
    publish();
    if (a.kind == Election::Action::kCreate && unreadable_since_ms_.load() != 0) {
      // Not a candidate while the stream cannot be read: elected, this
      // replica could neither catch up nor serve, and would only hold the
      // key until it gave up. A replica that reads it leads instead.
      election_.OnCreated(UnavailableError("replica " + options_.name + " cannot read the replicated log"));
      publish();
      continue;
    }
    if (a.kind != Election::Action::kWait) {
      // The KV call without the lock: StepDown may run meanwhile.
      l.unlock();
      Result<uint64_t> r = a.kind == Election::Action::kCreate ? TryCreate(a.value)
                                                                : kv_->Update("leader", a.value, a.revision);
      l.lock();
      if (a.kind == Election::Action::kCreate) {
        election_.OnCreated(r);
        SayCreateOutcome(r);
      } else {
        if (!r.ok() && election_.leading()) {
          Log("replica " + options_.name + ": keep of the leader key failed (retried while the lease lasts): " +
              r.status().message());
        }
        election_.OnUpdated(r);
      }
      publish();
      continue;
    }
    if (SystemNowMs() >= next_status_ms) {
      // This replica's line of `gatos cluster status`; best effort.
      ReplicaStatus st{options_.name, ReplicaRoleName(election_.role()), election_.term(), log_seq_.load(), lag_ms(),
                       SystemNowMs()};
      l.unlock();
      (void)kv_->Put(kReplicaStatusKeyPrefix + options_.name, EncodeReplicaStatus(st));
      l.lock();
      next_status_ms = SystemNowMs() + 1000;
      continue;
    }
    const int64_t wait = std::clamp<int64_t>(election_.next_ms() - SystemNowMs(), 1, 50);
    stop_cv_.wait_for(l, std::chrono::milliseconds(wait), [this] { return stop_.load(); });
  }
  if (election_.leading()) Log("replica " + options_.name + ": stopping while leader of term " +
                               std::to_string(election_.term()) + "; the key expires and another replica leads");
}

Result<uint64_t> Replica::TryCreate(const std::string& value) {
  // The key expires on each NATS node by its own timer, a few ms apart (more
  // on a loaded host). A create that reaches the bucket's Raft group in that
  // window is applied on a node where the key is gone and refused on one
  // where it is not: the nodes' copies of the bucket differ, and nats-server
  // 2.9 stalled the bucket's writes after its next leader change. So a
  // follower creates only once it has read the key absent twice in a row,
  // try_every_ms apart (a read is no proposal): the create then lands well
  // after every node dropped the key.
  auto e = kv_->LastRevision("leader");
  if (!e.ok()) {
    absent_reads_ = 0;
    return e.status();
  }
  if (e->has_value()) {
    absent_reads_ = 0;
    aside_since_ms_ = 0;
    return AlreadyExistsError("the leader key exists (revision " + std::to_string(**e) + ")");
  }
  if (++absent_reads_ < 2) return AbortedError("the leader key is gone; created at the next try");
  if (std::optional<std::string> aside = StandAside()) return AbortedError(*aside);
  absent_reads_ = 0;
  aside_since_ms_ = 0;
  return kv_->Create("leader", value);
}

std::optional<std::string> Replica::StandAside() {
  // Elected, this replica would apply what the other has and it has not
  // before it serves: the failover would take that much longer. A status
  // that cannot be read, or a peer that does not create the key in
  // ttl_ms / 3 (stopped, cut off, unable to read the stream), does not
  // hold this replica back any longer.
  const int64_t now = SystemNowMs();
  if (aside_since_ms_ != 0 && now - aside_since_ms_ >= options_.election.ttl_ms / 3) return std::nullopt;
  auto entries = kv_->LatestUnder(kReplicaStatusKeyPrefix);
  if (!entries.ok()) return std::nullopt;
  std::vector<ReplicaStatus> peers;
  for (const auto& [key, entry] : *entries) {
    auto st = DecodeReplicaStatus(entry.value);
    if (st.ok()) peers.push_back(std::move(*st));
  }
  const int64_t own = log_seq_.load();
  std::optional<ReplicaStatus> peer = MoreCurrentPeer(peers, options_.name, own);
  if (!peer) return std::nullopt;
  std::string why = "the leader key is gone; replica " + peer->name + " has applied more of the log (sequence " +
                    std::to_string(peer->log_seq) + " against " + std::to_string(own) + "): standing aside for it";
  if (aside_since_ms_ == 0) {
    aside_since_ms_ = now;
    Log("replica " + options_.name + ": " + why + " for up to " + std::to_string(options_.election.ttl_ms / 3) +
        " ms");
  }
  return why;
}

void Replica::SayCreateOutcome(const Result<uint64_t>& r) {
  // A follower's creates fail all the time while another replica leads
  // (AlreadyExists, at a revision that moves with each keep). Said: any
  // other failure, when it starts and every 10 s while it lasts, and a key
  // that neither moves nor expires for 3 TTLs (every 10 s).
  const int64_t now = SystemNowMs();
  if (r.ok()) {
    create_failure_.clear();
    return;
  }
  if (r.status().code() == StatusCode::kAborted) return;  // the key just went (TryCreate), or a lost race
  const std::string& m = r.status().message();
  const bool exists = r.status().code() == StatusCode::kAlreadyExists;
  const bool same = !create_failure_.empty() && exists == create_failure_exists_ && (!exists || m == create_failure_);
  if (!same) {
    create_failure_since_ms_ = now;
    create_failure_said_ms_ = 0;
  }
  create_failure_ = m;
  create_failure_exists_ = exists;
  if (now - create_failure_said_ms_ < 10000) return;
  if (!exists) {
    Log("replica " + options_.name + ": cannot stand for election" +
        (same ? " for " + std::to_string((now - create_failure_since_ms_) / 1000) + " s" : std::string()) + ": " + m);
    create_failure_said_ms_ = now;
  } else if (now - create_failure_since_ms_ >= 3 * options_.election.ttl_ms) {
    Log("replica " + options_.name + ": the leader key has not changed for " +
        std::to_string((now - create_failure_since_ms_) / 1000) + " s (neither kept nor expired): " + m);
    create_failure_said_ms_ = now;
  }
}

void Replica::StepDown(const std::string& why) {
  std::lock_guard<std::mutex> l(mu_);
  if (election_.leading()) {
    election_.StepDown(why);
    Log("replica " + options_.name + ": " + election_.last_change());
  }
  leading_ = false;
}

Result<uint64_t> Replica::Seek(int64_t local) {
  GATOS_ASSIGN_OR_RETURN(uint64_t first, stream_->FirstSequence());
  GATOS_ASSIGN_OR_RETURN(uint64_t last, stream_->LastSequence());
  if (first == 0 || last < first) return uint64_t{0};
  auto seq_at = [&](uint64_t s) -> Result<std::optional<RecordPart>> {
    GATOS_ASSIGN_OR_RETURN(auto m, stream_->Read(s));
    if (!m) return std::optional<RecordPart>();
    auto p = DecodeRecordPart(m->data);
    if (!p.ok()) return std::optional<RecordPart>();
    RecordPart part = *p;
    part.chunk = {};  // points into m
    return std::optional<RecordPart>(part);
  };
  uint64_t lo = first, hi = last + 1;  // the first message of a record after `local` is in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    GATOS_ASSIGN_OR_RETURN(auto p, seq_at(mid));
    if (!p) return uint64_t{0};
    if (p->seq > local) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo > last) return lo;  // the stream holds nothing newer
  GATOS_ASSIGN_OR_RETURN(auto p, seq_at(lo));
  if (!p || p->index > lo - first) return uint64_t{0};
  return lo - p->index;  // the record's first part (parts are contiguous)
}

Result<size_t> Replica::CatchUp(Ledger& ledger, const VerifyOptions& verify, WriteAheadLog* wal,
                                 int64_t budget_ms) {
  at_end_ = false;
  Result<size_t> n = ApplyNew(ledger, verify, wal, budget_ms);
  if (!n.ok() && n.status().code() == StatusCode::kUnavailable) {
    int64_t zero = 0;
    unreadable_since_ms_.compare_exchange_strong(zero, SystemNowMs());
  } else {
    unreadable_since_ms_ = 0;
  }
  return n;
}

int64_t Replica::unreadable_ms() const {
  const int64_t since = unreadable_since_ms_.load();
  return since == 0 ? 0 : std::max<int64_t>(1, SystemNowMs() - since);
}

Result<std::optional<RecordStream::Stored>> Replica::ReadAhead(uint64_t seq) {
  while (!ahead_.empty() && ahead_.front().first < seq) ahead_.pop_front();
  if (!ahead_.empty() && ahead_.front().first != seq) ahead_.clear();
  // Up to kReadAhead requests in flight, for messages the stream held when
  // last asked (past its end they would only come back empty). Asked again
  // while reading goes on past what it said (not at rest at its end).
  if (ahead_.empty() && seq > known_last_ && last_read_hit_) {
    auto last = stream_->LastSequence();
    if (last.ok()) known_last_ = *last;
  }
  uint64_t next = ahead_.empty() ? seq : ahead_.back().first + 1;
  while (ahead_.size() < kReadAhead && (next == seq || next <= known_last_)) {
    try {
      ahead_.emplace_back(next, std::async(std::launch::async, [s = stream_.get(), next] { return s->Read(next); }));
    } catch (const std::system_error&) {
      break;  // no thread to be had now: fewer in flight
    }
    ++next;
  }
  if (ahead_.empty()) return stream_->Read(seq);
  auto r = ahead_.front().second.get();
  ahead_.pop_front();
  // Missing: the stream's end, or a message deleted. What was asked after
  // it may have been appended since: asked again.
  last_read_hit_ = r.ok() && r->has_value();
  if (!last_read_hit_) ahead_.clear();
  return r;
}

Result<size_t> Replica::ApplyNew(Ledger& ledger, const VerifyOptions& verify, WriteAheadLog* wal,
                                  int64_t budget_ms) {
  const int64_t until_ms = SystemNowMs() + budget_ms;
  GATOS_ASSIGN_OR_RETURN(std::string head, ledger.ResolveRef(kLogRef));
  GATOS_ASSIGN_OR_RETURN(CommitInfo hc, ledger.ReadCommit(head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo hi, ParseLogMessage(hc.message));
  int64_t local = hi.seq;
  log_seq_ = local;
  if (!sought_) {
    // The first catch-up of this process: skip what the local log holds.
    GATOS_ASSIGN_OR_RETURN(uint64_t from, Seek(local));
    if (from > next_read_) next_read_ = from;
    sought_ = true;
  }
  size_t applied = 0;
  auto micros_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t).count();
  };
  // The records read and not applied yet: consecutive, from local + 1.
  // They are applied as a group (CheckAndApplyRecords: one pack, one run
  // of the checks, one sync) when the stream has no more, when the group
  // is full, or before a record that does not follow them.
  struct Pending {
    JoinedRecord rec;
    uint64_t stream_seq = 0;  // its last part's
    int64_t stored_ms = 0;
    int64_t read_us = 0;
  };
  std::vector<Pending> group;
  size_t group_bytes = 0;
  int64_t read_us = 0;  // reading the stream since the last record joined (GATOS_REPLICA_TIMING)
  auto landed = [&](const AppliedRecord& a, const Pending& p) {
    local = a.seq;
    log_seq_ = local;
    head = a.log_commit;
    cursor_ = p.stream_seq;
    ++applied;
  };
  // The reading is past records that did not land: the next call seeks
  // again from the local head.
  auto forget_reading = [&](const Status& s) {
    ahead_.clear();
    next_read_ = 1;
    sought_ = false;
    joiner_ = RecordJoiner();
    return s;
  };
  auto apply_group = [&]() -> Status {
    if (group.empty()) return OkStatus();
    const auto apply_at = std::chrono::steady_clock::now();
    std::vector<std::string_view> bytes;
    for (const Pending& p : group) bytes.push_back(p.rec.bytes);
    if (apply_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(apply_delay_ms_));
    Result<AppliedRecord> a = CheckAndApplyRecords(ledger, bytes, verify, /*fsync=*/true, wal);
    if (!a.ok() && group.size() > 1) {
      // Nothing of the group landed. One by one: those before a record
      // that does not check land, and its error names it.
      Log("replica " + options_.name + ": a group of " + std::to_string(group.size()) +
          " records did not apply (" + a.status().message() + "); applying them one by one");
      for (const Pending& p : group) {
        Result<AppliedRecord> one = CheckAndApplyRecord(ledger, p.rec.bytes, verify, true, wal);
        if (!one.ok()) return forget_reading(one.status());
        landed(*one, p);
      }
      group.clear();
      group_bytes = 0;
      return OkStatus();
    }
    if (!a.ok()) return forget_reading(a.status());
    const int64_t apply_us = micros_since(apply_at);
    for (const Pending& p : group) {
      if (timing_) {
        // The follower's lag for each record (benchmarks: e2e_bench --replicas 3).
        Log("replica " + options_.name + ": record " + std::to_string(p.rec.seq) + " applied after " +
            std::to_string(SystemNowMs() - p.stored_ms) + " ms (read " + std::to_string(p.read_us) +
            " us, checked and applied in " + std::to_string(apply_us) + " us, in a group of " +
            std::to_string(group.size()) + ")");
      }
    }
    AppliedRecord last = *a;
    for (Pending& p : group) {
      last.seq = p.rec.seq;
      landed(last, p);
    }
    head = a->log_commit;
    group.clear();
    group_bytes = 0;
    return OkStatus();
  };
  // A read that failed: what was read before it is applied first.
  auto read_or_apply = [&](auto r) -> decltype(r) {
    if (!r.ok()) GATOS_RETURN_IF_ERROR(apply_group());
    return r;
  };
  while (true) {
    if (!group.empty() && (group.size() >= kMaxGroupRecords || group_bytes >= kMaxGroupBytes ||
                           SystemNowMs() >= until_ms)) {
      GATOS_RETURN_IF_ERROR(apply_group());
    }
    if (group.empty() && applied > 0 && SystemNowMs() >= until_ms) break;  // more next call
    const auto read_at = std::chrono::steady_clock::now();
    GATOS_ASSIGN_OR_RETURN(auto m, read_or_apply(ReadAhead(next_read_)));
    read_us += micros_since(read_at);
    if (!m) {
      // Past the end, or a message deleted from the stream.
      GATOS_ASSIGN_OR_RETURN(uint64_t last, read_or_apply(stream_->LastSequence()));
      known_last_ = last;
      if (next_read_ > last) {
        GATOS_RETURN_IF_ERROR(apply_group());
        if (!joiner_.pending_seq()) caught_up_ms_ = SystemNowMs();
        at_end_ = true;
        break;
      }
      // It may have been appended between the read and now: read again.
      // Missing still, below the last sequence: deleted (the joiner
      // refuses a part set it cuts).
      GATOS_ASSIGN_OR_RETURN(m, read_or_apply(stream_->Read(next_read_)));
      if (!m) {
        ++next_read_;
        continue;
      }
    }
    ++next_read_;
    auto joined = joiner_.Add(m->data);
    if (!joined.ok()) {
      // Not a part of a record the leader wrote (anyone allowed to publish
      // on the subject can append to the stream): ignored. What the leader
      // writes is checked when it is applied; the fence refuses the
      // leader's next append after such a message, and it steps down.
      Log("replica " + options_.name + ": ignored message " + std::to_string(m->stream_seq) + " of " +
          WalStreamName(options_.ledger_id) + ": " + joined.status().message());
      continue;
    }
    std::optional<JoinedRecord> rec = std::move(*joined);
    if (!rec) continue;
    const int64_t next = local + 1 + static_cast<int64_t>(group.size());
    if (rec->seq != next) GATOS_RETURN_IF_ERROR(apply_group());  // what follows is judged on the local log
    if (rec->seq <= local) {
      // The local log has it (applied before, or written by this replica
      // as leader). At the head, it must be the same batch: another one is
      // a fork, which no leader fenced as it should.
      if (rec->seq == local) {
        WalFileContents c = DecodeWalFile(rec->bytes);
        if (c.records.size() != 1 || c.records[0].log_id != head) {
          return DataLossError("the stream's record " + std::to_string(rec->seq) +
                               " is not the local log's commit " + head.substr(0, 12) +
                               " at that sequence: the histories forked; stopping");
        }
      }
      cursor_ = m->stream_seq;
      read_us = 0;
      continue;
    }
    if (rec->seq != local + 1 + static_cast<int64_t>(group.size())) {
      return DataLossError("the stream's next record is " + std::to_string(rec->seq) + " but the local log is at " +
                           std::to_string(local + static_cast<int64_t>(group.size())) +
                           ": records in between are gone from the stream; make this replica again from a "
                           "current one (gatosd init --replica-of)");
    }
    group_bytes += rec->bytes.size();
    group.push_back(Pending{std::move(*rec), m->stream_seq, m->stored_ms, read_us});
    read_us = 0;
  }
  return applied;
}

Status Replica::ArmFence() {
  GATOS_ASSIGN_OR_RETURN(uint64_t last, stream_->LastSequence());
  if (last + 1 != next_read_) {
    return UnavailableError("the stream moved to sequence " + std::to_string(last) + " during the catch-up");
  }
  fence_ = last;
  appended_seq_ = 0;
  ahead_.clear();
  return OkStatus();
}

Status Replica::Append(int64_t seq, const std::string& record) {
  if (!leading()) return UnavailableError("replica " + options_.name + " is not the leader; retry: the leader answers");
  Status s;
  if (appended_seq_ != 0 && seq <= appended_seq_) {
    s = AbortedError("log sequence " + std::to_string(seq) + " after " + std::to_string(appended_seq_) +
                     " was appended (a batch the stream holds failed locally)");
  } else {
    // The stream without a leader for a few seconds (a NATS node died and
    // its Raft group elects another) or an acknowledgement late: publish
    // the part again while this replica leads, for up to 3 TTLs. Stepping
    // down would not help: the next leader needs the same stream, and the
    // election would add a TTL.
    const auto started = std::chrono::steady_clock::now();
    int retries = 0;
    auto retry = [&](const Status& failed) {
      const auto waited = std::chrono::steady_clock::now() - started;
      if (!leading() || waited >= std::chrono::milliseconds(3 * options_.election.ttl_ms)) return false;
      if (retries++ == 0) {
        Log("replica " + options_.name + ": append of log batch " + std::to_string(seq) +
            " not acknowledged, retried while this replica leads: " + failed.message());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.election.try_every_ms));
      return leading();
    };
    auto r = stream_->Append(seq, record, fence_, retry);
    if (r.ok() && retries > 0) {
      Log("replica " + options_.name + ": log batch " + std::to_string(seq) + " appended after " +
          std::to_string(retries) + " retries");
    }
    if (r.ok()) {
      // next_read_ stays: following again re-reads what this replica
      // appended (the local log has it, or gets it then).
      fence_ = *r;
      appended_seq_ = seq;
      log_seq_ = seq;
      cursor_ = *r;
      return OkStatus();
    }
    s = r.status();
  }
  StepDown("append of log batch " + std::to_string(seq) + " failed: " + s.message());
  return UnavailableError("replica " + options_.name + " stopped leading (" + s.message() +
                          "); retry: the next leader answers");
}

}  // namespace gatos::gatosd
