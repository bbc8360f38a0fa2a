// The Debian package (cmake/Packaging.cmake): built with CPack from this
// build tree, inspected with dpkg-deb, unpacked into a scratch root (never
// installed onto the machine), and its units' commands started with its
// example settings: nats-server with the configuration `gatos nats-config`
// writes, gatosd and a worker as the units run them, `gatos doctor` on both,
// and a job that runs to the end.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "child_process.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

// Sets `key: value` in a settings file: replaces the line that sets it (or
// a commented-out one), else appends.
std::string SetYaml(std::string text, const std::string& key, const std::string& value) {
  std::regex line("(^|\n)#? ?" + key + ":[^\n]*");
  if (std::regex_search(text, line)) {
    return std::regex_replace(text, line, "$1" + key + ": " + value, std::regex_constants::format_first_only);
  }
  return text + key + ": " + value + "\n";
}

// The words of a unit's ExecStart= line.
std::vector<std::string> ExecStart(const std::string& unit) {
  std::istringstream in(unit);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ExecStart=", 0) != 0) continue;
    std::istringstream words(line.substr(10));
    std::vector<std::string> argv;
    std::string w;
    while (words >> w) argv.push_back(w);
    return argv;
  }
  return {};
}

class PackageTest : public ::testing::Test {
 protected:
  std::string Bin(const std::string& name) { return root_ + "/usr/bin/" + name; }

  RunResult Installed(const std::string& program, std::vector<std::string> args,
                      const std::map<std::string, std::string>& extra_env = {}, int timeout_s = 120) {
    args.insert(args.begin(), Bin(program));
    RunOptions ro;
    ro.env = env_;
    for (const auto& [k, v] : extra_env) ro.env[k] = v;
    ro.timeout_seconds = timeout_s;
    return testing::Run(args, ro);
  }

  // The unit's command with the package's paths moved into the scratch root
  // and /etc/gatos/<file> replaced by `config`.
  std::vector<std::string> UnitCommand(const std::string& unit, const std::string& config) {
    std::vector<std::string> argv = ExecStart(ReadFile(root_ + "/usr/lib/systemd/system/" + unit));
    for (auto& a : argv) {
      if (a.rfind("/usr/bin/", 0) == 0) a = root_ + a;
      if (a.rfind("/etc/gatos/", 0) == 0) a = config;
    }
    return argv;
  }

  TempDir dir_;
  std::string root_;
  std::map<std::string, std::string> env_;
  ChildProcess nats_, gatosd_, worker_;
};

