// Helpers for the job launcher and sandbox tests (real processes).
#ifndef GATOS_TESTS_EXEC_LAUNCHER_TEST_UTIL_H_
#define GATOS_TESTS_EXEC_LAUNCHER_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gatos/exec/exec.h"
#include "test_util.h"

namespace gatos::launcher_test {

using Sandbox = ExecSpec::Sandbox;

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A spec with a fresh workspace and output dir under `dir`, and a marker in
// the job's environment so that its processes can be found in /proc.
inline ExecSpec MakeSpec(const gatos::testing::TempDir& dir, std::vector<std::string> argv,
                         Sandbox sb = Sandbox::kOff, const std::string& name = "ws") {
  static int counter = 0;
  ExecSpec s;
  s.argv = std::move(argv);
  s.workspace = dir.Join(name);
  s.output_dir = dir.Join(name + "-out");
  std::filesystem::create_directories(s.workspace);
  s.sandbox = sb;
  s.env["GATOS_TEST_MARKER"] =
      "m" + std::to_string(getpid()) + "-" + std::to_string(NowMs()) + "-" + std::to_string(++counter);
  s.timeout_ms = 60000;  // a safety net: no test should get near it
  return s;
}

inline ExecResult RunOn(JobLauncher& l, const ExecSpec& spec) {
  auto ex = l.Start(spec);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (!ex.ok()) return {};
  auto r = (*ex)->Wait();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ExecResult{};
}

// Pids of live processes whose environment holds GATOS_TEST_MARKER=<marker>.
inline std::vector<int> ProcessesWithMarker(const std::string& marker) {
  std::vector<int> out;
  std::string needle = "GATOS_TEST_MARKER=" + marker;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "environ", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string env = ss.str();
    size_t pos = 0;
    while ((pos = env.find(needle, pos)) != std::string::npos) {
      size_t end = pos + needle.size();
      if ((pos == 0 || env[pos - 1] == '\0') && (end == env.size() || env[end] == '\0')) {
        out.push_back(std::stoi(name));
        break;
      }
      pos = end;
    }
  }
  return out;
}

// Waits (generously, as a safety net) until `done` holds; returns it.
template <typename Fn>
bool Eventually(Fn done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Field `key` of /proc/<pid>/status ("" if absent).
inline std::string ProcStatus(int pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

inline bool Alive(int pid) {
  if (kill(pid, 0) != 0) return false;
  std::string state = ProcStatus(pid, "State");
  return !state.empty() && state[0] != 'Z';
}

// The process's name (comm: readable even for a non-dumpable process).
inline std::string ExeName(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// The entry of /tmp that holds `path` ("" if it is not under /tmp): a job
// whose workspace is there sees that entry in its own /tmp.
inline std::string TmpEntryOf(const std::string& path) {
  std::filesystem::path rel = std::filesystem::path(path).lexically_relative("/tmp");
  if (rel.empty() || *rel.begin() == "..") return "";
  return rel.begin()->string();
}

template <typename Fn>
LauncherOptions Options(Fn set) {
  LauncherOptions o;
  set(o);
  return o;
}

inline std::unique_ptr<JobLauncher> NewLauncher(LauncherOptions o = {}) {
  auto l = JobLauncher::Create(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

}  // namespace gatos::launcher_test

#endif  // GATOS_TESTS_EXEC_LAUNCHER_TEST_UTIL_H_
