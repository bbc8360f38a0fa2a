// e2e_bench: the whole job plane on loopback with real processes —
// nats-server (JetStream, file storage), gatosd serve, N gatos-worker
// processes (durable SQLite outbox, synchronous=FULL) — running trivial
// /bin/true jobs submitted through the gatosd RPC.
//
// Prints jobs/s (first submit to last result) and submit-to-claim and
// submit-to-result latency p50/p99, from the JetStream events gatosd emits.
//   e2e_bench [--jobs 1000] [--workers 2] [--concurrency 4] [--submitters 4]
//             [--sandbox off|auto] [--rate JOBS/S] [--keep DIR]
// With --rate the submissions are paced, so latencies show the plane's own
// delay rather than the queue of an overloaded run.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/bus.h"
#include "gatos/flags.h"
#include "gatos/clock.h"
#include "gatos/keys.h"
#include "gatos/manifest.h"
#include "gatos/process.h"
#include "gatos/result.h"
#include "gatos/rpc.h"

using namespace gatos;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

std::string g_bin;

void Die(const std::string& m) {
  std::fprintf(stderr, "e2e_bench: %s\n", m.c_str());
  std::exit(1);
}

// A child with stdout and stderr appended to `log`, SIGTERMed if we die.
Process Spawn(const std::vector<std::string>& argv, const std::string& log) {
  Result<Process> p = Process::Spawn(argv, SpawnOptions::WithLog(log, SIGTERM));
  if (!p.ok()) Die(p.status().message());
  return std::move(*p);
}

int RunWait(const std::vector<std::string>& argv, const std::string& log) { return Spawn(argv, log).Wait().code; }

int FreePort() {
  for (int p = 20000 + (getpid() % 20000);; ++p) {
    std::string cmd = "ss -ltn 'sport = :" + std::to_string(p) + "' | grep -q LISTEN";
    if (std::system(cmd.c_str()) != 0) return p;
  }
}

