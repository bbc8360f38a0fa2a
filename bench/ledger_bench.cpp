// ledger_bench: transition latency of the ledger's state machine over real
// libgit2 (JobPlane: claim, renew, result, cancel) with 1k and 100k jobs in
// the ledger, with loose refs and after `git pack-refs --all`.
//
// Prints claims/s and p50/p99 per transition. Never fails on a time.
//   ledger_bench [--jobs 1000,100000] [--ops 2000] [--dir DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gatos/blake3.h"
#include "gatos/encoding.h"
#include "gatos/job_plane.h"
#include "gatos/ledger.h"
#include "gatos/result.h"
#include "gatos/trailers.h"
#include "gatos/signed_request.h"

using namespace gatos;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  std::vector<double> us;
  void Add(Clock::time_point t0) {
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  double P(double q) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  }
  double Total() {
    double s = 0;
    for (double v : us) s += v;
    return s;
  }
};

void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "ledger_bench: %s: %s\n", what.c_str(), s.message().c_str());
  std::exit(1);
}

std::string Yaml(size_t i) {
  return "command: [\"/bin/true\"]\nargs: [\"" + std::to_string(i) + "\"]\ntimeout: 30\n";
}

void RunOne(const std::string& root, size_t jobs, size_t ops, bool pack) {
  std::string path = root + "/ledger-" + std::to_string(jobs) + (pack ? "-packed" : "") + ".git";
  std::filesystem::remove_all(path);
  if (Status s = Ledger::InitRepository(path); !s.ok()) Die("init", s);
  auto ledger = Ledger::Open(path);
  if (!ledger.ok()) Die("open", ledger.status());
  Ledger& l = **ledger;
  auto ledger_key = *GenerateEd25519Key("ledger");
  auto worker = *GenerateEd25519Key("worker");
  Policy p;
  p.settings.dev_mode = true;  // population writes unsigned job commits; claims are signed
  p.ledger_key = ledger_key.public_key();
  p.workers_text = "w " + worker.public_key().ToOpenSsh() + "\n";
  if (auto r = l.WritePolicy(p, "policy\n", ledger_key, SystemNowMs()); !r.ok()) Die("policy", r.status());
  JobPlane plane(&l, ledger_key, SystemNowMs);
  if (Status s = plane.LoadPolicy(); !s.ok()) Die("load policy", s);

  // Populate: every job adopted through the same path as a push.
  std::vector<std::string> hexes;
  hexes.reserve(jobs);
  Stats submit;
  auto t_pop = Clock::now();
  for (size_t i = 0; i < jobs; ++i) {
    std::string yaml = Yaml(i);
    auto m = ParseManifest(yaml, "job.yaml");
    std::string hex = JobIdHex(*m);
    std::string blob = *l.WriteBlob(yaml);
    std::string tree = *l.WriteTree({{"job.yaml", blob}});
    auto c = l.WriteCommit(tree, {}, "job\n\nJob-Id: blake3:" + hex + "\n", nullptr, "b", "b@x", SystemNowMs());
    std::string got;
    bool existing;
    auto t0 = Clock::now();
    Outcome o = plane.AdoptJob(*c, &got, &existing);
    submit.Add(t0);
    if (!o.ok()) Die("adopt", InternalError(o.message));
    hexes.push_back(hex);
    if ((i + 1) % 20000 == 0) std::fprintf(stderr, "  populated %zu/%zu jobs\n", i + 1, jobs);
  }
  double pop_s = std::chrono::duration<double>(Clock::now() - t_pop).count();
  if (pack) {
    std::string cmd = "git --git-dir '" + path + "' pack-refs --all";
    if (std::system(cmd.c_str()) != 0) Die("pack-refs", InternalError("git pack-refs failed"));
  }

  // Transitions on `ops` jobs spread over the ledger.
  Stats claim, renew, result, cancel, read;
  size_t n = std::min(ops, jobs);
  size_t stride = jobs / n;
  std::vector<LeaseGrant> grants(n);
  auto req = [&](const std::string& hex, int64_t epoch) {
    return SignLeaseRequest(worker, hex, epoch, SystemNowMs());
  };
  auto t_claims = Clock::now();
  for (size_t k = 0; k < n; ++k) {
    auto r = req(hexes[k * stride], 0);
    auto t0 = Clock::now();
    Outcome o = plane.Claim(r, &grants[k]);
    claim.Add(t0);
    if (!o.ok()) Die("claim", InternalError(o.message));
  }
  double claims_s = std::chrono::duration<double>(Clock::now() - t_claims).count();
  for (size_t k = 0; k < n; ++k) {
    auto r = req(hexes[k * stride], 1);
    auto t0 = Clock::now();
    Outcome o = plane.Renew(r, &grants[k]);
    renew.Add(t0);
    if (!o.ok()) Die("renew", InternalError(o.message));
  }
  for (size_t k = 0; k < n; ++k) {
    auto t0 = Clock::now();
    auto snap = l.ReadJob(hexes[k * stride]);
    read.Add(t0);
    if (!snap.ok()) Die("read", snap.status());
  }
  for (size_t k = 0; k < n; ++k) {
    const std::string& hex = hexes[k * stride];
    ResultBuildInput in;
    in.job_commit = grants[k].job_commit;
    in.lease_commit = *l.ResolveRef(ClaimRef(hex, worker.public_key().Hex()));
    in.poe.job_id = "blake3:" + hex;
    in.poe.worker_id = worker.public_key().WorkerId();
    in.poe.lease_epoch = 1;
    in.poe.status = "succeeded";
    in.poe.runner_program = Blake3Tagged("bench");
    in.poe.runner_version = "bench";
    in.poe.runner_platform = "linux-x86_64";
    in.poe.exit_code = 0;
    in.poe.started_at = FormatRfc3339Millis(SystemNowMs());
    in.poe.finished_at = in.poe.started_at;
    in.files = {{"stdout", ""}, {"stderr", ""}};
    in.time_ms = SystemNowMs();
    auto built = BuildResult(in, worker);  // the worker's cost, not timed
    ParsedResult accepted;
    bool existing;
    auto t0 = Clock::now();
    Outcome o = plane.AcceptResult(built->objects, built->commit_id, &accepted, &existing);
    result.Add(t0);
    if (!o.ok()) Die("result", InternalError(o.message));
  }
  // Cancels on other (pending) jobs.
  for (size_t k = 0; k < std::min<size_t>(n, jobs - n); ++k) {
    bool already;
    auto t0 = Clock::now();
    Outcome o = plane.Cancel(hexes[k * stride + 1 < jobs ? k * stride + 1 : 0], ledger_key.public_key().Hex(), &already);
    cancel.Add(t0);
    if (!o.ok()) Die("cancel", InternalError(o.message));
  }
  std::printf("jobs=%zu refs=%s ops=%zu populate=%.1fs (%.0f submits/s)\n", jobs, pack ? "packed" : "loose", n,
              pop_s, static_cast<double>(jobs) / pop_s);
  std::printf("  claims/s %.0f (one thread, sequential)\n", static_cast<double>(n) / claims_s);
  auto line = [](const char* name, Stats& s) {
    std::printf("  %-8s p50 %7.1f us   p99 %7.1f us   mean %7.1f us\n", name, s.P(0.5), s.P(0.99),
                s.us.empty() ? 0 : s.Total() / static_cast<double>(s.us.size()));
  };
  line("submit", submit);
  line("claim", claim);
  line("renew", renew);
  line("result", result);
  line("cancel", cancel);
  line("read", read);
  std::fflush(stdout);
  // Not removed here: deleting 100k+ files makes ext4's inode allocator slow
  // for the next run (recently_deleted), which would skew it. main() cleans up.
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1000, 100000};
  size_t ops = 2000;
  std::string dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) {
      sizes.clear();
      std::string v = argv[++i];
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        sizes.push_back(std::stoul(v.substr(pos, comma - pos)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (a == "--ops" && i + 1 < argc) {
      ops = std::stoul(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: ledger_bench [--jobs 1000,100000] [--ops 2000] [--dir DIR]\n");
      return 2;
    }
  }
  for (size_t n : sizes) {
    RunOne(dir, n, ops, false);
    RunOne(dir, n, ops, true);
  }
  for (size_t n : sizes) {
    std::filesystem::remove_all(dir + "/ledger-" + std::to_string(n) + ".git");
    std::filesystem::remove_all(dir + "/ledger-" + std::to_string(n) + "-packed.git");
  }
  return 0;
}
