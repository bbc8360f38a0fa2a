// Filling a ledger with jobs for the benchmarks, through the ledger's real
// write path (LedgerWriter, group commit) in batches: signed job commits,
// signed claims, and worker-built, signed results with provenance, exactly
// as gatosd records them. The ledger must exist (gatosd init).
#ifndef GATOS_BENCH_SUPPORT_POPULATE_H_
#define GATOS_BENCH_SUPPORT_POPULATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/model/status.h"

namespace gatos::bench {

struct BenchKeys {
  Ed25519PrivateKey submitter;
  std::vector<Ed25519PrivateKey> workers;
};

struct PopulateOptions {
  int64_t jobs = 1000;
  int64_t batch = 1000;     // jobs per log batch (three batches each: submit, claim, result)
  bool results = true;      // claim and report every job (else they stay pending)
  bool provenance = true;   // an in-toto envelope in each result, as the worker writes
  bool fsync = false;       // populating is not what is measured
  int64_t first = 0;        // job numbers start here (several calls add different jobs)
  bool progress = true;     // a line on stderr every 10 batches
  // Lease commits signed one by one, as ledgers were written before grants
  // were signed per reply (WriterOptions::sign_lease_commits).
  bool signed_leases = false;
  // `git pack-refs --all` after every this many jobs (0: never). A job leaves
  // four loose refs (a 4 KB block and an inode each, with their directories
  // 24 KB per job): a million jobs' loose refs would take 24 GB of disk.
  int64_t pack_refs_every = 0;
};

struct Populated {
  int64_t jobs = 0;
  double seconds = 0;
};

// Keys allowed by the ledger's policy (added through the writer when
// missing): a submitter and two workers. Written as <dir>/bench-keys/*.
Result<BenchKeys> EnsureBenchKeys(const std::string& ledger_dir);

// The manifest of job number n (distinct for every n).
std::string BenchJobYaml(int64_t n);

Result<Populated> Populate(const std::string& ledger_dir, const BenchKeys& keys, const PopulateOptions& options);

}  // namespace gatos::bench

#endif  // GATOS_BENCH_SUPPORT_POPULATE_H_
