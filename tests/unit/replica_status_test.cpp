#include "gatos/model/replica_status.h"

#include <gtest/gtest.h>

#include "gatos/model/log_format.h"

namespace gatos {
namespace {

TEST(ReplicaStatusTest, RoundTripsAndTheClusterShapeIsTheDocumentedOne) {
  ReplicaStatus a{"r2", "follower", 7, 120, 35, 1'800'000'000'000};
  ReplicaStatus b{"r1", "leader", 9, 121, 0, 1'800'000'000'001};
  auto back = DecodeReplicaStatus(EncodeReplicaStatus(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(ClusterStatusJson({a, b}),
            R"({"replicas":[{"lag_ms":0,"log_seq":121,"name":"r1","role":"leader","term":9},)"
            R"({"lag_ms":35,"log_seq":120,"name":"r2","role":"follower","term":7}]})");
}

TEST(ReplicaStatusTest, DecodeIsStrict) {
  for (const char* bad :
       {"", "{}", R"({"name":"r1","role":"boss","term":1,"log_seq":1,"lag_ms":0,"updated_ms":1})",
        R"({"name":"r 1","role":"leader","term":1,"log_seq":1,"lag_ms":0,"updated_ms":1})",
        R"({"name":"r1","role":"leader","term":-1,"log_seq":1,"lag_ms":0,"updated_ms":1})",
        R"({"name":"r1","role":"leader","term":1,"log_seq":-2,"lag_ms":0,"updated_ms":1})",
        R"({"name":"r1","role":"leader","term":1,"log_seq":1,"lag_ms":0,"updated_ms":1,"x":1})"}) {
    EXPECT_EQ(DecodeReplicaStatus(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ReplicaStatusTest, LedgerTermTrailerIsOptionalAndStrict) {
  LogCommitInfo info;
  info.seq = 4;
  info.ledger_key_hex = std::string(64, 'a');
  info.policy_commit = std::string(40, 'b');
  info.time_ms = 1'800'000'000'000;
  EXPECT_EQ(EncodeLogMessage(info).find("Ledger-Term"), std::string::npos);  // single node: none
  EXPECT_EQ(ParseLogMessage(EncodeLogMessage(info))->term, 0);
  info.term = 12;
  const std::string m = EncodeLogMessage(info);
  EXPECT_NE(m.find("\nLedger-Term: 12\n"), std::string::npos) << m;
  EXPECT_EQ(ParseLogMessage(m)->term, 12);
  std::string zero = m;
  zero.replace(zero.find("Ledger-Term: 12"), 15, "Ledger-Term: 0");
  EXPECT_EQ(ParseLogMessage(zero).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLogMessage(m + "Ledger-Term: 13\n").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
