#include "gatos/model/election.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

// A fake clock and a fake bucket: one key, revisions counting up, the
// key gone ttl after its last write (as the server's max age does).
struct FakeBucket {
  int64_t now = 1'000'000;
  int64_t ttl = 3000;
  uint64_t revision = 0;
  std::optional<std::pair<uint64_t, int64_t>> key;  // (revision, written at)
  bool reachable = true;

  void Expire() {
    if (key && now >= key->second + ttl) key.reset();
  }
  Result<uint64_t> Create() {
    Expire();
    if (!reachable) return UnavailableError("bucket unreachable");
    if (key) return AlreadyExistsError("leader key exists");
    key = std::make_pair(++revision, now);
    return revision;
  }
  Result<uint64_t> Update(uint64_t last) {
    Expire();
    if (!reachable) return UnavailableError("bucket unreachable");
    if (!key || key->first != last) return AbortedError("wrong last revision");
    key = std::make_pair(++revision, now);
    return revision;
  }
  // One step of a replica's driver loop: ask, call, report.
  void Step(Election& e) {
    Election::Action a = e.Next();
    if (a.kind == Election::Action::kCreate) e.OnCreated(Create());
    if (a.kind == Election::Action::kUpdate) e.OnUpdated(Update(a.revision));
  }
};

ElectionOptions Defaults() { return ElectionOptions{}; }

TEST(ElectionTest, DefaultsAreValidAndReplaceADeadLeaderWithinFiveSeconds) {
  ElectionOptions o = Defaults();
  EXPECT_TRUE(CheckElectionOptions(o).ok());
  EXPECT_LE(o.ttl_ms + 2 * o.try_every_ms, 5000 - 1000);  // two reads and a create; a second left to catch up
  o.keep_every_ms = 2500;
  EXPECT_EQ(CheckElectionOptions(o).code(), StatusCode::kInvalidArgument);
  o = Defaults();
  o.ttl_ms = 50;
  EXPECT_EQ(CheckElectionOptions(o).code(), StatusCode::kInvalidArgument);
}

// gatosd serve --election-*: the defaults scale with the TTL, and a
// setting that cannot work is refused naming the flags involved.
TEST(ElectionTest, SettingsScaleWithTheTtlAndImpossibleOnesNameTheirFlags) {
  ElectionOptions d = ElectionOptionsForTtl(3000);
  EXPECT_EQ(d.keep_every_ms, Defaults().keep_every_ms);
  EXPECT_EQ(d.margin_ms, Defaults().margin_ms);
  EXPECT_EQ(d.try_every_ms, Defaults().try_every_ms);
  for (int64_t ttl : {100, 1000, 10000, 3'600'000}) {
    EXPECT_TRUE(CheckElectionOptions(ElectionOptionsForTtl(ttl)).ok()) << ttl;
  }
  ElectionOptions o = ElectionOptionsForTtl(1000);
  o.keep_every_ms = 900;
  Status s = CheckElectionOptions(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("election-keep-ms"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("election-margin-ms"), std::string::npos) << s.message();
  o = ElectionOptionsForTtl(1000);
  o.try_every_ms = 1000;
  s = CheckElectionOptions(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("election-try-ms"), std::string::npos) << s.message();
  o = ElectionOptionsForTtl(1000);
  o.ttl_ms = 99;
  EXPECT_NE(CheckElectionOptions(o).message().find("election-ttl-ms"), std::string::npos);
}

TEST(ElectionTest, TheFirstCreateAcquiresWithTheRevisionAsTermAndASecondReplicaFollows) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  Election c("c", Defaults(), [&] { return b.now; });
  b.Step(a);
  EXPECT_TRUE(a.leading());
  EXPECT_EQ(a.term(), 1u);
  EXPECT_EQ(a.last_change(), "became leader with term 1");
  b.Step(c);
  EXPECT_FALSE(c.leading());
  EXPECT_EQ(c.term(), 0u);
  // The follower tries again only after try_every_ms.
  EXPECT_EQ(c.next_ms(), b.now + Defaults().try_every_ms);
  EXPECT_EQ(c.Next().kind, Election::Action::kWait);
}

