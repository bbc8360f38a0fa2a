// GATOS across hosts: every host is a Linux network namespace of its own
// (netns_lab.h), cabled to a private bridge. A three-node nats-server cluster
// (JetStream R3, authenticated routes and clients) runs on nats1..nats3,
// gatosd and a git daemon on `ledger`, one worker on each of worker1 and
// worker2, submissions come from `client`, and `auditor` mirrors the ledger
// over the git protocol and verifies it. Crashes are real SIGKILLs; a host
// cut off is its cable pulled at the switch.
//
// Needs root (CI runs as root). Without network namespaces the test fails
// with a message saying so; it never skips.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "child_process.h"
#include "log_reader.h"
#include "netns_lab.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kNatsPort = 4222;
constexpr int kRoutePort = 6222;
constexpr int kGitPort = 9418;
const std::vector<std::string> kNats = {"nats1", "nats2", "nats3"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

template <typename Pred>
bool PollUntil(Pred pred, std::chrono::milliseconds timeout, std::chrono::milliseconds every = 50ms) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

struct ClusterOptions {
  int64_t lease_ms = 4000;
  int republish_s = 5;
};

class MultiHostTest : public ::testing::Test {
 protected:
  // Members are destroyed in reverse: every process first, then the files,
  // then the lab's namespaces.
  NetLab lab_{{"nats1", "nats2", "nats3", "ledger", "worker1", "worker2", "client", "auditor"}};
  TempDir dir_;
  std::map<std::string, std::string> env_;
  std::string ledger_, submitter_key_, urls_;
  std::vector<std::string> worker_keys_, worker_ids_;
  std::map<std::string, std::unique_ptr<ChildProcess>> procs_;
  ClusterOptions options_;
  int submitted_ = 0;
  std::atomic<int> acknowledged_{0};  // submissions acknowledged so far (Submit)
  std::atomic<bool> stop_submitting_{false};  // a failed test ends a Submit running on a thread

  void TearDown() override {
    for (auto& [name, p] : procs_) {
      if (p && p->running()) p->Stop(SIGKILL, 5000);
    }
    if (HasFailure()) {
      // The whole logs, for a failure that a tail does not explain.
      if (const char* keep = std::getenv("GATOS_TEST_LOG_DIR"); keep != nullptr && *keep != '\0') {
        std::error_code ec;
        std::filesystem::create_directories(keep, ec);
        for (const auto& e : std::filesystem::directory_iterator(dir_.path(), ec)) {
          if (e.path().extension() == ".log") {
            std::filesystem::copy_file(e.path(), std::filesystem::path(keep) / e.path().filename(),
                                       std::filesystem::copy_options::overwrite_existing, ec);
          }
        }
        std::cerr << "logs copied to " << keep << "\n";
      }
      for (const auto& name : {"nats1", "nats2", "nats3", "gatosd", "replica1", "replica2", "replica3", "worker1",
                               "worker2"}) {
        auto it = procs_.find(name);
        if (it == procs_.end()) continue;
        std::string log = it->second->log();
        if (log.size() > 3000) log = "..." + log.substr(log.size() - 3000);
        std::cerr << "---- " << name << " log (tail) ----\n" << log << "\n";
      }
    }
  }

  ChildProcess* Proc(const std::string& name) {
    auto& p = procs_[name];
    if (!p) p = std::make_unique<ChildProcess>();
    return p.get();
  }

  RunResult Gatos(std::vector<std::string> args, const std::string& host = "", int timeout_s = 120) {
    args.insert(args.begin(), BinaryPath("gatos"));
    RunOptions ro;
    ro.env = env_;
    ro.timeout_seconds = timeout_s;
    return host.empty() ? testing::Run(args, ro) : lab_.Run(host, args, ro);
  }

  RunResult Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "--git-dir", ledger_};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions ro;
    ro.env = env_;
    return testing::Run(argv, ro);
  }

  // The ledger, its keys and policy; the cluster's configuration files.
  ::testing::AssertionResult Prepare() {
    auto ok = lab_.Start();
    if (!ok) return ok;
    env_ = GitTestEnv(dir_.path());
    ledger_ = dir_.Join("ledger.git");
    RunOptions ro;
    ro.env = env_;
    RunResult r = testing::Run({BinaryPath("gatosd"), "init", ledger_, "--lease-ms", std::to_string(options_.lease_ms)}, ro);
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatosd init: " << r.err;
    submitter_key_ = dir_.Join("alice");
    r = Gatos({"keygen", "-f", submitter_key_});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "keygen: " << r.err;
    r = Gatos({"policy", "allow-submitter", "--ledger", ledger_, submitter_key_ + ".pub"});
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "allow-submitter: " << r.err;
    for (int i = 1; i <= 2; ++i) {
      std::string k = dir_.Join("worker" + std::to_string(i));
      r = Gatos({"keygen", "-f", k});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "keygen: " << r.err;
      r = Gatos({"policy", "allow-worker", "--ledger", ledger_, k + ".pub"});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "allow-worker: " << r.err;
      worker_keys_.push_back(k);
      worker_ids_.push_back(TrimEnd(Gatos({"key", "show", k + ".pub"}).out));
    }
    std::string cluster;
    for (const auto& n : kNats) {
      cluster += (cluster.empty() ? "" : ",") + n + "=" + lab_.Address(n) + ":" + std::to_string(kNatsPort) + ":" +
                 std::to_string(kRoutePort);
      urls_ += (urls_.empty() ? "" : ",") + std::string("nats://") + lab_.Address(n) + ":" + std::to_string(kNatsPort);
    }
    WriteFile(dir_.Join("route.secret"), "lab-route-secret-0123456789\n", 0600);
    for (const auto& n : kNats) {
      r = Gatos({"nats-config", "--ledger", ledger_, "--cluster", cluster, "--node", n, "--store-dir",
                 dir_.Join(n + ".js"), "--route-secret-file", dir_.Join("route.secret")});
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatos nats-config --node " << n << ": " << r.err;
      WriteFile(dir_.Join(n + ".conf"), r.out, 0600);
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult StartNats(const std::string& node) {
    std::string error;
    if (!Proc(node)->Start(lab_.In(node, {"nats-server", "-c", dir_.Join(node + ".conf")}), {},
                           dir_.Join(node + ".log"), &error)) {
      return ::testing::AssertionFailure() << error;
    }
    if (!lab_.WaitForPort("ledger", lab_.Address(node), kNatsPort, 20000)) {
      return ::testing::AssertionFailure() << node << " does not accept connections:\n" << Proc(node)->log();
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult StartGatosd() {
    std::string error;
    std::string log = dir_.Join("gatosd.log");
    size_t before = ReadFile(log).size();
    if (!Proc("gatosd")->Start(lab_.In("ledger", {BinaryPath("gatosd"), "serve", "--ledger", ledger_, "--nats",
                                                  urls_, "--stream-replicas", "3", "--republish-s",
                                                  std::to_string(options_.republish_s), "--sweep-ms", "50",
                                                  "--nats-wait-s", "60", "--require-nats-auth"}),
                               env_, log, &error)) {
      return ::testing::AssertionFailure() << error;
    }
    bool up = PollUntil(
        [&] {
          std::string text = ReadFile(log);
          return text.find("serving ledger", before) != std::string::npos || !Proc("gatosd")->running();
        },
        60s);
    if (!up || !Proc("gatosd")->running()) {
      return ::testing::AssertionFailure() << "gatosd did not start:\n" << ReadFile(log).substr(before);
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult StartGitDaemon() {
    std::string error;
    if (!Proc("git-daemon")->Start(
            lab_.In("ledger", {"git", "daemon", "--reuseaddr", "--export-all", "--base-path=" + dir_.path(),
                               "--listen=" + lab_.Address("ledger"), "--port=" + std::to_string(kGitPort),
                               "--informative-errors", dir_.path()}),
            env_, dir_.Join("git-daemon.log"), &error)) {
      return ::testing::AssertionFailure() << error;
    }
    if (!lab_.WaitForPort("auditor", lab_.Address("ledger"), kGitPort, 10000)) {
      return ::testing::AssertionFailure() << "git daemon does not listen:\n" << Proc("git-daemon")->log();
    }
    return ::testing::AssertionSuccess();
  }

  // Worker i (1 or 2) on host worker<i>; waits until it is ready.
  ::testing::AssertionResult StartWorker(int i) {
    std::string host = "worker" + std::to_string(i);
    std::string log = dir_.Join(host + ".log");
    size_t before = ReadFile(log).size();
    std::string error;
    if (!Proc(host)->Start(lab_.In(host, {BinaryPath("gatos-worker"), "run", "--nats", urls_, "--key",
                                          worker_keys_[i - 1], "--ledger-key", ledger_ + "/gatos/ledger_key.pub",
                                          "--state-dir", dir_.Join(host + ".state"), "--name", host, "--sandbox",
                                          "off", "--concurrency", "4"}),
                           env_, log, &error)) {
      return ::testing::AssertionFailure() << error;
    }
    bool ready = PollUntil(
        [&] {
          std::string text = ReadFile(log);
          return text.find(" ready ", before) != std::string::npos || !Proc(host)->running();
        },
        30s);
    if (!ready || !Proc(host)->running()) {
      return ::testing::AssertionFailure() << host << " did not start:\n" << ReadFile(log).substr(before);
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult StartAll() {
    for (const auto& n : kNats) {
      auto ok = StartNats(n);
      if (!ok) return ok;
    }
    auto ok = StartGatosd();
    if (!ok) return ok;
    return StartGitDaemon();
  }

  // Writes job manifests and submits them from the client host through
  // gatosd, `parallel` submissions at a time. Returns the job ids in order.
  std::vector<std::string> Submit(const std::vector<std::string>& yamls, int parallel = 4) {
    std::vector<std::string> files, ids(yamls.size());
    for (const auto& y : yamls) {
      files.push_back(dir_.Join("job" + std::to_string(submitted_++) + ".yaml"));
      WriteFile(files.back(), y);
    }
    std::vector<std::thread> threads;
    std::vector<std::string> errors(parallel);
    for (int t = 0; t < parallel; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < files.size() && !stop_submitting_; i += parallel) {
          // A submission may meet a NATS node or gatosd that is restarting,
          // or no leader for the seconds a failover takes: the client
          // retries as a user would, for up to two minutes (a count of
          // tries ran out in seconds when each failed at once with "no
          // responders" between two leaders). Each try waits 10 s for an
          // answer: while a host is cut off, a NATS node keeps its route
          // there (and the interest of a leader there) until the route's
          // write deadline, and a request sent that way is lost; the next
          // try may go the other way. A submit asked again is answered
          // "existing".
          const auto until = Clock::now() + 120s;
          while (Clock::now() < until && !stop_submitting_) {
            RunResult r = Gatos({"submit", files[i], "--ledger", urls_, "--sign-key", submitter_key_, "--timeout",
                                 "10", "--leader-wait", "20"},
                                "client", 60);
            if (r.exit_code == 0) {
              ids[i] = TrimEnd(r.out);
              ++acknowledged_;
              break;
            }
            errors[t] = r.err;
            std::this_thread::sleep_for(250ms);
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i].rfind("blake3:", 0), 0u) << "submission " << i << " failed: " << errors[i % parallel];
    }
    return ids;
  }

  // job hex -> result commit, from the ledger's refs.
  std::map<std::string, std::string> Results(const std::string& repo = "") {
    std::map<std::string, std::string> out;
    RunOptions ro;
    ro.env = env_;
    RunResult r = testing::Run({"git", "--git-dir", repo.empty() ? ledger_ : repo, "for-each-ref",
                                "--format=%(refname) %(objectname)", "refs/gatos/jobs/"},
                               ro);
    for (const auto& line : Lines(r.out)) {
      size_t sp = line.find(' ');
      std::string ref = line.substr(0, sp);
      if (ref.size() > 7 && ref.compare(ref.size() - 7, 7, "/result") == 0) {
        out[ref.substr(16, 64)] = line.substr(sp + 1);
      }
    }
    return out;
  }

  // The poe.json of each result commit, read with one git cat-file.
  std::map<std::string, json> Poes(const std::map<std::string, std::string>& results) {
    std::string input;
    std::vector<std::string> order;
    for (const auto& [hex, commit] : results) {
      input += commit + ":poe.json\n";
      order.push_back(hex);
    }
    RunOptions ro;
    ro.env = env_;
    ro.stdin_data = input;
    RunResult r = testing::Run({"git", "--git-dir", ledger_, "cat-file", "--batch"}, ro);
    std::map<std::string, json> out;
    size_t pos = 0;
    for (const auto& hex : order) {
      size_t nl = r.out.find('\n', pos);
      if (nl == std::string::npos) break;
      std::string header = r.out.substr(pos, nl - pos);
      size_t size = std::stoul(header.substr(header.rfind(' ') + 1));
      out[hex] = json::parse(r.out.substr(nl + 1, size), nullptr, false);
      pos = nl + 1 + size + 1;
    }
    return out;
  }

  // The auditor's host mirrors the ledger with git over the network and
  // verifies every job (incrementally when the mirror was verified before).
  // With `state`, `gatos verify --state FILE`: the first run records the log
  // head it verified, the next ones verify only what the log added since.
  RunResult Audit(std::string* out_dir = nullptr, const std::string& state = "", bool require_results = true,
                  const std::string& repo_name = "ledger.git") {
    std::string mirror = dir_.Join("auditor-mirror.git");
    std::string url = "git://" + lab_.Address("ledger") + ":" + std::to_string(kGitPort) + "/" + repo_name;
    // gatos mirror: the log, every ref, the log again; consistent while
    // gatosd writes (a plain fetch is not a snapshot).
    RunResult fetch = Gatos({"mirror", url, mirror}, "auditor", 300);
    if (fetch.exit_code != 0) return fetch;
    if (out_dir) *out_dir = mirror;
    // The ledger key, pinned out of band (here: copied from the ledger host).
    std::vector<std::string> argv = {"verify", "--repo", mirror, "--all", "--ledger-key",
                                     ledger_ + "/gatos/ledger_key.pub"};
    if (require_results) argv.push_back("--require-results");
    if (!state.empty()) argv.insert(argv.end(), {"--state", state});
    return Gatos(argv, "auditor", 300);
  }

  // Lines of the shared effects file: what the jobs really did.
  std::map<std::string, int> Effects(const std::string& path) {
    std::map<std::string, int> count;
    for (const auto& l : Lines(ReadFile(path))) ++count[l];
    return count;
  }
};

// The sequence an audit state file records ("seq N" line; auditor-guide.md).
int64_t StateSeq(const std::string& state) {
  size_t at = state.find("\nseq ");
  if (at == std::string::npos) return 0;
  return std::atoll(state.c_str() + at + 5);
}

std::string EffectJob(const std::string& effects, const std::string& tag, const std::string& extra = "") {
  return "command: [\"/bin/sh\", \"-c\"]\nargs: ['echo " + tag + " >> " + effects + extra +
         "']\ntimeout: 60\n";
}

TEST_F(MultiHostTest, ThreeHundredJobsRunOnceAcrossHostsThroughANatsNodeCrashAndAGatosdCrash) {
  ASSERT_TRUE(Prepare());
  ASSERT_TRUE(StartAll());
  ASSERT_TRUE(StartWorker(1));
  ASSERT_TRUE(StartWorker(2));
  EXPECT_TRUE(Proc("gatosd")->WaitForLog("kept with 3 replicas", 1000)) << Proc("gatosd")->log();
  std::string effects = dir_.Join("effects");
  // A worker host's view of the deployment: every member reachable and
  // closed to anonymous clients, the worker's key authenticated, JetStream
  // holding the stream and the workers' consumer.
  RunResult doctor = Gatos({"doctor", "--nats", urls_, "--key", worker_keys_[0], "--ledger-key",
                            ledger_ + "/gatos/ledger_key.pub", "--json"},
                           "worker1");
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out << doctor.err;
  json checks = json::parse(doctor.out, nullptr, false);
  ASSERT_TRUE(checks.is_object()) << doctor.out;
  int closed = 0;
  for (const auto& c : checks["checks"]) {
    if (c.value("check", "") == "nats" && c.value("status", "") == "ok") ++closed;
    if (c.value("check", "") == "nats-auth" || c.value("check", "") == "jetstream") {
      EXPECT_EQ(c.value("status", ""), "ok") << c.dump();
    }
  }
  EXPECT_EQ(closed, 3) << doctor.out;
  auto started = Clock::now();

  // First third, all nodes up.
  std::vector<std::string> yamls;
  for (int i = 0; i < 300; ++i) yamls.push_back(EffectJob(effects, "job" + std::to_string(i), "; sleep 0.05"));
  double submit_s = 0;
  auto timed_submit = [&](auto begin, auto end) {
    auto t = Clock::now();
    auto out = Submit({begin, end});
    submit_s += Seconds(Clock::now() - t);
    return out;
  };
  std::vector<std::string> ids = timed_submit(yamls.begin(), yamls.begin() + 100);
  ASSERT_TRUE(PollUntil([&] { return Results().size() >= 50; }, 60s)) << Results().size() << " results";

  // The node everybody connected to first dies mid-run; the others carry on
  // (R3 stream, clients reconnect to another member). It comes back later.
  ASSERT_EQ(Proc("nats1")->Stop(SIGKILL), -SIGKILL);
  auto more = timed_submit(yamls.begin() + 100, yamls.begin() + 200);
  ids.insert(ids.end(), more.begin(), more.end());
  ASSERT_TRUE(PollUntil([&] { return Results().size() >= 150; }, 60s))
      << Results().size() << " results with nats1 down";
  ASSERT_TRUE(StartNats("nats1"));

  // The auditor checks its mirror mid-run, while results of the first 200
  // jobs still land (gatos mirror makes a fetch taken between batches
  // consistent), and records where it got to.
  const std::string audit_state = dir_.Join("auditor.state");
  RunResult first_audit = Audit(nullptr, audit_state, /*require_results=*/false);  // jobs still run
  ASSERT_EQ(first_audit.exit_code, 0) << first_audit.err << first_audit.out.substr(0, 3000);
  const int64_t first_seq = StateSeq(ReadFile(audit_state));
  ASSERT_GT(first_seq, 1) << ReadFile(audit_state);

  // gatosd crashes with work pending and running; on restart it offers the
  // pending jobs again and the workers' requests reach it once more.
  more = timed_submit(yamls.begin() + 200, yamls.end());
  ids.insert(ids.end(), more.begin(), more.end());
  ASSERT_EQ(Proc("gatosd")->Stop(SIGKILL), -SIGKILL);
  size_t at_crash = Results().size();
  auto crash = Clock::now();
  ASSERT_TRUE(StartGatosd());
  double gatosd_restart_s = Seconds(Clock::now() - crash);
  ASSERT_TRUE(PollUntil([&] { return Results().size() >= 300; }, 120s, 200ms))
      << Results().size() << " of 300 results; " << at_crash << " at the gatosd crash";
  double elapsed = Seconds(Clock::now() - started);

  // Exactly one result per job, and each job ran once, or once more per
  // lease that expired (a takeover is the only allowed second run).
  auto results = Results();
  ASSERT_EQ(results.size(), 300u);
  auto poes = Poes(results);
  std::map<std::string, int> by_worker;
  int takeovers = 0;
  auto counts = Effects(effects);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string hex = ids[i].substr(7);
    ASSERT_TRUE(results.count(hex)) << ids[i];
    const json& poe = poes[hex];
    ASSERT_TRUE(poe.is_object()) << ids[i];
    EXPECT_EQ(poe.value("status", ""), "succeeded") << ids[i];
    int epoch = poe.value("lease_epoch", 0);
    if (epoch > 1) ++takeovers;
    int runs = counts["job" + std::to_string(i)];
    EXPECT_GE(runs, 1) << ids[i] << " never ran";
    EXPECT_LE(runs, epoch) << ids[i] << " ran " << runs << " times under " << epoch << " lease(s)";
    ++by_worker[poe.value("worker_id", "")];
  }
  EXPECT_EQ(counts.size(), 300u);
  EXPECT_GT(by_worker[worker_ids_[0]], 0) << "worker1's host ran nothing";
  EXPECT_GT(by_worker[worker_ids_[1]], 0) << "worker2's host ran nothing";
  EXPECT_EQ(by_worker[worker_ids_[0]] + by_worker[worker_ids_[1]], 300);

  // The stream is replicated: every node holds GATOS_JOBS in its store.
  for (const auto& n : kNats) {
    EXPECT_TRUE(std::filesystem::exists(dir_.Join(n + ".js") + "/jetstream/$G/streams/GATOS_JOBS"))
        << n << " holds no replica of GATOS_JOBS";
  }

  // The auditor's mirror, fetched again over the git protocol, verifies
  // incrementally from where it stopped: only the sequences after it.
  RunResult incremental = Audit(nullptr, audit_state);
  EXPECT_EQ(incremental.exit_code, 0) << incremental.err << incremental.out.substr(0, 3000);
  EXPECT_NE(incremental.out.find("verified sequences " + std::to_string(first_seq + 1) + ".."), std::string::npos)
      << incremental.out.substr(0, 2000);
  EXPECT_GT(StateSeq(ReadFile(audit_state)), first_seq);
  // And a full replay from the root verifies every job.
  RunResult audit = Audit();
  EXPECT_EQ(audit.exit_code, 0) << audit.err << audit.out.substr(0, 3000);
  int verified = 0;
  for (const auto& line : Lines(audit.out)) verified += line.rfind("ok blake3:", 0) == 0 && line.find(" succeeded") != std::string::npos;
  EXPECT_EQ(verified, 300) << audit.out.substr(0, 2000);
  std::cout << "[figures] 300 jobs across 2 worker hosts in " << elapsed << " s ("
            << 300 / elapsed << " jobs/s, with a NATS node and gatosd SIGKILLed; 300 `gatos submit` processes took "
            << submit_s << " s of it; gatosd back " << gatosd_restart_s << " s after its SIGKILL); worker1 "
            << by_worker[worker_ids_[0]] << ", worker2 " << by_worker[worker_ids_[1]] << ", takeovers " << takeovers
            << "\n";
}

TEST_F(MultiHostTest, WorkerHostCutOffMidJobIsTakenOverAndItsLateResultRefused) {
  ASSERT_TRUE(Prepare());
  ASSERT_TRUE(StartAll());
  ASSERT_TRUE(StartWorker(1));
  std::string effects = dir_.Join("effects");
  // Runs 2 s of a 4 s lease: worker1 finishes it while cut off, before its
  // own lease runs out, so it has a result it cannot deliver in time.
  std::string id = Submit({EffectJob(effects, "start", "; sleep 2")})[0];
  ASSERT_TRUE(PollUntil([&] { return Effects(effects)["start"] == 1; }, 30s)) << Proc("worker1")->log();
  ASSERT_TRUE(lab_.SetLink("worker1", false));
  auto cut = Clock::now();
  ASSERT_TRUE(StartWorker(2));
  // The lease runs out at the ledger; worker2 takes the job over.
  ASSERT_TRUE(PollUntil([&] { return Effects(effects)["start"] == 2; }, 60s))
      << Proc("gatosd")->log() << Proc("worker2")->log();
  double takeover_s = Seconds(Clock::now() - cut);
  // worker1 comes back while worker2 still runs the job: its result is late.
  ASSERT_TRUE(lab_.SetLink("worker1", true));
  ASSERT_TRUE(PollUntil([&] { return Results().count(id.substr(7)) > 0; }, 60s)) << Proc("worker2")->log();
  std::string result = Results()[id.substr(7)];
  json poe = Poes(Results())[id.substr(7)];
  EXPECT_EQ(poe.value("lease_epoch", 0), 2);
  EXPECT_EQ(poe.value("worker_id", ""), worker_ids_[1]);
  ASSERT_TRUE(Proc("worker1")->WaitForLog("stale", 60000) || Proc("worker1")->WaitForLog("refused", 1))
      << Proc("worker1")->log();
  EXPECT_EQ(Results()[id.substr(7)], result) << "the late result replaced the accepted one";
  RunResult audit = Audit();
  EXPECT_EQ(audit.exit_code, 0) << audit.err << audit.out;
  std::cout << "[figures] worker host cut off mid-job: taken over by the other host after " << takeover_s
            << " s (lease " << options_.lease_ms << " ms)\n";
}

// The replicated ledger across hosts (docs/replication.md): replica i runs
// `gatosd serve --replicated` on nats<i+1>'s host beside that NATS node; the
// first replica's repository is the ledger made by Prepare, the others are
// made from it with `gatosd init --replica-of`.
class ReplicatedMultiHostTest : public MultiHostTest {
 protected:
  std::string ReplicaDir(int i) { return i == 0 ? ledger_ : dir_.Join("r" + std::to_string(i + 1) + ".git"); }
  std::string ReplicaProc(int i) { return "replica" + std::to_string(i + 1); }

  ::testing::AssertionResult PrepareReplicas() {
    RunOptions ro;
    ro.env = env_;
    for (int i = 1; i < 3; ++i) {
      RunResult r = testing::Run({BinaryPath("gatosd"), "init", ReplicaDir(i), "--replica-of", ledger_, "--ledger-key",
                                  ledger_ + "/gatos/ledger_key"},
                                 ro);
      if (r.exit_code != 0) return ::testing::AssertionFailure() << "gatosd init --replica-of: " << r.err << r.out;
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult StartReplica(int i) {
    std::string error;
    const std::string log = dir_.Join(ReplicaProc(i) + ".log");
    started_at_[i] = ReadFile(log).size();
    if (!Proc(ReplicaProc(i))
             ->Start(lab_.In(kNats[i], {BinaryPath("gatosd"), "serve", "--replicated", "--replica-name",
                                        "r" + std::to_string(i + 1), "--ledger", ReplicaDir(i), "--nats", urls_,
                                        "--stream-replicas", "3", "--republish-s", std::to_string(options_.republish_s),
                                        "--sweep-ms", "50", "--nats-wait-s", "60", "--require-nats-auth"}),
                     env_, log, &error)) {
      return ::testing::AssertionFailure() << error;
    }
    return ::testing::AssertionSuccess();
  }

  // This run's log of replica i (the file is appended across restarts).
  std::string RunLog(int i) { return Proc(ReplicaProc(i))->log().substr(std::min(started_at_[i], Proc(ReplicaProc(i))->log().size())); }

  // The replica that serves as leader now, by its last role lines; -1.
  int Leader() {
    for (int i = 0; i < 3; ++i) {
      if (!Proc(ReplicaProc(i))->running()) continue;
      const std::string log = RunLog(i);
      const size_t leads = log.rfind(" leads with term "), serving = log.rfind("serving ledger");
      const size_t follows = log.rfind(" following"), stops = log.rfind("no longer the leader");
      if (leads != std::string::npos && serving != std::string::npos && serving > leads &&
          (follows == std::string::npos || follows < leads) && (stops == std::string::npos || stops < leads)) {
        return i;
      }
    }
    return -1;
  }
  int WaitForLeader(int not_this) {
    int leader = -1;
    PollUntil([&] { return (leader = Leader()) >= 0 && leader != not_this; }, 60s);
    return leader != not_this ? leader : -1;
  }
  std::string LogHead(int i) {
    RunOptions ro;
    ro.env = env_;
    return TrimEnd(testing::Run({"git", "--git-dir", ReplicaDir(i), "rev-parse", "refs/gatos/log"}, ro).out);
  }

  std::map<int, size_t> started_at_;
};

// 2,000 jobs submitted from the client host while the leader is SIGKILLed
// three times, the leader's host is cut off the network once, and a NATS
// node is killed. A client on the cut-off host gets errors, never an
// acknowledgement the ledger then lacks; every acknowledged job has
// exactly one result; the replicas converge on one log; every replica's
// repository and the auditor's mirror verify; deposed leaders follow again.
TEST_F(ReplicatedMultiHostTest, TwoThousandJobsThroughLeaderKillsACutOffLeaderAndANatsNodeCrash) {
  constexpr int kJobs = 2000;
  ASSERT_TRUE(Prepare());
  ASSERT_TRUE(PrepareReplicas());
  for (const auto& n : kNats) ASSERT_TRUE(StartNats(n));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(StartReplica(i));
  int leader = WaitForLeader(-1);
  ASSERT_GE(leader, 0) << "no leader elected";
  ASSERT_TRUE(StartGitDaemon());
  ASSERT_TRUE(StartWorker(1));
  ASSERT_TRUE(StartWorker(2));
  const auto started = Clock::now();

  std::vector<std::string> yamls;
  for (int i = 0; i < kJobs; ++i) {
    yamls.push_back("command: [\"/bin/echo\", \"replicated-" + std::to_string(i) + "\"]\ntimeout: 60\n");
  }
  std::vector<std::string> ids;
  std::thread client([&] { ids = Submit(yamls, 4); });
  struct JoinClient {  // a failed assertion returns early: the client stops first
    std::thread& t;
    std::atomic<bool>& stop;
    ~JoinClient() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join_client{client, stop_submitting_};
  std::string history;  // for failure messages
  std::vector<int> deposed;
  auto at = [&](int acknowledged) {
    return PollUntil([&] { return acknowledged_ >= acknowledged; }, 180s, 100ms);
  };
  auto kill_leader = [&] {
    // The leader now: the one elected last may have stepped down since
    // (a NATS node failing under it) and another taken over.
    leader = WaitForLeader(-1);
    ASSERT_GE(leader, 0) << history << "no leader to kill";
    ASSERT_EQ(Proc(ReplicaProc(leader))->Stop(SIGKILL), -SIGKILL);
    const auto t = Clock::now();
    const int next = WaitForLeader(leader);
    ASSERT_GE(next, 0) << history << "no new leader after killing r" << leader + 1;
    history += "r" + std::to_string(leader + 1) + " killed at " + std::to_string(acknowledged_.load()) +
               " acknowledged; r" + std::to_string(next + 1) + " leads after " + std::to_string(Seconds(Clock::now() - t)) +
               " s\n";
    deposed.push_back(leader);
    ASSERT_TRUE(StartReplica(leader));  // rejoins as a follower
    leader = next;
  };

  ASSERT_TRUE(at(200)) << acknowledged_;
  kill_leader();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(at(500)) << acknowledged_;
  kill_leader();
  if (HasFatalFailure()) return;

  // The leader's host is cut off. Its NATS node has no quorum there, its
  // keep of the leader key fails: it stops acknowledging and steps down,
  // while the two hosts left elect another leader. A client on the cut-off
  // host gets errors; whatever it is told was accepted must be in the log.
  ASSERT_TRUE(at(800)) << acknowledged_;
  const int cut = leader;
  const std::string cut_host = kNats[cut];
  const size_t cut_log = Proc(ReplicaProc(cut))->log().size();
  ASSERT_TRUE(lab_.SetLink(cut_host, false));
  const auto cut_at = Clock::now();
  std::vector<std::string> acked_while_cut;
  int refused_while_cut = 0;
  for (int k = 0; Seconds(Clock::now() - cut_at) < 20 &&
                  Proc(ReplicaProc(cut))->log().find("no longer the leader", cut_log) == std::string::npos;
       ++k) {
    // --leader-wait 0: one try of 3 s, so the loop sees the step-down
    // when it happens (waiting for a leader, a try lasts 30 s).
    const std::string file = dir_.Join("cut" + std::to_string(k) + ".yaml");
    WriteFile(file, "command: [\"/bin/echo\", \"cut-off-" + std::to_string(k) + "\"]\ntimeout: 60\n");
    RunResult r = Gatos({"submit", file, "--ledger", "nats://" + lab_.Address(cut_host) + ":" + std::to_string(kNatsPort),
                         "--sign-key", submitter_key_, "--timeout", "3", "--leader-wait", "0"},
                        cut_host, 30);
    if (r.exit_code == 0) {
      acked_while_cut.push_back(TrimEnd(r.out));
    } else {
      ++refused_while_cut;
    }
  }
  ASSERT_NE(Proc(ReplicaProc(cut))->log().find("no longer the leader", cut_log), std::string::npos)
      << "the cut-off leader kept serving:\n" << Proc(ReplicaProc(cut))->log().substr(cut_log);
  const double stepped_down_s = Seconds(Clock::now() - cut_at);
  // Once it stepped down, a client there is refused.
  {
    const std::string file = dir_.Join("cut-after.yaml");
    WriteFile(file, "command: [\"/bin/echo\", \"cut-off-after\"]\ntimeout: 60\n");
    RunResult r = Gatos({"submit", file, "--ledger", "nats://" + lab_.Address(cut_host) + ":" + std::to_string(kNatsPort),
                         "--sign-key", submitter_key_, "--timeout", "3", "--leader-wait", "0"},
                        cut_host, 30);
    EXPECT_NE(r.exit_code, 0) << "acknowledged by a host cut off the network: " << r.out;
  }
  leader = WaitForLeader(cut);
  ASSERT_GE(leader, 0) << "the hosts left elected no leader";
  history += "r" + std::to_string(cut + 1) + "'s host cut off; it stepped down after " + std::to_string(stepped_down_s) +
             " s; r" + std::to_string(leader + 1) + " leads\n";
  ASSERT_TRUE(lab_.SetLink(cut_host, true));
  deposed.push_back(cut);
  started_at_[cut] = cut_log;  // its "following again" comes after the cut

  // A NATS node dies (not the leader's host) and comes back.
  ASSERT_TRUE(at(1100)) << acknowledged_;
  leader = WaitForLeader(-1);
  ASSERT_GE(leader, 0) << history << "no leader before the NATS node crash";
  const std::string nats_victim = kNats[(leader + 1) % 3];
  ASSERT_EQ(Proc(nats_victim)->Stop(SIGKILL), -SIGKILL);
  ASSERT_TRUE(at(1300)) << acknowledged_;
  ASSERT_TRUE(StartNats(nats_victim));
  history += nats_victim + " killed and restarted\n";

  ASSERT_TRUE(at(1500)) << acknowledged_;
  kill_leader();
  if (HasFatalFailure()) return;
  client.join();
  ASSERT_EQ(ids.size(), static_cast<size_t>(kJobs));
  // A submission that was never acknowledged failed the test in Submit;
  // what follows checks the acknowledged ones.
  ids.erase(std::remove(ids.begin(), ids.end(), std::string()), ids.end());

  // Every acknowledged job finishes.
  std::vector<std::string> wait = {"wait"};
  wait.insert(wait.end(), ids.begin(), ids.end());
  wait.insert(wait.end(), acked_while_cut.begin(), acked_while_cut.end());
  wait.insert(wait.end(), {"--ledger", urls_, "--timeout", "240"});
  wait.insert(wait.begin(), BinaryPath("gatos"));
  RunOptions as_alice;  // NATS admits only the policy's keys
  as_alice.env = env_;
  as_alice.env["GATOS_NATS_KEY"] = submitter_key_;
  as_alice.timeout_seconds = 300;
  RunResult w = lab_.Run("client", wait, as_alice);
  EXPECT_EQ(w.exit_code, 0) << history << w.err.substr(0, 3000);
  const double elapsed = Seconds(Clock::now() - started);

  // One log everywhere.
  ASSERT_TRUE(PollUntil([&] { return LogHead(0) == LogHead(leader) && LogHead(1) == LogHead(leader) &&
                                     LogHead(2) == LogHead(leader); },
                        60s))
      << history << LogHead(0) << " " << LogHead(1) << " " << LogHead(2);
  // The deposed leaders follow again (or lead once more, after following).
  for (int i : deposed) {
    EXPECT_TRUE(Proc(ReplicaProc(i))->running()) << "r" << i + 1;
    EXPECT_NE(Proc(ReplicaProc(i))->log().find(" following", started_at_[i]), std::string::npos)
        << "r" << i + 1 << " did not follow again:\n" << RunLog(i);
  }
  for (int i = 0; i < 3; ++i) Proc(ReplicaProc(i))->Stop(SIGTERM, 30000);

  // Exactly one submit and one result per acknowledged job, in each
  // replica's signed log; no job with two results.
  std::vector<std::string> acked = ids;
  acked.insert(acked.end(), acked_while_cut.begin(), acked_while_cut.end());
  for (int i = 0; i < 3; ++i) {
    ExpectOneSubmitAndOneResultEach(ReplicaDir(i), acked);
    RunResult v = Gatos({"verify", "--all", "--require-results", "--repo", ReplicaDir(i), "--ledger-key",
                         ledger_ + "/gatos/ledger_key.pub"},
                        "", 600);
    EXPECT_EQ(v.exit_code, 0) << "r" << i + 1 << ": " << v.err << v.out.substr(0, 3000);
  }
  // The auditor mirrors a follower's repository over git and verifies it.
  RunResult audit = Audit(nullptr, "", true, "r2.git");
  EXPECT_EQ(audit.exit_code, 0) << audit.err << audit.out.substr(0, 3000);
  std::cout << "[figures] replicated, " << kJobs << " jobs in " << elapsed << " s across hosts:\n"
            << history << "while cut off: " << acked_while_cut.size() << " acknowledged (all in the log), "
            << refused_while_cut << " refused\n";
}

}  // namespace
}  // namespace gatos::testing
