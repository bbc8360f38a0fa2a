// The auditor over real ledgers: a genuine corpus that must verify (zero false
// rejects) and a tamper corpus in which every case fails with its own check
// and reason (zero false accepts).
#include "gatos/audit/verify.h"
#include "gatos/crypto/sha256.h"

#include <gtest/gtest.h>

#include <memory>

#include "audit_fixture.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/trailers.h"

namespace gatos::testing {
namespace {

std::string Failures(const AuditReport& r) {
  std::string out;
  for (const auto& c : r.checks) {
    if (!c.ok) out += "  " + c.name + ": " + c.detail + "\n";
  }
  return out;
}

AuditReport MustVerify(Ledger& l, const std::string& job, const VerifyOptions& o = {}) {
  auto r = VerifyJob(l, job, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : AuditReport{};
}

// The first failed check must be `check` and its detail must contain `needle`.
void ExpectFirstFailure(const AuditReport& r, const std::string& check, const std::string& needle) {
  const ResultCheck* bad = r.first_failure();
  ASSERT_NE(bad, nullptr) << "expected " << check << " to fail, but the job verifies";
  EXPECT_EQ(bad->name, check) << "first failure: " << bad->name << ": " << bad->detail;
  EXPECT_NE(bad->detail.find(needle), std::string::npos)
      << bad->name << ": " << bad->detail << "\n  (expected to contain: " << needle << ")";
  EXPECT_FALSE(r.ok());
}

const ResultCheck* FindCheck(const AuditReport& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A ledger with two accepted results by w1 (jobs A and B), with provenance.
struct Corpus {
  LedgerFixture f;
  std::unique_ptr<Ledger> l = f.Open();
  JobRun a = RunJob(f, f.w1, {.yaml = Yaml(1)});
  JobRun b = RunJob(f, f.w1, {.yaml = Yaml(2)});

  AuditReport Verify(const std::string& hex, const VerifyOptions& o = {}) {
    return MustVerify(*l, hex, o);
  }
  std::vector<GitObject> Rebuild(const std::vector<ResultFile>& files, const std::string& message,
                                 const Ed25519PrivateKey* key) {
    return RebuildResult(files, {a.job_commit, a.grant.lease_commit}, message, f.now, key);
  }
  std::string MessageA() { return CommitMessageOf(a.built.objects[0]); }
  void Force(const std::vector<GitObject>& objs) { ForceResult(*l, a.job_hex, objs, objs[0].id); }
};

// ---------------------------------------------------------------- genuine

TEST(AuditGenuineTest, UntamperedResultsVerifyWithEveryCheck) {
  Corpus c;
  AuditReport r = c.Verify(c.a.job_hex);
  ASSERT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(r.state, "succeeded");
  EXPECT_TRUE(r.has_result);
  EXPECT_TRUE(r.has_provenance);
  EXPECT_FALSE(r.dev_mode);
  EXPECT_EQ(r.result_commit, c.a.built.commit_id);
  EXPECT_EQ(r.claim_commit, c.a.grant.lease_commit);
  EXPECT_EQ(r.worker_id, c.f.w1.public_key().WorkerId());
  std::vector<std::string> names;
  for (const auto& ch : r.checks) names.push_back(ch.name);
  std::vector<std::string> want = {"job_commit",
                                   "job_id",
                                   "job_trailer",
                                   "policy",
                                   "job_signature",
                                   "commit",
                                   "trailers",
                                   "tree",
                                   "poe_present",
                                   "poe_canonical",
                                   "poe_hash",
                                   "poe_matches_trailers",
                                   "tree_matches_outputs",
                                   "attest_sig",
                                   "commit_signature",
                                   "result_job_id",
                                   "result_parent_job",
                                   "worker_allowed",
                                   "claim_commit",
                                   "claim_signature",
                                   "claim_request_sig",
                                   "claim_matches_result",
                                   "claim_ref",
                                   "lease_current",
                                   "attest_program",
                                   "provenance"};
  EXPECT_EQ(names, want);
  // The blake3: prefix is optional.
  EXPECT_TRUE(c.Verify("blake3:" + c.b.job_hex).ok());
}

TEST(AuditGenuineTest, EveryKindOfGenuineJobVerifiesWithZeroFalseRejects) {
  LedgerFixture f(false, 10'000);
  auto l = f.Open();
  int n = 0;
  RunJob(f, f.w1, {.yaml = Yaml(++n)});
  RunJob(f, f.w2, {.yaml = Yaml(++n)});
  RunJob(f, f.w1, {.yaml = Yaml(++n), .status = "failed"});
  RunJob(f, f.w2, {.yaml = Yaml(++n), .status = "timed-out"});
  RunJob(f, f.w1, {.yaml = Yaml(++n), .status = "aborted"});
  RunJob(f, f.w1, {.yaml = Yaml(++n), .provenance = false});  // an older worker
  RunJob(f, f.w2, {.yaml = Yaml(++n), .renewals = 3});
  // A manifest naming the policy it was written for.
  auto policy = l->ReadPolicy();
  ASSERT_TRUE(policy.ok());
  RunJob(f, f.w1, {.yaml = Yaml(++n) + "policy_root: \"" + PolicyRoot(*policy) + "\"\n"});

  // Takeover: w1's lease expires, w2 takes over at epoch 2 and reports.
  JobRun t;
  std::tie(t.job_commit, t.job_hex) = SubmitPair(f, Yaml(++n));
  ASSERT_TRUE(ClaimInto(f, t.job_hex, f.w1, &t.grant).ok());
  f.now += 10'000 + 1'000 + 1;
  ASSERT_TRUE(ClaimInto(f, t.job_hex, f.w2, &t.grant).ok());
  ASSERT_EQ(t.grant.epoch, 2);
  BuildAndAccept(f, t, f.w2, {.yaml = Yaml(n)});

  // A result inside the grace period after expiry.
  JobRun g;
  std::tie(g.job_commit, g.job_hex) = SubmitPair(f, Yaml(++n));
  ASSERT_TRUE(ClaimInto(f, g.job_hex, f.w1, &g.grant).ok());
  f.now += 10'500;
  BuildAndAccept(f, g, f.w1, {.yaml = Yaml(n)});

  // A worker added by a later policy commit, and one removed by it: results
  // are judged by the policy in force when they were made.
  f.now += 60'000;
  Ed25519PrivateKey w3 = *GenerateEd25519Key("w3");
  Policy p2 = *l->ReadPolicy();
  p2.workers_text =
      "w2 " + f.w2.public_key().ToOpenSsh() + "\nw3 " + w3.public_key().ToOpenSsh() + "\n";
  p2.workers = *ParseAllowedSigners(p2.workers_text, "workers");
  ASSERT_TRUE(f.Apply(PolicyOp{p2, "add w3, remove w1\n", std::nullopt}).outcome.ok());
  f.now += 1000;
  RunJob(f, w3, {.yaml = Yaml(++n)});

  // Jobs without a result: pending, claimed, cancelled.
  SubmitPair(f, Yaml(++n));
  JobRun claimed;
  std::tie(claimed.job_commit, claimed.job_hex) = SubmitPair(f, Yaml(++n));
  ASSERT_TRUE(ClaimInto(f, claimed.job_hex, f.w2, &claimed.grant).ok());
  auto [cancel_commit, cancel_hex] = SubmitPair(f, Yaml(++n));
  ASSERT_TRUE(f.User(cancel_hex, f.ledger_key, false).outcome.ok());

  auto all = VerifyAll(*l, {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->jobs.size(), static_cast<size_t>(n));
  for (const auto& r : all->jobs) EXPECT_TRUE(r.ok()) << r.job_hex << "\n" << Failures(r);
  EXPECT_EQ(all->failed, 0u);
  EXPECT_EQ(all->verified, static_cast<size_t>(n - 3));
  EXPECT_EQ(all->without_result, 3u);
  EXPECT_TRUE(all->ok());
  std::map<std::string, int> states;
  for (const auto& r : all->jobs) ++states[r.state];
  EXPECT_EQ(states["succeeded"], n - 3 - 3);
  EXPECT_EQ(states["failed"], 1);
  EXPECT_EQ(states["timed-out"], 1);
  EXPECT_EQ(states["aborted"], 2);  // one result, one cancel
  EXPECT_EQ(states["pending"], 1);
  EXPECT_EQ(states["claimed"], 1);
  auto cancelled = MustVerify(*l, cancel_hex);
  EXPECT_EQ(FindCheck(cancelled, "result_present")->detail, "aborted (cancelled), no result");

  // --require-results turns the three jobs without a result into failures.
  VerifyOptions strict;
  strict.require_results = true;
  auto all_strict = VerifyAll(*l, strict);
  ASSERT_TRUE(all_strict.ok());
  EXPECT_EQ(all_strict->failed, 3u);
  auto pending = MustVerify(*l, claimed.job_hex, strict);
  ExpectFirstFailure(pending, "result_present", "claimed, no result; a result is required");

  // With a list of trusted worker binaries that holds ours: still all ok.
  VerifyOptions programs;
  programs.trusted_programs = std::set<std::string>{TestProgram()};
  auto all_programs = VerifyAll(*l, programs);
  ASSERT_TRUE(all_programs.ok());
  EXPECT_EQ(all_programs->failed, 0u);
}

TEST(AuditGenuineTest, DevModeJobIsAcceptedAndFlaggedLoudly) {
  LedgerFixture f(/*dev=*/true);
  auto l = f.Open();
  // Unsigned job commit, adopted because the policy is in dev mode.
  auto unsigned_job = f.JobCommit(Yaml(7), nullptr);
  ASSERT_TRUE(f.SubmitJob(unsigned_job).outcome.ok());
  std::string commit = unsigned_job.commit, hex = unsigned_job.hex;
  JobRun r;
  r.job_commit = commit;
  r.job_hex = hex;
  ASSERT_TRUE(ClaimInto(f, hex, f.w1, &r.grant).ok());
  BuildAndAccept(f, r, f.w1, {.yaml = Yaml(7)});
  AuditReport rep = MustVerify(*l, hex);
  EXPECT_TRUE(rep.ok()) << Failures(rep);
  EXPECT_TRUE(rep.dev_mode);
  EXPECT_EQ(
      FindCheck(rep, "job_signature")->detail.rfind("DEV MODE: the job commit is unsigned", 0), 0u)
      << FindCheck(rep, "job_signature")->detail;
  // A signed job in the same ledger is not flagged.
  JobRun s = RunJob(f, f.w1, {.yaml = Yaml(8)});
  AuditReport signed_rep = MustVerify(*l, s.job_hex);
  EXPECT_TRUE(signed_rep.ok()) << Failures(signed_rep);
  EXPECT_FALSE(signed_rep.dev_mode);
}

TEST(AuditGenuineTest, ExtraAllowedSignersAndTrustedProgramsFiles) {
  auto progs = ParseTrustedPrograms(
      "# workers we built\n" + TestProgram() + "\n\n" + std::string(64, 'a') + "  gatos-worker\n",
      "trusted");
  ASSERT_TRUE(progs.ok()) << progs.status().message();
  EXPECT_EQ(progs->size(), 2u);
  EXPECT_EQ(progs->count("blake3:" + std::string(64, 'a')), 1u);
  auto bad = ParseTrustedPrograms("blake3:xyz\n", "trusted");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("trusted:1: expected blake3:<64 lowercase hex>"),
            std::string::npos)
      << bad.status().message();

  Corpus c;
  // Only the auditor's own list: w1 is in it under the auditor's name.
  VerifyOptions own;
  own.trust_policy_workers = false;
  own.extra_workers = *ParseAllowedSigners(
      "# ours\nbuild-farm-1 " + c.f.w1.public_key().ToOpenSsh() + "\n", "signers");
  AuditReport r = c.Verify(c.a.job_hex, own);
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(FindCheck(r, "worker_allowed")->detail,
            "worker build-farm-1 is allowed by --allowed-signers line 2");
  own.extra_workers = *ParseAllowedSigners("w2 " + c.f.w2.public_key().ToOpenSsh() + "\n", "s");
  ExpectFirstFailure(c.Verify(c.a.job_hex, own), "worker_allowed",
                     "is not allowed by --allowed-signers");
}

// ------------------------------------------------------------ tamper corpus

// A scan job whose manifest pins one repository and names another by ref.
std::string InputsYaml(int n) {
  return Yaml(n) + "inputs:\n  - {kind: git, url: /srv/a, commit: " + std::string(40, 'a') +
         "}\n  - {kind: blobptr, hash: x}\n  - {kind: git, url: \"https://h/b\", ref: main}\n";
}

std::vector<PoeInput> ResolvedInputs() {
  return {{0, "/srv/a", "", std::string(40, 'a')}, {2, "https://h/b", "main", std::string(40, 'b')}};
}

TEST(AuditInputsTest, ResolvedCommitsAreReportedAndChecked) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun run = RunJob(f, f.w1, {.yaml = InputsYaml(1), .inputs = ResolvedInputs()});
  auto rep = VerifyJob(*l, run.job_hex, {});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok()) << rep->first_failure()->name << ": " << rep->first_failure()->detail;
  EXPECT_EQ(rep->inputs, ResolvedInputs());
  const ResultCheck* c = FindCheck(*rep, "inputs");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->detail.find("https://h/b at " + std::string(40, 'b')), std::string::npos) << c->detail;
  nlohmann::json j = AuditReportToJson(*rep);
  EXPECT_EQ(j["inputs"][1]["commit"], std::string(40, 'b'));
  // The provenance names the same commits.
  std::string env = *l->ReadFileAtCommit(run.built.commit_id, kProvenanceFileName, kMaxEnvelopeBytes);
  auto st = VerifyProvenanceEnvelope(env, f.w1.public_key());
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->inputs, ResolvedInputs());
  EXPECT_EQ(st->job_commit, run.job_commit);
}

TEST(AuditInputsTest, ACommitOtherThanThePinnedOneFails) {
  LedgerFixture f;
  auto l = f.Open();
  std::vector<PoeInput> wrong = ResolvedInputs();
  wrong[0].commit = std::string(40, 'c');
  JobRun run = RunJob(f, f.w1, {.yaml = InputsYaml(1), .inputs = wrong});
  auto rep = VerifyJob(*l, run.job_hex, {});
  ASSERT_TRUE(rep.ok());
  ASSERT_NE(rep->first_failure(), nullptr);
  EXPECT_EQ(rep->first_failure()->name, "inputs");
  EXPECT_NE(rep->first_failure()->detail.find("job.yaml pins " + std::string(40, 'a')),
            std::string::npos)
      << rep->first_failure()->detail;
}

TEST(AuditInputsTest, AJobThatRanWithoutAnInputFails) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun run = RunJob(f, f.w1, {.yaml = InputsYaml(1), .inputs = {ResolvedInputs()[0]}});
  auto rep = VerifyJob(*l, run.job_hex, {});
  ASSERT_TRUE(rep.ok());
  ASSERT_NE(rep->first_failure(), nullptr);
  EXPECT_EQ(rep->first_failure()->detail, "the job ran but poe.json records 1 of 2 git inputs");
  // A job that failed before it ran (an input could not be fetched) may
  // record fewer: that is the failure's story, not tampering.
  JobRun early = RunJob(f, f.w1, {.yaml = InputsYaml(2), .status = "aborted",
                                  .inputs = {ResolvedInputs()[0]}});
  auto ok = VerifyJob(*l, early.job_hex, {});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->ok()) << ok->first_failure()->detail;
}

