// The worker's durable outbox on real SQLite files: crash safety, idempotent
// enqueue, backoff and dead letters, pruning, the keep setting, health states,
// lease recovery, and a SIGKILL in the middle of writes.
#include "gatos/exec/outbox.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "test_util.h"

namespace gatos {
namespace {

using ::gatos::testing::TempDir;
using ::gatos::testing::WriteFile;

std::unique_ptr<Outbox> MustOpen(const std::string& dir, OutboxOptions opts = {}) {
  auto ob = Outbox::Open(dir, opts);
  EXPECT_TRUE(ob.ok()) << ob.status().ToString();
  return ob.ok() ? std::move(*ob) : nullptr;
}

// Runs one SQL statement on the database file directly; returns the first
// column of the first row as text.
std::string Sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  std::string out;
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

std::string Payload(int i) {
  std::string p = "batch-" + std::to_string(i);
  p.push_back('\0');  // payloads are bytes, not text
  p += std::string(100, static_cast<char>('a' + i % 26));
  return p;
}

TEST(Outbox, OpenCreatesAWalDatabaseWithSchemaVersion) {
  TempDir d;
  auto ob = MustOpen(d.Join("state/nested"));
  ASSERT_TRUE(ob);
  EXPECT_EQ(ob->path(), d.Join("state/nested/outbox.db"));
  EXPECT_EQ(Sql(ob->path(), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(Sql(ob->path(), "PRAGMA user_version"), "1");
  auto perms = std::filesystem::status(d.Join("state/nested")).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_all);
}

TEST(Outbox, UnknownSchemaVersionIsAClearError) {
  TempDir d;
  { ASSERT_TRUE(MustOpen(d.path())); }
  Sql(d.Join("outbox.db"), "PRAGMA user_version=7");
  auto ob = Outbox::Open(d.path());
  ASSERT_FALSE(ob.ok());
  EXPECT_EQ(ob.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ob.status().message().find("schema version 7"), std::string::npos)
      << ob.status().message();
  EXPECT_NE(ob.status().message().find("--state-dir"), std::string::npos);
}

TEST(Outbox, ANonDatabaseFileIsDataLoss) {
  TempDir d;
  WriteFile(d.Join("outbox.db"), std::string(8192, 'x'));
  auto ob = Outbox::Open(d.path());
  ASSERT_FALSE(ob.ok());
  EXPECT_EQ(ob.status().code(), StatusCode::kDataLoss) << ob.status().ToString();
}

TEST(Outbox, EnqueuedResultSurvivesCloseWithoutMarking) {
  TempDir d;
  int64_t id;
  {
    auto ob = MustOpen(d.path());
    auto r = ob->Enqueue("job1", 2, "c0ffee", Payload(1), 1000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    id = *r;
  }  // closed as a crashed worker would leave it: never marked
  auto ob = MustOpen(d.path());
  auto due = ob->Due(1000, 10);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  const OutboxItem& it = (*due)[0];
  EXPECT_EQ(it.id, id);
  EXPECT_EQ(it.job_hex, "job1");
  EXPECT_EQ(it.epoch, 2);
  EXPECT_EQ(it.commit_id, "c0ffee");
  EXPECT_EQ(it.payload, Payload(1));
  EXPECT_EQ(it.state, OutboxItemState::kPending);
  EXPECT_EQ(it.attempts, 0);
  EXPECT_EQ(it.created_ms, 1000);
}

TEST(Outbox, EnqueueIsIdempotentPerJobEpochCommit) {
  TempDir d;
  auto ob = MustOpen(d.path());
  auto a = ob->Enqueue("job1", 1, "c1", Payload(1), 1000);
  auto b = ob->Enqueue("job1", 1, "c1", Payload(2), 2000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto it = ob->Get(*a);
  ASSERT_TRUE(it.ok());
  EXPECT_EQ(it->payload, Payload(1));  // the first write stands
  EXPECT_EQ(it->created_ms, 1000);
  auto c = ob->Enqueue("job1", 2, "c1", Payload(3), 3000);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*c, *a);
  // Re-enqueue after delivery does not resurrect the row.
  ASSERT_TRUE(ob->MarkDelivered(*a, 4000).ok());
  auto again = ob->Enqueue("job1", 1, "c1", Payload(1), 5000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a);
  EXPECT_EQ(ob->Get(*a)->state, OutboxItemState::kDelivered);
  EXPECT_EQ(ob->Health(5000)->queue_depth, 1);
}

TEST(Outbox, BackoffValues) {
  OutboxOptions o;
  EXPECT_EQ(OutboxBackoffMs(1, 0.0, o), 100);
  EXPECT_EQ(OutboxBackoffMs(1, 1.0, o), 200);
  EXPECT_EQ(OutboxBackoffMs(2, 0.0, o), 200);
  EXPECT_EQ(OutboxBackoffMs(3, 0.5, o), 600);
  EXPECT_EQ(OutboxBackoffMs(8, 1.0, o), 25600);
  EXPECT_EQ(OutboxBackoffMs(9, 1.0, o), 30000);   // capped
  EXPECT_EQ(OutboxBackoffMs(60, 0.0, o), 15000);  // no overflow at large counts
}

TEST(Outbox, RetryableFailuresBackOffThenDeadLetterWithReason) {
  TempDir d;
  auto ob = MustOpen(d.path());
  auto id = ob->Enqueue("job1", 1, "c1", Payload(1), 0);
  ASSERT_TRUE(id.ok());
  int64_t now = 10000;
  OutboxOptions o;
  for (int n = 1; n < 10; ++n) {
    auto st = ob->MarkFailed(*id, "ledger unavailable: try again", now, true);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(*st, OutboxItemState::kPending);
    auto it = ob->Get(*id);
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(it->attempts, n);
    int64_t full = std::min<int64_t>(200LL << (n - 1), 30000);
    EXPECT_GE(it->next_attempt_ms, now + full / 2) << "attempt " << n;
    EXPECT_LE(it->next_attempt_ms, now + full) << "attempt " << n;
    EXPECT_EQ(it->last_error, "ledger unavailable: try again");
    // Not due before its time, due after.
    EXPECT_TRUE(ob->Due(it->next_attempt_ms - 1, 10)->empty());
    EXPECT_EQ(ob->Due(it->next_attempt_ms, 10)->size(), 1u);
    now = it->next_attempt_ms;
  }
  auto st = ob->MarkFailed(*id, "ledger unavailable: try again", now, true);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, OutboxItemState::kDead);
  auto it = ob->Get(*id);
  EXPECT_EQ(it->state, OutboxItemState::kDead);
  EXPECT_EQ(it->attempts, 10);
  EXPECT_EQ(it->last_error, "gave up after 10 attempts; last error: ledger unavailable: try again");
  EXPECT_TRUE(ob->Due(now + 1000000, 10)->empty());
  // Dead rows cannot fail again or be delivered without a requeue.
  EXPECT_EQ(ob->MarkFailed(*id, "x", now, true).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ob->MarkDelivered(*id, now).code(), StatusCode::kFailedPrecondition);
  auto h = ob->Health(now);
  EXPECT_EQ(h->dead_letter, 1);
  EXPECT_EQ(h->last_dead_error, it->last_error);
  // Operator requeue.
  EXPECT_EQ(*ob->RetryDead(now), 1);
  EXPECT_EQ(ob->Get(*id)->attempts, 0);
  EXPECT_EQ(ob->Due(now, 10)->size(), 1u);
}

TEST(Outbox, NonRetryableFailureIsDeadAtOnce) {
  TempDir d;
  auto ob = MustOpen(d.path());
  auto id = ob->Enqueue("job1", 1, "c1", Payload(1), 0);
  auto st = ob->MarkFailed(*id, "invalid: result tree lacks poe.json", 50, false);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, OutboxItemState::kDead);
  auto it = ob->Get(*id);
  EXPECT_EQ(it->attempts, 1);
  EXPECT_EQ(it->last_error, "invalid: result tree lacks poe.json");
  EXPECT_EQ(ob->Get(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ob->MarkDelivered(12345, 1).code(), StatusCode::kNotFound);
}

TEST(Outbox, MarkDeliveredIsIdempotentAndDropsThePayload) {
  TempDir d;
  auto ob = MustOpen(d.path());
  auto id = ob->Enqueue("job1", 1, "c1", Payload(1), 0);
  ASSERT_TRUE(ob->MarkDelivered(*id, 777).ok());
  ASSERT_TRUE(ob->MarkDelivered(*id, 999).ok());
  auto it = ob->Get(*id);
  EXPECT_EQ(it->state, OutboxItemState::kDelivered);
  EXPECT_EQ(it->delivered_ms, 777);
  EXPECT_TRUE(it->payload.empty());
  EXPECT_EQ(ob->Health(1000)->last_delivered_ms, 777);
}

TEST(Outbox, PruneKeepsExactlyTheMostRecentDeliveredRows) {
  TempDir d;
  OutboxOptions opts;
  opts.keep_delivered = 10;
  auto ob = MustOpen(d.path(), opts);
  std::vector<int64_t> delivered, pending, dead;
  for (int i = 0; i < 35; ++i) {
    auto id = ob->Enqueue("job" + std::to_string(i), 1, "c", Payload(i), i);
    ASSERT_TRUE(id.ok());
    if (i < 25) {
      // Delivery order differs from id order: 24, 23, ..., 0 at rising times.
      delivered.push_back(*id);
    } else if (i < 30) {
      dead.push_back(*id);
      ASSERT_TRUE(ob->MarkFailed(*id, "refused", 100, false).ok());
    } else {
      pending.push_back(*id);
    }
  }
  for (size_t k = 0; k < delivered.size(); ++k) {
    ASSERT_TRUE(ob->MarkDelivered(delivered[delivered.size() - 1 - k], 1000 + k).ok());
  }
  auto rep = ob->Prune();
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ran);
  EXPECT_EQ(rep->reclaimed_delivered, 15);
  // The 10 most recently delivered are the first 10 ids.
  for (size_t k = 0; k < delivered.size(); ++k) {
    auto it = ob->Get(delivered[k]);
    if (k < 10) {
      EXPECT_TRUE(it.ok()) << k;
    } else {
      EXPECT_EQ(it.status().code(), StatusCode::kNotFound) << k;
    }
  }
  for (int64_t id : pending) EXPECT_EQ(ob->Get(id)->state, OutboxItemState::kPending);
  for (int64_t id : dead) EXPECT_EQ(ob->Get(id)->state, OutboxItemState::kDead);
  auto h = ob->Health(5000);
  EXPECT_EQ(h->delivered_retained, 10);
  EXPECT_EQ(h->queue_depth, 5);
  EXPECT_EQ(h->dead_letter, 5);
  // Within the cap: nothing more to reclaim.
  EXPECT_EQ(ob->Prune()->reclaimed_delivered, 0);
  // No backup or side files beyond SQLite's own WAL files.
  for (const auto& e : std::filesystem::directory_iterator(d.path())) {
    std::string n = e.path().filename();
    EXPECT_TRUE(n == "outbox.db" || n == "outbox.db-wal" || n == "outbox.db-shm") << n;
  }
}

TEST(Outbox, PruneIgnoresRecency) {
  TempDir d;
  OutboxOptions opts;
  opts.keep_delivered = 3;
  auto ob = MustOpen(d.path(), opts);
  for (int i = 0; i < 20; ++i) {
    auto id = ob->Enqueue("j" + std::to_string(i), 1, "c", "p", 0);
    ASSERT_TRUE(ob->MarkDelivered(*id, 5000).ok());  // all acknowledged at the same moment
  }
  EXPECT_EQ(ob->Prune()->reclaimed_delivered, 17);
  EXPECT_EQ(ob->Health(5000)->delivered_retained, 3);
}

TEST(Outbox, PruneDisabledKeepsEverything) {
  TempDir d;
  OutboxOptions opts;
  opts.prune_enabled = false;
  auto ob = MustOpen(d.path(), opts);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(ob->MarkDelivered(*ob->Enqueue("j" + std::to_string(i), 1, "c", "p", 0), 1).ok());
  }
  auto rep = ob->Prune();
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->ran);
  EXPECT_EQ(ob->Health(2)->delivered_retained, 5);
}

