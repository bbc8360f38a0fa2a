// Several "hosts" on one machine for multi-host tests: one Linux network
// namespace per host, each with an eth0 cabled (veth) to a bridge that lives
// in a namespace of its own (the switch). Hosts reach each other on private
// addresses 10.213.0.N/24 and nothing else: no route leaves the lab, and the
// machine's own namespace is never touched (no interface, address or route
// is added there).
//
// Processes run in a host with In(host, argv) (an `ip netns exec` prefix; the
// program execs in place, so its pid is the program's). Cutting a host off
// is SetLink(host, false): its cable goes down at the switch.
//
// Everything is removed in the destructor, also when a test fails. Names are
// unique per run (gatoslab-<pid>-<n>-<host>); a lab left behind by a test
// binary that was SIGKILLed is removed by the next lab created on the
// machine (its pid no longer runs).
//
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2. Start() fails with
// a message that says what is missing; it never skips.
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef GATOS_TESTS_SUPPORT_NETNS_LAB_H_
#define GATOS_TESTS_SUPPORT_NETNS_LAB_H_

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace gatos::testing {

class NetLab {
 public:
  explicit NetLab(std::vector<std::string> hosts);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // Creates the switch, the hosts and their cables. Use as
  // ASSERT_TRUE(lab.Start()).
  ::testing::AssertionResult Start();

  // The host's address on the lab network ("10.213.0.3").
  std::string Address(const std::string& host) const;
  // The host's namespace name (for `ip netns exec`).
  std::string Namespace(const std::string& host) const;
  // argv run inside `host`'s network namespace.
  std::vector<std::string> In(const std::string& host, const std::vector<std::string>& argv) const;
  // Runs argv in `host` and waits.
  RunResult Run(const std::string& host, const std::vector<std::string>& argv, const RunOptions& options = {}) const;

  // Plugs the host's cable in or pulls it out (at the switch; the host sees
  // its link go down, its peers see silence).
  ::testing::AssertionResult SetLink(const std::string& host, bool up);
  // Whether a TCP connection from `from` to addr:port succeeds now.
  bool CanConnect(const std::string& from, const std::string& addr, int port, int timeout_ms = 500) const;
  // Polls CanConnect until it holds; false after timeout_ms.
  bool WaitForPort(const std::string& from, const std::string& addr, int port, int timeout_ms) const;

  const std::vector<std::string>& hosts() const { return hosts_; }

 private:
  static void RemoveStaleLabs();
  int Index(const std::string& host) const;

  std::vector<std::string> hosts_;
  std::string prefix_;
  std::string switch_ns_;
  std::vector<std::string> created_;  // namespaces to delete
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_NETNS_LAB_H_