TEST(AuditInputsTest, ProvenanceInputsThatDifferFromThePoeFail) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(f, InputsYaml(1));
  ASSERT_TRUE(ClaimInto(f, r.job_hex, f.w1, &r.grant).ok());
  r.input = MakeInput(f, r, f.w1, "succeeded");
  // The provenance says one commit, poe.json another.
  r.input.poe.inputs = ResolvedInputs();
  r.input.poe.inputs[1].commit = std::string(40, 'd');
  std::string env = ProvenanceFor(r.input, InputsYaml(1), f.w1);
  r.input.poe.inputs = ResolvedInputs();
  r.input.files.push_back({kProvenanceFileName, env});
  auto built = BuildResult(r.input, f.w1);
  ASSERT_TRUE(built.ok());
  ASSERT_TRUE(f.Report(built->objects, built->commit_id).outcome.ok());
  auto rep = VerifyJob(*l, r.job_hex, {});
  ASSERT_TRUE(rep.ok());
  ASSERT_NE(rep->first_failure(), nullptr);
  EXPECT_EQ(rep->first_failure()->name, "provenance");
  EXPECT_NE(rep->first_failure()->detail.find("resolvedDependencies"), std::string::npos);
}

TEST(AuditTamperTest, ChangedStdoutByte) {
  Corpus c;
  auto files = FilesWithPoe(c.a);
  ASSERT_EQ(files[0].path, "stdout");
  files[0].data[0] ^= 0x20;  // "hello" -> "Hello", same size
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "tree_matches_outputs", "\"stdout\" hashes to blake3:");
}

