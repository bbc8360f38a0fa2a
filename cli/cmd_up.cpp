// gatos up: a whole local stack on loopback in one command.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
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
#include "flags.h"
#include "gatos/keys.h"

extern char** environ;

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
  pid_t pid = -1;
  std::string log;
};

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Children die with us even if we are SIGKILLed.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(125);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setpgid(0, 0);  // Ctrl-C reaches us only; we stop children in order
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

int RunQuiet(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = Spawn(argv, log);
  if (pid < 0) return -1;
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

bool WaitReady(Child& c, const std::string& needle, int ms, size_t from = 0) {
  for (int i = 0; i < ms / 20; ++i) {
    std::ifstream in(c.log);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.size() > from && s.find(needle, from) != std::string::npos) return true;
    int st;
    if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
      c.pid = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void StopAll(std::vector<Child>& children) {
  // Workers first (they finish or abandon their jobs), then gatosd, then NATS.
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    if (it->pid <= 0) continue;
    kill(it->pid, SIGTERM);
    for (int i = 0; i < 750; ++i) {  // 15 s
      int st;
      if (waitpid(it->pid, &st, WNOHANG) == it->pid) {
        it->pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (it->pid > 0) {
      kill(it->pid, SIGKILL);
      waitpid(it->pid, nullptr, 0);
      it->pid = -1;
    }
    std::cerr << "gatos up: stopped " << it->name << "\n";
  }
}

}  // namespace

int RunUp(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"workers"}, {"dir"}, {"nats-port"}, {"http-port"}, {"concurrency"}, {"sandbox"}})) {
    return UsageError("up", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos up [--workers N] [--dir DIR] [--concurrency N] [--sandbox auto|require|off]\n"
                 "                [--nats-port P] [--http-port P]\n\n"
                 "Starts a local job plane on loopback and keeps it running until Ctrl-C:\n"
                 "nats-server with JetStream (store in DIR/nats), a ledger at DIR/ledger.git\n"
                 "(created on first use: gatosd init, a submitter key DIR/keys/submitter, N worker\n"
                 "keys, all allowed by its policy), gatosd serve with /metrics, and N workers.\n"
                 "Prints how to push a job. DIR defaults to ./gatos-local; N to 2. Writes\n"
                 "DIR/up.json (URLs, paths) once everything is ready. Ctrl-C or SIGTERM stops\n"
                 "workers, gatosd and nats-server in that order.\n";
    return kExitOk;
  }
  int workers = std::atoi(flags.GetOr("workers", "2").c_str());
  if (workers < 1 || workers > 64) return UsageError("up", "--workers must be 1..64");
  std::string concurrency = flags.GetOr("concurrency", "2");
  std::string sandbox = flags.GetOr("sandbox", "auto");
  std::error_code ec;
  fs::path dir = fs::absolute(flags.GetOr("dir", "gatos-local"), ec);
  fs::create_directories(dir / "keys", ec);
  fs::create_directories(dir / "logs", ec);
  if (ec) return ReportError("cannot create " + dir.string() + ": " + ec.message(), kExitFailure);
  std::string d = dir.string();
  fs::remove(d + "/up.json", ec);

  // Only this thread takes SIGINT/SIGTERM, so children are stopped in order.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, nullptr);

  int nats_port = PickPort(std::atoi(flags.GetOr("nats-port", "4222").c_str()));
  int http_port = PickPort(std::atoi(flags.GetOr("http-port", "9464").c_str()));
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

  std::vector<Child> children;
  auto fail = [&](const std::string& what, const Child& c) {
    std::cerr << "gatos up: " << what << "; last lines of " << c.log << ":\n" << Tail(c.log);
    StopAll(children);
    return kExitFailure;
  };
  {
    std::ofstream conf(d + "/nats.conf");
    conf << "# written by gatos up\nmax_payload: 8388608\n";
  }
  Child nats{"nats-server", -1, d + "/logs/nats.log"};
  size_t from = fs::exists(nats.log) ? fs::file_size(nats.log) : 0;
  nats.pid = Spawn({"nats-server", "-js", "-a", "127.0.0.1", "-p", std::to_string(nats_port), "-sd", d + "/nats",
                    "-c", d + "/nats.conf"},
                   nats.log);
  children.push_back(nats);
  if (!WaitReady(children.back(), "Server is ready", 15000, from)) return fail("nats-server did not start", children.back());
  std::cerr << "gatos up: nats-server on " << nats_url << "\n";

  Child gatosd{"gatosd", -1, d + "/logs/gatosd.log"};
  from = fs::exists(gatosd.log) ? fs::file_size(gatosd.log) : 0;
  gatosd.pid = Spawn({Tool("gatosd"), "serve", "--ledger", ledger, "--nats", nats_url, "--http",
                      "127.0.0.1:" + std::to_string(http_port)},
                     gatosd.log);
  children.push_back(gatosd);
  if (!WaitReady(children.back(), "serving ledger", 30000, from)) return fail("gatosd did not start", children.back());
  std::cerr << "gatos up: gatosd serving " << ledger << ", metrics on http://127.0.0.1:" << http_port << "/metrics\n";

  for (int i = 0; i < workers; ++i) {
    std::string name = "worker" + std::to_string(i);
    Child w{"gatos-worker " + name, -1, d + "/logs/" + name + ".log"};
    from = fs::exists(w.log) ? fs::file_size(w.log) : 0;
    w.pid = Spawn({Tool("gatos-worker"), "run", "--nats", nats_url, "--key", d + "/keys/" + name, "--state-dir",
                   d + "/" + name, "--name", name, "--concurrency", concurrency, "--sandbox", sandbox},
                  w.log);
    children.push_back(w);
    if (!WaitReady(children.back(), " ready ", 30000, from)) return fail(name + " did not start", children.back());
    if (LogHas(w.log, "UNSANDBOXED")) std::cerr << "gatos up: WARNING: " << name << " runs jobs unsandboxed (see its log)\n";
  }
  std::cerr << "gatos up: " << workers << " worker(s) running\n";

  nlohmann::json up = {{"nats_url", nats_url},
                       {"ledger", ledger},
                       {"metrics", "http://127.0.0.1:" + std::to_string(http_port) + "/metrics"},
                       {"submitter_key", d + "/keys/submitter"},
                       {"logs", d + "/logs"},
                       {"pid", getpid()}};
  {
    std::ofstream out(d + "/up.json.tmp");
    out << up.dump(2) << "\n";
  }
  fs::rename(d + "/up.json.tmp", d + "/up.json", ec);
  std::cout << "\nThe job plane is up. To run a job:\n\n"
            << "  gatos submit job.yaml --ledger " << nats_url << " --sign-key " << d << "/keys/submitter\n\n"
            << "or with stock git, in a repository holding job.yaml:\n\n"
            << "  git config gpg.format ssh && git config user.signingkey " << d << "/keys/submitter\n"
            << "  git add job.yaml && git commit -S -m 'my job' -m \"Job-Id: $(gatos job id job.yaml)\"\n"
            << "  git push " << ledger << " HEAD:refs/gatos/submit/my-job\n\n"
            << "then:  gatos wait JOB-ID --ledger " << nats_url << "\n"
            << "       gatos ls --ledger " << nats_url << "\n\n"
            << "Ctrl-C stops everything.\n"
            << std::flush;

  int rc = kExitOk;
  while (true) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGCHLD) {
      bool died = false;
      for (auto& c : children) {
        int st;
        if (c.pid > 0 && waitpid(c.pid, &st, WNOHANG) == c.pid) {
          c.pid = -1;
          std::cerr << "gatos up: " << c.name << " exited unexpectedly; last lines of " << c.log << ":\n"
                    << Tail(c.log);
          died = true;
        }
      }
      if (!died) continue;
      rc = kExitFailure;
      break;
    }
    std::cerr << "\ngatos up: " << (sig == SIGINT ? "Ctrl-C" : "SIGTERM") << ": stopping\n";
    break;
  }
  StopAll(children);
  fs::remove(d + "/up.json", ec);
  return rc;
}

}  // namespace gatos::cli
