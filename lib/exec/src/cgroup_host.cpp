// Finding the cgroup hierarchy a worker may make job cgroups in
// (gatos/exec/job_cgroup.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cgroup_files.h"
#include "gatos/exec/job_cgroup.h"

namespace gatos {
namespace {

using namespace ::gatos::exec_internal;  // NOLINT: the file helpers

struct Mount {
  std::string root;   // the mount's root within its hierarchy
  std::string point;  // where it is mounted
  std::string type;   // cgroup or cgroup2
  std::string options;
};

std::vector<Mount> CgroupMounts() {
  std::vector<Mount> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root point options [optional...] - type source superoptions
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 1 == f.end()) continue;
    const std::string& type = *(dash + 1);
    if (type != "cgroup" && type != "cgroup2") continue;
    out.push_back({f[3], f[4], type, dash + 3 < f.end() ? *(dash + 3) : ""});
  }
  return out;
}

// controller list ("memory", "cpu,cpuacct", "" for v2) -> path, from /proc/self/cgroup.
std::vector<std::pair<std::string, std::string>> OwnCgroups() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    out.push_back({line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return out;
}

bool HasOption(const std::string& options, const std::string& name) {
  std::istringstream s(options);
  std::string o;
  while (std::getline(s, o, ',')) {
    if (o == name) return true;
  }
  return false;
}

// The directory of our own cgroup in a hierarchy mounted at `m`.
std::string OwnDir(const Mount& m, std::string path) {
  if (m.root != "/" && path.compare(0, m.root.size(), m.root) == 0)
    path = path.substr(m.root.size());
  if (path == "/") path.clear();
  return m.point + path;
}

// Our own cgroup's directory in every hierarchy that has memory, pids or
// cpu (v1), and in the unified one (v2).
std::vector<std::string> OwnDirs() {
  std::vector<std::string> out;
  const auto own = OwnCgroups();
  for (const Mount& m : CgroupMounts()) {
    for (const auto& [list, path] : own) {
      const bool match = m.type == "cgroup2" ? list.empty()
                                             : !list.empty() && (HasOption(m.options, "memory") ||
                                                                 HasOption(m.options, "pids") ||
                                                                 HasOption(m.options, "cpu"));
      if (!match) continue;
      // v1: the line of /proc/self/cgroup whose controllers this mount has.
      if (m.type == "cgroup") {
        std::istringstream cs(list);
        std::string c;
        bool mine = false;
        while (std::getline(cs, c, ',')) mine |= HasOption(m.options, c);
        if (!mine) continue;
      }
      const std::string d = OwnDir(m, path);
      if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    }
  }
  return out;
}

}  // namespace

void CgroupHost::RemoveStale(const std::string& prefix) {
  for (const std::string& parent : OwnDirs()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
      const std::string n = e.path().filename().string();
      if (n.size() <= prefix.size() + 1 || n.compare(0, prefix.size() + 1, prefix + "-") != 0)
        continue;
      const std::string digits = n.substr(prefix.size() + 1);
      if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const pid_t pid = static_cast<pid_t>(std::stol(digits));
      if (kill(pid, 0) == 0 || errno != ESRCH)
        continue;  // its process lives (or is not ours to judge)
      RemoveCgroupTree(e.path().string());
    }
  }
}

