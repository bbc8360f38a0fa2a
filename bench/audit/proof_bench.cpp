// proof_bench: the cost of the log's Merkle tree, checkpoints and proof
// bundles on a large ledger.
//
// Builds a ledger in-process through the ledger's writer (bench/support
// populate.h: signed jobs, claims, signed results with provenance), with
// small batches so that the log has many entries (three log commits per
// batch of B jobs). Then measures: building the tree from nothing (what the
// first `gatos checkpoint` on an old ledger does), bringing it up to date
// after a few more batches, signing a checkpoint, and for a sample of jobs
// BuildProofBundle (`gatos proof`), the bundle's size, and parse + verify
// (`gatos verify --bundle`), in-process and as the CLI runs them (fork, exec,
// read the files). Prints figures; never passes or fails on a time.
//
//   proof_bench [N] [--batch B] [--samples S] [--keep DIR]   (default 100000, 32, 50)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>

#include "cpu_clock.h"
#include "gatos/audit/log_tree.h"
#include "gatos/audit/proof_bundle.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/manifest.h"
#include "gatos/sys/file.h"
#include "populate.h"

namespace gatos {
namespace {

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "proof_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}
template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what, r.status());
  return std::move(r).value();
}

std::string SelfDir() { return std::filesystem::canonical("/proc/self/exe").parent_path().string(); }

double RunMs(const std::string& cmd) {
  double t = bench::MonoMs();
  if (std::system(cmd.c_str()) != 0) Die(cmd, InternalError("command failed"));
  return bench::MonoMs() - t;
}

int Main(int argc, char** argv) {
  int64_t n = 100000, batch = 32;
  int samples = 50;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) {
      batch = std::stoll(argv[++i]);
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::stoi(argv[++i]);
    } else if (a == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else if (!a.empty() && std::isdigit(static_cast<unsigned char>(a[0]))) {
      n = std::stoll(a);
    } else {
      std::cout << "usage: proof_bench [N] [--batch B] [--samples S] [--keep DIR]\n";
      return 2;
    }
  }
  std::string dir = keep;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/gatos-proof-bench-XXXXXX";
    if (!mkdtemp(tmpl.data())) Die("mkdtemp", InternalError("failed"));
    dir = tmpl;
  }
  std::string ledger_dir = dir + "/ledger.git";
  bool fresh = !std::filesystem::exists(ledger_dir);
  if (fresh) {
    std::string init = "'" + SelfDir() + "/gatosd' init '" + ledger_dir + "' >/dev/null";
    if (std::system(init.c_str()) != 0) Die("gatosd init", InternalError(init));
    auto keys = Must(bench::EnsureBenchKeys(ledger_dir), "bench keys");
    bench::PopulateOptions o;
    o.jobs = n;
    o.batch = batch;
    auto done = Must(bench::Populate(ledger_dir, keys, o), "populate");
    std::printf("populate: %lld jobs with results in %.1f s, batches of %lld\n", static_cast<long long>(done.jobs),
                done.seconds, static_cast<long long>(batch));
  }
  auto ledger = Must(Ledger::Open(ledger_dir), "open");
  std::filesystem::remove_all(LogTree::DirFor(ledger_dir));

  double t = bench::MonoMs(), cpu = bench::TreeCpuMs();
  auto tree = Must(LogTree::Open(LogTree::DirFor(ledger_dir)), "tree");
  if (Status s = tree.Update(*ledger); !s.ok()) Die("tree update", s);
  double build_ms = bench::MonoMs() - t, build_cpu = bench::TreeCpuMs() - cpu;
  std::printf("tree from nothing: %llu log entries in %.0f ms (cpu %.0f ms, %.1f us/entry)\n",
              static_cast<unsigned long long>(tree.size()), build_ms, build_cpu, 1e3 * build_cpu / tree.size());

  // A few more batches, then the incremental update.
  auto keys = Must(bench::EnsureBenchKeys(ledger_dir), "bench keys");
  bench::PopulateOptions more;
  more.jobs = 4 * batch;
  more.batch = batch;
  more.first = n + 1000000;
  more.progress = false;
  Must(bench::Populate(ledger_dir, keys, more), "populate more");
  ledger = Must(Ledger::Open(ledger_dir), "open");
  uint64_t before = tree.size();
  t = bench::MonoMs();
  if (Status s = tree.Update(*ledger); !s.ok()) Die("tree update", s);
  std::printf("tree update: +%llu entries in %.2f ms\n", static_cast<unsigned long long>(tree.size() - before),
              bench::MonoMs() - t);

  auto key = Must(LoadLedgerKey(ledger_dir), "ledger key");
  t = bench::MonoMs();
  Checkpoint cp{LedgerOrigin(Must(tree.Entry(0), "entry 0").first), tree.size(), Must(tree.Root(tree.size()), "root"), {}};
  std::string note = SignCheckpoint(cp, key);
  std::printf("checkpoint (root + sign): %.2f ms\n", bench::MonoMs() - t);
  if (Status s = WriteFileAtomically(LogTree::DirFor(ledger_dir) + "/checkpoint", note, 0644, false); !s.ok()) {
    Die("write checkpoint", s);
  }
  std::string pub = dir + "/ledger.pub";
  if (Status s = WriteFileAtomically(pub, key.public_key().ToOpenSsh() + "\n"); !s.ok()) Die("pub", s);

  std::mt19937_64 rng(42);
  std::vector<double> build, size, verify, cli_proof, cli_verify;
  BundleVerifyOptions vo;
  vo.ledger_key = key.public_key();
  for (int i = 0; i < samples; ++i) {
    int64_t job = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    auto m = Must(ParseManifest(bench::BenchJobYaml(job), "job.yaml"), "manifest");
    std::string hex = JobIdHex(m);
    // A fresh tree object: what one `gatos proof` process reads (its tiles).
    auto t2 = Must(LogTree::Open(LogTree::DirFor(ledger_dir)), "tree");
    double s0 = bench::MonoMs();
    auto b = Must(BuildProofBundle(*ledger, t2, hex, note), "bundle " + hex);
    std::string text = EncodeProofBundle(b);
    build.push_back(bench::MonoMs() - s0);
    size.push_back(static_cast<double>(text.size()));
    s0 = bench::MonoMs();
    auto parsed = Must(ParseProofBundle(text), "parse");
    BundleReport r = VerifyProofBundle(parsed, vo);
    verify.push_back(bench::MonoMs() - s0);
    if (!r.ok()) Die("verify " + hex, InternalError(r.first_failure()->name + ": " + r.first_failure()->detail));
    if (i < 10) {
      std::string out = dir + "/b.json";
      cli_proof.push_back(RunMs("'" + SelfDir() + "/gatos' proof " + hex + " --repo '" + ledger_dir + "' -o '" + out + "'"));
      cli_verify.push_back(RunMs("'" + SelfDir() + "/gatos' verify --bundle '" + out + "' --ledger-key '" + pub +
                                 "' >/dev/null"));
    }
  }
  std::sort(size.begin(), size.end());
  std::printf("bundle: build median %.2f ms, size median %.0f B, max %.0f B (%d jobs)\n", bench::Median(build),
              bench::Median(size), size.back(), samples);
  std::printf("verify (parse + every check, in-process): median %.2f ms\n", bench::Median(verify));
  std::printf("CLI, process included: gatos proof median %.1f ms, gatos verify --bundle median %.1f ms\n",
              bench::Median(cli_proof), bench::Median(cli_verify));
  if (keep.empty()) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace gatos

int main(int argc, char** argv) { return gatos::Main(argc, argv); }