TEST(AuditTamperTest, ExtraFile) {
  Corpus c;
  auto files = FilesWithPoe(c.a);
  files.push_back({"outputs/extra.txt", "planted\n"});
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "tree_matches_outputs",
                     "file \"outputs/extra.txt\" is in the tree but not in poe.json outputs");
}

TEST(AuditTamperTest, RemovedFile) {
  Corpus c;
  auto files = FilesWithPoe(c.a);
  std::erase_if(files, [](const ResultFile& f) { return f.path == "outputs/report.txt"; });
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "tree_matches_outputs",
                     "poe.json lists \"outputs/report.txt\" but the tree has no such file");
}

TEST(AuditTamperTest, EditedPoeJsonStillCanonical) {
  Corpus c;
  auto poe = ParsePoe(c.a.built.poe_json);
  ASSERT_TRUE(poe.ok());
  poe->exit_code = 1;  // claim a different exit code, keep everything else
  auto edited = SerializePoe(*poe);
  ASSERT_TRUE(edited.ok());
  auto files = FilesWithPoe(c.a);
  files.back().data = *edited;
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "poe_hash", "but poe.json hashes to blake3:");
}

TEST(AuditTamperTest, EditedPoeJsonWithMatchingTrailerButNoWorkerKey) {
  Corpus c;
  auto poe = ParsePoe(c.a.built.poe_json);
  poe->exit_code = 1;
  std::string edited = *SerializePoe(*poe);
  auto files = FilesWithPoe(c.a);
  files.back().data = edited;
  std::string msg = c.MessageA();
  std::string old_hash = Blake3Tagged(c.a.built.poe_json);
  msg.replace(msg.find(old_hash), old_hash.size(), Blake3Tagged(edited));
  // The forger has no worker key: the commit is signed by their own.
  Ed25519PrivateKey forger = *GenerateEd25519Key("forger");
  c.Force(c.Rebuild(files, msg, &forger));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "attest_sig",
                     "Attest-Sig does not verify over poe.json");
}

