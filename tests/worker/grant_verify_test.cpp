// What a worker accepts as a grant: one ledger signature over the grants of
// a reply (gatos/git/grant.h), then each grant's objects against it and the
// request just sent. Replies are built here as gatosd builds them; the
// end-to-end forms (a rogue responder on a real bus) are in
// tests/integration/worker_security_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/git_object.h"
#include "gatos/git/grant.h"
#include "gatos/git/result.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/manifest.h"
#include "gatos/model/refs.h"

namespace gatos {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1'760'000'000'000;

struct Fixture {
  Ed25519PrivateKey ledger = *GenerateEd25519Key("ledger");
  Ed25519PrivateKey rogue = *GenerateEd25519Key("rogue");
  Ed25519PrivateKey worker = *GenerateEd25519Key("worker");
  std::vector<Ed25519PublicKey> keys{ledger.public_key()};

  // A job (job.yaml, tree, commit) and a claim reply's entry for `sent`,
  // without its signature. `expires` is what the lease commit says.
  json Entry(const std::string& yaml, const LeaseRequest& sent, rpc::Grant* grant,
             int64_t expires = kNow + 30'000) {
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto job = BuildCommitObject(tree, {}, "job\n\nJob-Id: blake3:" + sent.job_hex + "\n", "s", "s@x", kNow,
                                 nullptr);
    LeaseCommitInfo info;
    info.kind = "claim";
    info.job_hex = sent.job_hex;
    info.worker_hex = sent.worker_hex;
    info.epoch = sent.epoch;
    info.expires_ms = expires;
    info.attempt = 1;
    info.requested_at_ms = sent.requested_at_ms;
    info.request_sig_hex = sent.sig_hex;
    info.lease_ms = 30'000;
    auto lease = BuildCommitObject(kEmptyTreeId, {job->id}, FormatLeaseCommitMessage(info), "gatos ledger",
                                   "ledger@gatos.invalid", kNow, nullptr);
    objects.insert(objects.begin(), *job);
    objects.insert(objects.begin(), *lease);
    std::string batch = EncodeObjectBatch(objects);
    *grant = {sent.job_hex, sent.epoch, lease->id, expires, job->id};
    json reply = {{"ok", true}, {"attempt", 1}};
    rpc::SetGrantFields(*grant, &reply);
    reply["objects"] = Base64Encode(reinterpret_cast<const uint8_t*>(batch.data()), batch.size());
    return reply;
  }

  static void Sign(const Ed25519PrivateKey& key, const std::vector<rpc::Grant>& grants,
                   std::vector<json*> entries) {
    auto sig = Ed25519Sign(key, rpc::GrantsPayload(grants));
    for (json* e : entries) (*e)[rpc::kGrantSigField] = HexEncode(sig.data(), sig.size());
  }

