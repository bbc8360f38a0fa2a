#include "populate.h"

#include <sys/stat.h>

#include <chrono>
#include <iostream>

#include "gatos/audit/attest.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/maintenance.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/blake3.h"
#include "gatos/model/manifest.h"
#include "gatos/model/time_format.h"

namespace gatos::bench {
namespace {

Result<Ed25519PrivateKey> KeyFile(const std::string& path, const char* comment) {
  auto k = ReadPrivateKeyFile(path);
  if (k.ok()) return k;
  GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, GenerateEd25519Key(comment));
  GATOS_RETURN_IF_ERROR(WriteKeyPair(path, key));
  return key;
}

}  // namespace

std::string BenchJobYaml(int64_t n) {
  return "command: [\"/usr/bin/make\", \"-C\", \"src\", \"target-" + std::to_string(n) + "\"]\ntimeout: 600\n";
}

Result<BenchKeys> EnsureBenchKeys(const std::string& dir) {
  std::string kd = dir + "/bench-keys";
  ::mkdir(kd.c_str(), 0700);
  BenchKeys keys{*GenerateEd25519Key("x"), {}};
  GATOS_ASSIGN_OR_RETURN(keys.submitter, KeyFile(kd + "/submitter", "bench submitter"));
  for (int i = 0; i < 2; ++i) {
    GATOS_ASSIGN_OR_RETURN(auto w, KeyFile(kd + "/worker" + std::to_string(i), "bench worker"));
    keys.workers.push_back(std::move(w));
  }
  GATOS_ASSIGN_OR_RETURN(auto ledger_key, LoadLedgerKey(dir));
  GATOS_ASSIGN_OR_RETURN(auto w, LedgerWriter::Open(dir, std::move(ledger_key)));
  Policy p = w->policy();
  bool changed = false, c = false;
  GATOS_RETURN_IF_ERROR(PolicyAllow(&p, "submitter", keys.submitter.public_key(), &c));
  changed |= c;
  for (const auto& k : keys.workers) {
    GATOS_RETURN_IF_ERROR(PolicyAllow(&p, "worker", k.public_key(), &c));
    changed |= c;
  }
  if (changed) {
    std::vector<Op> ops;
    ops.push_back(PolicyOp{p, "bench keys\n", std::nullopt});
    auto r = w->Apply(ops);
    if (!r[0].outcome.ok()) return InternalError("policy: " + r[0].outcome.message);
  }
  return keys;
}