TEST(AuditTamperTest, EditedPoeJsonNotCanonical) {
  Corpus c;
  auto files = FilesWithPoe(c.a);
  files.back().data = "{ " + c.a.built.poe_json.substr(1);  // same JSON, one space more
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "poe_canonical", "not in canonical form");
}

TEST(AuditTamperTest, EditedTrailer) {
  Corpus c;
  std::string data = c.a.built.objects[0].data;
  size_t pos = data.find("Status: succeeded");
  ASSERT_NE(pos, std::string::npos);
  data.replace(pos, 17, "Status: failed");
  GitObject commit = Commit(data);
  c.Force({commit});
  AuditReport r = c.Verify(c.a.job_hex);
  ExpectFirstFailure(r, "poe_matches_trailers",
                     "poe.json status succeeded differs from Status failed");
  EXPECT_FALSE(FindCheck(r, "commit_signature")->ok);
}

TEST(AuditTamperTest, JobIdOfAnotherJob) {
  Corpus c;
  // The worker signs a result naming job B, parented on job A's commit and
  // claim, and it is placed at A's result ref.
  ResultBuildInput in = c.a.input;
  in.poe.job_id = "blake3:" + c.b.job_hex;
  auto built = BuildResult(in, c.f.w1);
  ASSERT_TRUE(built.ok());
  c.Force(built->objects);
  ExpectFirstFailure(c.Verify(c.a.job_hex), "result_job_id",
                     "the result's Job-Id is blake3:" + c.b.job_hex);
  // B's genuine result copied to A's ref: the same check catches it.
  ForceResult(*c.l, c.a.job_hex, {}, c.b.built.commit_id);
  ExpectFirstFailure(c.Verify(c.a.job_hex), "result_job_id",
                     "the result's Job-Id is blake3:" + c.b.job_hex);
}