  LeaseRequest Claim(const std::string& yaml, int64_t at = kNow) {
    auto m = ParseManifest(yaml, "job.yaml");
    return SignLeaseRequest(worker, JobIdHex(*m), 1, at, false);
  }
};

const char kYamlA[] = "command: [\"/bin/true\", \"a\"]\ntimeout: 30\n";
const char kYamlB[] = "command: [\"/bin/true\", \"b\"]\ntimeout: 30\n";

TEST(GrantVerify, OneSignatureCoversEveryGrantOfAReply) {
  Fixture f;
  LeaseRequest a = f.Claim(kYamlA), b = f.Claim(kYamlB);
  rpc::Grant ga, gb;
  json ea = f.Entry(kYamlA, a, &ga), eb = f.Entry(kYamlB, b, &gb);
  Fixture::Sign(f.ledger, {ga, gb}, {&ea, &eb});
  auto grants = VerifyReplyGrants({&ea, &eb}, f.keys);
  ASSERT_TRUE(grants.ok()) << grants.status().message();
  ASSERT_EQ(grants->size(), 2u);
  auto va = VerifyGrant(ea["objects"].get<std::string>(), (*grants)[0], a);
  ASSERT_TRUE(va.ok()) << va.status().message();
  EXPECT_EQ(va->lease_commit, ga.lease_commit);
  EXPECT_EQ(va->job_yaml, kYamlA);
  EXPECT_EQ(va->lease.expires_ms, ga.expires_ms);
  EXPECT_TRUE(VerifyGrant(eb["objects"].get<std::string>(), (*grants)[1], b).ok());
  // The payload names each field of each grant, in order.
  EXPECT_EQ(rpc::GrantsPayload({ga}), "gatos-grant-v1\n1\n" + ga.job_hex + "\n1\n" + ga.lease_commit + "\n" +
                                          std::to_string(ga.expires_ms) + "\n" + ga.job_commit + "\n");
}

TEST(GrantVerify, ForgedOrMissingSignatureIsRefused) {
  Fixture f;
  LeaseRequest a = f.Claim(kYamlA);
  rpc::Grant ga;
  json ea = f.Entry(kYamlA, a, &ga);
  // Missing.
  EXPECT_EQ(VerifyReplyGrants({&ea}, f.keys).status().code(), StatusCode::kPermissionDenied);
  // Signed by another key.
  Fixture::Sign(f.rogue, {ga}, {&ea});
  auto forged = VerifyReplyGrants({&ea}, f.keys);
  EXPECT_EQ(forged.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(forged.status().message().find("does not verify"), std::string::npos) << forged.status().message();
  // Not hex, or the wrong length.
  ea[rpc::kGrantSigField] = "zz";
  EXPECT_EQ(VerifyReplyGrants({&ea}, f.keys).status().code(), StatusCode::kPermissionDenied);
  ea[rpc::kGrantSigField] = 7;
  EXPECT_EQ(VerifyReplyGrants({&ea}, f.keys).status().code(), StatusCode::kPermissionDenied);
}

TEST(GrantVerify, AGrantAlteredAfterSigningIsRefused) {
  Fixture f;
  LeaseRequest a = f.Claim(kYamlA), b = f.Claim(kYamlB);
  rpc::Grant ga, gb;
  json ea = f.Entry(kYamlA, a, &ga), eb = f.Entry(kYamlB, b, &gb);
  Fixture::Sign(f.ledger, {ga, gb}, {&ea, &eb});
  // A later expiry in the reply's fields.
  json later = ea;
  later["expires_ms"] = ga.expires_ms + 3'600'000;
  EXPECT_EQ(VerifyReplyGrants({&later, &eb}, f.keys).status().code(), StatusCode::kPermissionDenied);
  // Another lease commit (a later expiry, or more network) with the fields
  // unchanged: the signed id is not in the reply's objects.
  rpc::Grant g2;
  json other = f.Entry(kYamlA, a, &g2, kNow + 3'600'000);
  json swapped = ea;
  swapped["objects"] = other["objects"];
  auto signed_grants = VerifyReplyGrants({&swapped, &eb}, f.keys);
  ASSERT_TRUE(signed_grants.ok());
  auto v = VerifyGrant(swapped["objects"].get<std::string>(), (*signed_grants)[0], a);
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.status().message().find("not in the reply"), std::string::npos) << v.status().message();
  // A grant dropped from the reply, or the two in another order.
  EXPECT_EQ(VerifyReplyGrants({&ea}, f.keys).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(VerifyReplyGrants({&eb, &ea}, f.keys).status().code(), StatusCode::kPermissionDenied);
  // Entries of one reply with different signatures.
  json resigned = eb;
  Fixture::Sign(f.ledger, {gb}, {&resigned});
  EXPECT_EQ(VerifyReplyGrants({&ea, &resigned}, f.keys).status().code(), StatusCode::kPermissionDenied);
}

TEST(GrantVerify, AGrantForAnotherJobIsRefused) {
  Fixture f;
  LeaseRequest a = f.Claim(kYamlA), b = f.Claim(kYamlB);
  rpc::Grant gb;
  json eb = f.Entry(kYamlB, b, &gb);
  Fixture::Sign(f.ledger, {gb}, {&eb});
  auto grants = VerifyReplyGrants({&eb}, f.keys);
  ASSERT_TRUE(grants.ok());
  // Genuine, but the answer to another job's claim.
  auto v = VerifyGrant(eb["objects"].get<std::string>(), grants->front(), a);
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.status().message().find("not the job this worker asked for"), std::string::npos)
      << v.status().message();
}

TEST(GrantVerify, AReplayedReplyIsRefused) {
  Fixture f;
  LeaseRequest first = f.Claim(kYamlA, kNow);
  rpc::Grant g;
  json e = f.Entry(kYamlA, first, &g);
  Fixture::Sign(f.ledger, {g}, {&e});
  auto grants = VerifyReplyGrants({&e}, f.keys);
  ASSERT_TRUE(grants.ok());
  ASSERT_TRUE(VerifyGrant(e["objects"].get<std::string>(), grants->front(), first).ok());
  // The same genuine reply, to a later request of the same worker for the
  // same job and epoch: its lease commit answers the first request.
  LeaseRequest again = f.Claim(kYamlA, kNow + 5'000);
  auto v = VerifyGrant(e["objects"].get<std::string>(), grants->front(), again);
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.status().message().find("another request"), std::string::npos) << v.status().message();
  // A renewal is not a grant, and a grant is not a renewal.
  auto r = VerifyRenewal(e["objects"].get<std::string>(), grants->front(), f.keys, first);
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace gatos
