// A temp ledger with a policy, keys for a submitter and two workers, and a
// fake clock, for integration tests of the job plane over real libgit2.
#ifndef GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_
#define GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "gatos/encoding.h"
#include "gatos/job_plane.h"
#include "gatos/signed_request.h"
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

  explicit LedgerFixture(bool dev = false, int64_t lease_ms = 10'000) {
    path = dir.Join("ledger.git");
    EXPECT_TRUE(Ledger::InitRepository(path).ok());
    auto l = Ledger::Open(path);
    Policy p;
    p.settings.dev_mode = dev;
    p.settings.lease_ms = lease_ms;
    p.settings.result_grace_ms = 1000;
    p.ledger_key = ledger_key.public_key();
    p.submitters_text = "alice " + submitter.public_key().ToOpenSsh() + "\n";
    p.workers_text = "w1 " + w1.public_key().ToOpenSsh() + "\nw2 " + w2.public_key().ToOpenSsh() + "\n";
    EXPECT_TRUE((*l)->WritePolicy(p, "policy\n", ledger_key, now).ok());
  }

  std::unique_ptr<Ledger> Open() { return std::move(*Ledger::Open(path)); }

  std::unique_ptr<JobPlane> Plane(Ledger* l) {
    auto jp = std::make_unique<JobPlane>(l, ledger_key, [this] { return now; });
    EXPECT_TRUE(jp->LoadPolicy().ok());
    return jp;
  }

  // A job commit as `git commit -S` would make it; returns {commit, job hex}.
  std::pair<std::string, std::string> JobCommit(Ledger& l, const std::string& yaml,
                                                const Ed25519PrivateKey* key,
                                                const std::string& trailer_override = "") {
    auto m = ParseManifest(yaml, "job.yaml");
    EXPECT_TRUE(m.ok()) << m.status().message();
    std::string hex = JobIdHex(*m);
    std::string blob = *l.WriteBlob(yaml);
    std::string tree = *l.WriteTree({{"job.yaml", blob}});
    std::string msg = "run it\n\nJob-Id: " + (trailer_override.empty() ? "blake3:" + hex : trailer_override) + "\n";
    auto c = l.WriteCommit(tree, {}, msg, key, "Alice", "alice@example.com", now);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return {*c, hex};
  }

  // A signed job commit adopted into the ledger; returns {commit, job hex}.
  std::pair<std::string, std::string> Submit(Ledger& l, JobPlane& jp, const std::string& yaml) {
    auto job = JobCommit(l, yaml, &submitter);
    std::string got;
    bool existing = true;
    Outcome o = jp.AdoptJob(job.first, &got, &existing);
    EXPECT_TRUE(o.ok()) << o.message;
    EXPECT_FALSE(existing);
    return job;
  }

  LeaseRequest Req(const std::string& job, const Ed25519PrivateKey& w, int64_t epoch = 0) {
    return SignLeaseRequest(w, job, epoch, now);
  }
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_LEDGER_FIXTURE_H_
