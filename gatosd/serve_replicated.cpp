// gatosd serve --replicated: a replica's life, follower then leader then
// follower again (docs/replication.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <iostream>
#include <optional>
#include <thread>

#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/maintenance.h"
#include "gatos/ledger/wal.h"
#include "gatos/ledger/writer.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/sys/log.h"
#include "follower_door.h"
#include "follower_http.h"
#include "replica.h"
#include "replica_reads.h"
#include "server.h"

namespace gatos::gatosd {
namespace {

using Clock = std::chrono::steady_clock;

// A follower that could not read the stream for this long on one
// connection drops it and connects again.
constexpr int64_t kReconnectAfterMs = 20000;

// The ledger writer's lock (LedgerWriter::Open takes the same file): held
// while following, so that a git hook or the CLI on this host cannot write
// a batch the stream does not hold; they are told the ledger is busy.
class FollowerLock {
 public:
  explicit FollowerLock(const std::string& dir) {
    fd_ = ::open((LedgerStateDir(dir) + "/writer.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FollowerLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Waits up to `ms` for SIGINT/SIGTERM (blocked in every thread).
bool SignalWithin(const sigset_t& set, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  return sigtimedwait(&set, nullptr, &ts) > 0;
}

}  // namespace

int ServeReplicated(const ServeOptions& opts) {
  SetLogProgram("gatosd");
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  std::string dir = opts.ledger_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto fail = [](const std::string& what) {
    std::cerr << "gatosd serve --replicated: " << what << "\n";
    return 1;
  };
  if (!ValidReplicaName(opts.replica_name)) {
    return fail("replica name '" + opts.replica_name + "': give --replica-name with 1-64 of [A-Za-z0-9_.-]");
  }
  auto key = LoadLedgerKey(dir);
  if (!key.ok()) return fail(key.status().message());
  auto ledger_id = ReplicaLedgerId(dir);
  if (!ledger_id.ok()) return fail(ledger_id.status().message());

  BusOptions bo;
  bo.url = opts.nats_url;
  bo.name = "gatosd replica " + opts.replica_name + " " + dir;
  bo.tls_ca_file = opts.nats_ca_file;
  SetBusIdentity(&bo, *key);
  bo.on_async_error = [](const std::string& what) { Log("NATS: " + what); };
  // Where the connection went, for the log (the callbacks run on a library
  // thread while the Bus lives; ~Bus calls none of them).
  std::atomic<Bus*> live_bus{nullptr};
  bo.on_disconnected = [&live_bus] {
    Bus* b = live_bus.load();
    Log("NATS: disconnected" + (b ? ": " + b->ConnectionState() : std::string()));
  };
  bo.on_reconnected = [&live_bus] {
    Bus* b = live_bus.load();
    Log("NATS: reconnected" + (b ? ": " + b->ConnectionState() : std::string()));
  };
  std::unique_ptr<Bus> bus;
  std::unique_ptr<Replica> replica;
  ReplicaOptions ro{opts.replica_name, *ledger_id, opts.election, opts.stream_replicas, opts.log_max_bytes};
  // Connects and opens the bucket and the stream: at start until
  // --nats-wait-s has passed, and again (without a deadline) when a
  // follower drops a connection on which the stream stayed unreadable.
  // 0: done; 1: failed for good (said); 2: SIGINT/SIGTERM.
  auto open = [&](std::optional<Clock::time_point> deadline) -> int {
    for (bool said = false;; said = true) {
      Status s;
      if (!bus) {
        auto b = Bus::Connect(bo);
        if (b.ok()) {
          bus = std::move(*b);
          live_bus = bus.get();
        }
        s = b.status();
      }
      if (bus) {
        auto r = Replica::Start(*bus, ro);
        if (r.ok()) {
          replica = std::move(*r);
          return 0;
        }
        s = r.status();
      }
      // A cluster that is forming answers JetStream calls late or not at
      // all (timeouts, a bucket whose stream another replica is creating):
      // retry until the deadline, except what no retry changes.
      const bool final = s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition ||
                         s.code() == StatusCode::kPermissionDenied;
      if (final || (deadline && Clock::now() >= *deadline)) {
        (void)fail(s.message() + " (is nats-server -js running, clustered for --stream-replicas?)");
        return 1;
      }
      if (!said) Log("waiting for NATS and JetStream at " + opts.nats_url + ": " + s.message());
      if (SignalWithin(set, 250)) return 2;
    }
  };
  if (int o = open(Clock::now() + std::chrono::milliseconds(opts.nats_wait_ms)); o != 0) return o == 1 ? 1 : 0;
  Log("replica " + opts.replica_name + " of ledger " + *ledger_id + " (stream " + WalStreamName(*ledger_id) +
      ", bucket " + LeaderBucketName(*ledger_id) + "), NATS " + bus->ConnectionState());
  VerifyOptions verify;
  verify.ledger_key = key->public_key();
  // Reads from this replica's own repository, whatever its role, for as
  // long as it runs (replica_reads.h); started again with a new connection.
  std::unique_ptr<ReplicaReads> reads;
  auto start_reads = [&]() -> Status {
    Replica* rp = replica.get();
    auto r = ReplicaReads::Start(*bus, dir, opts.replica_name, [rp] {
      return ReplicaReads::Role{rp->leading(), rp->term(), rp->lag_ms()};
    });
    if (!r.ok()) return r.status();
    reads = std::move(*r);
    return OkStatus();
  };
  if (Status st = start_reads(); !st.ok()) return fail("serving reads: " + st.message());
  while (true) {
    // Follower: apply the stream; lead when elected, once caught up.
    {
      // What a crash of this replica left (it may have led): a stale lock
      // of the log ref, batches only in the local write-ahead log, view
      // refs behind the log. Opening the writer repairs them, as at any
      // start; it is closed at once.
      {
        WriterOptions wo;
        wo.fsync = opts.fsync;
        auto repaired = LedgerWriter::Open(dir, *key, wo);
        if (!repaired.ok()) return fail(repaired.status().message());
      }
      FollowerLock lock(dir);
      if (!lock.held()) return fail("the ledger " + dir + " is in use by another writer (gatosd or the CLI)");
      auto ledger = Ledger::Open(dir);
      if (!ledger.ok()) return fail(ledger.status().message());
      // Applied records are durable in the replica's write-ahead log (one
      // fdatasync each), the repository synced by a checkpoint every 2 s
      // of activity, as the ledger's writer does.
      std::optional<WriteAheadLog> wal;
      if (opts.fsync) {
        auto opened = WriteAheadLog::Open(LedgerStateDir(dir));
        if (!opened.ok()) return fail(opened.status().message());
        wal.emplace(std::move(*opened));
      }
      auto next_checkpoint = Clock::now() + std::chrono::seconds(2);
      auto checkpoint = [&] {
        if (!wal) return;
        Status c = wal->CheckpointNow(dir);
        if (!c.ok()) Log("replica checkpoint failed (retried): " + c.message());
        next_checkpoint = Clock::now() + std::chrono::seconds(2);
      };
      // The front door's pushes, forwarded to the leader; the dashboard
      // and /metrics as of what this replica applied.
      auto door = FollowerDoor::Start(dir, bus.get());
      if (!door.ok()) Log("ERROR: pushes to this replica's front door fail: " + door.status().message());
      auto http = FollowerHttp::Start(opts, dir);
      if (!http.ok()) Log("ERROR: no dashboard or metrics while following: " + http.status().message());
      Log("replica " + opts.replica_name + " following");
      // Each applied record is a pack, as each batch is for a leader: roll
      // them up as the leader does, or every object lookup of the checks
      // slows down with their number (1,400 packs in a 3,000-job run).
      Repacker repacker(dir);
      auto next_maintenance = Clock::now() + std::chrono::seconds(5);
      struct RepackWait {
        Repacker& r;
        ~RepackWait() { (void)r.Wait(); }  // before the leader's own repacks
      } repack_wait{repacker};
      bool unavailable = false;
      Clock::time_point said_unavailable{};  // when last said
      while (true) {
        const bool elected = replica->leading();
        auto n = replica->CatchUp(**ledger, verify, wal ? &*wal : nullptr);
        if (Clock::now() >= next_checkpoint) checkpoint();
        if (Clock::now() >= next_maintenance) {
          if (repacker.MaybeStart()) Log("repacking the replica's object store in the background");
          next_maintenance = Clock::now() + std::chrono::seconds(5);
        }
        if (!n.ok()) {
          if (n.status().code() != StatusCode::kUnavailable) {
            Log("ERROR: replica " + opts.replica_name + " stopped following: " + n.status().message());
            return 1;
          }
          // Said at once, then every 10 s while it lasts, with where the
          // connection is.
          if (!unavailable || Clock::now() - said_unavailable >= std::chrono::seconds(10)) {
            Log(std::string(unavailable ? "the replicated log is still unavailable after " +
                                                   std::to_string(replica->unreadable_ms() / 1000) + " s: "
                                             : "the replicated log is unavailable: ") +
                n.status().message() + "; NATS " + bus->ConnectionState());
            said_unavailable = Clock::now();
            unavailable = true;
          }
          // Elected, but the stream cannot be read: it cannot catch up, so
          // cannot serve. Let a replica that reads it lead.
          if (elected && replica->unreadable_ms() >= opts.election.ttl_ms) {
            replica->StepDown("elected, but the replicated log has been unreadable for " +
                              std::to_string(replica->unreadable_ms()) + " ms: " + n.status().message());
          }
          // Unreadable for long on this connection (whatever the library
          // or the server it is on keeps stale): start again with a new
          // connection, a new bucket and stream handle, and a new seek.
          if (!elected && replica->unreadable_ms() >= kReconnectAfterMs) {
            Log("the replicated log has been unreadable for " + std::to_string(replica->unreadable_ms() / 1000) +
                " s; connecting to NATS again (NATS " + bus->ConnectionState() + ")");
            door = Result<std::unique_ptr<FollowerDoor>>(UnavailableError("reconnecting"));
            reads.reset();  // both use the connection and the replica
            replica.reset();
            live_bus = nullptr;
            bus.reset();
            const int o = open(std::nullopt);
            if (o != 0) {
              checkpoint();
              return o == 1 ? 1 : 0;
            }
            if (Status st = start_reads(); !st.ok()) Log("ERROR: serving reads: " + st.message());
            door = FollowerDoor::Start(dir, bus.get());
            if (!door.ok()) Log("ERROR: pushes to this replica's front door fail: " + door.status().message());
            Log("replica " + opts.replica_name + " reconnected: NATS " + bus->ConnectionState());
            unavailable = false;
            continue;
          }
        } else {
          if (unavailable) {
            Log("the replicated log is readable again; NATS " + bus->ConnectionState());
            unavailable = false;
          }
          if (*n > 0 && !elected) {
            Log("applied " + std::to_string(*n) + " record(s) from the replicated log");
          }
          // Caught up with everything the stream held when elected: lead.
          if (elected && replica->leading() && replica->at_end()) {
            Status armed = replica->ArmFence();
            if (armed.ok()) {
              checkpoint();  // the writer opens next; an empty log is quicker to open
              break;
            }
            Log("not leading yet: " + armed.message());
          }
        }
        if (http.ok() && *http) (*http)->Update(replica->term(), replica->lag_ms(), bus->connected());
        // Behind (CatchUp returned after its time budget): go on at once.
        const int wait_ms = n.ok() && !replica->at_end() ? 0 : elected ? 1 : 100;
        if (SignalWithin(set, wait_ms)) {
          checkpoint();
          return 0;
        }
      }
    }
    Log("replica " + opts.replica_name + " leads with term " + std::to_string(replica->term()));
    ServeOptions lo = opts;
    lo.replicate = [&replica](int64_t seq, const std::string& record) { return replica->Append(seq, record); };
    lo.leading = [&replica] { return replica->leading(); };
    lo.term = [&replica] { return static_cast<int64_t>(replica->term()); };
    const int code = Serve(lo);
    if (code == 0) return 0;  // SIGINT/SIGTERM
    // Serve unblocked the signals for its own thread; block them again.
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (code != kSteppedDown) {
      // It could not start (NATS or JetStream failing for a moment) or its
      // writer stopped: let another replica lead, and follow (the writer's
      // open at the follower's start writes what the write-ahead log holds).
      replica->StepDown("gatosd could not serve (exit status " + std::to_string(code) + ")");
      if (SignalWithin(set, 1000)) return 0;
    }
    Log("replica " + opts.replica_name + " stepped down; following again");
  }
}

}  // namespace gatos::gatosd