std::shared_ptr<CgroupHost> CgroupHost::Open(const std::string& name) {
  std::shared_ptr<CgroupHost> h(new CgroupHost());
  const std::vector<Mount> mounts = CgroupMounts();
  const auto own = OwnCgroups();
  auto own_path = [&](const std::string& controller) -> std::string {
    for (const auto& [list, path] : own) {
      if (controller.empty() ? list.empty() : HasOption(list, controller)) return path;
    }
    return "";
  };
  auto make = [&](const std::string& parent, std::string* dst, const char* what) {
    std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      h->problems_.push_back(std::string(what) + ": cannot create " + dir + ": " +
                             std::strerror(errno) +
                             "; run the worker as root or in a cgroup delegated to it "
                             "(systemd: Delegate=yes in its unit)");
      return;
    }
    *dst = dir;
  };

  // cgroup v2 first: the unified hierarchy, with the controllers we need.
  for (const Mount& m : mounts) {
    if (m.type != "cgroup2") continue;
    const std::string own_dir = OwnDir(m, own_path(""));
    std::string controllers;
    if (!ReadSmallFile(own_dir + "/cgroup.controllers", &controllers)) continue;
    std::istringstream cs(controllers);
    std::vector<std::string> have;
    std::string c;
    while (cs >> c) have.push_back(c);
    auto has = [&](const char* x) { return std::find(have.begin(), have.end(), x) != have.end(); };
    if (!has("memory") && !has("pids") && !has("cpu")) continue;  // hybrid: controllers are v1's
    h->version_ = Version::kV2;
    // "No internal processes": the controllers can be given to children
    // only of a cgroup without processes of its own. If ours has (this
    // worker), the worker moves into a leaf of its own first.
    std::string enable;
    for (const char* x : {"memory", "pids", "cpu"}) {
      if (has(x)) enable += std::string(enable.empty() ? "" : " ") + "+" + x;
    }
    if (WriteSmallFile(own_dir + "/cgroup.subtree_control", enable) == EBUSY) {
      const std::string leaf = own_dir + "/" + name + "-worker";
      if (mkdir(leaf.c_str(), 0755) == 0 || errno == EEXIST) {
        WriteSmallFile(leaf + "/cgroup.procs", "0");
      }
      WriteSmallFile(own_dir + "/cgroup.subtree_control", enable);
    }
    std::string dir;
    make(own_dir, &dir, "cgroup v2");
    if (dir.empty()) return h;
    if (int e = WriteSmallFile(dir + "/cgroup.subtree_control", enable)) {
      h->problems_.push_back("cgroup v2: cannot enable " + enable + " in " + dir + ": " +
                             std::strerror(e) +
                             "; the worker's cgroup must be delegated to it (Delegate=yes)");
      rmdir(dir.c_str());
      return h;
    }
    if (has("memory")) h->memory_dir_ = dir;
    if (has("pids")) h->pids_dir_ = dir;
    if (has("cpu")) h->cpu_dir_ = dir;
    for (const char* x : {"memory", "pids", "cpu"}) {
      if (!has(x)) {
        h->problems_.push_back(std::string(x) + ": the cgroup v2 controller is not available in " +
                               own_dir +
                               " (cgroup.controllers); enable it in the parent's "
                               "cgroup.subtree_control");
      }
    }
    return h;
  }

  // cgroup v1: one hierarchy per controller (cpu may share one with cpuacct).
  struct Want {
    const char* controller;
    std::string* dst;
  };
  for (Want w :
       {Want{"memory", &h->memory_dir_}, Want{"pids", &h->pids_dir_}, Want{"cpu", &h->cpu_dir_}}) {
    const Mount* found = nullptr;
    for (const Mount& m : mounts) {
      if (m.type == "cgroup" && HasOption(m.options, w.controller)) found = &m;
    }
    if (!found) {
      h->problems_.push_back(std::string(w.controller) +
                             ": no cgroup hierarchy has this controller (neither cgroup v2 nor "
                             "v1 mounts it)");
      continue;
    }
    const std::string own_dir = OwnDir(*found, own_path(w.controller));
    make(own_dir, w.dst, w.controller);
  }
  if (!h->memory_dir_.empty() || !h->pids_dir_.empty() || !h->cpu_dir_.empty()) {
    h->version_ = Version::kV1;
  }
  return h;
}

CgroupHost::~CgroupHost() {
  for (const std::string* d : {&memory_dir_, &pids_dir_, &cpu_dir_}) {
    if (!d->empty()) RemoveCgroupTree(*d);  // ENOENT for the second of a shared one: fine
  }
}

std::string CgroupHost::Describe() const {
  if (version_ == Version::kNone) {
    std::string why;
    for (const auto& p : problems_) why += (why.empty() ? "" : "; ") + p;
    return "no cgroup: memory, process and CPU limits are not enforced (" + why + ")";
  }
  std::string what;
  for (auto [ok, n] :
       {std::pair{memory(), "memory"}, std::pair{pids(), "pids"}, std::pair{cpu(), "cpu"}}) {
    if (ok) what += std::string(what.empty() ? "" : ", ") + n;
  }
  std::string out = std::string(version_ == Version::kV2 ? "cgroup v2" : "cgroup v1") + " (" +
                    what + ") under " +
                    (memory() ? memory_dir_
                     : pids() ? pids_dir_
                              : cpu_dir_);
  for (const auto& p : problems_) out += "; " + p;
  return out;
}

std::vector<std::string> CgroupHost::UnenforcedWithout(const JobLimits& want) {
  std::vector<std::string> out;
  if (want.cpu_millis > 0) out.push_back("cpu");
  if (want.memory_mb > 0) out.push_back("memory");
  if (want.pids > 0) out.push_back("pids");
  return out;
}

std::vector<std::string> CgroupHost::Unenforced(const JobLimits& want) const {
  std::vector<std::string> out;
  if (want.cpu_millis > 0 && !cpu()) out.push_back("cpu");
  if (want.memory_mb > 0 && !memory()) out.push_back("memory");
  if (want.pids > 0 && !pids()) out.push_back("pids");
  return out;
}

}  // namespace gatos
