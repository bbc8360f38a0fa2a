// gatosd: the GATOS ledger daemon (main and wiring only).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "hooks.h"
#include "ledger_setup.h"
#include "server.h"

namespace {

constexpr char kUsage[] =
    "usage: gatosd <command> [options]\n"
    "\n"
    "commands:\n"
    "  init DIR [--dev] [--lease-ms N]   create a bare ledger repository with its hooks,\n"
    "                                    ledger key and first policy commit\n"
    "  serve --ledger DIR [--nats URL] [--http HOST:PORT] [--republish-s N]\n"
    "                                    run the daemon: worker RPC, JetStream publication,\n"
    "                                    /metrics and /healthz (default NATS nats://127.0.0.1:4222)\n"
    "  hook pre-receive|post-receive     run a git hook (installed by init; git calls it)\n"
    "\n"
    "--dev accepts unsigned job commits; every start says so.\n";

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "gatosd";
  buf[n] = '\0';
  return buf;
}

int Init(const std::vector<std::string>& args) {
  gatos::gatosd::InitOptions opts;
  opts.gatosd_path = SelfPath();
  std::string dir;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--dev") {
      opts.settings.dev_mode = true;
    } else if (a == "--lease-ms" && i + 1 < args.size()) {
      char* end = nullptr;
      long long v = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end || v < 100 || v > 86'400'000) {
        std::cerr << "gatosd init: --lease-ms must be an integer in 100..86400000\n";
        return 2;
      }
      opts.settings.lease_ms = v;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "gatosd init: unknown option '" << a << "'\n";
      return 2;
    } else if (dir.empty()) {
      dir = a;
    } else {
      std::cerr << "gatosd init: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (dir.empty()) {
    std::cerr << "gatosd init: DIR is required\n";
    return 2;
  }
  gatos::Status s = gatos::gatosd::InitLedger(dir, opts);
  if (!s.ok()) {
    std::cerr << "gatosd init: " << s.message() << "\n";
    return 1;
  }
  std::cout << "initialized ledger " << dir << "\n";
  if (opts.settings.dev_mode) {
    std::cout << "WARNING: dev mode: this ledger accepts UNSIGNED job commits\n";
  }
  std::cout << "ledger key: " << gatos::gatosd::LedgerKeyPath(dir) << ".pub\n"
            << "next: gatos policy allow-submitter --ledger " << dir << " KEY.pub\n"
            << "      gatos policy allow-worker --ledger " << dir << " KEY.pub\n";
  return 0;
}

bool ParseMs(const std::string& flag, const std::string& text, int64_t scale, int64_t lo, int64_t hi,
             int64_t* out) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi) {
    std::cerr << "gatosd serve: " << flag << " must be an integer in " << lo << ".." << hi << "\n";
    return false;
  }
  *out = v * scale;
  return true;
}

int ServeCommand(const std::vector<std::string>& args) {
  gatos::gatosd::ServeOptions opts;
  if (const char* env = std::getenv("GATOS_NATS_URL")) opts.nats_url = env;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) {
        std::cerr << "gatosd serve: " << a << " needs a value\n";
        return false;
      }
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--ledger") {
      if (!value(&opts.ledger_dir)) return 2;
    } else if (a == "--nats") {
      if (!value(&opts.nats_url)) return 2;
    } else if (a == "--http") {
      if (!value(&opts.http_addr)) return 2;
    } else if (a == "--republish-s") {
      if (!value(&v) || !ParseMs(a, v, 1000, 1, 86400, &opts.republish_ms)) return 2;
    } else if (a == "--sweep-ms") {
      if (!value(&v) || !ParseMs(a, v, 1, 10, 60000, &opts.sweep_ms)) return 2;
    } else if (a == "--nats-wait-s") {
      if (!value(&v) || !ParseMs(a, v, 1000, 0, 3600, &opts.nats_wait_ms)) return 2;
    } else {
      std::cerr << "gatosd serve: unknown argument '" << a << "' (see gatosd --help)\n";
      return 2;
    }
  }
  if (opts.ledger_dir.empty()) {
    std::cerr << "gatosd serve: --ledger DIR is required\n";
    return 2;
  }
  return gatos::gatosd::Serve(opts);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "init") return Init({args.begin() + 1, args.end()});
  if (args[0] == "serve") return ServeCommand({args.begin() + 1, args.end()});
  if (args[0] == "hook" && args.size() == 2 && args[1] == "pre-receive") {
    return gatos::gatosd::RunPreReceive(std::cin, std::cerr);
  }
  if (args[0] == "hook" && args.size() == 2 && args[1] == "post-receive") {
    return gatos::gatosd::RunPostReceive(std::cin, std::cerr);
  }
  std::cerr << "gatosd: unknown command '" << args[0] << "' (see gatosd --help)\n";
  return 2;
}