TEST(ElectionTest, ALeaderKeepsTheKeySeveralTimesPerTtlAndTheValueNamesItsTerm) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  Election c("c", Defaults(), [&] { return b.now; });
  b.Step(a);
  int updates = 0;
  for (int ms = 0; ms < 30'000; ms += 50) {
    b.now += 50;
    Election::Action act = a.Next();
    if (act.kind == Election::Action::kUpdate) {
      ++updates;
      auto v = DecodeLeaderValue(act.value);
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(v->name, "a");
      EXPECT_EQ(v->term, 1u);
      a.OnUpdated(b.Update(act.revision));
    }
    b.Step(c);
    ASSERT_TRUE(a.leading()) << "at " << ms << " ms: " << a.last_change();
    ASSERT_FALSE(c.leading());
  }
  EXPECT_GE(updates, 30'000 / Defaults().keep_every_ms - 1);
  EXPECT_EQ(a.term(), 1u);
  EXPECT_EQ(a.changes(), 1u);
}

TEST(ElectionTest, WhenTheLeaderStopsTheKeyExpiresAndAnotherReplicaLeadsWithAHigherTerm) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  Election c("c", Defaults(), [&] { return b.now; });
  b.Step(a);
  b.Step(a);  // first keep
  const int64_t died = b.now;
  int64_t took_over = 0;
  for (int ms = 0; ms < 10'000 && !took_over; ms += 10) {
    b.now += 10;
    b.Step(c);
    if (c.leading()) took_over = b.now;
  }
  ASSERT_GT(took_over, 0);
  EXPECT_LE(took_over - died, Defaults().ttl_ms + Defaults().try_every_ms);
  EXPECT_GT(c.term(), a.term());
  // The dead leader comes back: its lease lapsed long ago, it steps down
  // without writing, then follows.
  EXPECT_EQ(a.Next().kind, Election::Action::kWait);
  EXPECT_FALSE(a.leading());
  EXPECT_NE(a.last_change().find("no successful keep"), std::string::npos) << a.last_change();
  b.now += Defaults().try_every_ms;
  b.Step(a);
  EXPECT_FALSE(a.leading());
  EXPECT_TRUE(c.leading());
}

TEST(ElectionTest, ALeaderStepsDownOnTheFirstRefusedUpdate) {
  // Someone else wrote the key: a keep with the old revision is refused.
  FakeBucket b;
  Election d("d", Defaults(), [&] { return b.now; });
  b.Step(d);
  b.Step(d);
  ASSERT_TRUE(d.leading());
  b.key->first = 99;  // another writer
  b.now += Defaults().keep_every_ms;
  b.Step(d);
  EXPECT_FALSE(d.leading());
  EXPECT_NE(d.last_change().find("could not be kept (wrong last revision)"), std::string::npos) << d.last_change();
  // Any other error than "no answer" steps down at once too.
  FakeBucket b2;
  Election e("e", Defaults(), [&] { return b2.now; });
  b2.Step(e);
  b2.now += Defaults().keep_every_ms;
  ASSERT_EQ(e.Next().kind, Election::Action::kUpdate);
  e.OnUpdated(InternalError("garbled answer"));
  EXPECT_FALSE(e.leading());
}

// The bucket's stream electing a new leader after a NATS node died answers
// nothing for a few seconds: the leader keeps trying while its lease
// lasts, and leads on when a keep lands in time.
TEST(ElectionTest, AnUnansweredKeepIsRetriedWhileTheLeaseLasts) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  b.Step(a);
  b.Step(a);  // the first keep writes the term
  ASSERT_TRUE(a.leading());
  const int64_t kept = b.now;
  b.reachable = false;
  b.now += Defaults().keep_every_ms;
  b.Step(a);  // fails: no answer
  EXPECT_TRUE(a.leading()) << a.last_change();
  // Retried every try_every_ms, not every keep_every_ms.
  EXPECT_EQ(a.next_ms(), b.now + Defaults().try_every_ms);
  b.now = a.next_ms();
  b.Step(a);  // fails again
  EXPECT_TRUE(a.leading());
  b.reachable = true;
  b.now = a.next_ms();
  ASSERT_LT(b.now, kept + Defaults().ttl_ms - Defaults().margin_ms);
  b.Step(a);  // lands
  EXPECT_TRUE(a.leading());
  EXPECT_EQ(a.changes(), 1u);
  EXPECT_EQ(b.key->second, b.now);
  // Never answered: it steps down before the key can expire, saying why.
  const int64_t kept2 = b.now;
  b.reachable = false;
  while (a.leading()) {
    b.now += 10;
    b.Step(a);
    ASSERT_LT(b.now, kept2 + b.ttl) << "still leading when the key may have expired";
  }
  EXPECT_LE(b.now, kept2 + Defaults().ttl_ms - Defaults().margin_ms);
  EXPECT_NE(a.last_change().find("no successful keep of the leader key"), std::string::npos) << a.last_change();
  EXPECT_NE(a.last_change().find("unanswered: bucket unreachable"), std::string::npos) << a.last_change();
  EXPECT_EQ(a.lease_until_ms(), 0);
}

