#include "netns_lab.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

namespace gatos::testing {
namespace {

constexpr char kLabPrefix[] = "gatoslab-";
constexpr char kSubnet[] = "10.213.0.";

std::atomic<int> lab_counter{0};

std::vector<std::string> ListNamespaces() {
  std::vector<std::string> out;
  DIR* d = opendir("/run/netns");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kLabPrefix, 0) == 0) out.push_back(name);
  }
  closedir(d);
  return out;
}

void DeleteNamespace(const std::string& name) {
  RunOptions ro;
  ro.timeout_seconds = 30;
  Run({"ip", "netns", "delete", name}, ro);
}

// Connects from inside the namespace `ns`: a thread of its own enters it
// (setns changes only the calling thread), so the test process stays put.
bool ConnectFrom(const std::string& ns, const std::string& addr, int port, int timeout_ms) {
  bool ok = false;
  std::thread t([&] {
    int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) return;
    int rc = setns(nsfd, CLONE_NEWNET);
    close(nsfd);
    if (rc != 0) return;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
      close(fd);
      return;
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, timeout_ms) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    close(fd);
  });
  t.join();
  return ok;
}

}  // namespace

NetLab::NetLab(std::vector<std::string> hosts) : hosts_(std::move(hosts)) {
  prefix_ = std::string(kLabPrefix) + std::to_string(getpid()) + "-" + std::to_string(lab_counter++) + "-";
  switch_ns_ = prefix_ + "switch";
}

NetLab::~NetLab() {
  // Deleting a namespace takes its veth ends (and so the peers) with it.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) DeleteNamespace(*it);
}

void NetLab::RemoveStaleLabs() {
  for (const auto& name : ListNamespaces()) {
    // gatoslab-<pid>-<n>-<host>
    size_t start = sizeof(kLabPrefix) - 1;
    size_t dash = name.find('-', start);
    if (dash == std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::atoi(name.substr(start, dash - start).c_str()));
    if (pid <= 0 || pid == getpid()) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its test still runs
    DeleteNamespace(name);
  }
}

int NetLab::Index(const std::string& host) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i] == host) return static_cast<int>(i);
  }
  ADD_FAILURE() << "NetLab: no host named " << host;
  return 0;
}

std::string NetLab::Address(const std::string& host) const { return kSubnet + std::to_string(Index(host) + 1); }

std::string NetLab::Namespace(const std::string& host) const {
  Index(host);
  return prefix_ + host;
}

std::vector<std::string> NetLab::In(const std::string& host, const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"ip", "netns", "exec", Namespace(host)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

RunResult NetLab::Run(const std::string& host, const std::vector<std::string>& argv, const RunOptions& options) const {
  return testing::Run(In(host, argv), options);
}

::testing::AssertionResult NetLab::Start() {
  if (geteuid() != 0) {
    return ::testing::AssertionFailure()
           << "the multi-host test needs root (it creates network namespaces); run it as root, as CI does";
  }
  RunResult probe = testing::Run({"ip", "-V"});
  if (probe.exit_code != 0) {
    return ::testing::AssertionFailure() << "the multi-host test needs iproute2 ('ip'): " << probe.err;
  }
  RemoveStaleLabs();
  if (hosts_.empty() || hosts_.size() > 250) return ::testing::AssertionFailure() << "NetLab: 1..250 hosts";
  // One `ip -batch` for the whole lab. Every interface is created inside a
  // lab namespace, never in the machine's own.
  std::string batch = "netns add " + switch_ns_ + "\n";
  for (const auto& h : hosts_) batch += "netns add " + prefix_ + h + "\n";
  RunOptions ro;
  ro.stdin_data = batch;
  ro.timeout_seconds = 60;
  RunResult r = testing::Run({"ip", "-batch", "-"}, ro);
  // Record what exists, so the destructor removes it even after a failure.
  for (const auto& name : ListNamespaces()) {
    if (name.rfind(prefix_, 0) == 0) created_.push_back(name);
  }
  if (r.exit_code != 0) {
    return ::testing::AssertionFailure() << "cannot create network namespaces (ip netns add): " << r.err
                                         << "\nthe multi-host test needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN";
  }
  // The switch: a bridge and one cable (veth pair) per host, whose far end
  // is the host's eth0.
  batch = "link set lo up\nlink add br0 type bridge\nlink set br0 up\n";
  for (size_t i = 0; i < hosts_.size(); ++i) {
    std::string port = "p" + std::to_string(i);
    batch += "link add " + port + " type veth peer name eth0 netns " + prefix_ + hosts_[i] + "\n";
    batch += "link set " + port + " master br0\nlink set " + port + " up\n";
  }
  ro.stdin_data = batch;
  r = testing::Run({"ip", "-n", switch_ns_, "-batch", "-"}, ro);
  if (r.exit_code != 0) {
    return ::testing::AssertionFailure() << "cannot cable the lab (bridge and veth pairs): " << r.err;
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    ro.stdin_data = "addr add " + std::string(kSubnet) + std::to_string(i + 1) +
                    "/24 dev eth0\nlink set eth0 up\nlink set lo up\n";
    r = testing::Run({"ip", "-n", prefix_ + hosts_[i], "-batch", "-"}, ro);
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "cannot address " << hosts_[i] << ": " << r.err;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NetLab::SetLink(const std::string& host, bool up) {
  RunResult r = testing::Run(
      {"ip", "-n", switch_ns_, "link", "set", "p" + std::to_string(Index(host)), up ? "up" : "down"});
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "link of " << host << ": " << r.err;
  return ::testing::AssertionSuccess();
}

bool NetLab::CanConnect(const std::string& from, const std::string& addr, int port, int timeout_ms) const {
  return ConnectFrom(Namespace(from), addr, port, timeout_ms);
}

bool NetLab::WaitForPort(const std::string& from, const std::string& addr, int port, int timeout_ms) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (CanConnect(from, addr, port)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gatos::testing
