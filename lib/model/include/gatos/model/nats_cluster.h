// NATS beyond one machine (docs/deployment.md): the URL lists gatosd, the
// workers and the CLI accept, and the nats-server configuration of each node
// of a JetStream cluster, generated from the ledger's policy.
//
// Thread-safety: pure functions.
#ifndef GATOS_NATS_CLUSTER_H_
#define GATOS_NATS_CLUSTER_H_

#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/policy.h"
#include "gatos/model/status.h"

namespace gatos {

// Splits "nats://a:4222, tls://b:4222" into its URLs (spaces around commas
// are dropped). Each must be nats:// or tls:// with a host and a port
// (1..65535); an empty list, an empty member or another scheme is
// InvalidArgument naming the member, as is a list mixing nats:// and tls://.
// Duplicates are dropped (first kept).
Result<std::vector<std::string>> SplitNatsUrls(std::string_view urls);

// One member of a cluster: its name (server_name: letters, digits, '-', '_',
// '.'), the host the others and the clients reach it at, and its two ports.
struct NatsNode {
  std::string name;
  std::string host;
  int client_port = 4222;
  int cluster_port = 6222;
};

// Parses "node1=host:4222:6222,node2=host2" (ports optional: client, then
// cluster; defaults 4222 and 6222). InvalidArgument names the bad member;
// names and host:cluster-port pairs must be unique.
Result<std::vector<NatsNode>> ParseNatsNodes(std::string_view spec);

struct NatsServerConfigOptions {
  // The node this configuration is for; empty for a single server (no
  // cluster block).
  std::string node;
  std::vector<NatsNode> nodes;  // every member, this one included
  std::string cluster_name = "gatos";
  // Where JetStream keeps its files on this node.
  std::string store_dir = "/var/lib/nats/jetstream";
  // Listen on this address (default: every address of the host).
  std::string listen_host = "0.0.0.0";
  int client_port = 4222;  // single server only (a cluster node uses its own)
  int64_t max_payload_bytes = 8 << 20;
  // Routes between the nodes authenticate with this user and password (the
  // same on every node). Required for a cluster unless the routes use
  // mutual TLS (route_tls_*).
  std::string route_user = "gatos-route";
  std::string route_password;
  // TLS for clients (tls:// URLs): certificate and key of this node, and
  // the CA that signed it. Empty: plain connections.
  std::string tls_cert, tls_key, tls_ca;
  // TLS for the routes, with verification of the peer's certificate
  // against route_tls_ca (mutual TLS). Empty: plain routes.
  std::string route_tls_cert, route_tls_key, route_tls_ca;
  // Written as pid_file when set (what gatosd --nats-pid-file reads).
  std::string pid_file;
  // When set, the authorization block is not written inline but included
  // from this file next to the configuration (a plain file name), so that
  // gatosd --nats-auth-file can keep it in step with the policy.
  std::string auth_include;
};

// The whole nats-server configuration of one node: identity, client listener,
// JetStream, the cluster block with routes to every other node, and the
// `authorization` block of NatsAuthorizationConfig(policy) (inline, or an
// include of options.auth_include). Deterministic.
// InvalidArgument when the options do not make a working server (unknown
// node, a cluster without route authentication, half a TLS pair, a value
// that would break the file's syntax).
Result<std::string> NatsServerConfig(const NatsServerConfigOptions& options, const Policy& policy);

// The client URL list of a cluster ("nats://h1:4222,nats://h2:4222,..."),
// tls:// when `tls` is set: what gatosd --nats and the workers take.
std::string NatsClientUrls(const std::vector<NatsNode>& nodes, bool tls);

}  // namespace gatos

#endif  // GATOS_NATS_CLUSTER_H_
