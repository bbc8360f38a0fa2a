// Per-job process and sandbox cost of gatos_exec: jobs/s and CPU per job for
// Execution::Start (one gatos-supervise per job, bubblewrap per job) and
// JobLauncher (long-lived slots, namespace sandbox), sandboxed or not, at
// concurrency 1 and 2; then what bubblewrap's steps cost one by one. Prints
// figures; never passes or fails. Run as the worker would run (root here).
//
//   exec_bench [--jobs N] [--rounds R] [--steps-only] [--paths-only]
//              [--path perjob|launcher] [--sandbox 0|1] [--shell 0|1] [--conc N]
// (the last four restrict the first table, e.g. to profile one case)
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gatos/exec/exec.h"
#include "cpu_clock.h"

namespace {

using gatos::ExecSpec;
namespace fs = std::filesystem;

using gatos::bench::MachineCpuMs;
using gatos::bench::Median;
using gatos::bench::MonoMs;
using gatos::bench::TreeCpuMs;


struct Figures {
  double jobs_per_s = 0, tree_cpu_ms = 0, machine_cpu_ms = 0;
};

enum class Path { kPerJob, kLauncher };

// Runs `jobs` jobs on `threads` threads; each thread has its own workspace.
Figures RunJobs(Path path, bool sandboxed, bool shell, int threads, int jobs, const std::string& dir) {
  std::unique_ptr<gatos::JobLauncher> launcher;
  double tree0 = TreeCpuMs(), machine0 = MachineCpuMs();
  int warm = 0;
  if (path == Path::kLauncher) {
    auto l = gatos::JobLauncher::Create();
    if (!l.ok()) {
      std::fprintf(stderr, "launcher: %s\n", l.status().ToString().c_str());
      std::exit(1);
    }
    launcher = std::move(*l);
  }
  auto make_spec = [&](int t, int i) {
    ExecSpec s;
    std::string ws = dir + "/t" + std::to_string(t);
    s.workspace = ws + "/work";
    s.output_dir = ws + "/out";
    if (shell) {
      s.argv = {"/bin/sh", "-c", "echo " + std::to_string(i) + " >> file"};
    } else {
      s.argv = {"/bin/true"};
    }
    s.sandbox = sandboxed ? ExecSpec::Sandbox::kRequire : ExecSpec::Sandbox::kOff;
    s.timeout_ms = 60000;
    s.extra_env = {{"GATOS_JOB_ID", "blake3:bench"}};
    return s;
  };
  auto run_one = [&](const ExecSpec& s) {
    auto ex = launcher ? launcher->Start(s) : gatos::Execution::Start(s);
    if (!ex.ok()) {
      std::fprintf(stderr, "start: %s\n", ex.status().ToString().c_str());
      std::exit(1);
    }
    auto r = (*ex)->Wait();
    if (!r.ok() || r->exit_code != 0) {
      std::fprintf(stderr, "job failed: %s %s\n", r.status().ToString().c_str(),
                   r.ok() ? r->stderr_data.c_str() : "");
      std::exit(1);
    }
  };
  for (int t = 0; t < threads; ++t) fs::create_directories(dir + "/t" + std::to_string(t) + "/work");
  // Warm-up: one job per thread at once (starts the launcher's slots).
  {
    std::vector<std::thread> ws;
    for (int t = 0; t < threads; ++t) ws.emplace_back([&, t] { run_one(make_spec(t, 0)); });
    for (auto& w : ws) w.join();
    warm = threads;
  }
  double t0 = MonoMs();
  std::vector<std::thread> ws;
  for (int t = 0; t < threads; ++t) {
    ws.emplace_back([&, t] {
      for (int i = t; i < jobs; i += threads) run_one(make_spec(t, i));
    });
  }
  for (auto& w : ws) w.join();
  double wall = MonoMs() - t0;
  launcher.reset();  // reaps the slots, so that their CPU is counted
  Figures f;
  f.jobs_per_s = jobs / (wall / 1e3);
  f.tree_cpu_ms = (TreeCpuMs() - tree0) / (jobs + warm);
  f.machine_cpu_ms = (MachineCpuMs() - machine0) / (jobs + warm);
  return f;
}

// ---------------------------------------------------------------------------
// bubblewrap's steps, one at a time. Each iteration forks a child that does
// the step and exits (so namespaces are also torn down); the figure is the
// CPU of the children and of the machine per iteration, minus nothing: the
// first row (fork + exit) is the baseline to subtract.

struct StepFigures {
  double wall_ms, tree_cpu_ms, machine_cpu_ms;
};

StepFigures Measure(int iters, const std::function<int()>& child) {
  double tree0 = TreeCpuMs(), machine0 = MachineCpuMs(), t0 = MonoMs();
  for (int i = 0; i < iters; ++i) {
    pid_t p = fork();
    if (p == 0) _exit(child());
    int st;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::fprintf(stderr, "step failed (status %d)\n", st);
      std::exit(1);
    }
  }
  return {(MonoMs() - t0) / iters, (TreeCpuMs() - tree0) / iters,
          (MachineCpuMs() - machine0) / iters};
}

int RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t p = vfork();
  if (p == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execv(a[0], a.data());
    _exit(127);
  }
  int st;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool Bind(const std::string& src, const std::string& dst, bool dir, unsigned long flags) {
  if (dir) {
    fs::create_directories(dst);
  } else {
    int fd = open(dst.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
  }
  return mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
         mount("none", dst.c_str(), nullptr, MS_REMOUNT | MS_BIND | flags, nullptr) == 0;
}

// bubblewrap's default layout for a job (what Execution::Start asks of it),
// done in the current process: tmpfs root, /usr, links, /etc files, /proc,
// /dev, /tmp, workspace and output binds, then the pivot.
int BwrapMounts(const std::string& ws) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return 10;
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, nullptr) != 0) return 11;
  if (chdir("/tmp") != 0) return 12;
  mkdir("newroot", 0755);
  mkdir("oldroot", 0755);
  if (mount("newroot", "newroot", nullptr, MS_BIND | MS_REC, nullptr) != 0) return 13;
  if (syscall(SYS_pivot_root, "/tmp", "oldroot") != 0) return 14;
  const unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (!Bind("/oldroot/usr", "/newroot/usr", true, ro)) return 15;
  for (const char* d : {"bin", "sbin", "lib", "lib64"}) {
    if (symlink((std::string("usr/") + d).c_str(), (std::string("/newroot/") + d).c_str()) != 0) return 16;
  }
  mkdir("/newroot/etc", 0755);
  for (const char* e : {"passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf",
                        "ld.so.conf.d", "alternatives", "localtime", "ssl", "ca-certificates",
                        "mime.types"}) {
    std::string s = std::string("/oldroot/etc/") + e;
    struct stat st;
    if (stat(s.c_str(), &st) != 0) continue;
    if (!Bind(s, std::string("/newroot/etc/") + e, S_ISDIR(st.st_mode), ro)) return 17;
  }
  mkdir("/newroot/proc", 0755);
  if (mount("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return 18;
  for (const char* c : {"sys", "irq", "bus"}) {
    std::string p = std::string("/newroot/proc/") + c;
    if (!Bind(p, p, true, ro | MS_NOEXEC)) return 19;
  }
  mkdir("/newroot/dev", 0755);
  if (mount("tmpfs", "/newroot/dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return 20;
  for (const char* d : {"null", "zero", "full", "random", "urandom", "tty"}) {
    if (!Bind(std::string("/oldroot/dev/") + d, std::string("/newroot/dev/") + d, false, MS_NOSUID)) return 21;
  }
  mkdir("/newroot/dev/shm", 0755);
  mkdir("/newroot/dev/pts", 0755);
  if (mount("devpts", "/newroot/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=620") != 0) {
    return 22;
  }
  mkdir("/newroot/tmp", 0755);
  if (mount("tmpfs", "/newroot/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return 23;
  if (!Bind("/oldroot" + ws + "/work", "/newroot" + ws + "/work", true, MS_NOSUID | MS_NODEV)) return 24;
  if (!Bind("/oldroot" + ws + "/out", "/newroot" + ws + "/out", true, MS_NOSUID | MS_NODEV)) return 25;
  if (umount2("/oldroot", MNT_DETACH) != 0) return 26;
  if (chdir("/newroot") != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0) {
    return 27;
  }
  return 0;
}

void Steps(int iters, int rounds, const std::string& dir, const std::string& supervise) {
  std::printf("\n## bubblewrap's steps, one at a time (median of %d rounds of %d iterations)\n\n",
              rounds, iters);
  std::printf("Each iteration forks a child that does the step and exits; subtract the first row.\n\n");
  std::printf("| step | wall ms | CPU ms (tree) | CPU ms (machine) |\n|---|---|---|---|\n");
  struct Step {
    std::string name;
    std::function<int()> child;
    std::vector<double> wall, tree, machine;
  };
  std::vector<Step> list;
  auto add = [&](std::string name, std::function<int()> fn) { list.push_back({std::move(name), std::move(fn), {}, {}, {}}); };
  add("fork + exit (baseline)", [] { return 0; });
  struct Ns {
    const char* name;
    int flag;
  };
  for (Ns ns : {Ns{"+ user namespace", CLONE_NEWUSER}, Ns{"+ PID namespace", CLONE_NEWPID},
                Ns{"+ network namespace", CLONE_NEWNET}, Ns{"+ IPC namespace", CLONE_NEWIPC},
                Ns{"+ UTS namespace", CLONE_NEWUTS}, Ns{"+ cgroup namespace", CLONE_NEWCGROUP},
                Ns{"+ mount namespace", CLONE_NEWNS},
                Ns{"+ all of bwrap's (--unshare-all)", CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                                           CLONE_NEWIPC | CLONE_NEWUTS |
                                                           CLONE_NEWCGROUP | CLONE_NEWNS},
                Ns{"+ the same but network", CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC |
                                                 CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNS}}) {
    add(ns.name, [flag = ns.flag] { return unshare(flag) == 0 ? 0 : 1; });
  }
  std::string ws = dir + "/t0";
  fs::create_directories(ws + "/work");
  fs::create_directories(ws + "/out");
  add("+ mount namespace and bwrap's mounts (~60 mount calls, 2 pivots)",
      [ws] { return unshare(CLONE_NEWNS) == 0 ? BwrapMounts(ws) : 1; });
  add("+ one more fork (bwrap's init forks the job)", [] {
    pid_t p = fork();
    if (p == 0) _exit(0);
    int st;
    return waitpid(p, &st, 0) == p ? 0 : 1;
  });
  add("+ vfork + exec /bin/true (one process start)", [] { return RunProgram({"/bin/true"}); });
  add("+ vfork + exec bwrap --version (bwrap's own start)",
      [] { return RunProgram({"/usr/bin/bwrap", "--version"}); });
  if (!supervise.empty()) {
    add("+ vfork + exec gatos-supervise (exits at once)",
        [supervise] { return RunProgram({supervise, "--version-check"}) == 2 ? 0 : 1; });
  }
  std::vector<std::string> bw = {"/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                                 "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"};
  for (const char* d : {"bin", "sbin", "lib", "lib64"}) {
    bw.insert(bw.end(), {"--symlink", std::string("usr/") + d, std::string("/") + d});
  }
  for (const char* e : {"passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf",
                        "ld.so.conf.d", "alternatives", "localtime", "ssl", "ca-certificates",
                        "mime.types"}) {
    bw.insert(bw.end(), {"--ro-bind-try", std::string("/etc/") + e, std::string("/etc/") + e});
  }
  bw.insert(bw.end(), {"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev",
                       "--tmpfs", "/tmp", "--bind", ws + "/work", ws + "/work", "--bind", ws + "/out",
                       ws + "/out", "--chdir", ws + "/work", "--", "/bin/true"});
  add("+ vfork + exec of the whole bwrap ... /bin/true, as Execution::Start runs it",
      [bw] { return RunProgram(bw); });
  for (int r = 0; r < rounds; ++r) {
    for (auto& st : list) {
      StepFigures f = Measure(iters, st.child);
      st.wall.push_back(f.wall_ms);
      st.tree.push_back(f.tree_cpu_ms);
      st.machine.push_back(f.machine_cpu_ms);
    }
  }
  for (auto& st : list) {
    std::printf("| %s | %.3f | %.3f | %.3f |\n", st.name.c_str(), Median(st.wall), Median(st.tree),
                Median(st.machine));
  }
  std::fflush(stdout);
}

std::string Machine() {
  std::string model;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname u;
  uname(&u);
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, Linux " + u.release +
         (getuid() == 0 ? ", as root" : ", as uid " + std::to_string(getuid()));
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 500, rounds = 3;
  bool steps = true, paths = true;
  std::string only_path, only_sandbox, only_shell, only_conc;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) {
      jobs = std::atoi(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--path" && i + 1 < argc) {
      only_path = argv[++i];
    } else if (a == "--sandbox" && i + 1 < argc) {
      only_sandbox = argv[++i];
    } else if (a == "--shell" && i + 1 < argc) {
      only_shell = argv[++i];
    } else if (a == "--conc" && i + 1 < argc) {
      only_conc = argv[++i];
    } else if (a == "--steps-only") {
      paths = false;
    } else if (a == "--paths-only") {
      steps = false;
    } else {
      std::fprintf(stderr,
                   "usage: exec_bench [--jobs N] [--rounds R] [--steps-only|--paths-only]\n"
                   "                  [--path perjob|launcher] [--sandbox 0|1] [--shell 0|1] [--conc N]\n");
      return 2;
    }
  }
  std::string dir = fs::temp_directory_path() / ("gatos-exec-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("# exec_bench: %s\n", Machine().c_str());
  double load[3];
  if (getloadavg(load, 3) == 3) std::printf("load average at start: %.2f %.2f %.2f\n", load[0], load[1], load[2]);

  if (paths) {
    std::printf("\n## jobs/s and CPU per job (%d jobs, median of %d rounds)\n\n", jobs, rounds);
    std::printf("CPU (tree): this process, its supervisors and jobs. CPU (machine): all cores,\n"
                "kernel threads included (namespace teardown runs there), and anything else running.\n\n");
    std::printf("| command | path | sandbox | conc | jobs/s | CPU ms/job (tree) | CPU ms/job (machine) |\n"
                "|---|---|---|---|---|---|---|\n");
    struct Config {
      bool shell, sandboxed;
      Path path;
      int conc;
      std::vector<double> rate, tree, machine;
    };
    std::vector<Config> configs;
    for (bool shell : {false, true}) {
      for (bool sandboxed : {false, true}) {
        for (Path path : {Path::kPerJob, Path::kLauncher}) {
          for (int conc : {1, 2}) {
            if ((!only_path.empty() && only_path != (path == Path::kPerJob ? "perjob" : "launcher")) ||
                (!only_sandbox.empty() && only_sandbox != (sandboxed ? "1" : "0")) ||
                (!only_shell.empty() && only_shell != (shell ? "1" : "0")) ||
                (!only_conc.empty() && only_conc != std::to_string(conc))) {
              continue;
            }
            configs.push_back({shell, sandboxed, path, conc, {}, {}, {}});
          }
        }
      }
    }
    // Round-robin, so that a change in the machine's load hits every case alike.
    for (int r = 0; r < rounds; ++r) {
      for (auto& c : configs) {
        Figures f = RunJobs(c.path, c.sandboxed, c.shell, c.conc, jobs, dir);
        c.rate.push_back(f.jobs_per_s);
        c.tree.push_back(f.tree_cpu_ms);
        c.machine.push_back(f.machine_cpu_ms);
      }
    }
    for (auto& c : configs) {
      std::printf("| %s | %s | %s | %d | %.0f | %.2f | %.2f |\n",
                  c.shell ? "`sh -c 'echo N >> file'`" : "`/bin/true`",
                  c.path == Path::kPerJob ? "Execution::Start" : "JobLauncher",
                  !c.sandboxed ? "none" : c.path == Path::kPerJob ? "bwrap" : "namespaces", c.conc,
                  Median(c.rate), Median(c.tree), Median(c.machine));
    }
    std::fflush(stdout);
  }
  if (steps) {
    std::string supervise;
    std::error_code ec;
    fs::path self = fs::canonical("/proc/self/exe", ec);
    for (fs::path p : {self.parent_path() / "gatos-supervise", self.parent_path().parent_path() / "bin/gatos-supervise"}) {
      if (access(p.c_str(), X_OK) == 0) {
        supervise = p.string();
        break;
      }
    }
    Steps(std::max(20, jobs / 5), std::max(rounds, 3), dir, supervise);
  }
  if (getloadavg(load, 3) == 3) std::printf("\nload average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
