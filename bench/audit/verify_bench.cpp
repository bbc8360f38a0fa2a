// verify_bench: how fast the auditor verifies results, on one core.
//
// Builds a ledger in-process with N accepted results (default 10,000) exactly
// as gatosd records them: signed job commits adopted by JobPlane (policy NOT
// in dev mode), ledger-signed claims from signed worker requests, results
// built and signed by the worker (BuildResult, with an in-toto provenance
// envelope in each tree) and accepted by JobPlane::AcceptResult. Then it
// verifies every job with gatos_audit's Auditor (what `gatos verify --all`
// runs), first on the ledger as written (loose objects and refs), then on a
// `git clone --mirror` of it (one packfile, packed refs: what an auditor
// receives). Prints figures; never passes or fails on a time.
//
//   verify_bench [N] [--keep DIR]     (scratch under $TMPDIR, default /tmp)
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "gatos/attest.h"
#include "gatos/blake3.h"
#include "gatos/encoding.h"
#include "gatos/job_plane.h"
#include "gatos/lease.h"
#include "gatos/manifest.h"
#include "gatos/result.h"
#include "gatos/verify.h"
#include "gatos/signed_request.h"

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

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::cerr << "verify_bench: " << what << ": " << s.ToString() << "\n";
  std::exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what, r.status());
  return std::move(r).value();
}

void MustOk(const Outcome& o, const std::string& what) {
  if (!o.ok())
    Die(what, InternalError(std::string(TransitionErrorName(o.error)) + ": " + o.message));
}

struct Population {
  double seconds = 0;
  size_t results = 0;
};