Result<Populated> Populate(const std::string& dir, const BenchKeys& keys, const PopulateOptions& o) {
  GATOS_ASSIGN_OR_RETURN(auto ledger_key, LoadLedgerKey(dir));
  WriterOptions wo;
  wo.fsync = o.fsync;
  wo.sign_lease_commits = o.signed_leases;
  GATOS_ASSIGN_OR_RETURN(auto w, LedgerWriter::Open(dir, std::move(ledger_key), wo));
  const std::string program = Blake3Tagged("gatos-worker bench binary");
  auto start = std::chrono::steady_clock::now();
  auto check = [](const std::vector<OpResult>& rs, const char* what) -> Status {
    for (const auto& r : rs) {
      if (!r.outcome.ok()) return InternalError(std::string(what) + ": " + r.outcome.message);
    }
    return OkStatus();
  };
  int64_t done = 0;
  // Packs are rolled up in the background while the fill goes on, as gatosd
  // does (one small pack per batch); the fill waits only when the repack
  // falls far behind.
  Repacker repacker(dir, 64);
  for (int64_t base = o.first; base < o.first + o.jobs; base += o.batch) {
    int64_t end = std::min(o.first + o.jobs, base + o.batch);
    int64_t now = SystemNowMs();
    std::vector<Op> submits;
    std::vector<std::pair<std::string, std::string>> jobs;  // commit, hex
    std::vector<Manifest> manifests;
    for (int64_t n = base; n < end; ++n) {
      std::string yaml = BenchJobYaml(n);
      GATOS_ASSIGN_OR_RETURN(Manifest m, ParseManifest(yaml, "job.yaml"));
      std::vector<GitObject> objects;
      GATOS_ASSIGN_OR_RETURN(std::string tree, BuildTreeObjects({{"job.yaml", yaml, false}}, &objects));
      std::string hex = JobIdHex(m);
      GATOS_ASSIGN_OR_RETURN(GitObject c, BuildCommitObject(tree, {}, "build\n\nJob-Id: blake3:" + hex + "\n", "Alice",
                                                            "alice@example.com", now, &keys.submitter));
      objects.insert(objects.begin(), c);
      GATOS_ASSIGN_OR_RETURN(auto checked, CheckJobCommit(BatchLookup(&objects, nullptr), c.id, "", w->policy(), now));
      submits.push_back(SubmitOp{std::move(checked), std::move(objects)});
      jobs.emplace_back(c.id, hex);
      manifests.push_back(std::move(m));
    }
    GATOS_RETURN_IF_ERROR(check(w->Apply(submits), "submit"));
    if (o.results) {
      std::vector<Op> claims;
      for (size_t i = 0; i < jobs.size(); ++i) {
        claims.push_back(LeaseOp{SignLeaseRequest(keys.workers[i % 2], jobs[i].second, 1, SystemNowMs(), false)});
      }
      auto granted = w->Apply(claims);
      GATOS_RETURN_IF_ERROR(check(granted, "claim"));
      std::vector<Op> results;
      for (size_t i = 0; i < jobs.size(); ++i) {
        const Ed25519PrivateKey& wk = keys.workers[i % 2];
        int64_t t = SystemNowMs();
        ResultBuildInput in;
        in.job_commit = jobs[i].first;
        in.lease_commit = granted[i].commit;
        in.poe.job_id = "blake3:" + jobs[i].second;
        in.poe.worker_id = wk.public_key().WorkerId();
        in.poe.lease_epoch = 1;
        bool fail = (base + static_cast<int64_t>(i)) % 10 == 9;
        in.poe.status = fail ? "failed" : "succeeded";
        in.poe.exit_code = fail ? 2 : 0;
        in.poe.runner_program = program;
        in.poe.runner_version = "0.1.0";
        in.poe.runner_platform = "linux-x86_64";
        in.poe.stdout_cap = 1 << 20;
        in.poe.started_at = FormatRfc3339Millis(t - 5);
        in.poe.finished_at = FormatRfc3339Millis(t);
        std::string artifact(1024, static_cast<char>('a' + (base + i) % 26));
        in.files = {{"stdout", "built target-" + std::to_string(base + i) + "\n"},
                    {"stderr", ""},
                    {"outputs/target.bin", artifact}};
        if (o.provenance) {
          ProvenanceInput p;
          p.manifest_json = CanonicalManifest(manifests[i]);
          p.job_id = in.poe.job_id;
          p.job_commit = in.job_commit;
          p.worker_id = in.poe.worker_id;
          p.lease_epoch = 1;
          p.runner_program = program;
          p.runner_version = in.poe.runner_version;
          p.runner_platform = in.poe.runner_platform;
          p.started_at = in.poe.started_at;
          p.finished_at = in.poe.finished_at;
          p.subjects = SubjectsForFiles(in.files);
          GATOS_ASSIGN_OR_RETURN(std::string env, BuildProvenanceEnvelope(p, wk));
          in.files.push_back({kProvenanceFileName, env});
        }
        in.time_ms = t;
        GATOS_ASSIGN_OR_RETURN(BuiltResult built, BuildResult(in, wk));
        ParsedResult parsed;
        Decision oc = CheckResultContent(BatchLookup(&built.objects, nullptr), built.commit_id, w->policy(), &parsed);
        if (!oc.ok()) return InternalError("result: " + oc.message);
        results.push_back(ResultOp{std::move(parsed), std::move(built.objects)});
      }
      GATOS_RETURN_IF_ERROR(check(w->Apply(results), "result"));
    }
    done += end - base;
    if (!repacker.MaybeStart() && CountPacks(dir) > 256) GATOS_RETURN_IF_ERROR(repacker.Wait());
    // As gatosd does while it serves: a fill that is stopped restarts
    // without replaying every batch's view refs.
    if (((base - o.first) / o.batch) % 10 == 9) GATOS_RETURN_IF_ERROR(w->SyncViews());
    if (o.pack_refs_every > 0 && (end - o.first) / o.pack_refs_every != (base - o.first) / o.pack_refs_every) {
      // The writer is between batches and writes refs only from Apply.
      std::string cmd = "git --git-dir='" + dir + "' pack-refs --all";
      if (std::system(cmd.c_str()) != 0) return InternalError(cmd + " failed");
    }
    if (o.progress && ((base - o.first) / o.batch) % 10 == 9) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << "  populated " << done << " jobs (" << static_cast<int64_t>(done / s) << "/s)\n";
    }
  }
  GATOS_RETURN_IF_ERROR(repacker.Wait());
  return Populated{done, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace gatos::bench
