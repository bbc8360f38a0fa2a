// scheduler_bench: what the offer scheduler costs the ledger
// (docs/benchmarks.md, "Scheduling").
//
// For each shape (one submitter and one pool; then --submitters submitters
// and --pools pools) it makes a ledger with `gatosd init`, allows the
// submitter keys in one policy change, and submits --jobs jobs through the
// JobService (gatosd's request handlers, without NATS), job i signed by
// submitter i mod S, in pool i mod P. Then, as a pool of always-idle
// workers would, it claims every job the service offers (the offers the
// scheduler lets out: per pool, the window of outstanding offers that
// follows the claim rate) in batches, until --claims jobs are claimed, and
// reports claims/s, with the same number of offers in flight in both
// shapes (--window, spread over the pools), so that both claim in rounds of
// the same size. The ratio of the two shapes is the scheduler's cost of
// many submitters and pools (round-robin turns, more queues). First, the
// Scheduler alone on the same jobs, without the ledger.
//
// Prints figures; never passes or fails on a time.
//
//   scheduler_bench [--jobs 100000] [--submitters 1000] [--pools 10] [--claims 20000] [--fsync] [--dir DIR]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unordered_map>

#include "bench_util.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/scheduler.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"
#include "populate.h"

namespace gatos {
namespace {

using bench::Die;
using bench::Must;
using bench::SelfDir;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }



struct Shape {
  int64_t jobs, submitters, pools, claims;
};

struct Figures {
  double submit_s = 0, claim_s = 0;
  int64_t claimed = 0, rounds = 0, lost = 0;
};

// The Scheduler alone (no ledger): `jobs` jobs made ready, then offered,
// claimed and finished one window at a time until none is left. Offers/s.
double SchedulerAlone(const Shape& shape) {
  Scheduler s;
  SchedulingPolicy policy;
  std::vector<ScheduledJob> jobs;
  for (int64_t i = 0; i < shape.jobs; ++i) {
    jobs.push_back({std::to_string(i), shape.pools > 1 ? "p" + std::to_string(i % shape.pools) : "",
                    std::string(64, static_cast<char>('a' + i % 6)) + std::to_string(i % shape.submitters),
                    kDefaultPriority});
  }
  std::unordered_map<std::string, const ScheduledJob*> by_id;
  for (const auto& j : jobs) by_id[j.job_hex] = &j;
  auto t0 = Clock::now();
  for (const auto& j : jobs) s.Ready(j);
  int64_t offered = 0, now = 0;
  while (offered < shape.jobs) {
    auto next = s.Next(policy, now);
    if (next.empty()) Die("the scheduler stopped offering");
    for (const auto& id : next) {
      s.Running(*by_id[id], now);
      s.Remove(id);
    }
    offered += static_cast<int64_t>(next.size());
    now += 1;
  }
  return static_cast<double>(shape.jobs) / Since(t0);
}

Figures RunShape(const std::string& dir, const Shape& shape, bool fsync, int64_t window) {
  auto init = RunAndCapture({SelfDir() + "/gatosd", "init", dir}, {}, "", std::chrono::seconds(60));
  if (!init.ok() || !init->status.ok()) Die("gatosd init failed");
  auto keys = Must(bench::EnsureBenchKeys(dir), "keys");
  std::vector<Ed25519PrivateKey> submitters;
  for (int64_t i = 0; i < shape.submitters; ++i) submitters.push_back(Must(GenerateEd25519Key("bench"), "keygen"));
  WriterOptions wo;
  wo.fsync = fsync;
  wo.async_views = true;
  auto writer = Must(LedgerWriter::Open(dir, Must(LoadLedgerKey(dir), "key"), wo), "open writer");
  {
    Policy next = writer->policy();
    for (const auto& k : submitters) {
      bool changed = false;
      if (!PolicyAllow(&next, "submitter", k.public_key(), &changed).ok()) Die("allow");
    }
    std::vector<Op> ops = {PolicyOp{next, "bench: submitters\n", std::nullopt}};
    auto r = writer->Apply(ops);
    if (!r[0].outcome.ok()) Die("policy: " + r[0].outcome.message);
  }
  ServiceOptions so;
  // The same offers in flight in both shapes (spread over the pools), so
  // that both claim in rounds of the same size.
  so.offer_window = window > 0 ? std::max<int64_t>(1, window / shape.pools) : 0;
  JobService service(writer.get(), so);
  service.Start();
  (void)service.TakeEvents();

  Figures f;
  // Submits, in batches of 1,000 (signed off the clock).
  constexpr int64_t kBatch = 1000;
  for (int64_t first = 0; first < shape.jobs; first += kBatch) {
    std::vector<ServiceRequest> reqs;
    for (int64_t i = first; i < std::min(shape.jobs, first + kBatch); ++i) {
      std::string yaml = "command: [\"/bin/true\", \"" + std::to_string(i) + "\"]\ntimeout: 60\n";
      if (shape.pools > 1) yaml += "pool: p" + std::to_string(i % shape.pools) + "\n";
      std::vector<GitObject> objects;
      std::string tree = Must(BuildTreeObjects({{"job.yaml", yaml, false}}, &objects), "tree");
      std::string hex = JobIdHex(Must(ParseManifest(yaml, "job.yaml"), "manifest"));
      GitObject c = Must(BuildCommitObject(tree, {}, "bench\n\nJob-Id: blake3:" + hex + "\n", "b", "b@x",
                                           SystemNowMs(), &submitters[static_cast<size_t>(i % shape.submitters)]),
                         "commit");
      objects.insert(objects.begin(), c);
      reqs.push_back({rpc::kSubmit, rpc::EncodeFrame(json{{"commit", c.id}}, EncodeObjectBatch(objects)), 0});
    }
    auto t0 = Clock::now();
    auto replies = service.Handle(reqs);
    f.submit_s += Since(t0);
    for (const auto& r : replies) {
      json j = json::parse(r);
      if (!j.value("ok", false)) Die("submit refused: " + j.value("message", ""));
    }
  }
  writer->FlushViews();
  // Claims of whatever is offered, round after round, as idle workers
  // would: the scheduler decides how many and which.
  std::vector<std::string> offered;
  auto t0 = Clock::now();
  while (f.claimed < shape.claims) {
    for (const auto& e : service.TakeEvents()) {
      if (e.subject.rfind(rpc::kPendingSubject, 0) != 0) continue;
      auto p = rpc::DecodePending(e.data);
      if (p.ok()) offered.push_back(rpc::Dump(rpc::LeaseRequestJson(
                      SignLeaseRequest(keys.workers[0], p->job_hex, p->epoch, SystemNowMs(), false))));
    }
    if (offered.empty()) {
      service.Sweep();
      if (Since(t0) > 300) Die("no offers for a while");
      continue;
    }
    std::vector<ServiceRequest> reqs;
    for (auto& o : offered) reqs.push_back({rpc::kClaim, std::move(o), 0});
    offered.clear();
    auto replies = service.Handle(reqs);
    for (const auto& r : replies) {
      if (r.find("\"ok\":true") != std::string::npos) {
        ++f.claimed;
      } else if (r.find("\"lost_race\"") != std::string::npos) {
        ++f.lost;  // an offer published again after --republish (the fill is slow): as a worker, drop it
      } else {
        Die("claim refused: " + r.substr(0, 300));
      }
    }
    ++f.rounds;
  }
  writer->FlushViews();
  f.claim_s = Since(t0);
  return f;
}

}  // namespace
}  // namespace gatos