TEST(AuditTamperTest, ResultGraftedOntoAnotherJob) {
  Corpus c;
  // A result of job A whose history is grafted onto job B's commit.
  ResultBuildInput in = c.a.input;
  in.job_commit = c.b.job_commit;
  auto built = BuildResult(in, c.f.w1);
  ASSERT_TRUE(built.ok());
  c.Force(built->objects);
  ExpectFirstFailure(
      c.Verify(c.a.job_hex), "result_parent_job",
      "the result's first parent " + c.b.job_commit.substr(0, 12) + " is not this job's commit");
}

TEST(AuditTamperTest, SignatureFromAnUntrustedKey) {
  Corpus c;
  Ed25519PrivateKey stranger = *GenerateEd25519Key("stranger");
  ResultBuildInput in = c.a.input;
  in.poe.worker_id = stranger.public_key().WorkerId();
  std::erase_if(in.files, [](const ResultFile& f) { return f.path == kProvenanceFileName; });
  auto built = BuildResult(in, stranger);
  ASSERT_TRUE(built.ok());
  c.Force(built->objects);
  ExpectFirstFailure(
      c.Verify(c.a.job_hex), "worker_allowed",
      "worker " + stranger.public_key().WorkerId() + " is not allowed by the workers of policy");
}

TEST(AuditTamperTest, ValidCommitSignatureOverDifferentBytes) {
  Corpus c;
  // A's commit carrying the (valid, w1) signature of B's result commit.
  std::string data = c.a.built.objects[0].data;
  std::string mine = SignatureBlock(data);
  std::string theirs = SignatureBlock(c.b.built.objects[0].data);
  ASSERT_NE(mine, theirs);
  data.replace(data.find(mine), mine.size(), theirs);
  c.Force({Commit(data)});
  AuditReport r = c.Verify(c.a.job_hex);
  ExpectFirstFailure(r, "commit_signature", "commit signature:");
  // Every other check still passes: only the signature is wrong.
  for (const auto& ch : r.checks) {
    if (ch.name != "commit_signature") {
      EXPECT_TRUE(ch.ok) << ch.name << ": " << ch.detail;
    }
  }
}

TEST(AuditTamperTest, ValidAttestSigOverDifferentPoe) {
  Corpus c;
  auto trailers = [](const JobRun& r) {
    return ParseCommitMessage(CommitMessageOf(r.built.objects[0]))->trailers;
  };
  std::string mine = *FindTrailer(trailers(c.a), "Attest-Sig");
  std::string theirs = *FindTrailer(trailers(c.b), "Attest-Sig");
  std::string msg = c.MessageA();
  msg.replace(msg.find(mine), mine.size(), theirs);
  c.Force(c.Rebuild(FilesWithPoe(c.a), msg, &c.f.w1));
  ExpectFirstFailure(c.Verify(c.a.job_hex), "attest_sig",
                     "Attest-Sig does not verify over poe.json");
}

TEST(AuditTamperTest, ClaimFromAnotherWorker) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(3));
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w2, &r.grant).ok());  // w2 holds the lease
  // w1 reports against w2's claim commit.
  r = BuildAndAccept(c.f, r, c.f.w1, {.yaml = Yaml(3), .accept = false});
  ForceResult(*c.l, r.job_hex, r.built.objects, r.built.commit_id);
  ExpectFirstFailure(
      MustVerify(*c.l, r.job_hex), "claim_matches_result",
      "is worker ed25519:" + c.f.w2.public_key().Hex().substr(0, 16) +
          "… at epoch 1; the result is worker ed25519:" + c.f.w1.public_key().Hex().substr(0, 16));
}

