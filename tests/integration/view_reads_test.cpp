// Reads answered from a LedgerView (what every replica serves from its own
// repository, view_reads.h), over a real ledger on disk.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gatos/ledger/view_reads.h"
#include "gatos/model/rpc.h"
#include "ledger_fixture.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

TEST(ViewReadsTest, StatusListAndLogsFromTheViewSayWhichReplicaAnswered) {
  LedgerFixture f;
  auto a = f.Submit("command: [\"/bin/echo\", \"a\"]\ntimeout: 30\n");
  auto b = f.Submit("command: [\"/bin/echo\", \"b\"]\ntimeout: 30\n");
  ASSERT_TRUE(f.Claim(a.hex, f.w1).outcome.ok());
  f.Close();
  auto view = LedgerView::Open(f.path);
  ASSERT_TRUE(view.ok()) << view.status().message();
  auto policy = (*view)->ReadPolicy();
  ASSERT_TRUE(policy.ok());
  const json who = {{"replica", {{"name", "r2"}, {"role", "follower"}, {"log_seq", (*view)->seq()}}}};

  json st = json::parse(ViewReadReply(**view, *policy, rpc::kStatus, json{{"job", a.hex}}.dump(), f.now, who));
  ASSERT_TRUE(st.value("ok", false)) << st.dump();
  EXPECT_EQ(st["status"]["state"], "claimed");
  EXPECT_EQ(st["status"]["pool"], "default");
  EXPECT_EQ(st["replica"]["name"], "r2");
  EXPECT_EQ(st["replica"]["log_seq"], (*view)->seq());

  json ls = json::parse(ViewReadReply(**view, *policy, rpc::kList, R"({"limit":10})", f.now, who));
  ASSERT_TRUE(ls.value("ok", false)) << ls.dump();
  ASSERT_EQ(ls["jobs"].size(), 2u) << ls.dump();
  EXPECT_EQ(ls["counts"]["pending"], 1);
  EXPECT_EQ(ls["counts"]["claimed"], 1);
  EXPECT_EQ(ls["now_ms"], f.now);
  EXPECT_EQ(ls["replica"]["role"], "follower");

  // No result yet: an error reply, without the replica's note.
  json logs = json::parse(ViewReadReply(**view, *policy, rpc::kLogs, json{{"job", b.hex}}.dump(), f.now, who));
  EXPECT_FALSE(logs.value("ok", true)) << logs.dump();
  EXPECT_FALSE(logs.contains("replica"));

  json none = json::parse(ViewReadReply(**view, *policy, rpc::kStatus, json{{"job", std::string(64, 'a')}}.dump(),
                                        f.now, who));
  EXPECT_FALSE(none.value("ok", true));
  EXPECT_NE(none.value("message", "").find("no job"), std::string::npos) << none.dump();
  for (const auto& [subject, data] : std::vector<std::pair<std::string, std::string>>{
           {rpc::kStatus, "{not json"}, {rpc::kList, R"({"limit":"x"})"}, {rpc::kSubmit, "{}"}, {"", ""}}) {
    json bad = json::parse(ViewReadReply(**view, *policy, subject, data, f.now, who));
    EXPECT_FALSE(bad.value("ok", true)) << subject << " " << data << " " << bad.dump();
    EXPECT_EQ(bad.value("error", ""), "invalid") << bad.dump();
  }
}

TEST(ViewReadsTest, ReplicaReadSubjects) {
  EXPECT_EQ(rpc::ReplicaReadSubject("r1", rpc::kStatus), "gatos.replica.r1.status");
  EXPECT_EQ(rpc::ReplicaReadSubject("db.example", rpc::kLogs), "gatos.replica.db.example.logs");
  EXPECT_EQ(rpc::ReplicaReadSubject("", rpc::kList), "gatos.read.list");
  EXPECT_EQ(rpc::ReplicaReadSubject("r1", rpc::kSubmit), rpc::kSubmit);  // writes go to the leader
  EXPECT_TRUE(IsViewRead(rpc::kLogs));
  EXPECT_FALSE(IsViewRead(rpc::kPools));
}

}  // namespace
}  // namespace gatos::testing
