// verify_bench: how fast the auditor verifies results, on one core.
//
// Builds a ledger in-process with N accepted results (default 10,000) exactly
// as gatosd records them, through the ledger's writer in batches: signed job
// commits (policy NOT in dev mode), ledger-signed claims from signed worker
// requests, results built and signed by the worker (BuildResult, with an
// in-toto provenance envelope in each tree). Then it
// verifies every job with gatos_audit's Auditor (what `gatos verify --all`
// runs), first on the ledger as written (loose objects and refs), then on a
// `git clone --mirror` of it (one packfile, packed refs: what an auditor
// receives). Prints figures; never passes or fails on a time.
//
//   verify_bench [N] [--keep DIR [--reuse]]   (scratch under $TMPDIR, default /tmp)
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "gatos/audit/attest.h"
#include "gatos/model/blake3.h"
#include "gatos/model/encoding.h"
#include "populate.h"
#include "gatos/audit/log_audit.h"
#include "gatos/audit/verify.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/result.h"
#include "gatos/model/job_state.h"
#include "gatos/model/manifest.h"

namespace gatos {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU time of this thread: on a shared machine wall time includes waiting for
// the core; both are printed.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// CPU time of the whole process: every thread, those that ended included.
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

double LoadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::cerr << "verify_bench: " << what << ": " << s.ToString() << "\n";
  std::exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what, r.status());
  return std::move(r).value();
}


struct Population {
  double seconds = 0;
  size_t results = 0;
};

std::string SelfDir() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string();
}

// A ledger made by gatosd init and filled through the ledger's real write
// path (bench/support/populate.h).
bool signed_leases = false;  // --signed-leases: the old form of the ledger
int64_t pack_refs_every = 0;  // --pack-refs K: git pack-refs every K jobs

Population Populate(const std::string& path, int n, int64_t first = 0, bool provenance = true, int batch = 500) {
  if (first == 0) {
    std::string init = "'" + SelfDir() + "/gatosd' init '" + path + "' >/dev/null";
    if (std::system(init.c_str()) != 0) Die("gatosd init", InternalError(init));
  }
  auto keys = Must(bench::EnsureBenchKeys(path), "bench keys");
  bench::PopulateOptions o;
  o.jobs = n;
  o.first = first;
  o.provenance = provenance;
  o.batch = batch;
  o.signed_leases = signed_leases;
  o.pack_refs_every = pack_refs_every;
  auto done = Must(bench::Populate(path, keys, o), "populate");
  return {done.seconds, static_cast<size_t>(done.jobs)};
}

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;
  AuditSummary summary;
};

Run VerifyEverything(const std::string& path) {
  auto ledger = Must(Ledger::Open(path), "open " + path);
  Auditor auditor(ledger.get(), {});
  auto start = Clock::now();
  double cpu = ThreadCpuSeconds();
  Run r;
  r.summary = Must(auditor.VerifyAll(), "verify");
  r.seconds = Seconds(start);
  r.cpu_seconds = ThreadCpuSeconds() - cpu;
  return r;
}

// CheckResultCommit alone over every result ref: the self-contained share of
// the work (hashing, Attest-Sig, SSH signature), for the breakdown.
double CheckResultsOnly(const std::string& path, size_t* count) {
  auto ledger = Must(Ledger::Open(path), "open " + path);
  std::vector<std::string> results;
  Status s = ledger->ForEachJob([&](std::string_view hex) {
    auto id = ledger->ResolveRef(JobRef(hex, "result"));
    if (id.ok() && !id->empty()) results.push_back(*id);
  });
  if (!s.ok()) Die("list jobs", s);
  ObjectLookup lookup = LedgerLookup(ledger.get());
  double cpu = ThreadCpuSeconds();
  auto start = Clock::now();
  for (const auto& id : results) {
    ResultReport rep = CheckResultCommit(lookup, id);
    if (!rep.ok()) Die("check " + id, InternalError(rep.first_failure()->detail));
  }
  *count = results.size();
  double wall = Seconds(start);
  std::printf(
      "%-36s %6zu results                  | wall %6.2f s %6.0f results/s %7.1f us/result "
      "| cpu %6.2f s %6.0f results/s\n",
      "  of which CheckResultCommit alone", results.size(), wall, results.size() / wall,
      1e6 * wall / std::max<size_t>(1, results.size()), ThreadCpuSeconds() - cpu,
      results.size() / (ThreadCpuSeconds() - cpu));
  return wall;
}

struct LogRun {
  double seconds = 0;
  double cpu_seconds = 0;          // the replay thread
  double process_cpu_seconds = 0;  // every thread
  double load = 0;                 // the load average when it ended
  LogAuditReport report;
};