TEST(AuditTamperTest, StaleEpochAfterTakeover) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(4));
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w1, &r.grant).ok());
  JobRun stale = BuildAndAccept(c.f, r, c.f.w1, {.yaml = Yaml(4), .accept = false});
  c.f.now += 10'000 + 1'000 + 1;
  LeaseGrant g2;
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w2, &g2).ok());
  ASSERT_EQ(g2.epoch, 2);
  // The ledger refuses w1's result now; someone writes it in anyway.
  EXPECT_EQ(c.f.Report(stale.built.objects, stale.built.commit_id).outcome.error, TransitionError::kStaleOwner);
  ForceResult(*c.l, r.job_hex, stale.built.objects, stale.built.commit_id);
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "lease_current",
                     "stale result: the job's lease is at epoch 2, held by ed25519:" +
                         c.f.w2.public_key().Hex().substr(0, 16));
}

TEST(AuditTamperTest, JobYamlEditedAfterAcceptance) {
  Corpus c;
  // Same Job-Id trailer, validly signed by the submitter, different command.
  auto edited = WriteJobCommit(c.f, *c.l, "command: [\"/bin/rm\", \"-rf\", \"/\"]\ntimeout: 30\n",
                              &c.f.submitter, "blake3:" + c.a.job_hex);
  ASSERT_TRUE(
      c.l->UpdateRefs({{JobRef(c.a.job_hex, "job"), c.a.job_commit, edited.first}}, "t").ok());
  ExpectFirstFailure(c.Verify(c.a.job_hex), "job_id",
                     "job.yaml hashes to blake3:" + edited.second + " but its ref names blake3:" +
                         c.a.job_hex + ": the manifest was changed after the job was accepted");
}

// ------------------------------------------------- more ways to be wrong

TEST(AuditTamperTest, RenewalCommitAsSecondParent) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(5));
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w1, &r.grant).ok());
  c.f.now += 1000;
  OpResult renewed = c.f.Renew(r.job_hex, c.f.w1, 1);
  ASSERT_TRUE(renewed.outcome.ok()) << renewed.outcome.message;
  r.grant.lease_commit = renewed.commit;
  r = BuildAndAccept(c.f, r, c.f.w1, {.yaml = Yaml(5), .accept = false});
  ForceResult(*c.l, r.job_hex, r.built.objects, r.built.commit_id);
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "claim_commit", "it is a renewal of epoch 1");
}

TEST(AuditTamperTest, ClaimCommitNotSignedByTheLedger) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(6));
  // w1 writes its own "claim" (well-formed, with a valid Request-Sig), signed
  // with its own key instead of the ledger's.
  LeaseRequest req = c.f.Req(r.job_hex, c.f.w1, 1);
  LeaseCommitInfo info{"claim", r.job_hex, c.f.w1.public_key().Hex(), 1, c.f.now + 10'000, 1,
                       req.requested_at_ms, req.sig_hex, 10'000, 1 << 20, 4 << 20, false};
  auto claim = c.l->WriteCommit(kEmptyTreeId, {r.job_commit}, FormatLeaseCommitMessage(info), &c.f.w1,
                                "gatos ledger", "ledger@gatos.invalid", c.f.now);
  ASSERT_TRUE(claim.ok());
  ASSERT_TRUE(c.l->UpdateRefs({{JobRef(r.job_hex, "lease"), "", *claim},
                               {ClaimRef(r.job_hex, c.f.w1.public_key().Hex()), "", *claim}},
                              "forged")
                  .ok());
  r.grant.lease_commit = *claim;
  r.grant.epoch = 1;
  r = BuildAndAccept(c.f, r, c.f.w1, {.yaml = Yaml(6), .accept = false});
  ForceResult(*c.l, r.job_hex, r.built.objects, r.built.commit_id);
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "claim_signature",
                     "it is signed by " + c.f.w1.public_key().WorkerId() + ", not by " +
                         c.f.ledger_key.public_key().WorkerId());
}

// Lease commits are unsigned; the signed log vouches for them. One the log
// never recorded (written behind the ledger's back) is refused.
TEST(AuditTamperTest, UnsignedClaimTheLogDoesNotName) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(7));
  LeaseRequest req = c.f.Req(r.job_hex, c.f.w1, 1);
  LeaseCommitInfo info{"claim", r.job_hex, c.f.w1.public_key().Hex(), 1, c.f.now + 10'000, 1,
                       req.requested_at_ms, req.sig_hex, 10'000, 1 << 20, 4 << 20, false};
  auto claim = c.l->WriteCommit(kEmptyTreeId, {r.job_commit}, FormatLeaseCommitMessage(info), nullptr,
                                "gatos ledger", "ledger@gatos.invalid", c.f.now);
  ASSERT_TRUE(claim.ok());
  ASSERT_TRUE(c.l->UpdateRefs({{JobRef(r.job_hex, "lease"), "", *claim},
                               {ClaimRef(r.job_hex, c.f.w1.public_key().Hex()), "", *claim}},
                              "forged")
                  .ok());
  r.grant.lease_commit = *claim;
  r.grant.epoch = 1;
  r = BuildAndAccept(c.f, r, c.f.w1, {.yaml = Yaml(7), .accept = false});
  ForceResult(*c.l, r.job_hex, r.built.objects, r.built.commit_id);
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "claim_signature", "does not name it in the job's record");
}

