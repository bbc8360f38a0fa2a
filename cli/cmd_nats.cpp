// gatos nats-config: the nats-server configuration that lets in only the
// keys a ledger's policy names (nats_auth.h), with the authorization block
// in a file of its own that gatosd keeps in step with the policy.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/git/ledger.h"
#include "gatos/model/encoding.h"
#include "gatos/model/nats_auth.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/sys/flags.h"

namespace gatos::cli {

namespace fs = std::filesystem;

Result<NatsConfigFiles> WriteNatsConfig(const std::string& ledger_dir, const std::string& out_dir,
                                        const std::string& host, int port) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(ledger_dir));
  GATOS_ASSIGN_OR_RETURN(Policy policy, ledger->ReadPolicy());
  std::error_code ec;
  fs::path out = fs::absolute(out_dir, ec);
  fs::create_directories(out, ec);
  if (ec) return InternalError("cannot create " + out_dir + ": " + ec.message());
  NatsConfigFiles f;
  f.config = (out / "nats.conf").string();
  f.auth = (out / "gatos-auth.conf").string();
  f.pid = (out / "nats.pid").string();
  f.store = (out / "jetstream").string();
  GATOS_ASSIGN_OR_RETURN(std::string text, SingleNodeNatsConfig(host, port, f.store, f.pid, "gatos-auth.conf"));
  GATOS_ASSIGN_OR_RETURN(bool changed, WriteNatsAuthorizationFile(f.auth, policy));
  (void)changed;
  std::string tmp = f.config + ".tmp";
  {
    std::ofstream o(tmp, std::ios::trunc);
    o << text;
    o.flush();
    if (!o) return InternalError("cannot write " + tmp);
  }
  fs::rename(tmp, f.config, ec);
  if (ec) return InternalError("cannot write " + f.config + ": " + ec.message());
  f.users = policy.submitters.entries().size() + policy.workers.entries().size() + policy.operators.entries().size() + 1;
  return f;
}

int RunNatsConfig(const Args& args) {
  // A node of a cluster has a configuration of its own (cmd_nats_config.cpp).
  for (const auto& a : args) {
    if (a == "--cluster" || a.rfind("--cluster=", 0) == 0) return RunNatsClusterConfig(args);
  }
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"dir"}, {"host"}, {"port"}, {"json", 0, false}})) {
    return UsageError("nats-config", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos nats-config --ledger DIR [--dir OUT] [--host 127.0.0.1] [--port 4222] [--json]\n\n"
                 "Writes OUT/nats.conf (a single-node nats-server with JetStream) and\n"
                 "OUT/gatos-auth.conf (one NATS user per key of the ledger's policy, each with\n"
                 "only the subjects its role needs; no anonymous access). Without --dir,\n"
                 "prints the authorization block alone.\n\n"
                 "Then:\n"
                 "  nats-server -c OUT/nats.conf\n"
                 "  gatosd serve --ledger DIR --nats nats://HOST:PORT \\\n"
                 "      --nats-auth-file OUT/gatos-auth.conf --nats-pid-file OUT/nats.pid\n"
                 "gatosd rewrites gatos-auth.conf on every policy change and makes\n"
                 "nats-server reload it, so a revoked key is disconnected at once.\n"
                 "Clients connect as their own key: workers with --key, `gatos submit\n"
                 "--sign-key`, other commands with GATOS_NATS_KEY=FILE.\n\n"
                 "For a JetStream cluster, each node's configuration:\n"
                 "  gatos nats-config --ledger DIR --cluster NAME=HOST,... --node NAME ...\n"
                 "(see gatos nats-config --cluster x --help).\n";
    return kExitOk;
  }
  auto ledger = flags.Get("ledger");
  if (!ledger) return UsageError("nats-config", "--ledger DIR is required (the ledger repository)");
  if (!flags.positional().empty()) {
    return UsageError("nats-config", "unexpected argument '" + TruncateUtf8(flags.positional()[0], 64) + "'");
  }
  int64_t port = 4222;
  if (!flags.GetInt("port", 1, 65535, &port)) return UsageError("nats-config", flags.error());
  std::string host = flags.GetOr("host", "127.0.0.1");
  auto dir = flags.Get("dir");
  if (!dir) {
    auto l = Ledger::Open(*ledger);
    if (!l.ok()) return ReportError(l.status().message(), kExitFailure);
    auto policy = (*l)->ReadPolicy();
    if (!policy.ok()) return ReportError(policy.status().message(), kExitFailure);
    std::cout << NatsAuthorizationConfig(*policy);
    return kExitOk;
  }
  auto files = WriteNatsConfig(*ledger, *dir, host, static_cast<int>(port));
  if (!files.ok()) return ReportError(files.status().message(), kExitFailure);
  std::string url = "nats://" + host + ":" + std::to_string(port);
  if (flags.Has("json")) {
    std::cout << nlohmann::json{{"config", files->config}, {"auth", files->auth}, {"pid_file", files->pid},
                                {"store_dir", files->store}, {"url", url}, {"users", files->users}}
                     .dump()
              << "\n";
    return kExitOk;
  }
  std::cout << "wrote " << files->config << " and " << files->auth << " (" << files->users << " keys)\n"
            << "start:  nats-server -c " << files->config << "\n"
            << "        gatosd serve --ledger " << *ledger << " --nats " << url << " --nats-auth-file " << files->auth
            << " --nats-pid-file " << files->pid << "\n";
  return kExitOk;
}

}  // namespace gatos::cli
