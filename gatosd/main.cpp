// gatosd: the GATOS ledger daemon (main and wiring only).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "gatos/ledger/local_ledger.h"
#include "gatos/model/encoding.h"
#include "gatos/model/scheduler.h"
#include "gatos/sys/config_file.h"
#include "gatos/sys/flags.h"
#include "dashboard.h"
#include "hooks.h"
#include "http.h"
#include "ledger_setup.h"
#include "replica_init.h"
#include "server.h"

namespace {

constexpr char kUsage[] =
    "usage: gatosd <command> [options]\n"
    "\n"
    "commands:\n"
    "  init DIR --replica-of LEDGER --ledger-key FILE\n"
    "                                    make a replica of a replicated ledger: clone its\n"
    "                                    objects and refs, verify its log against the key\n"
    "                                    (docs/replication.md)\n"
    "  init DIR [--dev] [--lease-ms N]   create a bare ledger repository with its hooks,\n"
    "                                    ledger key and first policy commit, and its push\n"
    "                                    front door DIR/push (git push jobs there)\n"
    "  serve --ledger DIR [--nats URL] [--http HOST:PORT] [--republish-s N]\n"
    "                                    run the daemon: worker RPC, JetStream publication,\n"
    "                                    the dashboard, /metrics and /healthz on --http\n"
    "                                    (default NATS nats://127.0.0.1:4222)\n"
    "        [--http-token-file FILE]    bearer token of the dashboard and /metrics; required\n"
    "                                    when --http is not a loopback address\n"
    "        [--stream-replicas N]       copies of the GATOS_JOBS stream in a JetStream cluster\n"
    "                                    (1..5, default 1; 3 on a three-node cluster). --nats\n"
    "                                    takes every member: nats://a:4222,nats://b:4222,...\n"
    "                                    (tls://... for TLS)\n"
    "        [--offer-window auto|all|N] offers outstanding per pool (docs/scheduling.md):\n"
    "                                    auto (default) follows the claim rate so that later\n"
    "                                    high-priority jobs do not queue behind earlier offers;\n"
    "                                    all offers every pending job at once (no priorities)\n"
    "        [--input-credentials FILE]  credentials for reading the repositories triggers\n"
    "                                    watch (git ls-remote), in gatos-worker's --credentials\n"
    "                                    format (docs/inputs.md); default: none\n"
    "        [--watch-local DIR]...      local repositories (paths, file:// URLs) triggers may\n"
    "                                    watch, only under DIR (default: none), by a worker's\n"
    "                                    --local-inputs rules\n"
    "        [--watch-allow-url PREFIX]... watched URLs under PREFIX may reach this host's\n"
    "                                    loopback or link-local addresses (default: refused)\n"
    "        [--checkpoint-s N]          sign a checkpoint of the log's Merkle tree into\n"
    "                                    DIR/gatos/tlog/checkpoint every N s while the log moves\n"
    "                                    (default 10; 0 = never; served with the tiles at /tlog/)\n"
    "        [--max-batch N] [--no-fsync] requests applied as one durable log batch at most\n"
    "                                    (default 128); --no-fsync trades durability for speed\n"
    "                                    (experiments only; said loudly at start)\n"
    "        [--batch-budget-ms N]       size batches so each takes about N ms to apply\n"
    "                                    (default 200; sweeps and fires wait at most that long)\n"
    "        [--no-wal]                  each batch syncs its pack and log ref (six syncs)\n"
    "                                    instead of one write-ahead log record (comparisons)\n"
    "        [--nats-auth-file FILE]     keep nats-server's authorization block in FILE in step\n"
    "        [--nats-pid-file FILE]      with the policy, and SIGHUP the nats-server in FILE\n"
    "                                    after each change (see gatos nats-config)\n"
    "        [--nats-ca FILE] [--require-nats-auth]\n"
    "                                    CA of a tls:// server; refuse to serve on a NATS that\n"
    "                                    lets clients in without a key (else a loud warning)\n"
    "        [--replicated] [--replica-name NAME]\n"
    "                                    run as a replica of a replicated ledger: follow the\n"
    "                                    leader, lead when elected (docs/replication.md); NAME\n"
    "                                    defaults to the host name\n"
    "        [--election-ttl-ms N]       a dead leader's key expires N ms after its last keep\n"
    "                                    (default 3000); the next two default to N/4 and N/3\n"
    "        [--election-keep-ms N]      the leader keeps its key every N ms (default 750)\n"
    "        [--election-margin-ms N]    and stops leading N ms before it could expire (1000);\n"
    "                                    keep + margin < TTL\n"
    "        [--election-try-ms N]       a follower tries to lead every N ms (default 250; < TTL)\n"
    "        [--append-window N]         batches the leader appends to the replicated log ahead\n"
    "                                    of their acknowledgement (default 4; 0: one at a time)\n"
    "        [--replicated-log-max-mb N] keep the newest N MiB of the replicated log (default:\n"
    "                                    all); a replica further behind must be made again\n"
    "        [--config FILE]             settings from a YAML file: every flag above by its\n"
    "                                    name (ledger: DIR, stream-replicas: 3, ...);\n"
    "                                    flags on the command line win\n"
    "  hook pre-receive|proc-receive [--ledger DIR]\n"
    "                                    run a git hook (installed by init; git calls it)\n"
    "\n"
    "--dev accepts unsigned job commits; every start says so.\n"
    "gatosd connects to NATS as the ledger key; workers and users connect as\n"
    "the keys the policy names (docs/threat-model.md).\n";

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "gatosd";
  buf[n] = '\0';
  return buf;
}

