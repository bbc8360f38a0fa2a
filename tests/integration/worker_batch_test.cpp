// The batch forms of the worker RPC (claim-batch, result-batch) against a
// real gatosd: each entry gets its own reply, and one bad entry refuses only
// that entry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/grant.h"
#include "gatos/git/result.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/time_format.h"
#include "gatos/nats/bus.h"
#include "stack.h"
#include "test_worker.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

TEST(RpcBatchCodec, RoundTripsAndRefusesMalformedBatches) {
  std::vector<std::string> entries = {"one", "", std::string("t\0o", 3)};
  std::string b = rpc::EncodeBatch(entries);
  EXPECT_TRUE(rpc::IsBatch(b));
  auto back = rpc::DecodeBatch(b);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0], "one");
  EXPECT_EQ((*back)[1], "");
  EXPECT_EQ((*back)[2], std::string_view("t\0o", 3));
  EXPECT_FALSE(rpc::IsBatch("{\"job\":1}"));
  EXPECT_EQ(rpc::DecodeBatch("{}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rpc::DecodeBatch(b.substr(0, b.size() - 1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rpc::DecodeBatch(b + "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rpc::DecodeBatch(rpc::EncodeBatch({})).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::string> many(rpc::kMaxBatchEntries + 1, "x");
  EXPECT_EQ(rpc::DecodeBatch(rpc::EncodeBatch(many)).status().code(), StatusCode::kInvalidArgument);
}

// A test worker that also submits jobs and sends batch requests.
class BatchClient : public TestWorker {
 public:
  using TestWorker::TestWorker;

  std::string SubmitJob(const std::string& yaml, const Ed25519PrivateKey& submitter) {
    std::string hex = JobIdHex(*ParseManifest(yaml, "job.yaml"));
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto commit = BuildCommitObject(tree, {}, "job\n\nJob-Id: blake3:" + hex + "\n", "t", "t@x", SystemNowMs(),
                                    &submitter);
    objects.insert(objects.begin(), *commit);
    auto reply = bus().Request(rpc::kSubmit, rpc::EncodeFrame(json{{"commit", commit->id}}, EncodeObjectBatch(objects)),
                               10000);
    EXPECT_TRUE(reply.ok());
    EXPECT_TRUE(json::parse(reply->data).value("ok", false)) << reply->data;
    return hex;
  }
  // Sends a batch; returns each entry's reply as JSON.
  std::vector<json> Batch(const char* subject, const std::vector<std::string>& entries) {
    auto reply = bus().Request(subject, rpc::EncodeBatch(entries), 10000);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    std::vector<json> out;
    if (!reply.ok()) return out;
    EXPECT_TRUE(rpc::IsBatch(reply->data)) << reply->data;
    auto replies = rpc::DecodeBatch(reply->data);
    EXPECT_TRUE(replies.ok());
    if (!replies.ok()) return out;
    for (auto r : *replies) out.push_back(json::parse(r));
    return out;
  }
};

TEST(WorkerBatchRpc, OneBadEntryRefusesOnlyThatEntry) {
  Stack stack;
  ASSERT_TRUE(stack.Start());
  BatchClient w(stack.nats_url(), stack.worker_keys()[0]);
  auto submitter = ReadPrivateKeyFile(stack.submitter_key());
  ASSERT_TRUE(submitter.ok());
  std::string a = w.SubmitJob("command: [\"/bin/true\", \"a\"]\ntimeout: 30\n", *submitter);
  std::string b = w.SubmitJob("command: [\"/bin/true\", \"b\"]\ntimeout: 30\n", *submitter);
  std::string c = w.SubmitJob("command: [\"/bin/true\", \"c\"]\ntimeout: 30\n", *submitter);

  LeaseRequest ra = SignLeaseRequest(w.key(), a, 1, SystemNowMs(), false);
  LeaseRequest rb = SignLeaseRequest(w.key(), b, 1, SystemNowMs(), false);
  LeaseRequest rc = SignLeaseRequest(w.key(), c, 1, SystemNowMs(), false);
  rc.sig_hex[0] = rc.sig_hex[0] == '0' ? '1' : '0';  // a signature that does not verify
  std::vector<json> claims = w.Batch(rpc::kClaimBatch, {rpc::Dump(rpc::LeaseRequestJson(ra)), "not json at all",
                                                        rpc::Dump(rpc::LeaseRequestJson(rc)),
                                                        rpc::Dump(rpc::LeaseRequestJson(rb))});
  ASSERT_EQ(claims.size(), 4u);
  EXPECT_TRUE(claims[0].value("ok", false)) << claims[0].dump();
  EXPECT_EQ(claims[1]["error"], "invalid") << claims[1].dump();
  EXPECT_EQ(claims[2]["error"], "unauthorized") << claims[2].dump();
  EXPECT_TRUE(claims[3].value("ok", false)) << claims[3].dump();
  // One ledger signature covers both grants of the reply, and each grant is
  // for its own entry's request.
  auto ledger_pub = ReadPublicKeyFile(stack.ledger() + "/gatos/ledger_key.pub");
  ASSERT_TRUE(ledger_pub.ok());
  EXPECT_EQ(claims[0][rpc::kGrantSigField], claims[3][rpc::kGrantSigField]);
  auto grants = VerifyReplyGrants({&claims[0], &claims[3]}, {*ledger_pub});
  ASSERT_TRUE(grants.ok()) << grants.status().message();
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_TRUE(VerifyGrant(claims[0]["objects"].get<std::string>(), (*grants)[0], ra).ok());
  EXPECT_TRUE(VerifyGrant(claims[3]["objects"].get<std::string>(), (*grants)[1], rb).ok());
  // Each grant alone is not what the ledger signed: the signature is over
  // the reply's list, so a grant lifted out of it proves nothing.
  EXPECT_EQ(VerifyReplyGrants({&claims[0]}, {*ledger_pub}).status().code(), StatusCode::kPermissionDenied);
  // Nor is the list in another order.
  EXPECT_EQ(VerifyReplyGrants({&claims[3], &claims[0]}, {*ledger_pub}).status().code(),
            StatusCode::kPermissionDenied);

  // Results: a good one, a malformed frame, one for a job this worker does
  // not hold, and another good one.
  BatchClient other(stack.nats_url(), stack.worker_keys()[1]);
  std::vector<json> results = w.Batch(
      rpc::kResultBatch,
      {w.ResultFrame(a, claims[0]), std::string("\0\0", 2), other.ResultFrame(b, claims[3]), w.ResultFrame(b, claims[3])});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].value("ok", false)) << results[0].dump();
  EXPECT_EQ(results[1]["error"], "invalid") << results[1].dump();
  EXPECT_EQ(results[2]["error"], "stale_owner") << results[2].dump();
  EXPECT_TRUE(results[3].value("ok", false)) << results[3].dump();
  for (const std::string& hex : {a, b}) {
    RunResult st = stack.Gatos({"status", "blake3:" + hex, "--ledger", stack.nats_url(), "--json"});
    EXPECT_EQ(json::parse(st.out).value("state", ""), "succeeded") << st.out;
  }
  RunResult st = stack.Gatos({"status", "blake3:" + c, "--ledger", stack.nats_url(), "--json"});
  EXPECT_EQ(json::parse(st.out).value("state", ""), "pending") << st.out;

  // A message that is not a batch at all gets one plain error reply.
  auto whole = w.bus().Request(rpc::kClaimBatch, "{\"job\":\"x\"}", 10000);
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(rpc::IsBatch(whole->data));
  json wj = json::parse(whole->data);
  EXPECT_EQ(wj["error"], "invalid") << whole->data;
  EXPECT_NE(wj["message"].get<std::string>().find("not a batch"), std::string::npos) << whole->data;
  // gatosd is still serving.
  EXPECT_EQ(stack.HttpGet("/healthz").substr(0, 3), "200");
}

}  // namespace
}  // namespace gatos::testing