TEST(Outbox, PruneAlsoBoundsFinishedLeases) {
  TempDir d;
  OutboxOptions opts;
  opts.keep_delivered = 2;
  auto ob = MustOpen(d.path(), opts);
  for (int i = 0; i < 5; ++i) {
    std::string job = "j" + std::to_string(i);
    ASSERT_TRUE(ob->RecordLease(job, 1, 100, "/ws", i).ok());
    if (i < 4) {
      ASSERT_TRUE(ob->FinishLease(job, 1, LeaseState::kDone, 10 + i).ok());
    }
  }
  auto rep = ob->Prune();
  EXPECT_EQ(rep->reclaimed_leases, 2);
  EXPECT_EQ(ob->HeldLeases()->size(), 1u);  // the running one is untouched
}

TEST(OutboxKeep, ResolutionAndMalformedFallback) {
  auto def = ResolveOutboxKeep(nullptr, nullptr);
  EXPECT_EQ(def.keep, 1000);
  EXPECT_TRUE(def.enabled);
  EXPECT_EQ(def.source, "default");
  EXPECT_TRUE(def.warnings.empty());

  auto env = ResolveOutboxKeep("50", "20");
  EXPECT_EQ(env.keep, 50);
  EXPECT_EQ(env.source, "env GATOS_OUTBOX_KEEP");

  auto off = ResolveOutboxKeep("off", nullptr);
  EXPECT_FALSE(off.enabled);

  for (const char* bad : {"abc", "", "0", "-5", "12x", " 7", "99999999999", "1e3"}) {
    auto s = ResolveOutboxKeep(bad, nullptr);
    EXPECT_EQ(s.keep, 1000) << bad;
    EXPECT_TRUE(s.enabled) << bad;
    EXPECT_EQ(s.source, "default") << bad;
    ASSERT_EQ(s.warnings.size(), 1u) << bad;
    EXPECT_NE(s.warnings[0].find("GATOS_OUTBOX_KEEP"), std::string::npos);
    EXPECT_NE(s.warnings[0].find("default 1000"), std::string::npos) << s.warnings[0];
  }
  // A malformed env value falls back to the config, not to the default.
  auto cfg = ResolveOutboxKeep("lots", "20");
  EXPECT_EQ(cfg.keep, 20);
  EXPECT_EQ(cfg.source, "config");
  EXPECT_EQ(cfg.warnings.size(), 1u);
  // Both malformed: default, two warnings.
  auto both = ResolveOutboxKeep("lots", "many");
  EXPECT_EQ(both.keep, 1000);
  EXPECT_EQ(both.warnings.size(), 2u);
}