// What the ledger writes now: unsigned lease commits, vouched for by the log.
TEST(AuditTamperTest, UnsignedClaimsTheLogNamesVerify) {
  Corpus c;
  auto rep = MustVerify(*c.l, c.a.job_hex);
  ASSERT_TRUE(rep.ok());
  for (const auto& ch : rep.checks) {
    if (ch.name == "claim_signature") {
      EXPECT_NE(ch.detail.find("named by the signed log head"), std::string::npos) << ch.detail;
    }
  }
}

// A ledger written before lease commits went unsigned: its claims carry the
// ledger key's signature, which the per-job pass still checks.
TEST(AuditTamperTest, OldFormSignedClaimsStillVerify) {
  LedgerFixture f;
  f.writer_options.sign_lease_commits = true;
  JobRun r = RunJob(f, f.w1, {.yaml = Yaml(8)});
  f.Close();
  auto l = f.Open();
  auto claim = l->ReadCommit(r.grant.lease_commit);
  ASSERT_TRUE(claim.ok());
  EXPECT_FALSE(claim->signature.empty());
  auto rep = MustVerify(*l, r.job_hex);
  EXPECT_TRUE(rep.ok()) << (rep.first_failure() ? rep.first_failure()->detail : "");
  const ResultCheck* sig = FindCheck(rep, "claim_signature");
  ASSERT_NE(sig, nullptr);
  EXPECT_NE(sig->detail.find("signed by the ledger key"), std::string::npos) << sig->detail;
}

TEST(AuditTamperTest, ClaimRefMovedAway) {
  Corpus c;
  std::string ref = ClaimRef(c.a.job_hex, c.f.w1.public_key().Hex());
  ASSERT_TRUE(c.l->UpdateRefs({{ref, c.a.grant.lease_commit, ""}}, "t").ok());
  ExpectFirstFailure(c.Verify(c.a.job_hex), "claim_ref",
                     "is absent, not the result's claim commit");
}

TEST(AuditTamperTest, UntrustedWorkerBinary) {
  Corpus c;
  VerifyOptions o;
  o.trusted_programs = std::set<std::string>{Blake3Tagged("some other build")};
  ExpectFirstFailure(c.Verify(c.a.job_hex, o), "attest_program",
                     "Attest-Program " + TestProgram() + " is not in the trusted programs list");
}

TEST(AuditTamperTest, ProvenanceSubjectsDoNotMatchTheTree) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(9));
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w1, &r.grant).ok());
  ResultBuildInput in = MakeInput(c.f, r, c.f.w1, "succeeded");
  AddProvenance(&in, Yaml(9), c.f.w1);
  in.files[2].data = "43\n";  // outputs/report.txt changed after the statement was signed
  auto built = BuildResult(in, c.f.w1);
  ASSERT_TRUE(built.ok());
  ASSERT_TRUE(c.f.Report(built->objects, built->commit_id).outcome.ok());
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "provenance",
                     "subject \"outputs/report.txt\" has blake3 " + DigestHex(Blake3("42\n")) +
                         " but the file hashes to " + DigestHex(Blake3("43\n")));
}

TEST(AuditTamperTest, ProvenanceSignedByAnotherKey) {
  Corpus c;
  JobRun r;
  std::tie(r.job_commit, r.job_hex) = SubmitPair(c.f, Yaml(10));
  ASSERT_TRUE(ClaimInto(c.f, r.job_hex, c.f.w1, &r.grant).ok());
  ResultBuildInput in = MakeInput(c.f, r, c.f.w1, "succeeded");
  ResultBuildInput as_w2 = in;
  as_w2.poe.worker_id = c.f.w2.public_key().WorkerId();
  in.files.push_back({kProvenanceFileName, ProvenanceFor(as_w2, Yaml(10), c.f.w2)});
  auto built = BuildResult(in, c.f.w1);
  ASSERT_TRUE(c.f.Report(built->objects, built->commit_id).outcome.ok());
  ExpectFirstFailure(MustVerify(*c.l, r.job_hex), "provenance",
                     "the DSSE signature's keyid is " + c.f.w2.public_key().WorkerId());
}

TEST(AuditTamperTest, RequiredProvenanceMissing) {
  Corpus c;
  JobRun r = RunJob(c.f, c.f.w1, {.yaml = Yaml(11), .provenance = false});
  EXPECT_TRUE(c.Verify(r.job_hex).ok());
  VerifyOptions o;
  o.require_provenance = true;
  ExpectFirstFailure(c.Verify(r.job_hex, o), "provenance", "provenance is required");
}