TEST_F(PackageTest, DebInstallsProgramsUnitsAndSettingsThatStartAWorkingStack) {
  // Build the package from this build tree.
  std::string out = dir_.Join("pkg");
  RunOptions cp;
  cp.cwd = GATOS_BINARY_DIR;
  cp.timeout_seconds = 300;
  auto t0 = std::chrono::steady_clock::now();
  RunResult pack = testing::Run({"cpack", "-G", "DEB", "--config", std::string(GATOS_BINARY_DIR) + "/CPackConfig.cmake", "-B", out}, cp);
  ASSERT_EQ(pack.exit_code, 0) << pack.out << pack.err;
  double pack_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RunResult ls = testing::Run({"sh", "-c", "ls " + out + "/*.deb"});
  std::string deb = TrimEnd(ls.out);
  ASSERT_FALSE(deb.empty()) << pack.out;

  // What it holds.
  RunResult contents = testing::Run({"dpkg-deb", "-c", deb});
  ASSERT_EQ(contents.exit_code, 0) << contents.err;
  for (const char* path : {"./usr/bin/gatos", "./usr/bin/gatosd", "./usr/bin/gatos-worker", "./usr/bin/gatos-supervise",
                           "./usr/bin/gatos-scan", "./usr/lib/systemd/system/gatosd.service",
                           "./usr/lib/systemd/system/gatos-worker.service",
                           "./usr/share/doc/gatos/examples/gatosd.yaml", "./usr/share/doc/gatos/examples/worker.yaml",
                           "./usr/share/doc/gatos/deployment.md", "./usr/share/doc/gatos/install.md"}) {
    EXPECT_NE(contents.out.find(std::string(path) + "\n"), std::string::npos) << path << " missing:\n" << contents.out;
  }
  EXPECT_EQ(contents.out.find("tests"), std::string::npos) << "test programs in the package";
  RunResult info = testing::Run({"dpkg-deb", "-I", deb});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* field : {"Package: gatos", "Depends: git (>= 1:2.34), adduser", "libgit2", "libnats", "libjemalloc2",
                            "Recommends: nats-server, bubblewrap", "postinst", "prerm", "postrm"}) {
    EXPECT_NE(info.out.find(field), std::string::npos) << field << " not in:\n" << info.out;
  }

  // Unpacked into a scratch root; the units are hardened.
  root_ = dir_.Join("root");
  RunResult x = testing::Run({"dpkg-deb", "-x", deb, root_});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  std::map<std::string, double> exposure;
  for (const char* unit : {"gatosd.service", "gatos-worker.service"}) {
    std::string text = ReadFile(root_ + "/usr/lib/systemd/system/" + unit);
    for (const char* setting : {"User=gatos", "ProtectSystem=strict", "StateDirectory=", "NoNewPrivileges=true",
                                "ProtectHome=true", "PrivateTmp=true", "--config /etc/gatos/"}) {
      EXPECT_NE(text.find(setting), std::string::npos) << unit << " lacks " << setting;
    }
    // systemd's own assessment of the unit (offline: nothing is loaded);
    // --threshold is in tenths (40 = exposure 4.0 of 10).
    RunResult sec = testing::Run({"systemd-analyze", "security", "--offline=true", "--threshold=40",
                         root_ + "/usr/lib/systemd/system/" + unit});
    EXPECT_EQ(sec.exit_code, 0) << unit << " exposure above 4.0:\n" << sec.out << sec.err;
    std::smatch m;
    std::string all = sec.out + sec.err;
    if (std::regex_search(all, m, std::regex("exposure level for [^:]+: ([0-9.]+)"))) {
      exposure[unit] = std::stod(m[1]);
    }
  }

  // A stack from the installed programs, started as the units start them,
  // with the package's example settings filled in.
  env_ = {{"HOME", dir_.path()}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_AUTHOR_NAME", "Op"},
          {"GIT_AUTHOR_EMAIL", "op@example.com"}, {"GIT_COMMITTER_NAME", "Op"}, {"GIT_COMMITTER_EMAIL", "op@example.com"}};
  std::string ledger = dir_.Join("ledger.git");
  ASSERT_EQ(Installed("gatosd", {"init", ledger}).exit_code, 0);
  std::string worker_key = dir_.Join("worker.key"), submitter_key = dir_.Join("alice");
  ASSERT_EQ(Installed("gatos", {"keygen", "-f", worker_key}).exit_code, 0);
  ASSERT_EQ(Installed("gatos", {"keygen", "-f", submitter_key}).exit_code, 0);
  ASSERT_EQ(Installed("gatos", {"policy", "allow-worker", "--ledger", ledger, worker_key + ".pub"}).exit_code, 0);
  ASSERT_EQ(Installed("gatos", {"policy", "allow-submitter", "--ledger", ledger, submitter_key + ".pub"}).exit_code, 0);

  int port = FreePort();
  std::string url = "nats://127.0.0.1:" + std::to_string(port);
  RunResult nc = Installed("gatos", {"nats-config", "--ledger", ledger, "--dir", dir_.Join("nats"), "--port",
                                     std::to_string(port), "--json"});
  ASSERT_EQ(nc.exit_code, 0) << nc.err;
  json files = json::parse(nc.out);
  std::string error;
  ASSERT_TRUE(nats_.Start({"nats-server", "-c", files["config"]}, {}, dir_.Join("nats.log"), &error)) << error;
  ASSERT_TRUE(nats_.WaitForLog("Server is ready", 20000)) << nats_.log();

  std::string examples = root_ + "/usr/share/doc/gatos/examples/";
  std::string gconf = ReadFile(examples + "gatosd.yaml");
  gconf = SetYaml(gconf, "ledger", ledger);
  gconf = SetYaml(gconf, "nats", url);
  gconf = SetYaml(gconf, "http", "127.0.0.1:" + std::to_string(FreePort()));
  gconf = SetYaml(gconf, "nats-auth-file", files["auth"]);
  gconf = SetYaml(gconf, "nats-pid-file", files["pid_file"]);
  gconf = SetYaml(gconf, "require-nats-auth", "true");
  WriteFile(dir_.Join("gatosd.yaml"), gconf);
  ASSERT_TRUE(gatosd_.Start(UnitCommand("gatosd.service", dir_.Join("gatosd.yaml")), env_, dir_.Join("gatosd.log"),
                            &error))
      << error;
  ASSERT_TRUE(gatosd_.WaitForLog("serving ledger", 30000)) << gatosd_.log();

  std::string wconf = ReadFile(examples + "worker.yaml");
  wconf = SetYaml(wconf, "nats", url);
  wconf = SetYaml(wconf, "key", worker_key);
  wconf = SetYaml(wconf, "ledger-key", ledger + "/gatos/ledger_key.pub");
  wconf = SetYaml(wconf, "state-dir", dir_.Join("worker.state"));
  wconf = SetYaml(wconf, "name", "packaged");
  WriteFile(dir_.Join("worker.yaml"), wconf);
  ASSERT_TRUE(worker_.Start(UnitCommand("gatos-worker.service", dir_.Join("worker.yaml")), env_,
                            dir_.Join("worker.log"), &error))
      << error;
  ASSERT_TRUE(worker_.WaitForLog(" ready ", 30000)) << worker_.log();

  // gatos doctor on the ledger host and on the worker host, from their settings.
  for (const char* conf : {"gatosd.yaml", "worker.yaml"}) {
    RunResult doc = Installed("gatos", {"doctor", "--config", dir_.Join(conf), "--json"});
    EXPECT_EQ(doc.exit_code, 0) << conf << ":\n" << doc.out << doc.err;
    json report = json::parse(doc.out, nullptr, false);
    ASSERT_TRUE(report.is_object()) << doc.out;
    std::set<std::string> ok;
    for (const auto& c : report["checks"]) {
      if (c.value("status", "") == "ok") ok.insert(c.value("check", ""));
    }
    for (const char* need : {"git", "key", "nats", "nats-auth", "jetstream"}) {
      if (std::string(conf) == "gatosd.yaml" && std::string(need) == "key") continue;
      EXPECT_TRUE(ok.count(need)) << conf << ": " << need << " not ok:\n" << doc.out;
    }
    if (std::string(conf) == "gatosd.yaml") {
      EXPECT_TRUE(ok.count("ledger") && ok.count("clock") && ok.count("ledger-key-file")) << doc.out;
    } else {
      EXPECT_TRUE(ok.count("sandbox") && ok.count("ledger-key")) << doc.out;
    }
  }
  // The human form says what to fix when something is wrong.
  RunResult open_key = Installed("gatos", {"doctor", "--key", worker_key});
  EXPECT_EQ(open_key.exit_code, 0) << open_key.out;
  testing::Run({"chmod", "644", worker_key});
  RunResult loose = Installed("gatos", {"doctor", "--key", worker_key});
  EXPECT_EQ(loose.exit_code, 1) << loose.out;
  EXPECT_NE(loose.out.find("fix: chmod 600 " + worker_key), std::string::npos) << loose.out;
  testing::Run({"chmod", "600", worker_key});

  // A job through the packaged stack.
  WriteFile(dir_.Join("job.yaml"), "command: [\"/bin/sh\", \"-c\", \"echo packaged\"]\ntimeout: 30\n");
  RunResult sub = Installed("gatos", {"submit", dir_.Join("job.yaml"), "--ledger", url, "--sign-key", submitter_key});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  RunResult wait = Installed("gatos", {"wait", TrimEnd(sub.out), "--ledger", url, "--timeout", "60"},
                             {{"GATOS_NATS_KEY", submitter_key}}, 90);
  if (wait.exit_code != 0) {
    RunResult st = Installed("gatos", {"status", TrimEnd(sub.out), "--ledger", ledger, "--json"});
    ADD_FAILURE() << "wait: " << wait.exit_code << "\n" << wait.out << wait.err << "\nstatus: " << st.out << st.err
                  << "\n--- worker ---\n" << worker_.log() << "\n--- gatosd ---\n" << gatosd_.log();
  }
  std::cout << "[figures] cpack -G DEB: " << pack_s << " s; systemd-analyze security exposure: gatosd "
            << exposure["gatosd.service"] << ", gatos-worker " << exposure["gatos-worker.service"] << "\n";
}

}  // namespace
}  // namespace gatos::testing
