// gatosd serve: the ledger daemon.
//
// Threads (docs/ledger-format.md, "gatosd"):
//   ledger thread (the caller of Serve): owns the LedgerWriter and the
//     JobService; takes every waiting request as one batch (group commit),
//     the only writer of the ledger.
//   local socket threads: <ledger>/gatos/gatosd.sock for hooks and the CLI;
//     they enqueue and wait for the ledger thread's reply.
//   NATS library threads: decode and enqueue requests, never touch git.
//   publisher thread: publishes job events on JetStream, retrying while NATS
//     is away; the refs are its outbox, so losing its queue loses nothing.
//   HTTP thread: the dashboard, /metrics and /healthz (dashboard.h); its
//     event streams run on threads of their own.
//   signal thread: SIGINT/SIGTERM start a clean shutdown.
#ifndef GATOS_GATOSD_SERVER_H_
#define GATOS_GATOSD_SERVER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "gatos/exec/input_credentials.h"
#include "gatos/model/election.h"
#include "gatos/model/status.h"

namespace gatos::gatosd {

struct ServeOptions {
  std::string ledger_dir;
  std::string nats_url = "nats://127.0.0.1:4222";  // comma-separated cluster members allowed
  int stream_replicas = 1;           // copies of GATOS_JOBS in a JetStream cluster (1..5)
  std::string http_addr;             // "" = no HTTP endpoint
  std::string http_token;            // dashboard bearer token ("" = none; required off loopback)
  int64_t offer_window = 0;  // ServiceOptions::offer_window
  int64_t republish_ms = 30'000;     // pending jobs unclaimed this long are published again
  // Triggers (docs/scheduling.md, "Triggers"): the credentials `git
  // ls-remote` of a watched repository uses, in the workers' format
  // (input_credentials.h); empty: public and local repositories only.
  InputCredentials input_credentials;
  // What triggers may read besides public network repositories
  // (LsRemoteOptions): canonical local roots, and URL prefixes allowed to
  // reach this host's loopback or link-local addresses.
  std::vector<std::string> watch_local_roots;
  std::vector<std::string> watch_allow_urls;
  int64_t sweep_ms = 200;            // inbox poll and expiry sweep interval
  int64_t nats_wait_ms = 30'000;     // how long to wait for NATS at start
  int64_t stream_max_age_ms = 7LL * 24 * 3600 * 1000;
  bool fsync = true;                 // durable batches; --no-fsync for experiments only
  bool wal = true;                   // durable by the write-ahead log; --no-wal for comparisons
  // Requests applied as one log batch at most. A log commit lists every
  // commit its batch adopts as a parent, and a proof bundle carries the log
  // commits of a job's submission, lease and result: at 128 a bundle stays
  // near 40 KB whatever the load (1,024 made 230 KB; docs/benchmarks.md 6b).
  size_t max_batch = 128;
  // A log batch is sized so that applying it takes about this long (and
  // holds at most max_batch requests): sweeps, timers and schedule fires
  // wait at most that long behind a push of thousands of jobs. Cheap
  // requests (claims, renews) still go max_batch at a time.
  int64_t batch_budget_ms = 200;
  int64_t checkpoint_ms = 10'000;    // CheckpointPublisher's period; 0 = gatosd signs no checkpoints
  // NATS authentication (nats_auth.h). gatosd always connects as the ledger
  // key. With nats_auth_file it writes the server's authorization block there
  // from the policy, at start and on every policy change, then sends SIGHUP
  // to the pid in nats_pid_file so nats-server reloads it.
  std::string nats_auth_file;
  std::string nats_pid_file;
  std::string nats_ca_file;          // CA of a tls:// server
  bool require_nats_auth = false;    // refuse to serve on a server that lets anonymous clients in
  // Replicated mode (docs/replication.md; ServeReplicated). Single node
  // when false: none of the fields below is used.
  bool replicated = false;
  std::string replica_name;
  ElectionOptions election;
  // Set by ServeReplicated for its leader phase: each batch's record goes
  // to `replicate` before the local write-ahead log (WriterOptions), and
  // the ledger thread stops serving (Serve returns kSteppedDown) once
  // `leading` says false.
  std::function<Status(int64_t seq, const std::string& record)> replicate;
  std::function<bool()> leading;
  std::function<int64_t()> term;  // the Ledger-Term of each log commit
  // Replicated leader: batches appended ahead of their acknowledgement
  // (WriterOptions::replicate_window; 0: each batch waits for its append).
  int append_window = 4;
  // The replicated log's retention: -1 keeps every record.
  int64_t log_max_bytes = -1;
};

// Serve's exit code when a replicated leader stepped down.
inline constexpr int kSteppedDown = 75;


// Runs until SIGINT/SIGTERM. Returns the process exit code (0 after a clean
// shutdown, 1 when the ledger or NATS cannot be used at start).
int Serve(const ServeOptions& options);

// A replica (serve --replicated): follows the leader, applying the
// replicated write-ahead log to the local repository, takes part in the
// election, and when elected catches up with the stream and serves as
// Serve does, until SIGINT/SIGTERM or a step-down (then it follows again).
// Exit code as Serve; 1 when a record does not check (the follower stops).
int ServeReplicated(const ServeOptions& options);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_SERVER_H_