TEST(OutboxKeep, FromTheRealEnvironmentNeverFails) {
  ASSERT_EQ(setenv("GATOS_OUTBOX_KEEP", "12x", 1), 0);
  auto s = ResolveOutboxKeep(std::getenv("GATOS_OUTBOX_KEEP"), nullptr);
  unsetenv("GATOS_OUTBOX_KEEP");
  EXPECT_EQ(s.keep, 1000);
  TempDir d;
  OutboxOptions opts;
  opts.keep_delivered = s.keep;
  opts.prune_enabled = s.enabled;
  auto ob = MustOpen(d.path(), opts);
  ASSERT_TRUE(ob);
  EXPECT_TRUE(ob->Prune()->ran);
}

TEST(OutboxHealth, StatesFollowThePrecedence) {
  TempDir d;
  auto ob = MustOpen(d.path());
  auto state = [&](int64_t now) { return ob->Health(now)->state; };

  EXPECT_EQ(state(0), OutboxLifecycle::kIdle);
  // A held, unexpired lease alone is still idle: nothing waits for the ledger.
  ASSERT_TRUE(ob->RecordLease("run", 1, 100000, "/ws/run", 0).ok());
  EXPECT_EQ(state(1), OutboxLifecycle::kIdle);

  auto a = ob->Enqueue("a", 1, "c", "p", 10);
  EXPECT_EQ(state(20), OutboxLifecycle::kDraining);

  ASSERT_TRUE(ob->MarkFailed(*a, "unavailable", 30, true).ok());
  EXPECT_EQ(state(40), OutboxLifecycle::kRetryingBacklog);

  auto b = ob->Enqueue("b", 1, "c", "p", 50);
  ASSERT_TRUE(ob->MarkFailed(*b, "refused: bad signature", 60, false).ok());
  EXPECT_EQ(state(70), OutboxLifecycle::kDeadLetter);  // beats retrying

  EXPECT_EQ(state(100000), OutboxLifecycle::kStaleLease);  // the lease expired: beats all

  auto h = ob->Health(100000);
  EXPECT_EQ(h->queue_depth, 1);
  EXPECT_EQ(h->retrying, 1);
  EXPECT_EQ(h->dead_letter, 1);
  EXPECT_EQ(h->leases_held, 1);
  EXPECT_EQ(h->stale_leases, 1);
  EXPECT_EQ(h->oldest_pending_age_ms, 100000 - 10);
  EXPECT_FALSE(h->last_delivered_ms.has_value());
  EXPECT_EQ(h->last_dead_error, "refused: bad signature");

  auto j = nlohmann::json::parse(OutboxHealthJson(*h));
  EXPECT_EQ(j["state"], "stale_lease");
  EXPECT_EQ(j["queue_depth"], 1);
  EXPECT_EQ(j["stale_leases"], 1);
  EXPECT_EQ(j["oldest_pending_age_ms"], 99990);
  EXPECT_TRUE(j["last_delivered_at"].is_null());
  std::string text = OutboxHealthText(*h);
  EXPECT_NE(text.find("state:              stale_lease"), std::string::npos) << text;
  EXPECT_NE(text.find("1 stale"), std::string::npos) << text;

  // Recovery path: finish the lease, requeue, deliver: back to idle.
  ASSERT_TRUE(ob->FinishLease("run", 1, LeaseState::kAbandoned, 100001).ok());
  EXPECT_EQ(state(100002), OutboxLifecycle::kDeadLetter);
  ASSERT_EQ(*ob->RetryDead(100003), 1);
  EXPECT_EQ(state(100004), OutboxLifecycle::kRetryingBacklog);  // `a` still has attempts
  ASSERT_TRUE(ob->MarkDelivered(*a, 100005).ok());
  EXPECT_EQ(state(100006), OutboxLifecycle::kDraining);
  ASSERT_TRUE(ob->MarkDelivered(*b, 100007).ok());
  auto idle = ob->Health(100008);
  EXPECT_EQ(idle->state, OutboxLifecycle::kIdle);
  EXPECT_EQ(idle->last_delivered_ms, 100007);
  EXPECT_EQ(nlohmann::json::parse(OutboxHealthJson(*idle))["last_delivered_at"],
            "1970-01-01T00:01:40.007Z");
}

