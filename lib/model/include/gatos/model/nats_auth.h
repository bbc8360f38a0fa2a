// NATS authentication and subject permissions for the job plane
// (docs/threat-model.md): one identity per key the ledger already knows.
// NATS "nkeys" are Ed25519 keys, so the ledger key, each worker key and each
// submitter/operator key authenticates to nats-server as itself (it signs
// the server's nonce); no separate NATS secret exists.
//
// Permissions (who may publish and subscribe where):
//   gatosd (ledger key)  everything: it serves gatos.rpc.*, publishes
//                        gatos.jobs.* and gatos.cancel.*, runs JetStream.
//   workers              request gatos.rpc.claim/renew/result, pull and ack
//                        their durable consumer, hear gatos.cancel.*, publish
//                        running jobs' live output (gatos.live.*.*.*); replies
//                        only on their own inbox prefix.
//   submitters/operators request gatos.rpc.submit/status/list/cancel/retry/logs;
//                        replies on their own inbox prefix. A submitter hears
//                        the live output of the jobs its key signed
//                        (gatos.live.<key hex>.>), an operator of every job
//                        (gatos.live.>); live_output.h.
// Nobody but gatosd can subscribe to gatos.rpc.* (answer in its place) or
// publish gatos.jobs.* / gatos.cancel.*.
//
// Thread-safety: pure functions.
#ifndef GATOS_NATS_AUTH_H_
#define GATOS_NATS_AUTH_H_

#include <string>
#include <vector>

#include "gatos/model/policy.h"
#include "gatos/model/public_key.h"

namespace gatos {

// The nkey public key ("U" + base32) of an Ed25519 key, as nats-server's
// configuration names users.
std::string NkeyUserPublic(const Ed25519PublicKey& key);

// The inbox prefix a client connecting as `key` must use (replies to its
// requests arrive under it, and it may subscribe to nothing else there).
std::string InboxPrefixFor(const Ed25519PublicKey& key);

// The subjects a worker may publish to (requests, JetStream pull and ack).
std::vector<std::string> WorkerPublishSubjects(const std::vector<std::string>& pools = {});
// The subjects a submitter or operator may publish to.
std::vector<std::string> UserPublishSubjects();

// The `authorization { users = [...] }` block of nats-server's
// configuration for `policy`: one user per key with its permissions. A key
// listed in several roles gets the union. Deterministic (sorted), so a
// changed policy is a changed text and an unchanged one is not.
std::string NatsAuthorizationConfig(const Policy& policy);

}  // namespace gatos

#endif  // GATOS_NATS_AUTH_H_
