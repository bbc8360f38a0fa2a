// A temp ledger (gatosd init's layout: a log with its first policy), keys for
// a submitter and two workers, and a fake clock, for integration tests of
// the ledger's writer over real libgit2.
#ifndef GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_
#define GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gatos/crypto/signed_request.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "test_util.h"

namespace gatos::testing {

struct LedgerFixture {
  TempDir dir;
  std::string path;
  Ed25519PrivateKey ledger_key = *GenerateEd25519Key("ledger");
  Ed25519PrivateKey submitter = *GenerateEd25519Key("alice");
  Ed25519PrivateKey w1 = *GenerateEd25519Key("w1");
  Ed25519PrivateKey w2 = *GenerateEd25519Key("w2");
  int64_t now = 1'800'000'000'000;
  bool async_views = false;  // the writer as gatosd runs it (set before the first W())
  WriterOptions writer_options;  // the rest of the writer's options (before W())
  std::unique_ptr<LedgerWriter> writer;

  explicit LedgerFixture(bool dev = false, int64_t lease_ms = 10'000,
                         const std::function<void(Policy*)>& customize = nullptr) {
    path = dir.Join("ledger.git");
    EXPECT_TRUE(Ledger::InitRepository(path).ok());
    Policy p;
    p.settings.dev_mode = dev;
    p.settings.lease_ms = lease_ms;
    p.settings.result_grace_ms = 1000;
    p.ledger_key = ledger_key.public_key();
    p.submitters_text = "alice " + submitter.public_key().ToOpenSsh() + "\n";
    p.workers_text = "w1 " + w1.public_key().ToOpenSsh() + "\nw2 " + w2.public_key().ToOpenSsh() + "\n";
    p.submitters = *ParseAllowedSigners(p.submitters_text, "submitters");
    p.workers = *ParseAllowedSigners(p.workers_text, "workers");
    if (customize) customize(&p);
    Status s = LedgerWriter::Initialize(path, p, ledger_key, now);
    EXPECT_TRUE(s.ok()) << s.message();
  }

  // The writer, with the fixture's clock (opened on first use).
  LedgerWriter& W() {
    if (!writer) {
      WriterOptions o = writer_options;
      o.clock = [this] { return now; };
      o.async_views = async_views;
      auto w = LedgerWriter::Open(path, ledger_key, o);
      EXPECT_TRUE(w.ok()) << w.status().message();
      writer = std::move(*w);
    }
    return *writer;
  }
  void Close() { writer.reset(); }
  std::unique_ptr<Ledger> Open() { return std::move(*Ledger::Open(path)); }
  std::string Ref(const std::string& name) { return Open()->ResolveRef(name).value_or("?"); }

  OpResult Apply(Op op) {
    std::vector<Op> ops;
    ops.push_back(std::move(op));
    return W().Apply(ops)[0];
  }

  struct Job {
    std::string commit, hex;
    std::vector<GitObject> objects;
  };
  // A job commit as `git commit -S` would make it, built in memory.
  Job JobCommit(const std::string& yaml, const Ed25519PrivateKey* key, const std::string& trailer_override = "") {
    auto m = ParseManifest(yaml, "job.yaml");
    EXPECT_TRUE(m.ok()) << m.status().message();
    Job j;
    j.hex = JobIdHex(*m);
    auto tree = BuildTreeObjects({{"job.yaml", yaml, false}}, &j.objects);
    std::string msg = "run it\n\nJob-Id: " + (trailer_override.empty() ? "blake3:" + j.hex : trailer_override) + "\n";
    auto c = BuildCommitObject(*tree, {}, msg, "Alice", "alice@example.com", now, key);
    EXPECT_TRUE(c.ok()) << c.status().message();
    j.commit = c->id;
    j.objects.insert(j.objects.begin(), *c);
    return j;
  }
  // The ledger's checks of a job commit (as an RPC submit runs them).
  Result<JobCommitCheck> Check(const Job& j, const std::string& expected = "") {
    return CheckJobCommit(BatchLookup(&j.objects, nullptr), j.commit, expected, W().policy(), now);
  }
  OpResult SubmitJob(const Job& j) {
    auto check = Check(j);
    if (!check.ok()) {
      OpResult r;
      r.outcome = Decision::FromStatus(check.status());
      return r;
    }
    return Apply(SubmitOp{*check, j.objects});
  }
  // A signed job adopted into the ledger.
  Job Submit(const std::string& yaml) {
    Job j = JobCommit(yaml, &submitter);
    OpResult r = SubmitJob(j);
    EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
    EXPECT_FALSE(r.existing);
    return j;
  }

  LeaseRequest Req(const std::string& job, const Ed25519PrivateKey& w, int64_t epoch, bool renew = false) {
    return SignLeaseRequest(w, job, epoch, now, renew);
  }
  // A lease request as the service handles it: verified, then applied.
  OpResult Lease(const LeaseRequest& req) {
    Decision v = VerifyLeaseRequest(req, W().policy(), now);
    if (!v.ok()) {
      OpResult r;
      r.outcome = v;
      return r;
    }
    return Apply(LeaseOp{req});
  }
  OpResult Claim(const std::string& job, const Ed25519PrivateKey& w, int64_t epoch = 1) {
    return Lease(Req(job, w, epoch));
  }
  OpResult Renew(const std::string& job, const Ed25519PrivateKey& w, int64_t epoch) {
    return Lease(Req(job, w, epoch, true));
  }
  OpResult User(const std::string& job, const Ed25519PrivateKey& who, bool retry, int64_t attempt = 0) {
    UserRequest u = SignUserRequest(who, job, retry, attempt, now);
    return Apply(UserOp{retry, u.job_hex, u.requester_hex, u.attempt, u.requested_at_ms, u.sig_hex});
  }
  // A result built by a worker, as the service checks it, then applied.
  OpResult Report(const std::vector<GitObject>& objects, const std::string& commit) {
    ParsedResult parsed;
    Decision o = CheckResultContent(BatchLookup(&objects, nullptr), commit, W().policy(), &parsed);
    if (!o.ok()) {
      OpResult r;
      r.outcome = o;
      return r;
    }
    return Apply(ResultOp{parsed, objects});
  }
  JobRecord Record(const std::string& hex) {
    auto r = W().Find(hex);
    EXPECT_TRUE(r.ok() && *r) << hex;
    return r.ok() && *r ? **r : JobRecord{};
  }
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_