// The log replay (gatos verify --all --log-only, or --state when `since`).
LogRun ReplayLog(const std::string& path, std::optional<AuditState> since, size_t threads = 1) {
  if (!since) Ledger::DisableObjectCache();  // as gatos verify --all does
  auto ledger = Must(Ledger::Open(path), "open " + path);
  LogAuditOptions o;
  o.since = std::move(since);
  o.threads = threads;
  auto start = Clock::now();
  double cpu = ThreadCpuSeconds();
  double all = ProcessCpuSeconds();
  LogRun r;
  r.report = Must(AuditLog(*ledger, o), "log replay");
  r.seconds = Seconds(start);
  r.cpu_seconds = ThreadCpuSeconds() - cpu;
  r.process_cpu_seconds = ProcessCpuSeconds() - all;
  r.load = LoadAverage();
  if (!r.report.ok()) {
    std::cerr << "verify_bench: the genuine log does not verify: " << r.report.problems[0].check << ": "
              << r.report.problems[0].detail << "\n";
    std::exit(1);
  }
  return r;
}

void ReportLog(const char* what, const LogRun& r) {
  const LogAuditReport& s = r.report;
  double n = static_cast<double>(std::max<size_t>(1, s.results));
  std::printf(
      "%-36s %6zu log commits %7zu transitions %6zu results %6zu refs | wall %6.3f s %6.0f results/s "
      "| replay thread cpu %6.3f s %6.0f results/s | all threads cpu %6.3f s %6.1f us/result | load %.1f\n",
      what, s.commits, s.transitions, s.results, s.refs_checked, r.seconds, s.results / r.seconds, r.cpu_seconds,
      s.results / r.cpu_seconds, r.process_cpu_seconds, 1e6 * r.process_cpu_seconds / n, r.load);
}

void Report(const char* what, const Run& r) {
  const AuditSummary& s = r.summary;
  size_t v = std::max<size_t>(1, s.verified);
  std::printf(
      "%-36s %6zu jobs %6zu verified %zu failed | wall %6.2f s %6.0f results/s "
      "%7.1f us/result | cpu %6.2f s %6.0f results/s\n",
      what, s.jobs.size(), s.verified, s.failed, r.seconds, s.verified / r.seconds,
      1e6 * r.seconds / v, r.cpu_seconds, s.verified / r.cpu_seconds);
}

}  // namespace
}  // namespace gatos

