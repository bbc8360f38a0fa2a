// A worker-side RPC client over a real NATS connection, for integration
// tests that drive the worker protocol by hand: claims, and results sent
// over the result RPC or built for a push with git.
#ifndef GATOS_TESTS_SUPPORT_TEST_WORKER_H_
#define GATOS_TESTS_SUPPORT_TEST_WORKER_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/result.h"
#include "gatos/model/blake3.h"
#include "gatos/model/clock.h"
#include "gatos/model/rpc.h"
#include "gatos/model/time_format.h"
#include "gatos/nats/bus.h"

namespace gatos::testing {

class TestWorker {
 public:
  TestWorker(const std::string& url, const std::string& key_path)
      : key_(*ReadPrivateKeyFile(key_path)) {
    BusOptions bo;
    bo.url = url;
    bo.name = "test worker";
    bus_ = std::move(*Bus::Connect(bo));
  }
  Bus& bus() { return *bus_; }
  std::string hex() const { return key_.public_key().Hex(); }
  const Ed25519PrivateKey& key() const { return key_; }

  nlohmann::json Claim(const std::string& job_hex, int64_t epoch = 1) {
    last_claim_ = SignLeaseRequest(key_, job_hex, epoch, SystemNowMs(), false);
    return Call(rpc::kClaim, rpc::LeaseRequestJson(last_claim_).dump());
  }
  const LeaseRequest& last_claim() const { return last_claim_; }
  nlohmann::json Result(const std::string& job_hex, const nlohmann::json& grant, const std::string& status = "succeeded") {
    last_frame_ = ResultFrame(job_hex, grant, status);
    return Call(rpc::kResult, last_frame_);
  }
  // The result RPC's request for a signed result of the lease in `grant`.
  std::string ResultFrame(const std::string& job_hex, const nlohmann::json& grant,
                          const std::string& status = "succeeded") {
    std::string commit;
    std::vector<GitObject> objects = BuildObjects(job_hex, grant, &commit, status);
    return rpc::EncodeFrame(nlohmann::json{{"commit", commit}}, EncodeObjectBatch(objects));
  }
  // The outbox's retry after a lost acknowledgement: the same bytes again.
  nlohmann::json Resend() { return Call(rpc::kResult, last_frame_); }
  // A signed result for the lease in `grant`: its objects, for the RPC or
  // for pushing them with git.
  std::vector<GitObject> BuildObjects(const std::string& job_hex, const nlohmann::json& grant, std::string* commit,
                                      const std::string& status = "succeeded") {
    ResultBuildInput in;
    in.job_commit = grant["job_commit"];
    in.lease_commit = grant["lease_commit"];
    in.poe.job_id = "blake3:" + job_hex;
    in.poe.worker_id = key_.public_key().WorkerId();
    in.poe.lease_epoch = grant["epoch"];
    in.poe.status = status;
    in.poe.runner_program = Blake3Tagged("test worker");
    in.poe.runner_version = "test";
    in.poe.runner_platform = "linux-x86_64";
    in.poe.exit_code = status == "succeeded" ? 0 : 1;
    in.poe.stdout_cap = 1 << 20;
    in.poe.started_at = FormatRfc3339Millis(SystemNowMs());
    in.poe.finished_at = in.poe.started_at;
    in.files = {{"stdout", "ok\n"}, {"stderr", ""}};
    in.time_ms = SystemNowMs();
    auto built = BuildResult(in, key_);
    EXPECT_TRUE(built.ok()) << built.status().message();
    *commit = built->commit_id;
    return built->objects;
  }
  nlohmann::json Call(const char* subject, const std::string& data) {
    auto reply = bus_->Request(subject, data, 10000);
    EXPECT_TRUE(reply.ok()) << subject << ": " << reply.status().message();
    if (!reply.ok()) return nlohmann::json{{"ok", false}, {"error", "transport"}};
    return nlohmann::json::parse(reply->data);
  }

 private:
  Ed25519PrivateKey key_;
  std::unique_ptr<Bus> bus_;
  std::string last_frame_;
  LeaseRequest last_claim_;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_TEST_WORKER_H_