// What a driver blocked in a KV call checks: the lease ends ttl - margin
// after the last successful keep was sent, before the key can expire.
TEST(ElectionTest, TheLeaseEndsBeforeTheKeyCanExpire) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  EXPECT_EQ(a.lease_until_ms(), 0);
  b.Step(a);
  ASSERT_TRUE(a.leading());
  EXPECT_EQ(a.lease_until_ms(), b.now + Defaults().ttl_ms - Defaults().margin_ms);
  b.now += Defaults().keep_every_ms;
  b.Step(a);
  b.now += Defaults().keep_every_ms;
  const int64_t sent = b.now;
  const Election::Action keep = a.Next();
  ASSERT_EQ(keep.kind, Election::Action::kUpdate);
  b.now += 400;  // the answer takes a while; the lease runs from the send
  a.OnUpdated(b.Update(keep.revision));
  ASSERT_TRUE(a.leading());
  EXPECT_EQ(a.lease_until_ms(), sent + Defaults().ttl_ms - Defaults().margin_ms);
  EXPECT_LT(a.lease_until_ms(), b.key->second + b.ttl);
}

TEST(ElectionTest, ALeaderWhoseKeepsGoUnansweredStepsDownBeforeTheKeyCanExpire) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  b.Step(a);
  // The driver's keep never comes back; time passes.
  ASSERT_EQ(a.Next().kind, Election::Action::kUpdate);
  b.now += Defaults().ttl_ms - Defaults().margin_ms - 1;
  EXPECT_TRUE(a.leading());
  // The late answer arrives as a failure with no time left for a retry:
  // leading stops at once.
  a.OnUpdated(UnavailableError("timeout"));
  EXPECT_FALSE(a.leading());
  // And with no answer at all, Next alone steps down at ttl - margin.
  FakeBucket b2;
  Election d("d", Defaults(), [&] { return b2.now; });
  b2.Step(d);
  b2.Step(d);
  const int64_t last_keep = b2.now;
  b2.now = last_keep + Defaults().ttl_ms - Defaults().margin_ms;
  b2.reachable = false;  // nothing sent would land anyway
  EXPECT_EQ(d.Next().kind, Election::Action::kWait);
  EXPECT_FALSE(d.leading());
  EXPECT_LT(b2.now, last_keep + b2.ttl);  // before the key can expire
}

TEST(ElectionTest, ACreateAnsweredTooLateDoesNotLead) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  ASSERT_EQ(a.Next().kind, Election::Action::kCreate);
  b.now += Defaults().ttl_ms;  // the answer took the whole TTL
  a.OnCreated(uint64_t{5});
  EXPECT_FALSE(a.leading());
}

TEST(ElectionTest, AStepDownAfterAFailedAppendWaitsBeforeTryingAgain) {
  FakeBucket b;
  Election a("a", Defaults(), [&] { return b.now; });
  b.Step(a);
  a.StepDown("append to the stream failed: wrong last sequence");
  EXPECT_FALSE(a.leading());
  EXPECT_EQ(a.last_change(), "stepped down from term 1: append to the stream failed: wrong last sequence");
  EXPECT_EQ(a.Next().kind, Election::Action::kWait);
  // The key it held is still there until it expires: its create fails.
  b.now += Defaults().try_every_ms;
  b.Step(a);
  EXPECT_FALSE(a.leading());
  b.now += b.ttl;
  b.Step(a);
  EXPECT_TRUE(a.leading());
  EXPECT_GT(a.term(), 1u);
}

TEST(ElectionTest, LeaderValueIsStrict) {
  EXPECT_EQ(EncodeLeaderValue({"gatos-1", 12}), R"({"name":"gatos-1","term":12})");
  auto v = DecodeLeaderValue(R"({"name":"gatos-1","term":12})");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->name, "gatos-1");
  EXPECT_EQ(v->term, 12u);
  for (const char* bad : {"", "[]", R"({"name":"a"})", R"({"name":"a","term":-1})", R"({"name":"a b","term":1})",
                          R"({"name":"a","term":1,"x":2})", R"({"name":"","term":1})", R"({"name":"a","term":"1"})"}) {
    EXPECT_EQ(DecodeLeaderValue(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace gatos