int main(int argc, char** argv) {
  using namespace gatos;
  int n = 10'000;
  int add = 1'000;
  bool per_job = true;
  bool provenance = true;
  int batch = 500;
  std::string keep;
  bool reuse = false;
  std::string replay = "both";
  int cpu = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else if (a == "--new" && i + 1 < argc) {
      add = std::atoi(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::atoi(argv[++i]);
    } else if (a == "--reuse") {
      reuse = true;
    } else if (a == "--replay" && i + 1 < argc) {
      replay = argv[++i];
      if (replay != "one" && replay != "all" && replay != "both" && replay != "none") {
        std::cerr << "verify_bench: --replay takes one, all, both or none\n";
        return 2;
      }
    } else if (a == "--no-per-job") {
      per_job = false;
    } else if (a == "--no-provenance") {
      provenance = false;
    } else if (a == "--cpu" && i + 1 < argc) {
      cpu = std::atoi(argv[++i]);
    } else if (a == "--pack-refs" && i + 1 < argc) {
      pack_refs_every = std::atoll(argv[++i]);
    } else if (a == "--signed-leases") {
      signed_leases = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: verify_bench [N] [--new M] [--batch B] [--no-per-job] [--no-provenance]\n"
                   "                    [--signed-leases] [--pack-refs K] [--keep DIR [--reuse]]\n"
                   "                    [--replay one|all|both|none] [--cpu C]\n"
                   "  N jobs with results (default 10000); then the log replay of the mirror,\n"
                   "  M more jobs (default 1000), git fetch, and the incremental replay (--state).\n"
                   "  --reuse: DIR holds the ledger and mirror of an earlier --keep run of N jobs:\n"
                   "  replay them again without filling (no --new). --replay: on one core (pinned), on every\n"
                   "  core, both (default), or none (fill and clone only)\n"
                   "  --cpu C: the core to pin to (default 0)\n"
                   "  --pack-refs K: git pack-refs --all every K jobs while filling (a million jobs'\n"
                   "  loose refs take 24 GB of 4 KB blocks)\n"
                   "  --signed-leases writes lease commits signed one by one, as ledgers were\n"
                   "  before grants were signed per reply (the auditor checks each signature)\n";
      return 0;
    } else {
      n = std::atoi(a.c_str());
      if (n <= 0) {
        std::cerr << "verify_bench: N must be a positive number of results\n";
        return 2;
      }
    }
  }
  // One core: verification is single-threaded; pinning keeps the figure honest
  // on a machine where other work runs too.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  bool pinned = sched_setaffinity(0, sizeof one, &one) == 0;

  std::string dir;
  if (reuse && keep.empty()) {
    std::cerr << "verify_bench: --reuse needs --keep DIR\n";
    return 2;
  }
  if (keep.empty()) {
    // $TMPDIR=/dev/shm makes populating (150,000 loose objects) much faster.
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/gatos-verify-bench-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("verify_bench: mkdtemp");
      return 1;
    }
    dir = tmpl;
  } else {
    dir = keep;
    std::filesystem::create_directories(dir);
  }
  std::string ledger = dir + "/ledger.git";
  std::string mirror = dir + "/mirror.git";

  std::printf("verify_bench: %d results, policy not in dev mode, lease commits %s, %s\n", n,
              signed_leases ? "signed (old form)" : "unsigned",
              pinned ? ("pinned to CPU " + std::to_string(cpu)).c_str() : "NOT pinned (sched_setaffinity failed)");
  reuse = reuse && std::filesystem::exists(mirror);
  if (reuse) add = 0;  // the kept ledger stays as it was filled
  if (!reuse) {
    Population pop = Populate(ledger, n, 0, provenance, batch);
    std::printf("%-36s %6zu results in %.2f s (%.0f/s: submit+claim+build+accept)%s\n",
                "populate (ledger writer)", pop.results, pop.seconds,
                pop.results / pop.seconds, provenance ? "" : ", no provenance");
  }

  Run loose;
  if (per_job) {
    loose = VerifyEverything(ledger);
    Report("verify --all, ledger as written", loose);
  }

  if (!reuse) {
    std::string cmd = "git clone -q --mirror '" + ledger + "' '" + mirror + "'";
    auto t = std::chrono::steady_clock::now();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "verify_bench: " << cmd << " failed\n";
      return 1;
    }
    std::printf("%-36s %.2f s\n", "git clone --mirror",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  Run packed;
  if (per_job) {
    packed = VerifyEverything(mirror);
    Report("verify --all, mirror clone (packed)", packed);
    size_t count = 0;
    CheckResultsOnly(mirror, &count);
  }
  std::optional<LogRun> full;
  bool ok = true;
  if (replay == "one" || replay == "both") {
    full = ReplayLog(mirror, std::nullopt);
    ReportLog("log replay (--log-only), mirror", *full);
    ok = full->report.results == static_cast<size_t>(n);
  }
  if (replay == "all" || replay == "both") {
    // Every core: results checked ahead of the replay by one thread per CPU
    // (gatos verify's default). Wall time is the figure; "replay thread" is
    // that thread's CPU alone, "all threads" the whole process's.
    cpu_set_t all;
    CPU_ZERO(&all);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < cpus; ++c) CPU_SET(c, &all);
    bool unpinned = sched_setaffinity(0, sizeof all, &all) == 0;
    LogRun par = ReplayLog(mirror, std::nullopt, 0);
    std::string what = "log replay, every core (" + std::to_string(cpus) + " CPUs)";
    ReportLog(what.c_str(), par);
    if (full) {
      ok = ok && par.report.results == full->report.results &&
           LogAuditReportToJson(par.report).dump() == LogAuditReportToJson(full->report).dump();
    } else {
      ok = par.report.results == static_cast<size_t>(n);
      full = std::move(par);
    }
    if (unpinned) sched_setaffinity(0, sizeof one, &one);
  }

  if (add > 0 && full) {
    Population more = Populate(ledger, add, n, provenance, batch);
    std::printf("%-36s %6zu results in %.2f s\n", "populate more", more.results, more.seconds);
    auto t0 = std::chrono::steady_clock::now();
    std::string fetch = "git -C '" + mirror + "' fetch -q";
    if (std::system(fetch.c_str()) != 0) Die("git fetch", InternalError(fetch));
    std::printf("%-36s %.2f s\n", "git fetch (mirror)",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    LogRun inc = ReplayLog(mirror, full->report.state());
    ReportLog("incremental (--state), mirror", inc);
    ok = ok && inc.report.results == static_cast<size_t>(add) && inc.report.incremental;
  }

  if (keep.empty()) std::filesystem::remove_all(dir);
  if (per_job) {
    ok = ok && loose.summary.ok() && packed.summary.ok() && loose.summary.verified == static_cast<size_t>(n) &&
         packed.summary.verified == static_cast<size_t>(n);
  }
  if (!ok) std::cerr << "verify_bench: the genuine ledger did not verify completely\n";
  return ok ? 0 : 1;
}