int Usage(const std::string& command, const std::string& message) {
  std::cerr << "gatosd " << command << ": " << message << "\n";
  return gatos::kExitUsage;
}

int Init(const std::vector<std::string>& args) {
  gatos::gatosd::InitOptions opts;
  opts.gatosd_path = SelfPath();
  gatos::Flags flags;
  if (!flags.Parse(args, {{"dev", 0, false}, {"lease-ms"}, {"replica-of"}, {"ledger-key"}})) {
    return Usage("init", flags.error());
  }
  if (flags.help()) {
    std::cout << kUsage;
    return 0;
  }
  if (auto source = flags.Get("replica-of")) {
    if (flags.positional().size() != 1) return Usage("init", "DIR is required (one)");
    auto key = flags.Get("ledger-key");
    if (!key) return Usage("init", "--replica-of needs --ledger-key FILE (the ledger's private key)");
    if (flags.Has("dev") || flags.Has("lease-ms")) return Usage("init", "a replica takes its policy from the ledger");
    gatos::Status s = gatos::gatosd::InitReplica(flags.positional()[0], {*source, *key, SelfPath()});
    if (!s.ok()) {
      std::cerr << "gatosd init: " << s.message() << "\n";
      return 1;
    }
    std::cout << "initialized replica " << flags.positional()[0] << " of " << *source << "\n"
              << "next: gatosd serve --replicated --replica-name NAME --ledger " << flags.positional()[0] << "\n";
    return 0;
  }
  if (flags.Has("ledger-key")) return Usage("init", "--ledger-key goes with --replica-of");
  if (flags.Has("dev")) opts.settings.dev_mode = true;
  if (!flags.GetInt("lease-ms", 100, 86'400'000, &opts.settings.lease_ms)) return Usage("init", flags.error());
  if (flags.positional().empty()) return Usage("init", "DIR is required");
  if (flags.positional().size() > 1) {
    return Usage("init", "unexpected argument '" + gatos::TruncateUtf8(flags.positional()[1], 64) + "'");
  }
  const std::string& dir = flags.positional()[0];
  gatos::Status s = gatos::gatosd::InitLedger(dir, opts);
  if (!s.ok()) {
    std::cerr << "gatosd init: " << s.message() << "\n";
    return 1;
  }
  std::cout << "initialized ledger " << dir << "\n";
  if (opts.settings.dev_mode) {
    std::cout << "WARNING: dev mode: this ledger accepts UNSIGNED job commits\n";
  }
  std::cout << "push jobs to: " << gatos::LedgerPushPath(dir) << " (git push " << gatos::LedgerPushPath(dir)
            << " HEAD:refs/gatos/submit/NAME)\n"
            << "ledger key: " << gatos::gatosd::LedgerKeyPath(dir) << ".pub\n"
            << "next: gatos policy allow-submitter --ledger " << dir << " KEY.pub\n"
            << "      gatos policy allow-worker --ledger " << dir << " KEY.pub\n";
  return 0;
}