Population Populate(const std::string& path, int n) {
  Status s = Ledger::InitRepository(path);
  if (!s.ok()) Die("init " + path, s);
  auto ledger = Must(Ledger::Open(path), "open");
  Ed25519PrivateKey ledger_key = Must(GenerateEd25519Key("ledger"), "keygen");
  Ed25519PrivateKey submitter = Must(GenerateEd25519Key("alice"), "keygen");
  Ed25519PrivateKey workers[2] = {Must(GenerateEd25519Key("w1"), "keygen"),
                                  Must(GenerateEd25519Key("w2"), "keygen")};
  int64_t now = 1'800'000'000'000;
  Policy p;
  p.settings.dev_mode = false;
  p.ledger_key = ledger_key.public_key();
  p.submitters_text = "alice " + submitter.public_key().ToOpenSsh() + "\n";
  p.workers_text = "w1 " + workers[0].public_key().ToOpenSsh() + "\nw2 " +
                   workers[1].public_key().ToOpenSsh() + "\n";
  Must(ledger->WritePolicy(p, "policy\n", ledger_key, now), "write policy");
  JobPlane jp(ledger.get(), ledger_key, [&now] { return now; });
  if (Status l = jp.LoadPolicy(); !l.ok()) Die("load policy", l);
  std::string program = Blake3Tagged("gatos-worker bench binary");

  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    now += 7;
    const Ed25519PrivateKey& w = workers[i % 2];
    std::string yaml = "command: [\"/usr/bin/make\", \"-C\", \"src\", \"target-" +
                       std::to_string(i) + "\"]\ntimeout: 600\n";
    Manifest m = Must(ParseManifest(yaml, "job.yaml"), "manifest");
    std::string hex = JobIdHex(m);
    std::string blob = Must(ledger->WriteBlob(yaml), "blob");
    std::string tree = Must(ledger->WriteTree({{"job.yaml", blob}}), "tree");
    std::string job =
        Must(ledger->WriteCommit(tree, {}, "build target\n\nJob-Id: blake3:" + hex + "\n",
                                 &submitter, "Alice", "alice@example.com", now),
             "job commit");
    std::string got;
    bool existing = false;
    MustOk(jp.AdoptJob(job, &got, &existing), "adopt");

    LeaseRequest req = SignLeaseRequest(w, hex, 0, now);
    LeaseGrant grant;
    MustOk(jp.Claim(req, &grant), "claim");

    ResultBuildInput in;
    in.job_commit = job;
    in.lease_commit = grant.lease_commit;
    in.poe.job_id = "blake3:" + hex;
    in.poe.worker_id = w.public_key().WorkerId();
    in.poe.lease_epoch = grant.epoch;
    in.poe.status = i % 10 == 9 ? "failed" : "succeeded";
    in.poe.exit_code = i % 10 == 9 ? 2 : 0;
    in.poe.runner_program = program;
    in.poe.runner_version = "0.1.0";
    in.poe.runner_platform = "linux-x86_64";
    in.poe.stdout_cap = 1 << 20;
    in.poe.started_at = FormatRfc3339Millis(now - 5);
    in.poe.finished_at = FormatRfc3339Millis(now);
    std::string artifact(1024, 'a' + i % 26);
    artifact += std::to_string(i);
    in.files = {{"stdout", "make: Entering directory 'src'\nbuilt target-" + std::to_string(i) +
                               "\nmake: Leaving directory 'src'\n"},
                {"stderr", ""},
                {"outputs/target.bin", artifact}};
    ProvenanceInput prov;
    prov.manifest_json = CanonicalManifest(m);
    prov.job_id = in.poe.job_id;
    prov.job_commit = job;
    prov.worker_id = in.poe.worker_id;
    prov.lease_epoch = grant.epoch;
    prov.runner_program = program;
    prov.runner_version = in.poe.runner_version;
    prov.runner_platform = in.poe.runner_platform;
    prov.started_at = in.poe.started_at;
    prov.finished_at = in.poe.finished_at;
    prov.subjects = SubjectsForFiles(in.files);
    in.files.push_back({kProvenanceFileName, Must(BuildProvenanceEnvelope(prov, w), "provenance")});
    in.time_ms = now;
    BuiltResult built = Must(BuildResult(in, w), "build result");
    ParsedResult parsed;
    MustOk(jp.AcceptResult(built.objects, built.commit_id, &parsed, &existing), "accept");
    if ((i + 1) % 2000 == 0) {
      std::cerr << "  populated " << (i + 1) << " results (" << Seconds(start) << " s)\n";
    }
  }
  return {Seconds(start), static_cast<size_t>(n)};
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
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: verify_bench [N] [--keep DIR]\n";
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
  CPU_SET(0, &one);
  bool pinned = sched_setaffinity(0, sizeof one, &one) == 0;

  std::string dir;
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

  std::printf("verify_bench: %d results, policy not in dev mode, %s\n", n,
              pinned ? "pinned to CPU 0" : "NOT pinned (sched_setaffinity failed)");
  Population pop = Populate(ledger, n);
  std::printf("%-36s %6zu results in %.2f s (%.0f/s: submit+claim+build+accept)\n",
              "populate (in-process JobPlane)", pop.results, pop.seconds,
              pop.results / pop.seconds);

  Run loose = VerifyEverything(ledger);
  Report("verify --all, ledger as written", loose);

  std::string cmd = "git clone -q --mirror '" + ledger + "' '" + mirror + "'";
  auto t = std::chrono::steady_clock::now();
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "verify_bench: " << cmd << " failed\n";
    return 1;
  }
  std::printf("%-36s %.2f s\n", "git clone --mirror",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  Run packed = VerifyEverything(mirror);
  Report("verify --all, mirror clone (packed)", packed);
  size_t count = 0;
  CheckResultsOnly(mirror, &count);

  if (keep.empty()) std::filesystem::remove_all(dir);
  bool ok = loose.summary.ok() && packed.summary.ok() &&
            loose.summary.verified == static_cast<size_t>(n) &&
            packed.summary.verified == static_cast<size_t>(n);
  if (!ok) std::cerr << "verify_bench: the genuine ledger did not verify completely\n";
  return ok ? 0 : 1;
}
