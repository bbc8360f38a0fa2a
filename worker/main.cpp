// gatos-worker: runs jobs for a GATOS ledger (main and wiring only).
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/sys/config_file.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/log.h"
#include "gatos/sys/signal_watcher.h"
#include "gatos/model/scheduling.h"
#include "worker.h"

namespace {

constexpr char kUsage[] =
    "usage: gatos-worker run --nats URL --key KEY --ledger-key FILE --state-dir DIR [--concurrency "
    "N]\n"
    "                        [--sandbox auto|require|off] [--ro-bind PATH]... [--name NAME]\n"
    "                        [--local-inputs DIR]... [--allow-input-url PREFIX]...\n"
    "                        [--credentials FILE] [--live-output on|off] [--config FILE]\n"
    "                        [--pools NAME,NAME...]\n"
    "       gatos-worker status --state-dir DIR [--json] [--config FILE]\n"
    "\n"
    "run      takes jobs from gatosd (JetStream consumer gatos-workers on\n"
    "         gatos.jobs.pending), claims them with the ledger RPC, runs them and\n"
    "         reports signed results through a durable outbox in DIR.\n"
    "         KEY is an OpenSSH Ed25519 private key allowed as a worker by the\n"
    "         ledger's policy (gatos policy allow-worker). --ledger nats://... is\n"
    "         accepted as a synonym of --nats. GATOS_NATS_URL is the default URL.\n"
    "         The worker connects to NATS as KEY (tls:// URLs: --nats-ca FILE).\n"
    "         FILE holds the ledger's public key (one OpenSSH key per line; several\n"
    "         during a key rotation): the worker runs a job only when its grant is\n"
    "         a lease commit signed by that key for this worker's own request, and\n"
    "         acts on renew replies and cancels only when the ledger signed them.\n"
    "         'gatos policy show --ledger DIR' prints the key.\n"
    "         --concurrency N: jobs run at once (default 8 per CPU, 4 to 64).\n"
    "         --pools a,b: take the jobs of these pools (default: default); the\n"
    "         ledger's policy says which pools the key may serve\n"
    "         (gatos policy allow-worker KEY --pools ...; docs/scheduling.md).\n"
    "         --sandbox auto (default) sandboxes jobs when the host allows it\n"
    "         (namespaces set up once per slot, else bubblewrap) and says so\n"
    "         loudly when it does not. --ro-bind makes a host path (a repository\n"
    "         to scan, a tool) readable inside the sandbox. Jobs find programs\n"
    "         shipped with the worker (gatos-scan) on their PATH. Only scan\n"
    "         jobs (command gatos-scan) see the scan state (DIR/scan, as\n"
    "         GATOS_STATE_DIR); no other job can read or write it.\n"
    "         Git inputs (docs/inputs.md): before a job starts, the worker fetches\n"
    "         each repository its manifest declares ({kind: git, url, ref|commit})\n"
    "         into DIR/inputs, outside the sandbox, and shows it to the job\n"
    "         read-only at /gatos/inputs/<n> ($GATOS_INPUT_<n>, with\n"
    "         $GATOS_INPUT_<n>_COMMIT); the job needs no network.\n"
    "         --local-inputs DIR: local repositories (absolute paths, file://\n"
    "         URLs) may be inputs when they are under DIR (repeatable; default:\n"
    "         none); the worker fetches them in a sandbox that sees only their\n"
    "         git directory, and refuses one that redirects elsewhere (symlinks,\n"
    "         gitfiles, alternates) or that holds gatos state.\n"
    "         --allow-input-url PREFIX: network inputs under PREFIX may reach\n"
    "         this host's loopback or link-local addresses (repeatable; default:\n"
    "         none, such inputs are refused). --credentials FILE: per URL prefix,\n"
    "         a token file or an SSH key the worker fetches with; jobs never see them.\n"
    "         --live-output off: publish no running job's output or progress on\n"
    "         NATS (default on: bounded, for gatos logs -f and gatos status).\n"
    "         SIGINT/SIGTERM: stop taking jobs, let\n"
    "         running ones finish (10 s), then stop.\n"
    "         --config FILE: settings from a YAML file, every flag by its name\n"
    "         (nats: URLS, key: FILE, ro-bind: [A, B], ...); flags on the command\n"
    "         line win. GATOS_NATS_URL and --nats take comma-separated cluster\n"
    "         members (nats://a:4222,nats://b:4222, or tls://...).\n"
    "status   queue depth, leases, retries, dead letters and ONE lifecycle state\n"
    "         (idle, draining, retrying backlog, dead-letter, stale lease).\n"
    "\n"
    "Environment: GATOS_OUTBOX_KEEP (delivered outbox rows kept, default 1000).\n";

// `gatos-worker run|status ARGS`.
int Command(const std::string& cmd, const std::vector<std::string>& args) {
  gatos::worker::WorkerOptions opts;
  if (const char* env = std::getenv("GATOS_NATS_URL")) opts.nats_url = env;
  // One list for both commands, so one configuration file serves both
  // (status uses state-dir only).
  std::vector<gatos::FlagSpec> specs = {{"state-dir"},
                                        {"json", 0, false},
                                        {"nats"},
                                        {"ledger"},
                                        {"key"},
                                        {"ledger-key"},
                                        {"ro-bind", 0, true, true},
                                        {"name"},
                                        {"local-inputs", 0, true, true},
                                        {"allow-input-url", 0, true, true},
                                        {"credentials"},
                                        {"concurrency"},
                                        {"sandbox"},
                                        {"nats-ca"},
                                        {"live-output"},
                                        {"pools"}};
  specs.push_back({"config"});
  auto usage = [&cmd](const std::string& message) {
    std::cerr << "gatos-worker " << cmd << ": " << message << "\n";
    return gatos::kExitUsage;
  };
  // --config FILE: the same settings as YAML (docs/deployment.md); flags win.
  auto full = gatos::WithConfigFile(args, specs);
  if (!full.ok()) return usage(full.status().message());
  gatos::Flags flags;
  if (!flags.Parse(*full, specs)) return usage(flags.error());
  if (flags.help()) {
    std::cout << kUsage;
    return 0;
  }
  if (cmd == "run" && flags.Has("json")) return usage("--json is for gatos-worker status");
  if (!flags.positional().empty()) {
    return usage("unexpected argument '" + gatos::TruncateUtf8(flags.positional()[0], 64) +
                 "' (see --help)");
  }
  opts.state_dir = flags.GetOr("state-dir", "");
  if (flags.Has("nats") && flags.Has("ledger")) {
    return usage("--ledger is another name for --nats; give one of them");
  }
  if (auto ledger = flags.Get("ledger")) {
    if (!ledger->starts_with("nats://") && !ledger->starts_with("tls://")) {
      return usage(
          "--ledger must be the gatosd NATS URL (nats://HOST:PORT); workers reach the ledger only "
          "through gatosd");
    }
    opts.nats_url = *ledger;
  }
  opts.nats_url = flags.GetOr("nats", opts.nats_url);
  opts.nats_ca_file = flags.GetOr("nats-ca", "");
  opts.key_path = flags.GetOr("key", "");
  opts.ledger_key_path = flags.GetOr("ledger-key", "");
  opts.ro_binds = flags.GetAll("ro-bind");
  opts.local_inputs = flags.GetAll("local-inputs");
  opts.allow_input_urls = flags.GetAll("allow-input-url");
  opts.credentials_path = flags.GetOr("credentials", "");
  opts.name = flags.GetOr("name", "");
  if (auto pools = flags.Get("pools")) {
    auto list = gatos::ParsePoolList(*pools);
    if (!list.ok()) return usage("--pools: " + list.status().message());
    opts.pools = *list;
  }
  std::string sandbox = "auto", live = "on";
  if (!flags.GetInt("concurrency", 1, 256, &opts.concurrency) ||
      !flags.GetChoice("sandbox", {"auto", "require", "off"}, &sandbox) ||
      !flags.GetChoice("live-output", {"on", "off"}, &live)) {
    return usage(flags.error());
  }
  opts.live_output = live == "on";
  if (sandbox == "require") opts.sandbox = gatos::ExecSpec::Sandbox::kRequire;
  if (sandbox == "off") opts.sandbox = gatos::ExecSpec::Sandbox::kOff;
  if (opts.state_dir.empty()) return usage("--state-dir DIR is required");
  if (cmd == "status") return gatos::worker::PrintStatus(opts.state_dir, flags.Has("json"));
  if (opts.nats_url.empty()) return usage("--nats URL is required (or set GATOS_NATS_URL)");
  if (opts.key_path.empty()) return usage("--key KEY is required");
  if (opts.ledger_key_path.empty()) {
    return usage(
        "--ledger-key FILE is required: the ledger's public key, which signs every grant; a worker "
        "runs nothing it cannot check ('gatos policy show --ledger DIR' prints the key; gatos up "
        "passes it)");
  }
  // SIGINT/SIGTERM are taken by one thread (every thread RunWorker starts
  // inherits the mask) and only set the stop flag.
  signal(SIGPIPE, SIG_IGN);
  gatos::SetLogProgram("gatos-worker", opts.name);
  gatos::SignalWatcher signals(
      [](int sig) { gatos::Log(std::string(gatos::SignalWatcher::Name(sig)) + ": stopping"); });
  return gatos::worker::RunWorker(opts, signals.stop_flag());
}

}  // namespace

int main(int argc, char** argv) {
  auto command = [](const char* cmd) {
    return [cmd](const std::vector<std::string>& args) { return Command(cmd, args); };
  };
  return gatos::RunSubcommands("gatos-worker", kUsage, "gatos-worker 0.1.0",
                               {argv + 1, argv + argc},
                               {{"run", command("run")}, {"status", command("status")}});
}
