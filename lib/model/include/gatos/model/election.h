// Leader election of a replicated ledger, as decisions only: what a replica
// does next with the ledger's JetStream KV bucket (docs/replication.md,
// "Election"). The KV calls live in gatos/nats/kv_bucket.h; a driver loop
// asks Next(), makes the call, and reports its outcome back.
//
// The key `leader` holds {replica name, term}. A replica becomes leader by
// creating it (a create fails while it exists); the term is the KV
// revision of that create, so it only grows. The leader keeps the key by
// updating it with the last revision it saw every keep_every_ms; the
// bucket's TTL removes it ttl_ms after the last write when the leader
// stops. The leader steps down at once when an update is refused (someone else
// wrote the key, or it expired), and on its own when its last successful
// keep was sent more than ttl_ms - margin_ms ago: after that the key may
// have expired and another replica may lead. An update the bucket did not
// answer is retried until then.
//
// Defaults: a leader that dies is replaced within ttl_ms + 2 try_every_ms
// (3.5 s: gatosd's driver creates the key only after reading it absent at
// two tries in a row), leaving time for the new leader to catch up with
// the stream inside 5 s.
//
// Pure: the clock is injected. Thread-safety: not thread-safe.
#ifndef GATOS_MODEL_ELECTION_H_
#define GATOS_MODEL_ELECTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/clock.h"
#include "gatos/model/status.h"

namespace gatos {

struct ElectionOptions {
  int64_t ttl_ms = 3000;         // the KV bucket's TTL (max age)
  int64_t keep_every_ms = 750;   // the leader's updates
  int64_t try_every_ms = 250;    // a follower's creates
  int64_t margin_ms = 1000;      // a leader stops this long before the key may expire
};
// InvalidArgument unless 0 < keep_every_ms, 0 < try_every_ms < ttl_ms,
// keep_every_ms + margin_ms < ttl_ms, and ttl_ms >= 100 (the server's
// smallest max age). The message names the settings as gatosd's flags do.
Status CheckElectionOptions(const ElectionOptions& o);
// The defaults scaled to a TTL: keep every ttl/4, margin ttl/3, try every
// min(250, ttl/4) ms (3000 gives the defaults above).
ElectionOptions ElectionOptionsForTtl(int64_t ttl_ms);

// The value of the key: canonical JSON {"name":"<replica>","term":<n>}.
// A create cannot know its own revision yet, so it writes term 0; the
// first keep writes the real one. Names: 1 to 64 of [A-Za-z0-9_.-].
struct LeaderValue {
  std::string name;
  uint64_t term = 0;
};
std::string EncodeLeaderValue(const LeaderValue& v);
// Strict; InvalidArgument says what is wrong.
Result<LeaderValue> DecodeLeaderValue(std::string_view json);
bool ValidReplicaName(std::string_view name);

enum class ReplicaRole { kFollower, kLeader };
const char* ReplicaRoleName(ReplicaRole r);  // "follower", "leader"

class Election {
 public:
  struct Action {
    enum Kind { kWait, kCreate, kUpdate } kind = kWait;
    std::string value;      // what to write (kCreate, kUpdate)
    uint64_t revision = 0;  // kUpdate: the last revision this replica wrote
  };

  Election(std::string name, ElectionOptions options, ClockFn clock);

  // What to do now. A leader whose lease lapsed (no successful keep sent in
  // ttl_ms - margin_ms) steps down first and then waits. After a kCreate or
  // kUpdate, report its outcome before calling Next again.
  Action Next();
  // The outcome of the kCreate Next returned: the revision the key was
  // created at (this replica leads, term = revision), AlreadyExists (another
  // replica leads; stay follower) or another error (stay follower).
  void OnCreated(const Result<uint64_t>& revision);
  // The outcome of the kUpdate: the new revision (still leading). A refusal
  // (Aborted: another revision, someone else wrote the key or it expired)
  // or any other error steps down at once. Unavailable or DeadlineExceeded
  // (the bucket did not answer: its stream electing a new leader after a
  // NATS node died) is retried every try_every_ms while the lease lasts;
  // Next steps down when it lapses.
  void OnUpdated(const Result<uint64_t>& revision);
  // Stop leading now (a stream append failed): the next create comes after
  // try_every_ms, like any follower's.
  void StepDown(const std::string& why);

  ReplicaRole role() const { return role_; }
  bool leading() const { return role_ == ReplicaRole::kLeader; }
  uint64_t term() const { return term_; }  // 0 before this replica first led
  // While leading: when leading must end unless a keep succeeds first
  // (the last successful keep's send time + ttl_ms - margin_ms); 0 when
  // following. Next steps down then; a driver blocked in a call can check
  // it meanwhile.
  int64_t lease_until_ms() const {
    return role_ == ReplicaRole::kLeader ? kept_sent_ms_ + options_.ttl_ms - options_.margin_ms : 0;
  }
  // When Next has something to do (unix ms).
  int64_t next_ms() const { return next_ms_; }
  // Why the role last changed ("" before any change).
  const std::string& last_change() const { return last_change_; }
  // Increments on every change of role.
  uint64_t changes() const { return changes_; }
  const std::string& name() const { return name_; }
  const ElectionOptions& options() const { return options_; }

 private:
  void Lose(const std::string& why, int64_t now);
  std::string LapsedLease(int64_t now) const;  // why a lapsed lease ends leadership

  std::string name_;
  ElectionOptions options_;
  ClockFn clock_;
  ReplicaRole role_ = ReplicaRole::kFollower;
  uint64_t term_ = 0;
  uint64_t revision_ = 0;      // the last revision this leader wrote
  int64_t kept_sent_ms_ = 0;   // when the last successful create/keep was sent
  int64_t sent_ms_ = 0;        // when the call in flight was sent
  bool in_flight_ = false;
  int64_t next_ms_ = 0;
  int failed_keeps_ = 0;         // unanswered keeps since the last successful one
  std::string last_keep_error_;  // the last of them
  std::string last_change_;
  uint64_t changes_ = 0;
};

}  // namespace gatos

#endif  // GATOS_MODEL_ELECTION_H_
