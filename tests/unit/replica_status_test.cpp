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

// A follower that found the leader key gone lets the most current other
// follower create it; the old leader's status and its own do not count.
TEST(ReplicaStatusTest, AFollowerStandsAsideOnlyForAFollowerThatHasAppliedMore) {
  const std::vector<ReplicaStatus> peers = {
      {"r0", "leader", 4, 120, 0, 1000},    // the leader whose key went: the most current, and gone
      {"r1", "follower", 3, 118, 40, 1000},
      {"r2", "follower", 3, 90, 900, 1000},
      {"r3", "follower", 0, 117, 50, 1000},
  };
  auto p = MoreCurrentPeer(peers, "r2", 95);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "r1");
  // Level with or ahead of every other follower: it stands for election.
  EXPECT_FALSE(MoreCurrentPeer(peers, "r1", 118).has_value());
  EXPECT_FALSE(MoreCurrentPeer(peers, "r2", 118).has_value());
  // Its own status (older than what it has applied since) never counts.
  EXPECT_FALSE(MoreCurrentPeer({{"r2", "follower", 3, 200, 0, 1000}}, "r2", 95).has_value());
  EXPECT_FALSE(MoreCurrentPeer({}, "r2", 0).has_value());
  // Two followers, each reading the other's status (at most a second old):
  // whatever the timing, at most one stands aside.
  for (int64_t a_then = 0; a_then <= 6; ++a_then) {
    for (int64_t a_now = a_then; a_now <= 6; ++a_now) {
      for (int64_t b_then = 0; b_then <= 6; ++b_then) {
        for (int64_t b_now = b_then; b_now <= 6; ++b_now) {
          const bool a_aside = MoreCurrentPeer({{"b", "follower", 1, b_then, 0, 0}}, "a", a_now).has_value();
          const bool b_aside = MoreCurrentPeer({{"a", "follower", 1, a_then, 0, 0}}, "b", b_now).has_value();
          EXPECT_FALSE(a_aside && b_aside) << a_then << " " << a_now << " " << b_then << " " << b_now;
        }
      }
    }
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
