// How the CLI reaches a ledger named by --ledger:
//   a directory      the ledger repository on this host (read refs directly;
//                    writes use the ledger key in DIR/gatos/ledger_key)
//   nats://HOST:PORT the running gatosd, through its RPC (rpc.h)
//   any other URL    a git remote (ssh://, https://, file://, host:path):
//                    `gatos submit` pushes there with stock git
#ifndef GATOS_CLI_LEDGER_CLIENT_H_
#define GATOS_CLI_LEDGER_CLIENT_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/model/job_state.h"
#include "gatos/model/status.h"
#include "gatos/nats/bus.h"

namespace gatos::cli {

enum class LedgerKind { kDirectory, kNats, kGitRemote };

LedgerKind ClassifyLedger(const std::string& target);

// The --ledger value, or GATOS_LEDGER from the environment.
std::optional<std::string> LedgerTarget(const std::optional<std::string>& flag);

// The key the CLI shows NATS when it talks to gatosd (nats_auth.h): a key
// the ledger's policy names. Commands that sign (submit, cancel, retry) use
// their signing key; otherwise GATOS_NATS_KEY names a key file. Without one
// the CLI connects anonymously, which a secured NATS server refuses.
void UseNatsKey(const Ed25519PrivateKey& key);

// Reads (status, ls, wait, logs) over NATS go to one replica of a
// replicated ledger, by name, or to any replica for "any"
// (rpc::ReplicaReadSubject; docs/replication.md). Unset: to the leader.
void UseReplica(const std::string& name);
// The replica UseReplica named (nullopt: the leader).
std::optional<std::string> ReplicaTarget();

// How long a request to a replicated ledger's leader over NATS waits for a
// leader, asking again with backoff, when nobody answers or the ledger
// answers "retry" (a leader change; gatos/model/leader_wait.h): --leader-wait
// S (UseLeaderWait), else GATOS_LEADER_WAIT=S, else 30 s; 0 turns it off.
// While it waits it says so once on stderr. Reads asked of a named replica
// (--replica) are not retried.
void UseLeaderWait(int64_t ms);
int64_t LeaderWaitMs();
// --leader-wait's value applied: "" when fine, else the usage error.
std::string ApplyLeaderWaitFlag(const std::optional<std::string>& seconds);
// The --help lines of --leader-wait.
extern const char kLeaderWaitHelp[];

// Whether replica `name` answers reads on its own subjects (a list of one
// job, rpc::ReplicaReadSubject): its "replica" object on success, with
// "read_ms" (the round trip) added. Unavailable when it does not answer.
Result<nlohmann::json> ProbeReplicaReads(Bus& bus, const std::string& name, int timeout_ms);

// A connection to the NATS server of gatosd at `nats_url`, as the key
// UseNatsKey / GATOS_NATS_KEY names (anonymous without one); PermissionDenied
// when the server refuses it. `on_async_error` (optional) hears the
// server's asynchronous errors, such as a refused subscription.
Result<std::unique_ptr<Bus>> ConnectGatosd(
    const std::string& nats_url, std::function<void(const std::string&)> on_async_error = {});
// A request to gatosd on an open connection; the reply object (ok or not).
Result<nlohmann::json> GatosdRequestOn(Bus& bus, const std::string& subject,
                                       const std::string& data, int timeout_ms);

// A request to gatosd; returns the reply object (ok or not). Unavailable when
// nobody serves the subject. Asked again while a leader is elected (see
// UseLeaderWait).
Result<nlohmann::json> GatosdRequest(const std::string& nats_url, const std::string& subject,
                                     const std::string& data, int timeout_ms);

// A request to the ledger's writer: gatosd's RPC for nats://, the local path
// (gatosd's socket, or the writer lock) for a ledger directory. Returns the
// reply object (ok or not); Unavailable when nobody answers.
Result<nlohmann::json> LedgerCall(const std::string& target, const std::string& subject,
                                  const std::string& data, int timeout_ms);

// One job's status as JobStatusJson (job_service.h). NotFound when the job does not exist.
// On a ledger directory it is read from the log (no lock, no gatosd needed).
Result<nlohmann::json> JobStatus(const std::string& target, const std::string& job_hex);

// A page of a finished attempt's captured output (rpc::kLogs; JobOutputReply
// in job_service.h): from gatosd (on `bus` when given) or the directory's
// log and objects. The reply object, ok or not.
Result<nlohmann::json> JobLogsPage(const std::string& target, const nlohmann::json& request,
                                   Bus* bus = nullptr);

// A list request (rpc::ListRequest) answered from gatosd or the directory's log.
Result<nlohmann::json> ListJobs(const std::string& target, const nlohmann::json& request);

// The error for a --ledger that is neither a directory nor nats://: names a
// missing directory as such, else says what `what` needs.
std::string NotUsableLedger(const std::string& target, const std::string& what);

// Accepts "blake3:<hex>" or "<hex>"; InvalidArgument otherwise.
Result<std::string> ParseJobArg(const std::string& arg);

}  // namespace gatos::cli

#endif  // GATOS_CLI_LEDGER_CLIENT_H_
