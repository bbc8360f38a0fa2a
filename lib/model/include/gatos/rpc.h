// The worker and client RPC of gatosd over NATS request/reply, and the
// JetStream subjects it publishes. docs/ledger-format.md ("RPC") is the
// contract; every message here is JSON except the object-batch frames.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_RPC_H_
#define GATOS_RPC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gatos/job_record.h"
#include "gatos/lease.h"
#include "gatos/status.h"

namespace gatos::rpc {

// Request/reply subjects served by gatosd (queue group "gatosd").
inline constexpr char kClaim[] = "gatos.rpc.claim";
inline constexpr char kRenew[] = "gatos.rpc.renew";
inline constexpr char kResult[] = "gatos.rpc.result";
inline constexpr char kCancel[] = "gatos.rpc.cancel";
inline constexpr char kSubmit[] = "gatos.rpc.submit";
inline constexpr char kStatus[] = "gatos.rpc.status";
inline constexpr char kList[] = "gatos.rpc.list";
inline constexpr char kQueueGroup[] = "gatosd";

// JetStream: one stream for every job event. Workers share one durable pull
// consumer filtered on kPendingSubject.
inline constexpr char kStream[] = "GATOS_JOBS";
inline constexpr char kStreamSubjects[] = "gatos.jobs.>";
inline constexpr char kPendingSubject[] = "gatos.jobs.pending";
inline constexpr char kClaimedSubject[] = "gatos.jobs.claimed";
inline constexpr char kFinishedSubject[] = "gatos.jobs.finished";
inline constexpr char kAbortedSubject[] = "gatos.jobs.aborted";
inline constexpr char kWorkerDurable[] = "gatos-workers";
// Core NATS, at most once: "stop job <hex>" for the worker running it. The
// worker also learns of a cancel from every renew reply, so a lost message
// delays the stop by at most one renew interval.
inline constexpr char kCancelEventPrefix[] = "gatos.cancel.";

// What the worker signs to claim or renew: the signature proves the request
// came from the key named in it, and it is kept in the lease commit so an
// auditor can check it. requested_at bounds replays (kMaxRequestSkewMs).
std::string ClaimPayload(std::string_view job_hex, std::string_view worker_hex,
                         int64_t requested_at_ms);
std::string RenewPayload(std::string_view job_hex, std::string_view worker_hex, int64_t epoch,
                         int64_t requested_at_ms);
std::string CancelPayload(std::string_view job_hex, std::string_view requester_hex,
                          int64_t requested_at_ms);
inline constexpr int64_t kMaxRequestSkewMs = 60'000;

}  // namespace gatos::rpc

namespace gatos {

struct LeaseRequest {
  std::string job_hex;
  std::string worker_hex;
  int64_t epoch = 0;  // renew only
  int64_t requested_at_ms = 0;
  std::string sig_hex;  // Ed25519 over ClaimPayload / RenewPayload
};

struct LeaseGrant {
  std::string lease_commit;
  int64_t epoch = 0;
  int64_t expires_ms = 0;
  std::string job_commit;
};

}  // namespace gatos

namespace gatos::rpc {

// Largest JSON request gatosd reads (object batches have their own limit).
inline constexpr size_t kMaxJsonRequest = 64 * 1024;

// A reply: {"ok":true,...} or {"ok":false,"error":"<TransitionErrorName>","message":"..."}.
nlohmann::json OkReply();
nlohmann::json ErrorReply(TransitionError error, std::string_view message);

struct ReplyError {
  TransitionError error = TransitionError::kNone;
  std::string message;
};
// Parses a reply; a malformed reply becomes kRetry with a message naming the subject.
Result<nlohmann::json> ParseReply(std::string_view data, std::string_view subject, ReplyError* error);

// Parses a JSON request object of at most kMaxJsonRequest bytes.
// InvalidArgument with the subject in the message.
Result<nlohmann::json> ParseRequest(std::string_view data, std::string_view subject);

// Reads a required field of a given type; InvalidArgument names it.
Result<std::string> StringField(const nlohmann::json& j, const char* name);
Result<int64_t> IntField(const nlohmann::json& j, const char* name);

// A job's status as `gatos status --json` and gatos.rpc.status print it:
// {"job":"blake3:..","state":..,"job_commit":..,"cancel_requested":..,
//  "lease":{"worker":"ed25519:..","epoch":n,"expires":"RFC 3339","expired":b}?,
//  "result_commit":..?}
nlohmann::json EntryJson(const IndexEntry& e, int64_t now_ms);

// A claim (epoch 0) or renew request signed by the worker key, as the RPC
// carries it: {"job","worker","requested_at","sig"[,"epoch"]}.
nlohmann::json LeaseRequestJson(const LeaseRequest& req);
// The inverse; a renew must carry "epoch". InvalidArgument names the field.
// Accepts "blake3:"/"ed25519:" prefixes on job and worker.
Result<LeaseRequest> ParseLeaseRequest(const nlohmann::json& j, bool renew);

// Frame of a result or submit request: u32 big-endian length of a JSON
// header, the header, then an object batch (result.h).
std::string EncodeFrame(const nlohmann::json& header, std::string_view batch);
Status DecodeFrame(std::string_view data, size_t max_header, nlohmann::json* header,
                   std::string_view* batch);

}  // namespace gatos::rpc

#endif  // GATOS_RPC_H_