bool WaitForText(const std::string& path, const std::string& needle, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

double P(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 1000, workers = 2, concurrency = 4, submitters = 4;
  std::string sandbox = "off", keep;
  double rate = 0;  // jobs/s offered in total; 0 = as fast as gatosd accepts
  const std::vector<FlagSpec> specs = {{"jobs", 0, true, false, "N"},        {"workers", 0, true, false, "N"},
                                       {"concurrency", 0, true, false, "N"}, {"submitters", 0, true, false, "N"},
                                       {"sandbox", 0, true, false, "off|auto"}, {"rate", 0, true, false, "JOBS/S"},
                                       {"keep", 0, true, false, "DIR"}};
  Flags flags;
  if (!flags.Parse({argv + 1, argv + argc}, specs) || !flags.positional().empty() ||
      !flags.GetInt("jobs", 1, 10'000'000, &jobs) || !flags.GetInt("workers", 1, 64, &workers) ||
      !flags.GetInt("concurrency", 1, 256, &concurrency) || !flags.GetInt("submitters", 1, 256, &submitters) ||
      !flags.GetChoice("sandbox", {"off", "auto", "require"}, &sandbox) ||
      !flags.GetDouble("rate", 0, HUGE_VAL, &rate)) {
    Die((flags.error().empty() ? std::string() : flags.error() + "\n") + "usage: e2e_bench " + FlagSynopsis(specs));
  }
  if (flags.help()) {
    std::printf("usage: e2e_bench %s\n", FlagSynopsis(specs).c_str());
    return 0;
  }
  keep = flags.GetOr("keep", "");
  g_bin = fs::canonical("/proc/self/exe").parent_path().string();
  std::string dir = keep.empty() ? "/tmp/gatos-e2e-bench-" + std::to_string(getpid()) : keep;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string log = dir + "/log";
  int port = FreePort();
  std::string url = "nats://127.0.0.1:" + std::to_string(port);
  {
    std::ofstream conf(dir + "/nats.conf");
    conf << "max_payload: 8388608\n";
  }
  std::vector<Process> procs;
  procs.push_back(Spawn({"nats-server", "-js", "-a", "127.0.0.1", "-p", std::to_string(port), "-sd", dir + "/js",
                         "-c", dir + "/nats.conf"},
                        dir + "/nats.log"));
  if (!WaitForText(dir + "/nats.log", "Server is ready", 10000)) Die("nats-server did not start; see " + dir);
  std::string ledger = dir + "/ledger.git";
  if (RunWait({g_bin + "/gatosd", "init", ledger}, log) != 0) Die("gatosd init failed; see " + log);
  if (RunWait({g_bin + "/gatos", "keygen", "-f", dir + "/submitter"}, log) != 0) Die("keygen");
  RunWait({g_bin + "/gatos", "policy", "allow-submitter", "--ledger", ledger, dir + "/submitter.pub"}, log);
  for (int w = 0; w < workers; ++w) {
    std::string k = dir + "/worker" + std::to_string(w);
    RunWait({g_bin + "/gatos", "keygen", "-f", k}, log);
    RunWait({g_bin + "/gatos", "policy", "allow-worker", "--ledger", ledger, k + ".pub"}, log);
  }
  procs.push_back(Spawn({g_bin + "/gatosd", "serve", "--ledger", ledger, "--nats", url}, dir + "/gatosd.log"));
  if (!WaitForText(dir + "/gatosd.log", "serving ledger", 20000)) Die("gatosd did not start; see " + dir);
  for (int w = 0; w < workers; ++w) {
    std::string k = dir + "/worker" + std::to_string(w);
    std::string wlog = dir + "/worker" + std::to_string(w) + ".log";
    procs.push_back(Spawn({g_bin + "/gatos-worker", "run", "--nats", url, "--key", k, "--state-dir", k + ".state",
                           "--concurrency", std::to_string(concurrency), "--sandbox", sandbox},
                          wlog));
    if (!WaitForText(wlog, " ready ", 20000)) Die("worker did not start; see " + wlog);
  }

  BusOptions bo;
  bo.url = url;
  auto bus = Bus::Connect(bo);
  if (!bus.ok()) Die(bus.status().message());
  std::mutex mu;
  std::map<std::string, Clock::time_point> submitted, claimed, finished;
  std::atomic<int> done{0};
  auto on_event = [&](std::map<std::string, Clock::time_point>* into, bool count) {
    return [&, into, count](Message m) {
      json j = json::parse(m.data, nullptr, false);
      if (!j.is_object()) return;
      std::lock_guard<std::mutex> l(mu);
      if (into->emplace(j.value("job", ""), Clock::now()).second && count) ++done;
    };
  };
  // gatosd publishes no claim events (a claim is answered to its worker);
  // submit->claim latency comes from gatosd's gatos_submit_to_claim_seconds.
  auto s2 = (*bus)->Subscribe(rpc::kFinishedSubject, on_event(&finished, true));
  (void)(*bus)->Flush(2000);

  // Pre-build signed job commits so the submit loop measures the plane, not us.
  auto key = ReadPrivateKeyFile(dir + "/submitter");
  if (!key.ok()) Die(key.status().message());
  std::string run_tag = std::to_string(SystemNowMs());
  std::vector<std::pair<std::string, std::string>> frames;  // id, frame
  for (int i = 0; i < jobs; ++i) {
    std::string yaml = "command: [\"/bin/true\"]\nargs: [\"" + run_tag + "-" + std::to_string(i) + "\"]\ntimeout: 60\n";
    std::string hex = JobIdHex(*ParseManifest(yaml, "job.yaml"));
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto commit = BuildCommitObject(tree, {}, "bench job\n\nJob-Id: blake3:" + hex + "\n", "bench", "b@x",
                                    SystemNowMs(), &*key);
    objects.insert(objects.begin(), *commit);
    frames.emplace_back("blake3:" + hex, rpc::EncodeFrame(json{{"commit", commit->id}}, EncodeObjectBatch(objects)));
  }
  std::fprintf(stderr, "e2e_bench: %d jobs, %d workers x concurrency %d, %d submitters, sandbox %s\n", jobs,
               workers, concurrency, submitters, sandbox.c_str());
  auto t0 = Clock::now();
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < submitters; ++s) {
    threads.emplace_back([&] {
      BusOptions o;
      o.url = url;
      auto b = Bus::Connect(o);
      if (!b.ok()) Die(b.status().message());
      int i;
      while ((i = next++) < jobs) {
        if (rate > 0) {  // open-loop pacing: job i is due at t0 + i / rate
          auto due = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(i / rate));
          std::this_thread::sleep_until(due);
        }
        {
          std::lock_guard<std::mutex> l(mu);
          submitted[frames[i].first] = Clock::now();
        }
        auto r = (*b)->Request(rpc::kSubmit, frames[i].second, 30000);
        if (!r.ok() || !json::parse(r->data).value("ok", false)) {
          Die("submit failed: " + (r.ok() ? r->data : r.status().message()));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double submit_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto deadline = Clock::now() + std::chrono::minutes(10);
  while (done < jobs && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto t1 = Clock::now();
  double total_s = std::chrono::duration<double>(t1 - t0).count();
  std::vector<double> to_claim, to_result;
  {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [id, t] : submitted) {
      if (claimed.count(id)) to_claim.push_back(std::chrono::duration<double, std::milli>(claimed[id] - t).count());
      if (finished.count(id)) to_result.push_back(std::chrono::duration<double, std::milli>(finished[id] - t).count());
    }
  }
  std::printf("jobs %d finished %d in %.2f s: %.0f jobs/s (submission alone %.0f jobs/s)\n", jobs, done.load(),
              total_s, done / total_s, jobs / submit_s);
  std::printf("submit->claim   p50 %7.1f ms  p99 %7.1f ms\n", P(to_claim, 0.5), P(to_claim, 0.99));
  std::printf("submit->result  p50 %7.1f ms  p99 %7.1f ms\n", P(to_result, 0.5), P(to_result, 0.99));
  std::fflush(stdout);

  s2->reset();
  bus->reset();
  for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->Stop(SIGTERM, std::chrono::seconds(60));
  if (keep.empty()) fs::remove_all(dir);
  return done == jobs ? 0 : 1;
}
