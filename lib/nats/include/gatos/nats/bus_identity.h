// Connecting to NATS as a key the ledger knows (nats_auth.h): the nkey is
// the key itself; the server's nonce is signed with it; replies come back on
// the key's own inbox prefix.
//
// Thread-safety: functions are safe from any thread.
#ifndef GATOS_BUS_IDENTITY_H_
#define GATOS_BUS_IDENTITY_H_

#include <string>

#include "gatos/crypto/keys.h"
#include "gatos/model/policy.h"
#include "gatos/model/status.h"
#include "gatos/nats/bus.h"

namespace gatos {

// Fills nkey_public, sign_nonce and inbox_prefix of `options` for `key`
// (copied into the signing function).
void SetBusIdentity(BusOptions* options, const Ed25519PrivateKey& key);

// Whether the NATS server at `url` lets a client in without credentials. A
// job plane whose server does is open to anyone on the network: gatosd and
// the workers say so loudly at start. Unavailable when nothing answers.
Result<bool> NatsAcceptsAnonymous(const std::string& url, const std::string& tls_ca_file = "");

// Writes NatsAuthorizationConfig(policy) to `path` (mode 0644, through a
// temporary file and rename) unless the file already holds exactly that.
// Returns whether the file changed.
Result<bool> WriteNatsAuthorizationFile(const std::string& path, const Policy& policy);

// Asks the nats-server whose pid is in `pid_file` to reload its
// configuration (SIGHUP). NotFound when the file is missing or stale.
Status ReloadNatsServer(const std::string& pid_file);

// A single-node nats-server configuration for a ledger: client port on
// `host`, JetStream in `store_dir`, the pid file, and the authorization block
// from the file `auth_file_name` (included, so gatosd can rewrite it).
// nats-server resolves an include against the configuration file's own
// directory, so `auth_file_name` is a plain file name next to the
// configuration ([A-Za-z0-9._-]+; InvalidArgument otherwise).
Result<std::string> SingleNodeNatsConfig(const std::string& host, int port, const std::string& store_dir,
                                         const std::string& pid_file, const std::string& auth_file_name);

}  // namespace gatos

#endif  // GATOS_BUS_IDENTITY_H_
