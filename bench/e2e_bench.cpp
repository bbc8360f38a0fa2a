// e2e_bench: the whole job plane on loopback with real processes —
// nats-server (JetStream, file storage), gatosd serve, N gatos-worker
// processes (durable SQLite outbox, synchronous=FULL) with their default
// flags unless told otherwise — running trivial signed jobs.
//
// Prints jobs/s (first submission to last result) and submit-to-claim and
// submit-to-result latency p50/p99.
//   e2e_bench [--jobs 2000] [--workers 2] [--concurrency N] [--sandbox off|auto]
//             [--submit push|rpc] [--job sh|true] [--submitters 32]
//             [--rate JOBS/S] [--keep DIR] [--ledger-dir DIR] [--json] [--no-wal]
//             [--offer-window auto|all|N]   (gatosd's, docs/scheduling.md)
// --submit push (default): every job is a signed commit, all pushed with ONE
// stock `git push` to refs/gatos/submit/*, as a user would. --submit rpc:
// each job through the gatosd RPC by --submitters connections, each waiting
// for its reply before the next (32 by default: with 4, submission itself
// ran at ~200 jobs/s, a round trip per group commit per connection, and the
// figure measured the clients, not the plane); with --rate
// the submissions are paced, so latencies show the plane's own delay rather
// than the queue of an overloaded run.
// --replicas 3: a replicated ledger (docs/replication.md): three nats-server
// nodes in a cluster, three `gatosd serve --replicated` replicas, the
// streams and the leader bucket R3; needs --submit rpc (a push goes to one
// replica's front door, which may be a follower's).
// --ledger-dir DIR: the ledger lives in DIR (made empty first), everything
// else (nats-server's store, the workers' state) in the work directory: to
// measure the ledger's file system apart from the rest.
// --append-window N: the replicas' (gatosd serve --append-window).
// --batch-budget-ms N, --max-batch N: the single gatosd's (gatosd serve
// --batch-budget-ms, --max-batch).
// Replicated runs also print each follower's lag per record (from the
// stream storing it to the follower having applied it; the followers'
// GATOS_REPLICA_TIMING lines) and every run the log batches it took.
// --no-wal: gatosd syncs each batch's pack and log ref instead of writing a
// write-ahead log record (for comparison).
// --job sh (default): `/bin/sh -c 'echo N >> file'` in the job's workspace;
// --job echo: `/bin/sh -c 'echo N'` (one line of output: live output's cost);
// --job true: /bin/true.
// --live-output on|off: the workers' flag (default: the worker's, on).
// --schedules N: N schedules `--every 1s` (template /bin/true) added once
// gatosd serves; a thread polls refs/gatos/fires/* every 10 ms and prints
// the distribution of fire lag (a fire visible in the refs, minus its tick)
// over the run (docs/benchmarks.md, section 15). Fired jobs run on the
// workers too, beside the --jobs load.
// Claims are seen by listening to the claim requests and their replies on
// the bus (the bench is one more subscriber; gatosd publishes no claim
// event), results by gatosd's gatos.jobs.finished events.
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
#include <sstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/pack_writer.h"
#include "gatos/git/result.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/model/refs.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/model/log_format.h"
#include "gatos/model/nats_auth.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"

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

int RunWait(const std::vector<std::string>& argv, const std::string& log) {
  return Spawn(argv, log).Wait().code;
}