int ServeCommand(const std::vector<std::string>& args) {
  gatos::gatosd::ServeOptions opts;
  if (const char* env = std::getenv("GATOS_NATS_URL")) opts.nats_url = env;
  const std::vector<gatos::FlagSpec> specs = {{"ledger"},      {"nats"},           {"http"},
                                              {"republish-s"}, {"sweep-ms"},       {"nats-wait-s"}, {"offer-window"},
                                              {"max-batch"},   {"batch-budget-ms"}, {"no-fsync", 0, false}, {"no-wal", 0, false}, {"http-token-file"},
                                              {"stream-replicas"}, {"nats-auth-file"}, {"nats-pid-file"},
                                              {"nats-ca"}, {"require-nats-auth", 0, false}, {"config"},
                                              {"replicated", 0, false}, {"replica-name"},
                                              {"checkpoint-s"}, {"input-credentials"},
                                              {"watch-local", 0, true, true}, {"watch-allow-url", 0, true, true},
                                              {"election-ttl-ms"}, {"election-keep-ms"}, {"election-try-ms"},
                                              {"election-margin-ms"}, {"append-window"},
                                              {"replicated-log-max-mb"}};
  // --config FILE: the same settings as YAML (docs/deployment.md); flags win.
  auto full = gatos::WithConfigFile(args, specs);
  if (!full.ok()) return Usage("serve", full.status().message());
  gatos::Flags flags;
  if (!flags.Parse(*full, specs)) return Usage("serve", flags.error());
  if (flags.help()) {
    std::cout << kUsage;
    return 0;
  }
  if (!flags.positional().empty()) {
    return Usage("serve", "unexpected argument '" + gatos::TruncateUtf8(flags.positional()[0], 64) +
                              "' (see gatosd --help)");
  }
  opts.ledger_dir = flags.GetOr("ledger", "");
  opts.nats_url = flags.GetOr("nats", opts.nats_url);
  opts.http_addr = flags.GetOr("http", opts.http_addr);
  int64_t republish_s = opts.republish_ms / 1000, nats_wait_s = opts.nats_wait_ms / 1000;
  if (!flags.GetInt("republish-s", 1, 86400, &republish_s) || !flags.GetInt("sweep-ms", 10, 60000, &opts.sweep_ms) ||
      !flags.GetInt("nats-wait-s", 0, 3600, &nats_wait_s)) {
    return Usage("serve", flags.error());
  }
  int64_t checkpoint_s = opts.checkpoint_ms / 1000;
  if (!flags.GetInt("checkpoint-s", 0, 86400, &checkpoint_s)) return Usage("serve", flags.error());
  opts.checkpoint_ms = checkpoint_s * 1000;
  int64_t max_batch = static_cast<int64_t>(opts.max_batch);
  if (!flags.GetInt("max-batch", 1, 65536, &max_batch)) return Usage("serve", flags.error());
  opts.max_batch = static_cast<size_t>(max_batch);
  if (!flags.GetInt("batch-budget-ms", 1, 60000, &opts.batch_budget_ms)) return Usage("serve", flags.error());
  int64_t replicas = opts.stream_replicas;
  if (!flags.GetInt("stream-replicas", 1, 5, &replicas)) return Usage("serve", flags.error());
  opts.stream_replicas = static_cast<int>(replicas);
  opts.fsync = !flags.Has("no-fsync");
  opts.wal = !flags.Has("no-wal");
  opts.nats_auth_file = flags.GetOr("nats-auth-file", "");
  opts.nats_pid_file = flags.GetOr("nats-pid-file", "");
  opts.nats_ca_file = flags.GetOr("nats-ca", "");
  opts.require_nats_auth = flags.Has("require-nats-auth");
  if (!opts.nats_pid_file.empty() && opts.nats_auth_file.empty()) {
    return Usage("serve", "--nats-pid-file needs --nats-auth-file (the file nats-server reloads)");
  }
  if (flags.Has("republish-s")) opts.republish_ms = republish_s * 1000;
  if (auto w = flags.Get("offer-window"); w && *w != "auto") {
    if (*w == "all") {
      opts.offer_window = gatos::Scheduler::kAllOffers;
    } else if (!flags.GetInt("offer-window", 1, 1'000'000, &opts.offer_window)) {
      return Usage("serve", "--offer-window: expected auto, all or a number of offers 1..1000000");
    }
  }
  if (flags.Has("nats-wait-s")) opts.nats_wait_ms = nats_wait_s * 1000;
  if (opts.ledger_dir.empty()) return Usage("serve", "--ledger DIR is required");
  if (auto cred = flags.Get("input-credentials")) {
    auto c = gatos::LoadInputCredentialsFile(*cred);
    if (!c.ok()) return Usage("serve", "--input-credentials: " + c.status().message());
    for (const auto& w : c->warnings()) std::cerr << "gatosd: warning: --input-credentials: " << w << "\n";
    opts.input_credentials = std::move(*c);
  }
  for (const std::string& dir : flags.GetAll("watch-local")) {
    std::error_code ec;
    const auto canonical = std::filesystem::canonical(dir, ec);
    if (ec || !std::filesystem::is_directory(canonical)) {
      return Usage("serve", "--watch-local " + gatos::TruncateUtf8(dir, 200) + ": not a directory");
    }
    opts.watch_local_roots.push_back(canonical.string());
  }
  opts.watch_allow_urls = flags.GetAll("watch-allow-url");
  if (auto token_file = flags.Get("http-token-file")) {
    auto token = gatos::gatosd::LoadHttpToken(*token_file);
    if (!token.ok()) return Usage("serve", token.status().message());
    opts.http_token = std::move(*token);
  }
  if (!opts.http_addr.empty()) {
    // Off loopback, the dashboard and /metrics are for whoever reaches the
    // port: never without a token.
    auto loopback = gatos::gatosd::IsLoopbackAddress(opts.http_addr);
    if (!loopback.ok()) return Usage("serve", loopback.status().message());
    if (!*loopback && opts.http_token.empty()) {
      return Usage("serve", "--http " + opts.http_addr +
                                " is not a loopback address: refusing to serve the dashboard without a token "
                                "(give --http-token-file FILE, or bind 127.0.0.1)");
    }
  }
  // Ledgers made before the front door existed get one.
  std::error_code ec;
  if (std::filesystem::exists(gatos::gatosd::LedgerKeyPath(opts.ledger_dir), ec) &&
      !std::filesystem::exists(gatos::LedgerPushPath(opts.ledger_dir) + "/config", ec)) {
    gatos::Status door = gatos::gatosd::InstallFrontDoor(opts.ledger_dir, SelfPath());
    if (door.ok()) {
      std::cerr << "gatosd: created the push front door " << gatos::LedgerPushPath(opts.ledger_dir) << "\n";
    } else {
      std::cerr << "gatosd: warning: no push front door: " << door.message() << "\n";
    }
  }
  // And the push targets added since they were made.
  if (std::filesystem::exists(gatos::gatosd::LedgerKeyPath(opts.ledger_dir), ec)) {
    gatos::Status up = gatos::gatosd::UpgradePushTargets(opts.ledger_dir, SelfPath());
    if (!up.ok()) std::cerr << "gatosd: warning: cannot add the newer push targets: " << up.message() << "\n";
  }
  // The election's timing and the leader's append window (replicated only).
  const bool election_flags = flags.Has("election-ttl-ms") || flags.Has("election-keep-ms") ||
                              flags.Has("election-try-ms") || flags.Has("election-margin-ms");
  if (!flags.Has("replicated") &&
      (election_flags || flags.Has("append-window") || flags.Has("replicated-log-max-mb"))) {
    return Usage("serve", "--election-*, --append-window and --replicated-log-max-mb need --replicated");
  }
  if (flags.Has("replicated-log-max-mb")) {
    int64_t mb = 0;
    if (!flags.GetInt("replicated-log-max-mb", 1, 1LL << 30, &mb)) return Usage("serve", flags.error());
    opts.log_max_bytes = mb << 20;
  }
  if (flags.Has("election-ttl-ms")) {
    int64_t ttl = 0;
    if (!flags.GetInt("election-ttl-ms", 100, 3'600'000, &ttl)) return Usage("serve", flags.error());
    opts.election = gatos::ElectionOptionsForTtl(ttl);
  }
  if (!flags.GetInt("election-keep-ms", 1, 3'600'000, &opts.election.keep_every_ms) ||
      !flags.GetInt("election-try-ms", 1, 3'600'000, &opts.election.try_every_ms) ||
      !flags.GetInt("election-margin-ms", 0, 3'600'000, &opts.election.margin_ms)) {
    return Usage("serve", flags.error());
  }
  if (gatos::Status e = gatos::CheckElectionOptions(opts.election); !e.ok()) return Usage("serve", e.message());
  int64_t window = opts.append_window;
  if (!flags.GetInt("append-window", 0, 64, &window)) return Usage("serve", flags.error());
  opts.append_window = static_cast<int>(window);
  if (flags.Has("replicated")) {
    opts.replicated = true;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    opts.replica_name = flags.GetOr("replica-name", host);
    return gatos::gatosd::ServeReplicated(opts);
  }
  if (flags.Has("replica-name")) return Usage("serve", "--replica-name needs --replicated");
  return gatos::gatosd::Serve(opts);
}

