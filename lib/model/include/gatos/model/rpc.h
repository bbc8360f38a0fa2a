// gatosd's request/reply protocol (NATS request/reply, and the same messages
// over the ledger's local socket), the JetStream subjects it publishes, and
// the payloads users and workers sign. docs/ledger-format.md ("RPC") is the
// contract; each message has one typed codec here, used by both ends.
//
// Every message is a JSON object, except result and submit requests, which
// are frames (EncodeFrame): a JSON header followed by an object batch.
// Replies are {"ok":true,...} or {"ok":false,"error":"<class>","message":..}.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_RPC_H_
#define GATOS_RPC_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/job_record.h"
#include "gatos/model/decision.h"
#include "gatos/model/status.h"

namespace gatos::rpc {

// Request/reply subjects served by gatosd (queue group "gatosd").
inline constexpr char kClaim[] = "gatos.rpc.claim";
inline constexpr char kRenew[] = "gatos.rpc.renew";
inline constexpr char kResult[] = "gatos.rpc.result";
inline constexpr char kCancel[] = "gatos.rpc.cancel";
inline constexpr char kRetry[] = "gatos.rpc.retry";
inline constexpr char kSubmit[] = "gatos.rpc.submit";
inline constexpr char kStatus[] = "gatos.rpc.status";
inline constexpr char kList[] = "gatos.rpc.list";
// Per pool: queued, offered, running, paused, workers serving it (gatos pool ls).
inline constexpr char kPools[] = "gatos.rpc.pools";
// Core NATS, every few seconds from each worker: {"worker": HEX, "pools": [...]}.
// Informational (status says when no live worker serves a job's pool);
// nothing the ledger decides depends on it.
inline constexpr char kWorkerHeartbeat[] = "gatos.workers.heartbeat";
// A finished attempt's captured stdout or stderr, a page at a time:
// {job, attempt?, stream, offset?, limit?} -> {data (base64), size, offset,
// truncated, cap, attempt, status}. docs/ledger-format.md, section 4.
inline constexpr char kLogs[] = "gatos.rpc.logs";
// Batch forms of claim and result (EncodeBatch): several requests of the
// single form in one message, applied in one log batch. The reply is a batch
// of one reply per entry, in order; an entry that is malformed or refused
// gets its own error reply and the others are unaffected. A message that is
// not a batch at all gets one plain error reply.
inline constexpr char kClaimBatch[] = "gatos.rpc.claim-batch";
inline constexpr char kResultBatch[] = "gatos.rpc.result-batch";
inline constexpr char kQueueGroup[] = "gatosd";
// Reads from a replica of a replicated ledger (docs/replication.md): the
// read subjects (kStatus, kList, kLogs) of one replica by name,
// "gatos.replica.<name>.<status|list|logs>", and of any replica (leader or
// follower, NATS picks one of the queue group kReplicaQueueGroup),
// "gatos.read.<status|list|logs>". Each answers from its own repository:
// an ok reply carries "replica": {name, role, term, log_seq, lag_ms}.
inline constexpr char kReplicaReadPrefix[] = "gatos.replica.";
inline constexpr char kAnyReplicaReadPrefix[] = "gatos.read.";
inline constexpr char kReplicaQueueGroup[] = "gatos-replicas";
// The subject asking `replica` (a replica name, or "" for any replica) the
// read `subject` (kStatus, kList or kLogs; any other subject is returned as
// it is).
std::string ReplicaReadSubject(std::string_view replica, std::string_view subject);
// Only over the ledger's local socket (<ledger>/gatos/gatosd.sock), which
// only the ledger host's users that can open the socket reach: hooks hand
// pushed jobs and results to gatosd, and the CLI changes the policy.
inline constexpr char kLocalPushSubmit[] = "gatos.local.push-submit";
inline constexpr char kLocalPushResult[] = "gatos.local.push-result";
inline constexpr char kLocalPolicy[] = "gatos.local.policy";
inline constexpr char kLocalBatch[] = "gatos.local.batch";
// A pushed witness (refs/gatos/witnesses/<key hex>): {"commit", "key"}.
inline constexpr char kLocalPushWitness[] = "gatos.local.push-witness";
// A schedule commit (gatos schedule add|pause|resume|rm): a frame of
// {"commit"} and the commit's objects.
inline constexpr char kLocalSchedule[] = "gatos.local.schedule";
// A push the pre-receive hook refused: {"reason"} for gatosd's metrics (sent
// only when gatosd runs; nothing is written).
inline constexpr char kLocalRejected[] = "gatos.local.rejected";
// What a follower's front door takes and only the leader records, forwarded
// to the leader (docs/replication.md, "Pushes to a follower's front door"):
// a schedule commit as the kLocalSchedule frame, and a witness as a frame of
// {"commit", "key"} and the witness commit (an object batch of one). The
// leader checks each as it checks a local one: their signatures make them
// what they are, not the sender. On a NATS that admits only the policy's
// keys, only the ledger key (the replicas) may publish them.
inline constexpr char kForwardSchedule[] = "gatos.forward.schedule";
inline constexpr char kForwardWitness[] = "gatos.forward.witness";

// JetStream: one stream for every job event. Workers share one durable pull
// consumer filtered on kPendingSubject.
inline constexpr char kStream[] = "GATOS_JOBS";
inline constexpr char kStreamSubjects[] = "gatos.jobs.>";
inline constexpr char kPendingSubject[] = "gatos.jobs.pending";
// Offers of pool P (not the default pool) go to kPendingSubject + "." + P,
// read by the durable consumer kWorkerDurable + "-" + P.
std::string PendingSubjectFor(std::string_view pool);
std::string WorkerDurableFor(std::string_view pool);

// A worker's heartbeat (kWorkerHeartbeat). Decode is strict: a 64-hex key
// and 1 to kMaxPoolsPerList pool names.
struct WorkerHeartbeat {
  std::string worker_hex;
  std::vector<std::string> pools;
};
std::string EncodeHeartbeat(const WorkerHeartbeat& h);
Result<WorkerHeartbeat> DecodeHeartbeat(std::string_view data);
inline constexpr char kFinishedSubject[] = "gatos.jobs.finished";
inline constexpr char kAbortedSubject[] = "gatos.jobs.aborted";
inline constexpr char kWorkerDurable[] = "gatos-workers";
// Core NATS, at most once: the signed cancel commit, for the worker running
// the job. A worker acts on it only when the ledger's signature verifies;
// it also learns of a cancel from its next renew reply.
inline constexpr char kCancelEventPrefix[] = "gatos.cancel.";

// Largest JSON request gatosd reads (object batches have their own limit).
inline constexpr size_t kMaxJsonRequest = 64 * 1024;
inline constexpr int64_t kMaxRequestSkewMs = 60'000;

// JSON text that cannot fail: bytes that are not UTF-8 are replaced (U+FFFD).
std::string Dump(const nlohmann::json& j);

// ---- signed payloads ----
// A claim names the epoch it would open (the job's current epoch + 1), so the
// ledger grants a recorded request at most once.
std::string ClaimPayload(std::string_view job_hex, std::string_view worker_hex, int64_t epoch,
                         int64_t requested_at_ms);
std::string RenewPayload(std::string_view job_hex, std::string_view worker_hex, int64_t epoch,
                         int64_t requested_at_ms);
std::string CancelPayload(std::string_view job_hex, std::string_view requester_hex,
                          int64_t requested_at_ms);
// A re-run names the attempt it would open (current + 1).
std::string RetryPayload(std::string_view job_hex, std::string_view requester_hex, int64_t attempt,
                         int64_t requested_at_ms);

// A lease the ledger granted, as a claim or renew reply states it. The
// ledger signs the grants of one reply message together (Ed25519, its
// ledger key, over GrantsPayload): a claim-batch reply of 16 grants costs one
// signature, and a worker acts on a grant only when that signature verifies.
// The lease commit itself is not signed (the log commit that names it is).
struct Grant {
  std::string job_hex;
  int64_t epoch = 0;
  std::string lease_commit;
  int64_t expires_ms = 0;
  std::string job_commit;
};
// "gatos-grant-v1\n<count>\n", then per grant, in reply order,
// "<job hex>\n<epoch>\n<lease commit>\n<expires ms>\n<job commit>\n".
std::string GrantsPayload(const std::vector<Grant>& grants);
// The reply fields that state a grant: {"job","epoch","lease_commit",
// "expires_ms","job_commit"} (the signature is "grant_sig", hex).
void SetGrantFields(const Grant& g, nlohmann::json* reply);
// InvalidArgument names a missing or malformed field.
Result<Grant> ParseGrantFields(const nlohmann::json& reply);
inline constexpr char kGrantSigField[] = "grant_sig";

}  // namespace gatos::rpc

