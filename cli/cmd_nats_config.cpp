// gatos nats-config --cluster ... --node NAME: the nats-server configuration
// of one node of a JetStream cluster, from the ledger's policy
// (docs/deployment.md). One server: cmd_nats.cpp.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/git/ledger.h"
#include "gatos/model/nats_cluster.h"
#include "gatos/model/public_key.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/sys/file.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {

int RunNatsClusterConfig(const Args& args) {
  constexpr char kHelp[] =
      "usage: gatos nats-config --ledger DIR --cluster NAME=HOST[:PORT[:ROUTE-PORT]],... --node NAME\n"
      "         (--route-secret-file F | --route-tls-cert F --route-tls-key F --route-tls-ca F)\n"
      "         [--dir OUT] [--store-dir DIR] [--listen HOST] [--cluster-name NAME]\n"
      "         [--max-payload BYTES] [--tls-cert F --tls-key F [--tls-ca F]] [--json]\n\n"
      "The nats-server configuration of node NAME of a JetStream cluster: its client\n"
      "and route listeners, JetStream, routes to every other member, and one NATS user\n"
      "per key of the ledger's policy (no anonymous access). Give the same --cluster\n"
      "list on every node (ports default to 4222 and 6222).\n\n"
      "Routes must authenticate: with the password in --route-secret-file (one line,\n"
      "16+ characters of letters, digits, -._~; the same file on every node) or with\n"
      "mutual TLS (--route-tls-*). --tls-cert/--tls-key[/--tls-ca] turn on TLS for\n"
      "clients, who then use tls:// URLs.\n\n"
      "Without --dir the whole configuration is printed (the authorization block\n"
      "inline). With --dir OUT it writes OUT/nats.conf, which includes\n"
      "OUT/gatos-auth.conf (the authorization block), with JetStream in\n"
      "OUT/jetstream unless --store-dir says otherwise and its pid in OUT/nats.pid.\n"
      "On the node next to gatosd, 'gatosd serve --nats-auth-file OUT/gatos-auth.conf\n"
      "--nats-pid-file OUT/nats.pid' keeps it in step with the policy; on the other\n"
      "nodes run this command again (from a clone of the ledger's refs/gatos/policy)\n"
      "after each policy change and reload nats-server (SIGHUP).\n\n"
      "Then run gatosd with --nats set to the client URLs (printed to stderr) and\n"
      "--stream-replicas 3 on a cluster of three or more.\n";
  Flags flags;
  if (!flags.Parse(args, {{"ledger"},
                          {"dir"},
                          {"json", 0, false},
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
  if (!flags.GetInt("max-payload", int64_t{1024}, int64_t{64 << 20}, &o.max_payload_bytes)) {
    return UsageError("nats-config", flags.error());
  }
  if (!flags.Has("cluster") || !flags.Has("node")) {
    return UsageError("nats-config", "--cluster and --node go together (the members, and which one this is)");
  }
  {
    auto cluster = flags.Get("cluster");
    auto nodes = ParseNatsNodes(*cluster);
    if (!nodes.ok()) return UsageError("nats-config", nodes.status().message());
    o.nodes = std::move(*nodes);
    o.node = *flags.Get("node");
    if (auto secret_file = flags.Get("route-secret-file")) {
      auto secret = ReadFileToString(*secret_file, 4096, {.secret = true});
      if (!secret.ok()) return ReportError(secret.status().message(), kExitUsage);
      std::string s = *secret;
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (s.find('\n') != std::string::npos) {
        return UsageError("nats-config", "--route-secret-file " + *secret_file + " must hold one line");
      }
      o.route_password = std::move(s);
    }
  }

  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
  const std::string urls = NatsClientUrls(o.nodes, !o.tls_cert.empty());
  auto out_dir = flags.Get("dir");
  if (!out_dir) {
    auto config = NatsServerConfig(o, *policy);
    if (!config.ok()) return ReportError(config.status().message(), kExitUsage);
    std::cout << *config;
    std::cerr << "clients (gatosd --nats, gatos-worker --nats): " << urls << "\n";
    return kExitOk;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path out = fs::absolute(*out_dir, ec);
  fs::create_directories(out, ec);
  if (ec) return ReportError("cannot create " + *out_dir + ": " + ec.message(), kExitFailure);
  if (!flags.Has("store-dir")) o.store_dir = (out / "jetstream").string();
  o.pid_file = (out / "nats.pid").string();
  o.auth_include = "gatos-auth.conf";
  auto config = NatsServerConfig(o, *policy);
  if (!config.ok()) return ReportError(config.status().message(), kExitUsage);
  const std::string conf_path = (out / "nats.conf").string(), auth_path = (out / "gatos-auth.conf").string();
  auto written = WriteNatsAuthorizationFile(auth_path, *policy);
  if (!written.ok()) return ReportError(written.status().message(), kExitFailure);
  {
    // The route password may be in it: readable by its owner only.
    std::string tmp = conf_path + ".tmp";
    fs::remove(tmp, ec);
    std::ofstream f(tmp, std::ios::trunc);
    fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, ec);
    f << *config;
    f.flush();
    if (!f) return ReportError("cannot write " + tmp, kExitFailure);
    f.close();
    fs::rename(tmp, conf_path, ec);
    if (ec) return ReportError("cannot write " + conf_path + ": " + ec.message(), kExitFailure);
  }
  if (flags.Has("json")) {
    std::cout << nlohmann::json{{"config", conf_path}, {"auth", auth_path}, {"pid_file", o.pid_file},
                                {"store_dir", o.store_dir}, {"node", o.node}, {"urls", urls}}
                     .dump()
              << "\n";
    return kExitOk;
  }
  std::cout << "wrote " << conf_path << " and " << auth_path << " (node " << o.node << ")\n"
            << "start:   nats-server -c " << conf_path << "\n"
            << "clients: " << urls << "\n";
  return kExitOk;
}

}  // namespace gatos::cli