// The git hooks gatosd init installs; git runs them.
// The front door's hooks add --ledger DIR (relative to the front door, where
// git runs them).
int Hook(const std::vector<std::string>& args) {
  gatos::Flags flags;
  if (!flags.Parse(args, {{"ledger"}})) return Usage("hook", flags.error());
  const auto& pos = flags.positional();
  std::string ledger;
  if (auto dir = flags.Get("ledger")) {
    char* real = ::realpath(dir->c_str(), nullptr);
    if (!real) {
      std::cerr << "gatos: ledger unavailable: " << *dir << ": " << std::strerror(errno) << "\n";
      return 1;
    }
    ledger = real;
    std::free(real);
  }
  if (pos.size() == 1 && pos[0] == "pre-receive") return gatos::gatosd::RunPreReceive(ledger, std::cin, std::cerr);
  if (pos.size() == 1 && pos[0] == "proc-receive") {
    return gatos::gatosd::RunProcReceive(ledger, std::cin, std::cout, std::cerr);
  }
  return Usage("hook", "expects pre-receive or proc-receive (git runs it; see gatosd --help)");
}

}  // namespace

int main(int argc, char** argv) {
  return gatos::RunSubcommands("gatosd", kUsage, "", {argv + 1, argv + argc},
                               {{"init", Init}, {"serve", ServeCommand}, {"hook", Hook}});
}
