// What the CLI does while a replicated ledger elects a new leader (a few
// seconds after the old one died): a request nobody answered, or one the
// ledger answered "retry" (nothing recorded), is asked again with backoff
// for a bounded time, instead of failing the user's script. A refusal
// (policy, limits, a bad manifest or signature) is never asked again.
//
// Thread-safety: pure functions.
#ifndef GATOS_MODEL_LEADER_WAIT_H_
#define GATOS_MODEL_LEADER_WAIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gatos/model/decision.h"
#include "gatos/model/status.h"

namespace gatos {

// The default bound, and the environment variable that changes it (whole
// or fractional seconds; 0 turns the waiting off).
inline constexpr int64_t kDefaultLeaderWaitMs = 30'000;
inline constexpr char kLeaderWaitEnv[] = "GATOS_LEADER_WAIT";

// Whether a request on `subject` (an rpc.h subject) is asked again, given
// what came of it: `transport` is the request's own outcome (not ok: no
// reply), `reply` the ledger's answer when there was one (its error class,
// kNone for an ok reply).
//  - nobody subscribes or the connection is down (Unavailable): nothing
//    reached a leader: yes;
//  - no reply in time (DeadlineExceeded): for reads, and for a submit (a
//    job is submitted once, by its id: a second submit of a recorded one
//    answers "existing"); other writes may have been done: no;
//  - a "retry" answer (the batch was not recorded, the leader stepped
//    down, a replica cannot read its ledger): yes;
//  - anything else (ok, a refusal, a permission error): no.
bool RetryAcrossLeaderChange(std::string_view subject, const Status& transport, TransitionError reply);

// The pause before attempt `attempt` (1 = the first retry): 100 ms,
// doubling, at most 1 s.
int64_t LeaderWaitBackoffMs(int attempt);

// A leader-wait bound as given (--leader-wait S, GATOS_LEADER_WAIT=S):
// seconds >= 0, fractions allowed, at most a day. nullopt when malformed.
std::optional<int64_t> ParseLeaderWaitMs(std::string_view seconds);

}  // namespace gatos

#endif  // GATOS_MODEL_LEADER_WAIT_H_