TEST(OutboxLeases, ExpiredLeasesAreRecoveredAfterRestart) {
  TempDir d;
  {
    auto ob = MustOpen(d.path());
    ASSERT_TRUE(ob->RecordLease("early", 1, 1000, "/ws/early", 0).ok());
    ASSERT_TRUE(ob->RecordLease("late", 3, 5000, "/ws/late", 0).ok());
    ASSERT_TRUE(ob->RecordLease("renewed", 1, 1000, "/ws/renewed", 0).ok());
    ASSERT_TRUE(ob->UpdateLeaseExpiry("renewed", 1, 9000, 500).ok());
    ASSERT_TRUE(ob->RecordLease("reporting", 2, 1500, "/ws/rep", 0).ok());
    ASSERT_TRUE(ob->FinishLease("reporting", 2, LeaseState::kReporting, 600).ok());
    ASSERT_TRUE(ob->RecordLease("finished", 1, 100, "/ws/fin", 0).ok());
    ASSERT_TRUE(ob->FinishLease("finished", 1, LeaseState::kDone, 50).ok());
    EXPECT_EQ(ob->UpdateLeaseExpiry("nope", 1, 1, 1).code(), StatusCode::kNotFound);
    EXPECT_EQ(ob->FinishLease("late", 2, LeaseState::kDone, 1).code(), StatusCode::kNotFound);
  }  // the worker "crashes" here
  auto ob = MustOpen(d.path());
  auto expired = ob->ExpiredLeases(2000);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 2u);
  EXPECT_EQ((*expired)[0].job_hex, "early");
  EXPECT_EQ((*expired)[0].workspace, "/ws/early");
  EXPECT_EQ((*expired)[0].state, LeaseState::kRunning);
  EXPECT_EQ((*expired)[1].job_hex, "reporting");
  EXPECT_EQ((*expired)[1].epoch, 2);
  EXPECT_EQ((*expired)[1].state, LeaseState::kReporting);
  EXPECT_EQ(ob->Health(2000)->state, OutboxLifecycle::kStaleLease);
  for (const auto& l : *expired) {
    ASSERT_TRUE(ob->FinishLease(l.job_hex, l.epoch, LeaseState::kAbandoned, 2000).ok());
  }
  EXPECT_TRUE(ob->ExpiredLeases(2000)->empty());
  EXPECT_EQ(ob->HeldLeases()->size(), 2u);  // late, renewed
  EXPECT_EQ(ob->Health(2000)->state, OutboxLifecycle::kIdle);
}