TEST(AuditTamperTest, JobSignedByANonSubmitter) {
  Corpus c;
  auto job = WriteJobCommit(c.f, *c.l, Yaml(12), &c.f.w1);  // a worker key, not a submitter
  ASSERT_TRUE(c.l->UpdateRefs({{JobRef(job.second, "job"), "", job.first}}, "t").ok());
  ExpectFirstFailure(c.Verify(job.second), "job_signature",
                     "the job commit is signed by " + c.f.w1.public_key().WorkerId() +
                         ", which is not a submitter in policy");
  auto unsigned_job = WriteJobCommit(c.f, *c.l, Yaml(13), nullptr);
  ASSERT_TRUE(
      c.l->UpdateRefs({{JobRef(unsigned_job.second, "job"), "", unsigned_job.first}}, "t").ok());
  ExpectFirstFailure(c.Verify(unsigned_job.second), "job_signature",
                     "the job commit is not signed, and policy");
}

TEST(AuditTamperTest, JobIdTrailerOfAnotherJob) {
  Corpus c;
  auto job = WriteJobCommit(c.f, *c.l, Yaml(14), &c.f.submitter, "blake3:" + c.a.job_hex);
  ASSERT_TRUE(c.l->UpdateRefs({{JobRef(job.second, "job"), "", job.first}}, "t").ok());
  ExpectFirstFailure(c.Verify(job.second), "job_trailer",
                     "the job commit's trailer is 'Job-Id: blake3:" + c.a.job_hex + "'");
}

TEST(AuditTamperTest, PolicyCommitNotSignedByTheLedgerKey) {
  Corpus c;
  // Someone with write access appends a policy that lets their worker in.
  c.f.now += 5000;
  Ed25519PrivateKey intruder = *GenerateEd25519Key("intruder");
  Policy p = *c.l->ReadPolicy();
  p.workers_text += "evil " + intruder.public_key().ToOpenSsh() + "\n";
  p.ledger_key = intruder.public_key();
  p.workers = *ParseAllowedSigners(p.workers_text, "workers");
  ForcePolicy(*c.l, p, "more workers\n", intruder, c.f.now);
  c.f.now += 1000;
  auto job = WriteJobCommit(c.f, *c.l, Yaml(15), &c.f.submitter);
  ASSERT_TRUE(c.l->UpdateRefs({{JobRef(job.second, "job"), "", job.first}}, "t").ok());
  ExpectFirstFailure(c.Verify(job.second), "policy",
                     "is not signed by the ledger key " + c.f.ledger_key.public_key().WorkerId() +
                         " of its parent policy");
  // Results made under the genuine policy still verify.
  EXPECT_TRUE(c.Verify(c.a.job_hex).ok()) << Failures(c.Verify(c.a.job_hex));
}

TEST(AuditTamperTest, PinnedLedgerKeyDiffers) {
  Corpus c;
  VerifyOptions o;
  o.ledger_key = c.f.w2.public_key();  // the auditor expects another ledger
  ExpectFirstFailure(c.Verify(c.a.job_hex, o), "policy",
                     "names ledger key " + c.f.ledger_key.public_key().WorkerId() +
                         ", not the pinned key " + c.f.w2.public_key().WorkerId());
  o.ledger_key = c.f.ledger_key.public_key();
  EXPECT_TRUE(c.Verify(c.a.job_hex, o).ok());
}

TEST(AuditTamperTest, UnknownJobAndBadIds) {
  Corpus c;
  std::string hex(64, 'e');
  ExpectFirstFailure(c.Verify(hex), "job_commit", "no refs/gatos/jobs/" + hex + "/job");
  auto bad = VerifyJob(*c.l, "blake3:XYZ", {});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("is not a job id"), std::string::npos);
}

TEST(AuditTamperTest, RepositoryWithoutPolicyIsNotALedger) {
  TempDir dir;
  ASSERT_TRUE(Ledger::InitRepository(dir.Join("empty.git")).ok());
  auto l = Ledger::Open(dir.Join("empty.git"));
  ASSERT_TRUE(l.ok());
  auto all = VerifyAll(**l, {});
  EXPECT_EQ(all.status().code(), StatusCode::kNotFound);
  EXPECT_NE(all.status().message().find("git fetch LEDGER \"refs/gatos/*:refs/gatos/*\""),
            std::string::npos)
      << all.status().message();
}

TEST(AuditTamperTest, WholeCorpusCountsOnlyTheTamperedJob) {
  Corpus c;
  auto files = FilesWithPoe(c.a);
  files[0].data[0] ^= 0x20;
  c.Force(c.Rebuild(files, c.MessageA(), &c.f.w1));
  auto all = VerifyAll(*c.l, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->failed, 1u);
  EXPECT_EQ(all->verified, 1u);
  EXPECT_FALSE(all->ok());
  auto j = AuditReportToJson(all->jobs[0].job_hex == c.a.job_hex ? all->jobs[0] : all->jobs[1]);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["job_id"], "blake3:" + c.a.job_hex);
  EXPECT_EQ(j["checks"].size(), 26u);
}

}  // namespace
}  // namespace gatos::testing
