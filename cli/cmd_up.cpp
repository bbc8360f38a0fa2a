// gatos up: a whole local stack on loopback in one command.
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/model/nats_cluster.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/encoding.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/private_state.h"
#include "gatos/sys/process.h"
#include "gatos/sys/signal_watcher.h"

namespace gatos::cli {
namespace {

namespace fs = std::filesystem;

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

// Our sibling binary when it exists (build tree or install dir), else PATH.
std::string Tool(const std::string& name) {
  std::string sibling = SelfDir() + "/" + name;
  return access(sibling.c_str(), X_OK) == 0 ? sibling : name;
}

bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
}

int PickPort(int preferred) {
  if (PortFree(preferred)) return preferred;
  for (int p = preferred + 1; p < preferred + 2000; ++p) {
    if (PortFree(p)) return p;
  }
  return -1;
}

struct Child {
  std::string name;
  std::string log;
  Process proc;
};

// Our children: stdin from /dev/null, stdout and stderr appended to `log`,
// our environment, a process group of their own (Ctrl-C reaches us only; we
// stop them in order), and SIGTERM if we die, even by SIGKILL.
Result<Process> Spawn(const std::vector<std::string>& argv, const std::string& log) {
  SpawnOptions o = SpawnOptions::WithLog(log, SIGTERM);
  o.new_process_group = true;
  return Process::Spawn(argv, o);
}

// The exit code of argv, or -1 when it could not start (the reason is
// appended to `log`) or was killed.
int RunQuiet(const std::vector<std::string>& argv, const std::string& log) {
  Result<Process> p = Spawn(argv, log);
  if (!p.ok()) {
    std::ofstream(log, std::ios::app) << "gatos up: " << p.status().message() << "\n";
    return -1;
  }
  return p->Wait().code;
}

bool LogHas(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.find(needle) != std::string::npos;
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

// Waits until c.log has `needle` after byte `from`; false if c exits first or
// after `ms`.
bool WaitReady(Child& c, const std::string& needle, int ms, size_t from = 0) {
  for (int i = 0; i < ms / 20; ++i) {
    std::ifstream in(c.log);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.size() > from && s.find(needle, from) != std::string::npos) return true;
    if (!c.proc.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void StopAll(std::vector<Child>& children) {
  // Workers first (they finish or abandon their jobs), then gatosd, then NATS.
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    if (!it->proc.running()) continue;
    it->proc.Stop(SIGTERM, std::chrono::seconds(15));  // then SIGKILL
    std::cerr << "gatos up: stopped " << it->name << "\n";
  }
}

// A three-node NATS cluster on loopback for a replicated ledger: each
// node's configuration (NatsServerConfig: JetStream, routes with a random
// password, only the policy's keys admitted) in <out>/n<i>/.
// `urls` gets the clients' URL list.
Result<std::vector<NatsConfigFiles>> WriteNatsClusterConfigs(const std::string& ledger_dir, const std::string& out,
                                                            int first_client_port, std::string* urls) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(ledger_dir));
  GATOS_ASSIGN_OR_RETURN(Policy policy, ledger->ReadPolicy());
  std::vector<NatsNode> nodes;
  for (int i = 0, next = first_client_port; i < 3; ++i) {
    NatsNode n;
    n.name = "n" + std::to_string(i);
    n.host = "127.0.0.1";
    n.client_port = PickPort(next);
    n.cluster_port = PickPort(n.client_port + 1);
    if (n.client_port < 0 || n.cluster_port < 0) return UnavailableError("no free loopback port found");
    next = n.cluster_port + 1;
    *urls += std::string(urls->empty() ? "" : ",") + "nats://127.0.0.1:" + std::to_string(n.client_port);
    nodes.push_back(n);
  }
  std::string secret;
  {
    std::ifstream r("/dev/urandom", std::ios::binary);
    char b[16] = {};
    r.read(b, sizeof b);
    secret = HexEncode(std::string_view(b, sizeof b));
  }
  std::vector<NatsConfigFiles> files;
  for (const auto& n : nodes) {
    const std::string dir = out + "/" + n.name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    NatsConfigFiles f;
    f.config = dir + "/nats.conf";
    f.auth = dir + "/gatos-auth.conf";
    f.pid = dir + "/nats.pid";
    f.store = dir + "/jetstream";
    NatsServerConfigOptions o;
    o.node = n.name;
    o.nodes = nodes;
    o.store_dir = f.store;
    o.listen_host = "127.0.0.1";
    o.route_password = secret;
    o.pid_file = f.pid;
    o.auth_include = "gatos-auth.conf";
    GATOS_ASSIGN_OR_RETURN(std::string text, NatsServerConfig(o, policy));
    GATOS_ASSIGN_OR_RETURN(bool changed, WriteNatsAuthorizationFile(f.auth, policy));
    (void)changed;
    std::ofstream c(f.config, std::ios::trunc);
    c << text;
    if (!c) return InternalError("cannot write " + f.config);
    files.push_back(f);
  }
  return files;
}

}  // namespace