TEST(Outbox, ConcurrentUseFromSeveralThreads) {
  TempDir d;
  auto ob = MustOpen(d.path());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ob, t] {
      for (int i = 0; i < 50; ++i) {
        std::string job = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto id = ob->Enqueue(job, 1, "c", "p", i);
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        if (i % 2 == 0) {
          ASSERT_TRUE(ob->MarkDelivered(*id, 100 + i).ok());
        }
        ASSERT_TRUE(ob->Health(1000).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto h = ob->Health(1000);
  EXPECT_EQ(h->queue_depth, 100);
  EXPECT_EQ(h->delivered_retained, 100);
}

// A child process writes in a loop (enqueue, deliver, fail, prune) and
// reports each committed enqueue on a pipe; it is SIGKILLed mid-stream. The
// database must pass integrity_check, hold every enqueue the child saw
// committed, and have consistent rows.
TEST(OutboxCrash, SigkillDuringWritesLeavesAConsistentDatabase) {
  TempDir d;
  { ASSERT_TRUE(MustOpen(d.path())); }
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(p[0]);
    OutboxOptions opts;
    opts.keep_delivered = 20;
    auto ob = Outbox::Open(d.path(), opts);
    if (!ob.ok()) _exit(2);
    for (int i = 0;; ++i) {
      auto id =
          (*ob)->Enqueue("job" + std::to_string(i), 1, "c" + std::to_string(i), Payload(i), i);
      if (!id.ok()) _exit(3);
      int32_t n = i;
      if (write(p[1], &n, sizeof(n)) != sizeof(n)) _exit(4);
      if (i % 3 == 0) (*ob)->MarkDelivered(*id, i).IgnoreError();
      if (i % 3 == 1) (*ob)->MarkFailed(*id, "unavailable", i, i % 2 == 0).status().IgnoreError();
      if (i % 10 == 0) (*ob)->Prune().status().IgnoreError();
    }
  }
  close(p[1]);
  int32_t last = -1, n;
  while (last < 300 && read(p[0], &n, sizeof(n)) == sizeof(n)) last = n;
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "child exited early: " << st;
  while (read(p[0], &n, sizeof(n)) == sizeof(n)) last = n;  // acks written before the kill
  close(p[0]);
  ASSERT_GE(last, 300);

  EXPECT_EQ(Sql(d.Join("outbox.db"), "PRAGMA integrity_check"), "ok");
  auto ob = MustOpen(d.path());
  ASSERT_TRUE(ob);
  // Every enqueue the child saw commit is there, unless it was delivered and
  // pruned (only delivered rows are ever deleted).
  int present = 0;
  for (int i = 0; i <= last; ++i) {
    auto again = ob->Enqueue("job" + std::to_string(i), 1, "c" + std::to_string(i), Payload(i), 0);
    ASSERT_TRUE(again.ok());
    auto it = ob->Get(*again);
    ASSERT_TRUE(it.ok());
    if (it->created_ms == i) {
      ++present;
      if (it->state == OutboxItemState::kPending) {
        EXPECT_EQ(it->payload, Payload(i)) << i;
      }
      if (it->state == OutboxItemState::kDelivered) {
        EXPECT_TRUE(it->payload.empty()) << i;
        EXPECT_EQ(i % 3, 0) << i;
      }
      if (it->state == OutboxItemState::kDead) {
        EXPECT_EQ(i % 3, 1) << i;
      }
    } else {
      // Re-created just now: the original must have been a pruned delivered row.
      EXPECT_EQ(i % 3, 0) << "row " << i << " lost though it was never delivered";
    }
  }
  EXPECT_GT(present, 2 * last / 3);
  auto h = ob->Health(1000000);
  ASSERT_TRUE(h.ok());
  EXPECT_LE(h->delivered_retained, 20 + 10 + 1);  // cap plus at most one prune interval
}


// ---- batch calls and size caps ----

TEST(OutboxBatch, EnqueueResultsStoresEveryEntryAndMovesTheirLeasesToReporting) {
  TempDir d;
  auto ob = MustOpen(d.path());
  ASSERT_TRUE(ob->RecordLeases({{"a", 1, 5000, "/ws/a", LeaseState::kRunning, 0},
                                {"b", 2, 5000, "/ws/b", LeaseState::kRunning, 0}},
                               100)
                  .ok());
  auto held = ob->HeldLeases();
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 2u);
  auto stored = ob->EnqueueResults({{"a", 1, "ca", Payload(1)}, {"b", 2, "cb", Payload(2)}}, 200);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].state, OutboxItemState::kPending);
  EXPECT_NE((*stored)[0].id, (*stored)[1].id);
  EXPECT_EQ(Sql(ob->path(), "SELECT group_concat(state) FROM leases ORDER BY job_hex"), "reporting,reporting");
  EXPECT_EQ(ob->PendingBytes(), static_cast<int64_t>(Payload(1).size() + Payload(2).size()));
  // Idempotent, like Enqueue: the same results again are the same rows.
  auto again = ob->EnqueueResults({{"a", 1, "ca", Payload(1)}}, 300);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].id, (*stored)[0].id);
  EXPECT_EQ(ob->PendingBytes(), static_cast<int64_t>(Payload(1).size() + Payload(2).size()));
  // An entry without ids refuses the whole call; nothing is written.
  auto bad = ob->EnqueueResults({{"c", 1, "cc", "p"}, {"", 1, "x", "p"}}, 400);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sql(ob->path(), "SELECT count(*) FROM outbox"), "2");
}