int main(int argc, char** argv) {
  using namespace gatos;
  Flags flags;
  if (!flags.Parse({argv + 1, argv + argc},
                   {{"jobs"}, {"submitters"}, {"pools"}, {"claims"}, {"fsync", 0, false}, {"dir"}, {"window"}})) {
    Die(flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: scheduler_bench [--jobs 100000] [--submitters 1000] [--pools 10] [--claims 20000] "
                 "[--window 260] [--fsync] [--dir DIR]\n"
                 "  --window N: offers in flight, over all pools (N / pools each); 0 = gatosd's adaptive window\n";
    return 0;
  }
  Shape many{100000, 1000, 10, 20000};
  int64_t window = 260;
  if (!flags.GetInt("jobs", 1, 10'000'000, &many.jobs) || !flags.GetInt("submitters", 1, 100'000, &many.submitters) ||
      !flags.GetInt("pools", 1, 64, &many.pools) || !flags.GetInt("claims", 1, 10'000'000, &many.claims) ||
      !flags.GetInt("window", 0, 1'000'000, &window)) {
    Die(flags.error());
  }
  many.claims = std::min(many.claims, many.jobs);
  const bool fsync = flags.Has("fsync");
  std::string base = flags.GetOr("dir", "");
  if (base.empty()) {
    std::string tmpl = "/tmp/gatos-scheduler-bench-XXXXXX";
    if (!mkdtemp(tmpl.data())) Die("mkdtemp");
    base = tmpl;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("scheduler_bench: %lld pending jobs, %lld claims measured, window %lld, fsync %s, %u CPUs\n",
              static_cast<long long>(many.jobs), static_cast<long long>(many.claims), static_cast<long long>(window),
              fsync ? "on" : "off", std::thread::hardware_concurrency());
  std::printf(" the Scheduler alone (%lld jobs ready, then offered, claimed and finished):\n",
              static_cast<long long>(many.jobs));
  double alone_base = 0;
  for (Shape s : {Shape{many.jobs, 1, 1, many.claims}, many}) {
    const double rate = SchedulerAlone(s);
    if (alone_base == 0) alone_base = rate;
    std::printf("  %5lld submitter(s), %2lld pool(s): %10.0f jobs/s  %.2fx\n", static_cast<long long>(s.submitters),
                static_cast<long long>(s.pools), rate, rate / alone_base);
  }
  std::printf(" through the JobService (submit, then claim what is offered):\n");
  double base_rate = 0;
  for (Shape s : {Shape{many.jobs, 1, 1, many.claims}, many}) {
    std::string dir = base + "/ledger-" + std::to_string(s.submitters) + "x" + std::to_string(s.pools) + ".git";
    fs::remove_all(dir);
    Figures f = RunShape(dir, s, fsync, window);
    const double rate = static_cast<double>(f.claimed) / f.claim_s;
    if (base_rate == 0) base_rate = rate;
    std::printf("  %5lld submitter(s), %2lld pool(s): submits %8.0f/s; claims %8.0f/s (%lld claims in %lld rounds, "
                "%.1f per round, %lld lost races)  %.2fx\n",
                static_cast<long long>(s.submitters), static_cast<long long>(s.pools),
                static_cast<double>(s.jobs) / f.submit_s, rate, static_cast<long long>(f.claimed),
                static_cast<long long>(f.rounds), static_cast<double>(f.claimed) / static_cast<double>(f.rounds),
                static_cast<long long>(f.lost), rate / base_rate);
    fs::remove_all(dir);
  }
  if (flags.GetOr("dir", "").empty()) fs::remove_all(base);
  return 0;
}
