// gatos nats-config: the nats-server configuration of a ledger's bus, from
// its policy (docs/deployment.md): one server, or each node of a cluster.
#include <iostream>

#include "commands.h"
#include "gatos/flags.h"
#include "gatos/ledger.h"
#include "gatos/nats_cluster.h"
#include "gatos/public_key.h"
#include "ledger_client.h"

namespace gatos::cli {

int RunNatsConfig(const Args& args) {
  constexpr char kHelp[] =
      "usage: gatos nats-config --ledger DIR [--port N] [--store-dir DIR] [--listen HOST]\n"
      "                         [--max-payload BYTES] [--tls-cert F --tls-key F [--tls-ca F]]\n"
      "       gatos nats-config --ledger DIR --cluster NAME=HOST[:PORT[:ROUTE-PORT]],... --node NAME\n"
      "                         (--route-secret-file F | --route-tls-cert F --route-tls-key F --route-tls-ca F)\n"
      "                         [--cluster-name NAME] [--store-dir DIR] [--listen HOST] [...]\n\n"
      "Prints the nats-server configuration for the ledger's bus: the client listener,\n"
      "JetStream, and one NATS user per key of the policy (the ledger key, each worker,\n"
      "each submitter and operator) with the subjects its role may use; nobody connects\n"
      "anonymously. Generate it again and reload nats-server (SIGHUP) whenever the policy\n"
      "changes (a revoked key is then disconnected).\n\n"
      "With --cluster, prints the configuration of node --node of a JetStream cluster:\n"
      "the same users, plus the cluster block with routes to every other member. Give the\n"
      "same --cluster list on every node. Routes authenticate with the password in\n"
      "--route-secret-file (one line, 16+ characters of letters, digits, -._~, the same\n"
      "file on every node) or with mutual TLS (--route-tls-*). The clients' URL list\n"
      "(gatosd --nats, gatos-worker --nats) is printed to stderr. Run gatosd with\n"
      "--stream-replicas 3 on a cluster of three or more.\n\n"
      "--store-dir: JetStream's directory on that node (default /var/lib/nats/jetstream).\n"
      "--tls-cert/--tls-key/--tls-ca: TLS for clients (they then use tls:// URLs).\n";
  Flags flags;
  if (!flags.Parse(args, {{"ledger"},
                          {"port"},
                          {"store-dir"},
                          {"listen"},
                          {"max-payload"},
                          {"tls-cert"},
                          {"tls-key"},
                          {"tls-ca"},
                          {"cluster"},
                          {"node"},
                          {"cluster-name"},
                          {"route-secret-file"},
                          {"route-tls-cert"},
                          {"route-tls-key"},
                          {"route-tls-ca"}})) {
    return UsageError("nats-config", flags.error());
  }
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!flags.positional().empty()) return UsageError("nats-config", "unexpected argument (see --help)");
  auto dir = flags.Get("ledger");
  if (!dir) dir = LedgerTarget(std::nullopt);
  if (!dir) return UsageError("nats-config", "--ledger DIR is required (the ledger repository, for its policy)");

  NatsServerConfigOptions o;
  o.store_dir = flags.GetOr("store-dir", o.store_dir);
  o.listen_host = flags.GetOr("listen", o.listen_host);
  o.tls_cert = flags.GetOr("tls-cert", "");
  o.tls_key = flags.GetOr("tls-key", "");
  o.tls_ca = flags.GetOr("tls-ca", "");
  o.route_tls_cert = flags.GetOr("route-tls-cert", "");
  o.route_tls_key = flags.GetOr("route-tls-key", "");
  o.route_tls_ca = flags.GetOr("route-tls-ca", "");
  o.cluster_name = flags.GetOr("cluster-name", o.cluster_name);
  if (!flags.GetInt("port", 1, 65535, &o.client_port) ||
      !flags.GetInt("max-payload", int64_t{1024}, int64_t{64 << 20}, &o.max_payload_bytes)) {
    return UsageError("nats-config", flags.error());
  }
  if (flags.Has("cluster") != flags.Has("node")) {
    return UsageError("nats-config", "--cluster and --node go together (the members, and which one this is)");
  }
  if (auto cluster = flags.Get("cluster")) {
    auto nodes = ParseNatsNodes(*cluster);
    if (!nodes.ok()) return UsageError("nats-config", nodes.status().message());
    o.nodes = std::move(*nodes);
    o.node = *flags.Get("node");
    if (flags.Has("port")) return UsageError("nats-config", "--port is for one server; a member's port is in --cluster");
    if (auto secret_file = flags.Get("route-secret-file")) {
      auto secret = ReadSmallFile(*secret_file, 4096);
      if (!secret.ok()) return ReportError(secret.status().message(), kExitUsage);
      std::string s = *secret;
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (s.find('\n') != std::string::npos) {
        return UsageError("nats-config", "--route-secret-file " + *secret_file + " must hold one line");
      }
      o.route_password = std::move(s);
    }
  } else if (flags.Has("route-secret-file") || flags.Has("route-tls-cert") || flags.Has("cluster-name")) {
    return UsageError("nats-config", "route options need --cluster and --node");
  }

  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
  auto config = NatsServerConfig(o, *policy);
  if (!config.ok()) return ReportError(config.status().message(), kExitUsage);
  std::cout << *config;
  if (!o.nodes.empty()) {
    std::cerr << "clients (gatosd --nats, gatos-worker --nats): " << NatsClientUrls(o.nodes, !o.tls_cert.empty())
              << "\n";
  }
  return kExitOk;
}

}  // namespace gatos::cli
