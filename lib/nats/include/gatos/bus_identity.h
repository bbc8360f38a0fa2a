// Connecting to NATS as a key the ledger knows (nats_auth.h): the nkey is
// the key itself; the server's nonce is signed with it; replies come back on
// the key's own inbox prefix.
//
// Thread-safety: functions are safe from any thread.
#ifndef GATOS_BUS_IDENTITY_H_
#define GATOS_BUS_IDENTITY_H_

#include <string>

#include "gatos/bus.h"
#include "gatos/keys.h"
#include "gatos/status.h"

namespace gatos {

// Fills nkey_public, sign_nonce and inbox_prefix of `options` for `key`
// (copied into the signing function).
void SetBusIdentity(BusOptions* options, const Ed25519PrivateKey& key);

// Whether the NATS server at `url` lets a client in without credentials. A
// job plane whose server does is open to anyone on the network: gatosd and
// the workers say so loudly at start. Unavailable when nothing answers.
Result<bool> NatsAcceptsAnonymous(const std::string& url, const std::string& tls_ca_file = "");

}  // namespace gatos

#endif  // GATOS_BUS_IDENTITY_H_
