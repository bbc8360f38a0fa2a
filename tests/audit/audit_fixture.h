// Real ledgers with accepted results for the auditor's tests: jobs submitted,
// claimed and reported through the ledger's writer exactly as gatosd does, plus the
// tools to tamper with them afterwards (write objects, move refs).
#ifndef GATOS_TESTS_AUDIT_AUDIT_FIXTURE_H_
#define GATOS_TESTS_AUDIT_AUDIT_FIXTURE_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gatos/audit/attest.h"
#include "gatos/audit/verify.h"
#include "gatos/git/result.h"
#include "gatos/model/blake3.h"
#include "gatos/model/time_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/poe.h"
#include "ledger_fixture.h"

namespace gatos::testing {

inline std::string Yaml(int n) {
  return "command: [\"/bin/echo\", \"job-" + std::to_string(n) + "\"]\ntimeout: 30\n";
}

inline const std::string& TestProgram() {
  static const std::string kProgram = Blake3Tagged("gatos-worker test binary");
  return kProgram;
}

// What a claim granted, as the tests use it.
struct LeaseGrant {
  std::string lease_commit;
  int64_t epoch = 0;
  std::string job_commit;
};

// Submits a signed job; returns {commit, job hex}.
inline std::pair<std::string, std::string> SubmitPair(LedgerFixture& f, const std::string& yaml) {
  auto j = f.Submit(yaml);
  return {j.commit, j.hex};
}

// Claims the job's next epoch for `w`; the grant on success.
inline Decision ClaimInto(LedgerFixture& f, const std::string& hex, const Ed25519PrivateKey& w, LeaseGrant* g) {
  int64_t epoch = f.Record(hex).epoch + 1;
  OpResult r = f.Claim(hex, w, epoch);
  if (r.outcome.ok()) *g = LeaseGrant{r.commit, r.record->epoch, r.record->job_commit};
  return r.outcome;
}

// One job taken through submit, claim and (unless told otherwise) an
// accepted result.
struct JobRun {
  std::string job_commit, job_hex;
  LeaseGrant grant;
  ResultBuildInput input;  // files without poe.json (with the provenance file if any)
  BuiltResult built;
  Decision accepted;
};

struct RunSpec {
  std::string yaml;
  std::string status = "succeeded";
  bool provenance = true;
  bool accept = true;
  // Renewals before the result.
  int renewals = 0;
  // Git inputs the worker says it resolved (poe.json and the provenance).
  std::vector<PoeInput> inputs = {};
};

inline ResultBuildInput MakeInput(const LedgerFixture& f, const JobRun& r,
                                  const Ed25519PrivateKey& w, const std::string& status) {
  ResultBuildInput in;
  in.job_commit = r.job_commit;
  in.lease_commit = r.grant.lease_commit;
  in.poe.job_id = "blake3:" + r.job_hex;
  in.poe.worker_id = w.public_key().WorkerId();
  in.poe.lease_epoch = r.grant.epoch;
  in.poe.status = status;
  in.poe.runner_program = TestProgram();
  in.poe.runner_version = "0.1.0";
  in.poe.runner_platform = "linux-x86_64";
  if (status == "succeeded") in.poe.exit_code = 0;
  if (status == "failed") in.poe.exit_code = 3;
  if (status == "timed-out") {
    in.poe.signal = 9;
    in.poe.timed_out = true;
  }
  if (status == "aborted") in.poe.reason = "cancelled before start";
  in.poe.stdout_cap = 1 << 20;
  in.poe.started_at = FormatRfc3339Millis(f.now - 20);
  in.poe.finished_at = FormatRfc3339Millis(f.now);
  in.files = {{"stdout", "hello " + r.job_hex.substr(0, 8) + "\n"},
              {"stderr", ""},
              {"outputs/report.txt", "42\n"},
              {"outputs/deep/a.bin", std::string("\0\1\2", 3)}};
  in.time_ms = f.now;
  return in;
}

// The provenance envelope the worker adds to `in.files` before BuildResult.
inline std::string ProvenanceFor(const ResultBuildInput& in, const std::string& yaml,
                                 const Ed25519PrivateKey& w) {
  auto m = ParseManifest(yaml, "job.yaml");
  EXPECT_TRUE(m.ok()) << m.status().message();
  ProvenanceInput p;
  p.manifest_json = CanonicalManifest(*m);
  p.job_id = in.poe.job_id;
  p.job_commit = in.job_commit;
  p.worker_id = in.poe.worker_id;
  p.lease_epoch = in.poe.lease_epoch;
  p.runner_program = in.poe.runner_program;
  p.runner_version = in.poe.runner_version;
  p.runner_platform = in.poe.runner_platform;
  p.started_at = in.poe.started_at;
  p.finished_at = in.poe.finished_at;
  p.subjects = SubjectsForFiles(in.files);
  p.inputs = in.poe.inputs;
  auto env = BuildProvenanceEnvelope(p, w);
  EXPECT_TRUE(env.ok()) << env.status().message();
  return env.ok() ? *env : "";
}

inline void AddProvenance(ResultBuildInput* in, const std::string& yaml,
                          const Ed25519PrivateKey& w) {
  std::string env = ProvenanceFor(*in, yaml, w);
  in->files.push_back({kProvenanceFileName, env});
}

// Builds (and unless spec.accept is false, has the ledger accept) a result.
inline JobRun BuildAndAccept(LedgerFixture& f, JobRun r, const Ed25519PrivateKey& w, const RunSpec& spec) {
  r.input = MakeInput(f, r, w, spec.status);
  r.input.poe.inputs = spec.inputs;
  if (spec.provenance) AddProvenance(&r.input, spec.yaml, w);
  auto built = BuildResult(r.input, w);
  EXPECT_TRUE(built.ok()) << built.status().message();
  r.built = *built;
  if (spec.accept) {
    r.accepted = f.Report(r.built.objects, r.built.commit_id).outcome;
    EXPECT_TRUE(r.accepted.ok()) << r.accepted.message;
  }
  return r;
}

inline JobRun RunJob(LedgerFixture& f, const Ed25519PrivateKey& w, const RunSpec& spec) {
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(f, spec.yaml);
  Decision o = ClaimInto(f, r.job_hex, w, &r.grant);
  EXPECT_TRUE(o.ok()) << o.message;
  for (int i = 0; i < spec.renewals; ++i) {
    f.now += 1000;
    o = f.Renew(r.job_hex, w, r.grant.epoch).outcome;
    EXPECT_TRUE(o.ok()) << o.message;
  }
  // The result's second parent is always the claim commit, never a renewal.
  return BuildAndAccept(f, std::move(r), w, spec);
}

// Writes every object that is missing and moves refs/gatos/jobs/<job>/result
// to `commit` (creating it when absent), as an attacker with write access to
// the repository could.
inline void ForceResult(Ledger& l, const std::string& job_hex, const std::vector<GitObject>& objs,
                        const std::string& commit) {
  for (const GitObject& o : objs) {
    if (l.HasObject(o.id)) continue;
    auto id = l.WriteRawObject(o.type, o.data);
    ASSERT_TRUE(id.ok()) << id.status().message();
    ASSERT_EQ(*id, o.id);
  }
  std::string ref = JobRef(job_hex, "result");
  auto old = l.ResolveRef(ref);
  ASSERT_TRUE(old.ok());
  Status s = l.UpdateRefs({{ref, *old, commit}}, "tamper");
  ASSERT_TRUE(s.ok()) << s.message();
}

// Writes objects that are missing, as an attacker with write access could.
inline void WriteObjects(Ledger& l, const std::vector<GitObject>& objs) {
  for (const GitObject& o : objs) {
    if (l.HasObject(o.id)) continue;
    auto id = l.WriteRawObject(o.type, o.data);
    ASSERT_TRUE(id.ok()) << id.status().message();
  }
}

// A job commit written into the repository (not adopted by the ledger);
// returns {commit, job hex}.
inline std::pair<std::string, std::string> WriteJobCommit(LedgerFixture& f, Ledger& l, const std::string& yaml,
                                                          const Ed25519PrivateKey* key,
                                                          const std::string& trailer = "") {
  auto j = f.JobCommit(yaml, key, trailer);
  WriteObjects(l, j.objects);
  return {j.commit, j.hex};
}

// A policy commit on top of refs/gatos/policy, signed by `key`, moved in
// behind the ledger's back.
inline void ForcePolicy(Ledger& l, const Policy& p, const std::string& message, const Ed25519PrivateKey& key,
                        int64_t time_ms) {
  std::string old = *l.ResolveRef(kPolicyRef);
  auto objs = BuildPolicyCommit(p, old, message, key, time_ms);
  ASSERT_TRUE(objs.ok()) << objs.status().message();
  WriteObjects(l, *objs);
  ASSERT_TRUE(l.UpdateRefs({{kPolicyRef, old, objs->front().id}}, "tamper").ok());
}

// The message of a commit object built by BuildCommitObject.
inline std::string CommitMessageOf(const GitObject& commit) {
  return commit.data.substr(commit.data.find("\n\n") + 2);
}

// A result commit rebuilt from its parts: `files` must include poe.json.
// Signed by `key` when given (a worker signing whatever it likes).
inline std::vector<GitObject> RebuildResult(const std::vector<ResultFile>& files,
                                            const std::vector<std::string>& parents,
                                            const std::string& message, int64_t time_ms,
                                            const Ed25519PrivateKey* key) {
  std::vector<GitObject> objs;
  auto tree = BuildTreeObjects(files, &objs);
  EXPECT_TRUE(tree.ok()) << tree.status().message();
  auto commit = BuildCommitObject(*tree, parents, message, "gatos worker", "worker@gatos.invalid",
                                  time_ms, key);
  EXPECT_TRUE(commit.ok()) << commit.status().message();
  objs.insert(objs.begin(), *commit);
  return objs;
}

inline std::vector<ResultFile> FilesWithPoe(const JobRun& r) {
  std::vector<ResultFile> files = r.input.files;
  files.push_back({kPoeFileName, r.built.poe_json});
  return files;
}

// The armored gpgsig header block ("gpgsig ...\n ...\n") of a commit object.
inline std::string SignatureBlock(const std::string& data) {
  size_t start = data.find("gpgsig ");
  size_t end = data.find("-----END SSH SIGNATURE-----", start);
  EXPECT_NE(start, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  end = data.find('\n', end) + 1;
  return data.substr(start, end - start);
}

inline GitObject Commit(std::string data) {
  GitObject o{ObjectType::kCommit, std::move(data), ""};
  o.id = GitObjectId(ObjectType::kCommit, o.data);
  return o;
}

}  // namespace gatos::testing

#endif  // GATOS_TESTS_AUDIT_AUDIT_FIXTURE_H_