int FreePort(int from = 20000 + (getpid() % 20000)) {
  for (int p = from;; ++p) {
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

// CPU seconds of a process so far: its own and its waited-for children's
// (a worker's jobs), from /proc/PID/stat; -1 when it is gone.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 17 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);  // utime stime cutime cstime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The log sequence of a ledger's head; -1 when it cannot be read.
int64_t LogSeq(const std::string& dir) {
  auto ledger = Ledger::Open(dir);
  if (!ledger.ok()) return -1;
  auto head = (*ledger)->ResolveRef(kLogRef);
  if (!head.ok() || head->empty()) return -1;
  auto commit = (*ledger)->ReadCommit(*head);
  if (!commit.ok()) return -1;
  auto info = ParseLogMessage(commit->message);
  return info.ok() ? info->seq : -1;
}

// A follower's lag per applied record (GATOS_REPLICA_TIMING lines in its
// log): milliseconds from the stream storing the record to the replica
// having applied it.
std::vector<double> FollowerLags(const std::string& log) {
  std::vector<double> out;
  std::ifstream in(log);
  std::string line;
  const std::string mark = "applied after ";
  while (std::getline(in, line)) {
    size_t at = line.find(mark);
    if (at != std::string::npos) out.push_back(std::atof(line.c_str() + at + mark.size()));
  }
  return out;
}

double P(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// The job ids named by a claim request (single or batch form).
std::vector<std::string> ClaimedJobs(const std::string& data) {
  std::vector<std::string> out;
  auto one = [&](std::string_view e) {
    json j = json::parse(e, nullptr, false);
    if (j.is_object() && j.contains("job") && j["job"].is_string()) {
      std::string id = j["job"];
      out.push_back(id.rfind("blake3:", 0) == 0 ? id : "blake3:" + id);
    }
  };
  if (rpc::IsBatch(data)) {
    auto entries = rpc::DecodeBatch(data);
    if (entries.ok()) {
      for (auto e : *entries) one(e);
    }
  } else {
    one(data);
  }
  return out;
}

// Which entries of a claim reply are grants.
std::vector<bool> Granted(const std::string& data) {
  std::vector<bool> out;
  auto ok = [](std::string_view e) {
    json j = json::parse(e, nullptr, false);
    return j.is_object() && j.value("ok", false);
  };
  if (rpc::IsBatch(data)) {
    auto entries = rpc::DecodeBatch(data);
    if (entries.ok()) {
      for (auto e : *entries) out.push_back(ok(e));
    }
  } else {
    out.push_back(ok(data));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 2000, workers = 2, concurrency = 0, submitters = 32;
  std::string sandbox, keep, submit = "push", job_kind = "sh", live_output;
  double rate = 0;  // jobs/s offered in total; 0 = as fast as gatosd accepts
  const std::vector<FlagSpec> specs = {
      {"jobs", 0, true, false, "N"},
      {"workers", 0, true, false, "N"},
      {"concurrency", 0, true, false, "N (default: the worker's)"},
      {"submitters", 0, true, false, "N"},
      {"sandbox", 0, true, false, "off|auto (default: the worker's)"},
      {"submit", 0, true, false, "push|rpc"},
      {"job", 0, true, false, "sh|echo|true"},
      {"live-output", 0, true, false, "on|off (default: the worker's)"},
      {"rate", 0, true, false, "JOBS/S"},
      {"keep", 0, true, false, "DIR"},
      {"ledger-dir", 0, true, false, "DIR"},
      {"json", 0, false},
      {"no-wal", 0, false},
      {"offer-window"},
      {"replicas", 0, true, false, "1|3"},
      {"schedules", 0, true, false, "N"},
      {"append-window", 0, true, false, "N"},
      {"batch-budget-ms", 0, true, false, "N"},
      {"max-batch", 0, true, false, "N"}};
  int replicas = 1, schedules = 0;
  Flags flags;
  if (!flags.Parse({argv + 1, argv + argc}, specs) || !flags.positional().empty() ||
      !flags.GetInt("jobs", 1, 10'000'000, &jobs) || !flags.GetInt("workers", 1, 64, &workers) ||
      !flags.GetInt("concurrency", 1, 256, &concurrency) ||
      !flags.GetInt("submitters", 1, 256, &submitters) ||
      !flags.GetChoice("sandbox", {"off", "auto", "require"}, &sandbox) ||
      !flags.GetChoice("submit", {"push", "rpc"}, &submit) ||
      !flags.GetChoice("job", {"sh", "echo", "true"}, &job_kind) ||
      !flags.GetChoice("live-output", {"on", "off"}, &live_output) ||
      !flags.GetDouble("rate", 0, HUGE_VAL, &rate) || !flags.GetInt("replicas", 1, 3, &replicas) ||
      !flags.GetInt("schedules", 0, 1000, &schedules)) {
    Die((flags.error().empty() ? std::string() : flags.error() + "\n") + "usage: e2e_bench " +
        FlagSynopsis(specs));
  }
  if (flags.help()) {
    std::printf("usage: e2e_bench %s\n", FlagSynopsis(specs).c_str());
    return 0;
  }
  if (rate > 0 && submit == "push") Die("--rate paces RPC submissions: give --submit rpc");
  if (replicas != 1 && replicas != 3) Die("--replicas: 1 or 3");
  if (replicas > 1 && submit == "push") Die("--replicas 3 needs --submit rpc");
  const bool as_json = flags.Has("json");
  keep = flags.GetOr("keep", "");
  g_bin = fs::canonical("/proc/self/exe").parent_path().string();
  std::string dir = keep.empty() ? "/tmp/gatos-e2e-bench-" + std::to_string(getpid()) : keep;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  std::string log = dir + "/log";
  std::vector<int> ports, routes;
  for (int n = 0, from = 20000 + (getpid() % 20000); n < replicas; ++n) {
    ports.push_back(FreePort(from));
    routes.push_back(FreePort(ports.back() + 1));
    from = routes.back() + 1;
  }
  std::string url;
  std::vector<Process> procs;
  std::vector<std::string> names;  // procs[i]'s, for the CPU table
  for (int n = 0; n < replicas; ++n) {
    const std::string node = replicas == 1 ? "" : std::to_string(n);
    {
      std::ofstream conf(dir + "/nats" + node + ".conf");
      conf << "max_payload: 8388608\n";
      if (replicas > 1) {
        conf << "server_name: n" << n << "\ncluster {\n  name: gatos\n  listen: 127.0.0.1:" << routes[n]
             << "\n  routes: [";
        for (int m = 0, first = 1; m < replicas; ++m) {
          if (m == n) continue;
          conf << (first ? " " : ", ") << "nats-route://127.0.0.1:" << routes[m];
          first = 0;
        }
        conf << " ]\n}\n";
      }
    }
    procs.push_back(Spawn({"nats-server", "-js", "-a", "127.0.0.1", "-p", std::to_string(ports[n]), "-sd",
                           dir + "/js" + node, "-c", dir + "/nats" + node + ".conf"},
                          dir + "/nats" + node + ".log"));
    names.push_back("nats-server" + node);
    if (!WaitForText(dir + "/nats" + node + ".log", "Server is ready", 10000))
      Die("nats-server did not start; see " + dir);
    url += (url.empty() ? "" : ",") + std::string("nats://127.0.0.1:") + std::to_string(ports[n]);
  }
  const std::string ledger_dir = flags.GetOr("ledger-dir", "");
  std::string ledger = ledger_dir.empty() ? dir + "/ledger.git" : ledger_dir;
  if (!ledger_dir.empty()) fs::remove_all(ledger, ec);
  if (RunWait({g_bin + "/gatosd", "init", ledger}, log) != 0) Die("gatosd init failed; see " + log);
  if (RunWait({g_bin + "/gatos", "keygen", "-f", dir + "/submitter"}, log) != 0) Die("keygen");
  RunWait(
      {g_bin + "/gatos", "policy", "allow-submitter", "--ledger", ledger, dir + "/submitter.pub"},
      log);
  for (int w = 0; w < workers; ++w) {
    std::string k = dir + "/worker" + std::to_string(w);
    RunWait({g_bin + "/gatos", "keygen", "-f", k}, log);
    RunWait({g_bin + "/gatos", "policy", "allow-worker", "--ledger", ledger, k + ".pub"}, log);
  }
  if (replicas > 1) setenv("GATOS_REPLICA_TIMING", "1", 1);  // the followers' lag lines
  if (replicas == 1) {
    std::vector<std::string> argv = {g_bin + "/gatosd", "serve", "--ledger", ledger, "--nats", url};
    if (flags.Has("no-wal")) argv.push_back("--no-wal");
    if (auto w = flags.Get("offer-window")) argv.insert(argv.end(), {"--offer-window", *w});
    if (auto b = flags.Get("batch-budget-ms")) argv.insert(argv.end(), {"--batch-budget-ms", *b});
    if (auto b = flags.Get("max-batch")) argv.insert(argv.end(), {"--max-batch", *b});
    procs.push_back(Spawn(argv, dir + "/gatosd.log"));
    names.push_back("gatosd");
    if (!WaitForText(dir + "/gatosd.log", "serving ledger", 20000)) Die("gatosd did not start; see " + dir);
  } else {
    for (int r = 1; r < replicas; ++r) {
      if (RunWait({g_bin + "/gatosd", "init", dir + "/replica" + std::to_string(r) + ".git", "--replica-of", ledger,
                   "--ledger-key", ledger + "/gatos/ledger_key"},
                  log) != 0) {
        Die("gatosd init --replica-of failed; see " + log);
      }
    }
    for (int r = 0; r < replicas; ++r) {
      std::vector<std::string> argv = {g_bin + "/gatosd", "serve", "--replicated", "--replica-name",
                                       "r" + std::to_string(r), "--ledger",
                                       r == 0 ? ledger : dir + "/replica" + std::to_string(r) + ".git",
                                       "--nats", url, "--stream-replicas", std::to_string(replicas),
                                       "--nats-wait-s", "60"};
      if (flags.Has("no-wal")) argv.push_back("--no-wal");
      if (auto w = flags.Get("append-window")) argv.insert(argv.end(), {"--append-window", *w});
      procs.push_back(Spawn(argv, dir + "/gatosd" + std::to_string(r) + ".log"));
      names.push_back("gatosd r" + std::to_string(r));
    }
    bool serving = false;
    for (int i = 0; i < 3000 && !serving; ++i) {
      for (int r = 0; r < replicas && !serving; ++r) {
        serving = WaitForText(dir + "/gatosd" + std::to_string(r) + ".log", "serving ledger", 20);
      }
    }
    if (!serving) Die("no replica leads; see " + dir);
  }
  for (int w = 0; w < workers; ++w) {
    std::string k = dir + "/worker" + std::to_string(w);
    std::string wlog = dir + "/worker" + std::to_string(w) + ".log";
    std::vector<std::string> argv = {g_bin + "/gatos-worker",
                                     "run",
                                     "--nats",
                                     url,
                                     "--key",
                                     k,
                                     "--ledger-key",
                                     ledger + "/gatos/ledger_key.pub",
                                     "--state-dir",
                                     k + ".state"};
    if (concurrency > 0) argv.insert(argv.end(), {"--concurrency", std::to_string(concurrency)});
    if (!sandbox.empty()) argv.insert(argv.end(), {"--sandbox", sandbox});
    if (!live_output.empty()) argv.insert(argv.end(), {"--live-output", live_output});
    procs.push_back(Spawn(argv, wlog));
    names.push_back("worker" + std::to_string(w));
    if (!WaitForText(wlog, " ready ", 20000)) Die("worker did not start; see " + wlog);
  }
  std::string ready_line;
  {
    std::ifstream in(dir + "/worker0.log");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(" ready ") != std::string::npos || line.find("sandbox") != std::string::npos ||
          line.find("UNSANDBOXED") != std::string::npos) {
        ready_line += "  " + line + "\n";
      }
    }
  }

  BusOptions bo;
  bo.url = url;
  auto bus = Bus::Connect(bo);
  if (!bus.ok()) Die(bus.status().message());
  std::mutex mu;
  std::map<std::string, Clock::time_point> submitted, claimed, finished;
  // Paced runs only: where submit->claim goes, hop by hop (the submit's
  // reply, the offer on the stream, the worker's claim request).
  std::map<std::string, Clock::time_point> acked, offered, asked;
  std::map<std::string, std::vector<std::string>> claim_inbox;  // reply subject -> jobs asked for
  std::map<std::string, std::pair<Clock::time_point, std::string>> early_replies;
  std::atomic<int> done{0};
  std::set<std::string> ours;  // the --jobs load's ids (fired jobs finish too)
  auto s1 = (*bus)->Subscribe(rpc::kFinishedSubject, [&](Message m) {
    json j = json::parse(m.data, nullptr, false);
    if (!j.is_object()) return;
    std::lock_guard<std::mutex> l(mu);
    const std::string id = j.value("job", "");
    if (!ours.count(id)) return;
    if (finished.emplace(id, Clock::now()).second) ++done;
  });
  std::vector<std::unique_ptr<Bus::Subscription>> claim_subs;
  if (rate > 0) {
    // Paced runs measure submit->claim: the time a worker's claim is granted.
    for (const char* subject : {rpc::kClaim, rpc::kClaimBatch}) {
      auto s = (*bus)->Subscribe(subject, [&](Message m) {
        std::lock_guard<std::mutex> l(mu);
        std::vector<std::string> jobs = ClaimedJobs(m.data);
        for (const auto& id : jobs) asked.emplace(id, Clock::now());
        auto early = early_replies.find(m.reply);
        if (early == early_replies.end()) {
          claim_inbox[m.reply] = std::move(jobs);
          return;
        }
        // Callbacks of two subscriptions run on different threads: the
        // reply may have been seen first.
        std::vector<bool> ok = Granted(early->second.second);
        for (size_t i = 0; i < jobs.size() && i < ok.size(); ++i) {
          if (ok[i]) claimed.emplace(jobs[i], early->second.first);
        }
        early_replies.erase(early);
      });
      if (s.ok()) claim_subs.push_back(std::move(*s));
    }
    auto offers = (*bus)->Subscribe(rpc::kPendingSubject, [&](Message m) {
      auto now = Clock::now();
      auto pending = rpc::DecodePending(m.data);
      if (!pending.ok()) return;
      std::lock_guard<std::mutex> l(mu);
      offered.emplace("blake3:" + pending->job_hex, now);
    });
    if (offers.ok()) claim_subs.push_back(std::move(*offers));
    // Replies go to each worker's own inbox prefix (it connects as its key).
    std::vector<std::string> inboxes = {"_INBOX.>"};
    for (int w = 0; w < workers; ++w) {
      auto pub = ReadPublicKeyFile(dir + "/worker" + std::to_string(w) + ".pub");
      if (pub.ok()) inboxes.push_back(InboxPrefixFor(*pub) + ".>");
    }
    for (const auto& inbox : inboxes) {
      auto s = (*bus)->Subscribe(inbox, [&](Message m) {
        auto now = Clock::now();
        std::lock_guard<std::mutex> l(mu);
        auto it = claim_inbox.find(m.subject);
        if (it == claim_inbox.end()) {
          if (m.data.find("lease_commit") != std::string::npos)
            early_replies[m.subject] = {now, m.data};
          return;
        }
        std::vector<bool> ok = Granted(m.data);
        for (size_t i = 0; i < it->second.size() && i < ok.size(); ++i) {
          if (ok[i]) claimed.emplace(it->second[i], now);
        }
        claim_inbox.erase(it);
      });
      if (s.ok()) claim_subs.push_back(std::move(*s));
    }
  }
  (void)(*bus)->Flush(2000);  // best effort: the subscriptions are in place before the first job

  // Pre-build signed job commits so the submit loop measures the plane, not us.
  auto key = ReadPrivateKeyFile(dir + "/submitter");
  if (!key.ok()) Die(key.status().message());
  std::string run_tag = std::to_string(SystemNowMs());
  std::vector<std::pair<std::string, std::string>> frames;  // id, frame
  std::vector<GitObject> all_objects;
  std::vector<std::string> commits;
  for (int i = 0; i < jobs; ++i) {
    std::string n = run_tag + "-" + std::to_string(i);
    std::string yaml =
        job_kind == "sh"
            ? "command: [\"/bin/sh\", \"-c\"]\nargs: [\"echo " + n + " >> file\"]\ntimeout: 60\n"
        : job_kind == "echo"
            ? "command: [\"/bin/sh\", \"-c\"]\nargs: [\"echo " + n + "\"]\ntimeout: 60\n"
            : "command: [\"/bin/true\"]\nargs: [\"" + n + "\"]\ntimeout: 60\n";
    std::string hex = JobIdHex(*ParseManifest(yaml, "job.yaml"));
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto commit = BuildCommitObject(tree, {}, "bench job\n\nJob-Id: blake3:" + hex + "\n", "bench",
                                    "b@x", SystemNowMs(), &*key);
    objects.insert(objects.begin(), *commit);
    frames.emplace_back("blake3:" + hex,
                        rpc::EncodeFrame(json{{"commit", commit->id}}, EncodeObjectBatch(objects)));
    commits.push_back(commit->id);
    all_objects.insert(all_objects.end(), objects.begin(), objects.end());
  }
  {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [id, frame] : frames) ours.insert(id);
  }
  // Schedules firing every second through the run, and a poller of their
  // fires: lag = when the fire is visible in refs/gatos/fires/<name> minus
  // its tick.
  std::atomic<bool> stop_poll{false};
  std::vector<double> fire_lag_ms;
  std::thread poller;
  if (schedules > 0) {
    std::ofstream(dir + "/tick.yaml") << "command: [\"/bin/true\"]\ntimeout: 60\n";
    for (int s = 0; s < schedules; ++s) {
      if (RunWait({g_bin + "/gatos", "schedule", "add", "b" + std::to_string(s), "--every", "1s", "--template",
                   dir + "/tick.yaml", "--sign-key", dir + "/submitter", "--ledger", ledger},
                  log) != 0) {
        Die("gatos schedule add failed; see " + log);
      }
    }
    poller = std::thread([&] {
      auto l = Ledger::Open(ledger);
      if (!l.ok()) Die(l.status().message());
      std::map<std::string, std::string> seen;
      while (!stop_poll) {
        for (int s = 0; s < schedules; ++s) {
          const std::string ref = std::string(kFirePrefix) + "b" + std::to_string(s);
          auto id = (*l)->ResolveRef(ref);
          if (!id.ok() || id->empty() || seen[ref] == *id) continue;
          const bool first = seen[ref].empty();
          seen[ref] = *id;
          auto tick = FiredAtOf(LedgerLookup(l->get()), *id);
          // The first fire seen may predate the poller.
          if (tick.ok() && !first) fire_lag_ms.push_back(static_cast<double>(SystemNowMs() - *tick));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  std::string source = dir + "/jobs.git";
  if (submit == "push") {
    // All jobs as branches of one repository, written as one pack.
    if (RunWait({"git", "init", "-q", "--bare", source}, log) != 0)
      Die("git init failed; see " + log);
    std::vector<const GitObject*> ptrs;
    for (const auto& o : all_objects) ptrs.push_back(&o);
    auto pack = WritePack(source, ptrs, PackWriteOptions{});
    if (!pack.ok()) Die(pack.status().message());
    std::string updates;
    for (int i = 0; i < jobs; ++i)
      updates += "create refs/heads/j" + std::to_string(i) + " " + commits[i] + "\n";
    std::ofstream(dir + "/updates") << updates;
    if (std::system(
            ("git --git-dir " + source + " update-ref --stdin < " + dir + "/updates").c_str()) !=
        0) {
      Die("git update-ref failed");
    }
  }
  std::fprintf(
      stderr,
      "e2e_bench: %d jobs (%s), %d workers, concurrency %s, sandbox %s, submitted by %s\n%s", jobs,
      job_kind.c_str(), workers, concurrency ? std::to_string(concurrency).c_str() : "default",
      sandbox.empty() ? "default" : sandbox.c_str(),
      submit == "push" ? "one git push" : (std::to_string(submitters) + " RPC connections").c_str(),
      ready_line.c_str());
  std::vector<std::string> replica_dirs = {ledger};
  for (int r = 1; r < replicas; ++r) replica_dirs.push_back(dir + "/replica" + std::to_string(r) + ".git");
  const int64_t seq0 = LogSeq(ledger);
  std::vector<double> cpu0;
  for (const auto& p : procs) cpu0.push_back(CpuSeconds(p.pid()));
  const double bench_cpu0 = CpuSeconds(getpid());
  auto t0 = Clock::now();
  if (submit == "push") {
    {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& [id, frame] : frames) submitted[id] = t0;
    }
    if (RunWait({"git", "--git-dir", source, "push", "-q", LedgerPushPath(ledger),
                 "refs/heads/*:refs/gatos/submit/*"},
                dir + "/push.log") != 0) {
      Die("git push failed; see " + dir + "/push.log");
    }
  } else {
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
            auto due = t0 + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(i / rate));
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
          {
            std::lock_guard<std::mutex> l(mu);
            acked.emplace(frames[i].first, Clock::now());
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  double submit_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto deadline = Clock::now() + std::chrono::minutes(10);
  while (done < jobs && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto t1 = Clock::now();
  double total_s = std::chrono::duration<double>(t1 - t0).count();
  if (poller.joinable()) {
    stop_poll = true;
    poller.join();
  }
  // Where the CPU went in the timed window, per process (jobs' CPU counted
  // in their worker once reaped).
  std::string cpu_line;
  double cpu_total = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    const double c = CpuSeconds(procs[i].pid());
    if (c < 0 || cpu0[i] < 0) continue;
    cpu_total += c - cpu0[i];
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", cpu_line.empty() ? "" : ", ", names[i].c_str(),
                  (c - cpu0[i]) * 1000.0 / std::max(1, jobs));
    cpu_line += buf;
  }
  {
    const double c = CpuSeconds(getpid()) - bench_cpu0;  // the submitters and listeners
    char buf[64];
    std::snprintf(buf, sizeof buf, ", e2e_bench %.2f", c * 1000.0 / std::max(1, jobs));
    cpu_line += buf;
  }
  std::vector<double> to_claim, to_result;
  {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [id, t] : submitted) {
      if (claimed.count(id))
        to_claim.push_back(std::chrono::duration<double, std::milli>(claimed[id] - t).count());
      if (finished.count(id))
        to_result.push_back(std::chrono::duration<double, std::milli>(finished[id] - t).count());
    }
  }
  double jps = done / total_s;
  std::printf("jobs %d finished %d in %.2f s: %.0f jobs/s (submission alone %.0f jobs/s)\n", jobs,
              done.load(), total_s, jps, jobs / submit_s);
  std::printf("cpu ms/job: %s; all %.2f (%.2f CPUs busy)\n", cpu_line.c_str(),
              cpu_total * 1000.0 / std::max(1, jobs), cpu_total / total_s);
  if (!to_claim.empty()) {
    std::printf("submit->claim   p50 %7.1f ms  p99 %7.1f ms\n", P(to_claim, 0.5),
                P(to_claim, 0.99));
  }
  std::printf("submit->result  p50 %7.1f ms  p99 %7.1f ms\n", P(to_result, 0.5),
              P(to_result, 0.99));
  if (!fire_lag_ms.empty()) {
    std::printf("fire lag (%zu fires of %d schedules every 1s, tick->visible in refs/gatos/fires)\n"
                "  p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms  max %7.1f ms  over 1 s: %zu\n",
                fire_lag_ms.size(), schedules, P(fire_lag_ms, 0.5), P(fire_lag_ms, 0.9), P(fire_lag_ms, 0.99),
                *std::max_element(fire_lag_ms.begin(), fire_lag_ms.end()),
                static_cast<size_t>(std::count_if(fire_lag_ms.begin(), fire_lag_ms.end(),
                                                  [](double v) { return v > 1000; })));
  }
  if (rate > 0) {
    // submit -> reply (a group commit) -> offer on the stream (views
    // written, published, stored) -> claim request (the worker's fetch) ->
    // grant (a group commit): each job's own hops.
    std::vector<double> hop[4];
    std::lock_guard<std::mutex> l(mu);
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    for (const auto& [id, t] : submitted) {
      auto a = acked.find(id), o = offered.find(id), q = asked.find(id), c = claimed.find(id);
      if (a == acked.end() || o == offered.end() || q == asked.end() || c == claimed.end())
        continue;
      hop[0].push_back(ms(t, a->second));
      hop[1].push_back(ms(t, o->second));
      hop[2].push_back(ms(o->second, q->second));
      hop[3].push_back(ms(q->second, c->second));
    }
    const char* names[4] = {"submit->reply", "submit->offer", "offer->claim request",
                            "claim request->grant"};
    for (int h = 0; h < 4; ++h) {
      if (hop[h].empty()) continue;
      std::printf("  %-22s p50 %7.1f ms  p99 %7.1f ms\n", names[h], P(hop[h], 0.5),
                  P(hop[h], 0.99));
    }
  }
  if (as_json) {
    json j = {{"jobs", jobs},
              {"finished", done.load()},
              {"seconds", total_s},
              {"jobs_per_s", jps},
              {"submit_to_result_p50_ms", P(to_result, 0.5)},
              {"submit_to_result_p99_ms", P(to_result, 0.99)},
              {"cpu_ms_per_job", cpu_total * 1000.0 / std::max(1, jobs)},
              // The timed window on CLOCK_MONOTONIC (steady_clock's clock on
              // Linux), for `perf record -k CLOCK_MONOTONIC`
              // (bench/side_by_side/profile.sh samples only this window).
              {"window_monotonic_s",
               {std::chrono::duration<double>(t0.time_since_epoch()).count(),
                std::chrono::duration<double>(t1.time_since_epoch()).count()}}};
    if (!to_claim.empty()) {
      j["submit_to_claim_p50_ms"] = P(to_claim, 0.5);
      j["submit_to_claim_p99_ms"] = P(to_claim, 0.99);
    }
    std::printf("%s\n", j.dump().c_str());
  }
  std::fflush(stdout);

  claim_subs.clear();
  s1->reset();
  bus->reset();
  for (auto it = procs.rbegin(); it != procs.rend(); ++it)
    it->Stop(SIGTERM, std::chrono::seconds(60));
  // Log batches in the run (the replicas converged once stopped) and,
  // replicated, each follower's lag per applied record. With --json on
  // stderr: the JSON stays the last line of stdout (bench/side_by_side
  // reads it with tail -1).
  FILE* more = as_json ? stderr : stdout;
  int64_t seq1 = -1;
  for (const auto& d : replica_dirs) seq1 = std::max(seq1, LogSeq(d));
  if (seq0 > 0 && seq1 >= seq0) {
    std::fprintf(more, "log batches %lld (%.1f jobs per batch)\n", static_cast<long long>(seq1 - seq0),
                 jobs / std::max(1.0, static_cast<double>(seq1 - seq0)));
  }
  for (int r = 0; r < replicas && replicas > 1; ++r) {
    std::vector<double> lags = FollowerLags(dir + "/gatosd" + std::to_string(r) + ".log");
    if (lags.size() < 10) continue;  // the leader (or a replica that led most of the run)
    std::fprintf(more,
                 "follower r%d lag (stream stored -> applied): %zu records, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
                 r, lags.size(), P(lags, 0.5), P(lags, 0.99), P(lags, 1.0));
  }
  std::fflush(more);
  // A repack gatosd started may still be finishing: remove what can be removed.
  if (keep.empty()) {
    fs::remove_all(dir, ec);
    if (!ledger_dir.empty()) fs::remove_all(ledger, ec);
  }
  return done == jobs ? 0 : 1;
}