int RunUp(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"workers"}, {"dir"}, {"nats-port"}, {"http-port"}, {"concurrency"}, {"sandbox"},
                          {"local-inputs", 0, true, true}, {"credentials"}, {"replicas"}})) {
    return UsageError("up", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos up [--workers N] [--dir DIR] [--concurrency N] [--sandbox auto|require|off]\n"
                 "                [--nats-port P] [--http-port P] [--local-inputs DIR]... [--credentials FILE]\n\n"
                 "Starts a local job plane on loopback and keeps it running until Ctrl-C:\n"
                 "nats-server with JetStream (store in DIR/nats), a ledger at DIR/ledger.git\n"
                 "(created on first use: gatosd init, a submitter key DIR/keys/submitter, N worker\n"
                 "keys, all allowed by its policy), gatosd serve with /metrics, and N workers.\n"
                 "Prints how to push a job. DIR defaults to ./gatos-local; N to 2. Writes\n"
                 "DIR/up.json (URLs, paths) once everything is ready. Ctrl-C or SIGTERM stops\n"
                 "workers, gatosd and nats-server in that order.\n\n"
                 "Git inputs (docs/inputs.md): workers fetch the repositories a job declares\n"
                 "and show them to it read-only. Local repositories (paths, file:// URLs) may\n"
                 "be inputs under each --local-inputs DIR (default: none; name the directories\n"
                 "that hold the repositories you want scanned). Workers fetch each in a sandbox\n"
                 "that sees only its git directory; DIR itself (keys, ledger, workers' state)\n"
                 "is never an input. --credentials FILE is passed to every worker: a token\n"
                 "file or SSH key per URL prefix for private remotes.\n\n"
                 "--replicas 3: a replicated ledger (docs/replication.md): a three-node NATS\n"
                 "cluster (JetStream, R3, only the policy's keys admitted), three gatosd\n"
                 "replicas (DIR/ledger.git and DIR/replica1.git, DIR/replica2.git) and the\n"
                 "workers. up.json lists each replica (name, pid, ledger, push). Kill the\n"
                 "leader and watch another take over (gatos cluster status); a replica that\n"
                 "exits is started again and follows.\n";
    return kExitOk;
  }
  int workers = 2, concurrency = 2, nats_port = 4222, http_port = 9464, replicas = 1;
  std::string sandbox = "auto";
  if (!flags.GetInt("workers", 1, 64, &workers) || !flags.GetInt("concurrency", 1, 256, &concurrency) ||
      !flags.GetInt("nats-port", 1, 65535, &nats_port) || !flags.GetInt("http-port", 1, 65535, &http_port) ||
      !flags.GetChoice("sandbox", {"auto", "require", "off"}, &sandbox) ||
      !flags.GetInt("replicas", 1, 3, &replicas)) {
    return UsageError("up", flags.error());
  }
  if (replicas == 2) return UsageError("up", "--replicas: 1 or 3");
  if (!flags.positional().empty()) {
    return UsageError("up", "unexpected argument '" + TruncateUtf8(flags.positional()[0], 64) + "' (see --help)");
  }
  std::error_code ec;
  fs::path dir = fs::absolute(flags.GetOr("dir", "gatos-local"), ec);
  fs::create_directories(dir / "keys", ec);
  fs::create_directories(dir / "logs", ec);
  if (ec) return ReportError("cannot create " + dir.string() + ": " + ec.message(), kExitFailure);
  std::string d = dir.string();
  fs::remove(d + "/up.json", ec);
  // The ledger, keys and workers' state: never a job's input.
  if (Status m = MarkPrivate(d); !m.ok()) return ReportError(m.message(), kExitFailure);
  std::vector<std::string> input_flags;
  for (const std::string& l : flags.GetAll("local-inputs")) {
    fs::path p = fs::absolute(l, ec);
    if (ec || !fs::is_directory(p, ec)) return UsageError("up", "--local-inputs " + l + ": not an existing directory");
    input_flags.insert(input_flags.end(), {"--local-inputs", p.string()});
  }
  if (auto creds = flags.Get("credentials")) {
    fs::path p = fs::absolute(*creds, ec);
    if (ec || !fs::is_regular_file(p, ec)) return UsageError("up", "--credentials " + *creds + ": not a readable file");
    input_flags.insert(input_flags.end(), {"--credentials", p.string()});
  }

  // SIGINT/SIGTERM only tell us to stop, so children are stopped in order.
  SignalWatcher signals;

  nats_port = PickPort(nats_port);
  http_port = PickPort(http_port);
  if (nats_port < 0 || http_port < 0) return ReportError("no free loopback port found", kExitFailure);
  std::string nats_url = "nats://127.0.0.1:" + std::to_string(nats_port);
  std::string setup_log = d + "/logs/setup.log";
  std::string ledger = d + "/ledger.git";

  if (!fs::exists(ledger + "/gatos/ledger_key")) {
    if (RunQuiet({Tool("gatosd"), "init", ledger}, setup_log) != 0) {
      return ReportError("gatosd init failed:\n" + Tail(setup_log), kExitFailure);
    }
    std::cerr << "gatos up: created ledger " << ledger << "\n";
  }
  std::string self = SelfDir() + "/gatos";
  auto ensure_key = [&](const std::string& path, const char* role) -> bool {
    if (!fs::exists(path)) {
      if (RunQuiet({self, "keygen", "-f", path, "-C", std::string("gatos-up ") + role}, setup_log) != 0) return false;
    }
    return RunQuiet({self, "policy", std::string("allow-") + role, "--ledger", ledger, path + ".pub"}, setup_log) == 0;
  };
  if (!ensure_key(d + "/keys/submitter", "submitter")) return ReportError("key setup failed:\n" + Tail(setup_log), kExitFailure);
  for (int i = 0; i < workers; ++i) {
    if (!ensure_key(d + "/keys/worker" + std::to_string(i), "worker")) {
      return ReportError("key setup failed:\n" + Tail(setup_log), kExitFailure);
    }
  }

  // Destroying `children` (any early return) SIGKILLs whatever still runs.
  std::vector<Child> children;
  auto fail = [&](const std::string& what, const Child& c) {
    std::cerr << "gatos up: " << what << "; last lines of " << c.log << ":\n" << Tail(c.log);
    StopAll(children);
    return kExitFailure;
  };
  // Starts a child and waits for `ready` in its log; false (reported) if it
  // cannot start, exits or is not ready in time.
  auto start = [&](const std::string& name, const std::vector<std::string>& argv, const std::string& log,
                   const std::string& ready, int ms) {
    size_t from = fs::exists(log) ? fs::file_size(log) : 0;
    Result<Process> p = Spawn(argv, log);
    if (!p.ok()) {
      std::cerr << "gatos up: " << p.status().message() << "\n";
      StopAll(children);
      return false;
    }
    children.push_back(Child{name, log, std::move(*p)});
    if (!WaitReady(children.back(), ready, ms, from)) {
      fail(name + " did not start", children.back());
      return false;
    }
    return true;
  };
  // NATS admits only the policy's keys: gatosd as the ledger key, each
  // worker as its own, the submitter as its own (gatos nats-config).
  // A replicated ledger: the replicas' repositories, a three-node cluster.
  std::vector<std::string> replica_dirs = {ledger};
  for (int r = 1; r < replicas; ++r) {
    std::string rd = d + "/replica" + std::to_string(r) + ".git";
    if (!fs::exists(rd + "/gatos/ledger_key")) {
      if (RunQuiet({Tool("gatosd"), "init", rd, "--replica-of", ledger, "--ledger-key", ledger + "/gatos/ledger_key"},
                   setup_log) != 0) {
        return ReportError("gatosd init --replica-of failed:\n" + Tail(setup_log), kExitFailure);
      }
    }
    replica_dirs.push_back(rd);
  }
  Result<NatsConfigFiles> nats_files = NatsConfigFiles{};
  if (replicas == 1) {
    nats_files = WriteNatsConfig(ledger, d + "/nats", "127.0.0.1", nats_port);
    if (!nats_files.ok()) return ReportError("nats configuration: " + nats_files.status().message(), kExitFailure);
    if (!start("nats-server", {"nats-server", "-c", nats_files->config}, d + "/logs/nats.log", "Server is ready",
               15000)) {
      return kExitFailure;
    }
    std::cerr << "gatos up: nats-server on " << nats_url << " (only the ledger's keys may connect)\n";
  } else {
    nats_url.clear();
    auto cluster = WriteNatsClusterConfigs(ledger, d + "/nats", nats_port, &nats_url);
    if (!cluster.ok()) return ReportError("nats configuration: " + cluster.status().message(), kExitFailure);
    for (size_t i = 0; i < cluster->size(); ++i) {
      const std::string n = "n" + std::to_string(i);
      if (!start("nats-server " + n, {"nats-server", "-c", (*cluster)[i].config}, d + "/logs/nats-" + n + ".log",
                 "Server is ready", 15000)) {
        return kExitFailure;
      }
    }
    nats_files = (*cluster)[0];
    std::cerr << "gatos up: a three-node NATS cluster on " << nats_url << " (only the ledger's keys may connect)\n";
  }

  if (replicas > 1) {
    for (int r = 0; r < replicas; ++r) {
      const std::string name = "r" + std::to_string(r);
      std::vector<std::string> argv = {Tool("gatosd"), "serve", "--replicated", "--replica-name", name, "--ledger",
                                       replica_dirs[r], "--nats", nats_url, "--stream-replicas", "3",
                                       "--http", "127.0.0.1:" + std::to_string(r == 0 ? http_port : PickPort(http_port + 10 * r)),
                                       "--require-nats-auth"};
      if (r == 0) argv.insert(argv.end(), {"--nats-auth-file", nats_files->auth, "--nats-pid-file", nats_files->pid});
      {
        std::ofstream saved(d + "/logs/" + name + ".argv", std::ios::trunc);  // to start it again
        for (const auto& a : argv) saved << a << "\n";
      }
      if (!start("gatosd " + name, argv, d + "/logs/gatosd-" + name + ".log", "replica " + name + " following",
                 60000)) {
        return kExitFailure;
      }
    }
    bool serving = false;
    for (int i = 0; i < 3000 && !serving; ++i) {
      for (int r = 0; r < replicas && !serving; ++r) serving = LogHas(d + "/logs/gatosd-r" + std::to_string(r) + ".log", "serving ledger");
      if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!serving) return fail("no replica leads", children.back());
    std::cerr << "gatos up: " << replicas << " gatosd replicas, one leading (gatos cluster status --ledger " << ledger
              << " --nats " << nats_url << ")\n";
  } else if (!start("gatosd",
             {Tool("gatosd"), "serve", "--ledger", ledger, "--nats", nats_url, "--http",
              "127.0.0.1:" + std::to_string(http_port), "--nats-auth-file", nats_files->auth, "--nats-pid-file",
              nats_files->pid, "--require-nats-auth"},
             d + "/logs/gatosd.log", "serving ledger", 30000)) {
    return kExitFailure;
  }
  if (replicas == 1) {
    std::cerr << "gatos up: gatosd serving " << ledger << ", metrics on http://127.0.0.1:" << http_port << "/metrics\n";
  }

  for (int i = 0; i < workers; ++i) {
    std::string name = "worker" + std::to_string(i);
    std::string log = d + "/logs/" + name + ".log";
    std::vector<std::string> argv = {Tool("gatos-worker"), "run", "--nats", nats_url, "--key", d + "/keys/" + name, "--ledger-key", ledger + "/gatos/ledger_key.pub", "--state-dir",
                d + "/" + name, "--name", name, "--concurrency", std::to_string(concurrency), "--sandbox", sandbox};
    argv.insert(argv.end(), input_flags.begin(), input_flags.end());
    if (!start("gatos-worker " + name, argv, log, " ready ", 30000)) {
      return kExitFailure;
    }
    if (LogHas(log, "UNSANDBOXED")) std::cerr << "gatos up: WARNING: " << name << " runs jobs unsandboxed (see its log)\n";
  }
  std::cerr << "gatos up: " << workers << " worker(s) running\n";

  // up.json; with replicas, rewritten when one is started again.
  auto write_up = [&] {
    nlohmann::json up = {{"nats_url", nats_url},
                         {"ledger", ledger},
                         {"push_url", LedgerPushPath(ledger)},
                         {"metrics", "http://127.0.0.1:" + std::to_string(http_port) + "/metrics"},
                         {"submitter_key", d + "/keys/submitter"},
                         {"logs", d + "/logs"},
                         {"pid", getpid()}};
    if (replicas > 1) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& c : children) {
        if (c.name.rfind("gatosd r", 0) != 0) continue;
        const int r = std::stoi(c.name.substr(8));
        list.push_back({{"name", c.name.substr(7)},
                        {"pid", c.proc.pid()},
                        {"ledger", replica_dirs[r]},
                        {"push", LedgerPushPath(replica_dirs[r])}});
      }
      up["replicas"] = list;
    }
    std::error_code wec;
    {
      std::ofstream out(d + "/up.json.tmp");
      out << up.dump(2) << "\n";
    }
    fs::rename(d + "/up.json.tmp", d + "/up.json", wec);
  };
  write_up();
  std::cout << "\nThe job plane is up. To run a job:\n\n"
            << "  gatos submit job.yaml --ledger " << nats_url << " --sign-key " << d << "/keys/submitter\n\n"
            << "or with stock git, in a repository holding job.yaml:\n\n"
            << "  git config gpg.format ssh && git config user.signingkey " << d << "/keys/submitter\n"
            << "  git add job.yaml && git commit -S -m 'my job' -m \"Job-Id: $(gatos job id job.yaml)\"\n"
            << "  git push " << LedgerPushPath(ledger) << " HEAD:refs/gatos/submit/my-job\n\n"
            << "then:  gatos wait JOB-ID --ledger " << ledger << "\n"
            << "       gatos ls --ledger " << ledger << "\n"
            << "(through NATS, commands that do not sign name a key: GATOS_NATS_KEY=" << d << "/keys/submitter)\n\n"
            << "Ctrl-C stops everything.\n"
            << std::flush;

  int rc = kExitOk;
  while (!signals.WaitFor(std::chrono::milliseconds(200))) {
    bool died = false;
    for (auto& c : children) {
      if (replicas > 1 && c.name.rfind("gatosd r", 0) == 0 && c.proc.pid() > 0 && !c.proc.running()) {
        // A replica that exits (killed to watch a failover) is started
        // again with the same arguments: it follows the new leader.
        std::cerr << "gatos up: " << c.name << " exited (" << c.proc.exit_status()->ToString()
                  << "); starting it again\n";
        std::ifstream cmd(d + "/logs/" + c.name.substr(7) + ".argv");
        std::vector<std::string> argv;
        for (std::string a; std::getline(cmd, a);) argv.push_back(a);
        Result<Process> p = Spawn(argv, c.log);
        if (p.ok()) c.proc = std::move(*p);
        write_up();
        continue;
      }
      if (c.proc.pid() > 0 && !c.proc.running()) {
        std::cerr << "gatos up: " << c.name << " exited unexpectedly (" << c.proc.exit_status()->ToString()
                  << "); last lines of " << c.log << ":\n"
                  << Tail(c.log);
        died = true;
      }
    }
    if (died) {
      rc = kExitFailure;
      break;
    }
  }
  if (signals.stopped()) {
    std::cerr << "\ngatos up: " << (signals.signal() == SIGINT ? "Ctrl-C" : "SIGTERM") << ": stopping\n";
  }
  StopAll(children);
  fs::remove(d + "/up.json", ec);
  return rc;
}

}  // namespace gatos::cli