TEST(OutboxBatch, SettleDeliveriesDeliversRetriesAndRefusesInOneCall) {
  TempDir d;
  OutboxOptions o;
  o.max_attempts = 2;
  auto ob = MustOpen(d.path(), o);
  ASSERT_TRUE(ob->RecordLeases({{"a", 1, 5000, "", LeaseState::kRunning, 0},
                                {"b", 1, 5000, "", LeaseState::kRunning, 0},
                                {"c", 1, 5000, "", LeaseState::kRunning, 0}},
                               0)
                  .ok());
  auto stored = ob->EnqueueResults({{"a", 1, "ca", "pa"}, {"b", 1, "cb", "pb"}, {"c", 1, "cc", "pc"}}, 0);
  ASSERT_TRUE(stored.ok());
  using D = Outbox::Delivery;
  auto states = ob->SettleDeliveries({{(*stored)[0].id, D::Outcome::kDelivered, ""},
                                      {(*stored)[1].id, D::Outcome::kRetry, "retry: no ledger"},
                                      {(*stored)[2].id, D::Outcome::kRefused, "stale_owner: lease lost"},
                                      {999, D::Outcome::kDelivered, ""}},
                                     1000);
  ASSERT_TRUE(states.ok()) << states.status().ToString();
  EXPECT_EQ(*states, (std::vector<OutboxItemState>{OutboxItemState::kDelivered, OutboxItemState::kPending,
                                                   OutboxItemState::kDead, OutboxItemState::kDelivered}));
  EXPECT_EQ(Sql(ob->path(), "SELECT group_concat(state) FROM (SELECT state FROM leases ORDER BY job_hex)"),
            "done,reporting,abandoned");
  EXPECT_EQ(Sql(ob->path(), "SELECT last_error FROM outbox WHERE job_hex = 'c'"), "stale_owner: lease lost");
  EXPECT_EQ(ob->PendingBytes(), 2);  // "pb"
  auto next = ob->NextDueMs();
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_GE(**next, 1000 + o.backoff_base_ms / 2);
  // A settled row is left alone by a second settle; the retried one dies at max_attempts.
  states = ob->SettleDeliveries({{(*stored)[0].id, D::Outcome::kRefused, "late"},
                                 {(*stored)[1].id, D::Outcome::kRetry, "retry: still no ledger"}},
                                5000);
  ASSERT_TRUE(states.ok());
  EXPECT_EQ(*states, (std::vector<OutboxItemState>{OutboxItemState::kDelivered, OutboxItemState::kDead}));
  EXPECT_EQ(ob->PendingBytes(), 0);
  auto h = ob->Health(6000);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->dead_letter, 2);
  EXPECT_NE(h->last_dead_error.find("gave up after 2 attempts"), std::string::npos) << h->last_dead_error;
}

