// gatos-worker: runs jobs for a GATOS ledger (main and wiring only).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "worker.h"

namespace {

constexpr char kUsage[] =
    "usage: gatos-worker run --nats URL --key KEY --state-dir DIR [--concurrency N]\n"
    "                        [--sandbox auto|require|off] [--ro-bind PATH]... [--name NAME]\n"
    "       gatos-worker status --state-dir DIR [--json]\n"
    "\n"
    "run      takes jobs from gatosd (JetStream consumer gatos-workers on\n"
    "         gatos.jobs.pending), claims them with the ledger RPC, runs them and\n"
    "         reports signed results through a durable outbox in DIR.\n"
    "         KEY is an OpenSSH Ed25519 private key allowed as a worker by the\n"
    "         ledger's policy (gatos policy allow-worker). --ledger nats://... is\n"
    "         accepted as a synonym of --nats. GATOS_NATS_URL is the default URL.\n"
    "         --sandbox auto (default) uses bubblewrap when it works and says so\n"
    "         loudly when it does not. --ro-bind makes a host path (a repository\n"
    "         to scan, a tool) readable inside the sandbox. Jobs find programs\n"
    "         shipped with the worker (gatos-scan) on their PATH, and\n"
    "         GATOS_STATE_DIR (DIR/scan) is a cache shared by this worker's jobs.\n"
    "         SIGINT/SIGTERM: stop taking jobs, let\n"
    "         running ones finish (10 s), then stop.\n"
    "status   queue depth, leases, retries, dead letters and ONE lifecycle state\n"
    "         (idle, draining, retrying backlog, dead-letter, stale lease).\n"
    "\n"
    "Environment: GATOS_OUTBOX_KEEP (delivered outbox rows kept, default 1000).\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "--version") {
    std::cout << "gatos-worker 0.1.0\n";
    return 0;
  }
  std::string cmd = args[0];
  if (cmd != "run" && cmd != "status") {
    std::cerr << "gatos-worker: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  }
  gatos::worker::WorkerOptions opts;
  if (const char* env = std::getenv("GATOS_NATS_URL")) opts.nats_url = env;
  bool json = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) {
        std::cerr << "gatos-worker " << cmd << ": " << a << " needs a value\n";
        return false;
      }
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--json" && cmd == "status") {
      json = true;
    } else if (a == "--state-dir") {
      if (!value(&opts.state_dir)) return 2;
    } else if ((a == "--nats" || a == "--ledger") && cmd == "run") {
      if (!value(&v)) return 2;
      if (a == "--ledger" && v.rfind("nats://", 0) != 0) {
        std::cerr << "gatos-worker run: --ledger must be the gatosd NATS URL (nats://HOST:PORT); workers "
                     "reach the ledger only through gatosd\n";
        return 2;
      }
      opts.nats_url = v;
    } else if (a == "--key" && cmd == "run") {
      if (!value(&opts.key_path)) return 2;
    } else if (a == "--ro-bind" && cmd == "run") {
      if (!value(&v)) return 2;
      opts.ro_binds.push_back(v);
    } else if (a == "--name" && cmd == "run") {
      if (!value(&opts.name)) return 2;
    } else if (a == "--concurrency" && cmd == "run") {
      if (!value(&v)) return 2;
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 256) {
        std::cerr << "gatos-worker run: --concurrency must be an integer in 1..256\n";
        return 2;
      }
      opts.concurrency = static_cast<int>(n);
    } else if (a == "--sandbox" && cmd == "run") {
      if (!value(&v)) return 2;
      if (v == "auto") opts.sandbox = gatos::ExecSpec::Sandbox::kAuto;
      else if (v == "require") opts.sandbox = gatos::ExecSpec::Sandbox::kRequire;
      else if (v == "off") opts.sandbox = gatos::ExecSpec::Sandbox::kOff;
      else {
        std::cerr << "gatos-worker run: --sandbox must be auto, require or off\n";
        return 2;
      }
    } else {
      std::cerr << "gatos-worker " << cmd << ": unknown argument '" << a << "' (see --help)\n";
      return 2;
    }
  }
  if (opts.state_dir.empty()) {
    std::cerr << "gatos-worker " << cmd << ": --state-dir DIR is required\n";
    return 2;
  }
  if (cmd == "status") return gatos::worker::PrintStatus(opts.state_dir, json);
  if (opts.nats_url.empty()) {
    std::cerr << "gatos-worker run: --nats URL is required (or set GATOS_NATS_URL)\n";
    return 2;
  }
  if (opts.key_path.empty()) {
    std::cerr << "gatos-worker run: --key KEY is required\n";
    return 2;
  }
  // Signals are taken by one thread; every other thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  static std::atomic<bool> stop{false};
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    stop = true;
    std::cerr << "gatos-worker: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": stopping\n";
  }).detach();
  return gatos::worker::RunWorker(opts, &stop);
}