namespace gatos {

struct LeaseRequest {
  bool renew = false;
  std::string job_hex;
  std::string worker_hex;
  int64_t epoch = 0;  // claim: the epoch asked for; renew: the epoch held
  int64_t requested_at_ms = 0;
  std::string sig_hex;  // Ed25519 over ClaimPayload / RenewPayload
};
// The payload a lease request's signature covers.
std::string LeaseRequestPayload(const LeaseRequest& req);

// A cancel or a re-run, signed by a user's key.
struct UserRequest {
  bool retry = false;
  std::string job_hex;
  std::string requester_hex;
  int64_t attempt = 0;  // re-run only
  int64_t requested_at_ms = 0;
  std::string sig_hex;
};
std::string UserRequestPayload(const UserRequest& req);

}  // namespace gatos

namespace gatos::rpc {

// ---- requests ----
// {"job","worker","epoch","requested_at","sig"}; the inverse accepts
// "blake3:"/"ed25519:" prefixes. InvalidArgument names the field.
nlohmann::json LeaseRequestJson(const LeaseRequest& req);
Result<LeaseRequest> ParseLeaseRequest(const nlohmann::json& j, bool renew);
// {"job","requester","requested_at","sig"[,"attempt"]}
nlohmann::json UserRequestJson(const UserRequest& req);
Result<UserRequest> ParseUserRequest(const nlohmann::json& j, bool retry);
// {"job"} for status.
Result<std::string> ParseJobField(const nlohmann::json& j);

struct ListRequest {
  std::optional<std::string>
      state;          // a state name, or "dead" (failed or timed-out, no attempt left)
  std::string after;  // job id to continue after
  int64_t limit = 1000;
};
nlohmann::json ListRequestJson(const ListRequest& req);
Result<ListRequest> ParseListRequest(const nlohmann::json& j);

// ---- replies ----
nlohmann::json OkReply();
nlohmann::json ErrorReply(TransitionError error, std::string_view message);
// Parses a reply into *error (ok() when the reply says ok); a malformed reply
// becomes kRetry with a message naming the subject.
Result<nlohmann::json> ParseReply(std::string_view data, std::string_view subject, Decision* error);

// A job's status as `gatos status --json` and gatos.rpc.status report it:
// {"job","state","job_commit","attempt","submitted","cancel_requested",
//  "lease":{"worker","epoch","expires","expired"}?, "result_commit"?,
//  "result_status"?, "finished"?, "not_before"?, "pruned"?,
//  "attempts":[{"n","status","result_commit","finished"}]?, "dead"?}
nlohmann::json RecordJson(const JobRecord& r, int64_t now_ms);

// The pending message on JetStream: {"job","epoch","attempt"}; a worker
// claims it with that epoch.
struct PendingMessage {
  std::string job_hex;
  int64_t epoch = 1;
  int64_t attempt = 1;
};
// Nats-Msg-Id of the offer of `job_hex` for `attempt` at lease epoch
// `epoch`: "<job>.a<attempt>.e<epoch>".
std::string PendingMsgId(std::string_view job_hex, int64_t attempt, int64_t epoch);
std::string EncodePending(const PendingMessage& m);
Result<PendingMessage> DecodePending(std::string_view data);

// ---- parsing helpers ----
// Parses a JSON request object of at most kMaxJsonRequest bytes.
// InvalidArgument with the subject in the message.
Result<nlohmann::json> ParseRequest(std::string_view data, std::string_view subject);
// Reads a required field of a given type; InvalidArgument names it.
Result<std::string> StringField(const nlohmann::json& j, const char* name);
Result<int64_t> IntField(const nlohmann::json& j, const char* name);

// Frame of a result or submit request: u32 big-endian length of a JSON
// header, the header, then an object batch (result.h).
std::string EncodeFrame(const nlohmann::json& header, std::string_view batch);
Status DecodeFrame(std::string_view data, size_t max_header, nlohmann::json* header,
                   std::string_view* batch);

// Batch of requests or replies: "GATOSRB1", u32 BE count, then per entry u32
// BE length and the entry's bytes (a single-form request or reply).
inline constexpr size_t kMaxBatchEntries = 1024;
std::string EncodeBatch(const std::vector<std::string>& entries);
bool IsBatch(std::string_view data);
// InvalidArgument for a missing magic, a truncated entry, trailing bytes, or
// more than max_entries entries. The views point into `data`.
Result<std::vector<std::string_view>> DecodeBatch(std::string_view data,
                                                  size_t max_entries = kMaxBatchEntries);

}  // namespace gatos::rpc

#endif  // GATOS_RPC_H_