TEST(OutboxBatch, ResultsOverTheSizeCapsAreDeadLettersWithoutPayload) {
  TempDir d;
  OutboxOptions o;
  o.max_payload_bytes = 100;
  o.max_pending_bytes = 250;
  auto ob = MustOpen(d.path(), o);
  auto stored = ob->EnqueueResults({{"big", 1, "c1", std::string(101, 'x')},
                                    {"a", 1, "c2", std::string(100, 'a')},
                                    {"b", 1, "c3", std::string(100, 'b')},
                                    {"full", 1, "c4", std::string(100, 'c')}},
                                   0);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0].state, OutboxItemState::kDead);
  EXPECT_NE((*stored)[0].dead_reason.find("over the outbox's cap of 100 bytes per result"), std::string::npos)
      << (*stored)[0].dead_reason;
  EXPECT_EQ((*stored)[1].state, OutboxItemState::kPending);
  EXPECT_EQ((*stored)[2].state, OutboxItemState::kPending);
  EXPECT_EQ((*stored)[3].state, OutboxItemState::kDead);
  EXPECT_NE((*stored)[3].dead_reason.find("the outbox is full (200 bytes pending, cap 250)"), std::string::npos)
      << (*stored)[3].dead_reason;
  EXPECT_EQ(ob->PendingBytes(), 200);
  // The dead letters hold no payload, and the reason is what status shows.
  EXPECT_EQ(Sql(ob->path(), "SELECT sum(length(payload)) FROM outbox WHERE state = 'dead'"), "0");
  auto h = ob->Health(1);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->state, OutboxLifecycle::kDeadLetter);
  EXPECT_EQ(h->pending_bytes, 200);
  EXPECT_NE(OutboxHealthJson(*h).find("\"pending_bytes\":200"), std::string::npos) << OutboxHealthJson(*h);
  // The single Enqueue applies the same caps; a requeue has nothing to send for them.
  auto single = ob->Enqueue("big2", 1, "c5", std::string(101, 'x'), 2);
  ASSERT_TRUE(single.ok());
  auto item = ob->Get(*single);
  ASSERT_TRUE(item.ok());
  EXPECT_EQ(item->state, OutboxItemState::kDead);
  EXPECT_EQ(*ob->RetryDead(3), 0);
  // Delivering frees room; the count survives a reopen.
  ASSERT_TRUE(ob->MarkDelivered((*stored)[1].id, 4).ok());
  EXPECT_EQ(ob->PendingBytes(), 100);
  ob.reset();
  ob = MustOpen(d.path(), o);
  EXPECT_EQ(ob->PendingBytes(), 100);
}

}  // namespace
}  // namespace gatos
