#include "gatos/model/election.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace gatos {

Status CheckElectionOptions(const ElectionOptions& o) {
  const std::string settings = " (TTL " + std::to_string(o.ttl_ms) + " ms, keep every " +
                               std::to_string(o.keep_every_ms) + " ms, margin " + std::to_string(o.margin_ms) +
                               " ms, try every " + std::to_string(o.try_every_ms) + " ms)";
  if (o.ttl_ms < 100) {
    return InvalidArgumentError("election TTL (election-ttl-ms) of " + std::to_string(o.ttl_ms) +
                                " ms: at least 100 ms");
  }
  if (o.keep_every_ms <= 0 || o.try_every_ms <= 0 || o.margin_ms < 0) {
    return InvalidArgumentError("election: the keep and try intervals must be positive and the margin not negative" +
                                settings);
  }
  if (o.keep_every_ms + o.margin_ms >= o.ttl_ms) {
    return InvalidArgumentError("election: keeping every " + std::to_string(o.keep_every_ms) +
                                " ms (election-keep-ms) with a margin of " + std::to_string(o.margin_ms) +
                                " ms (election-margin-ms) does not fit a TTL of " + std::to_string(o.ttl_ms) +
                                " ms (election-ttl-ms): keep + margin must be less than the TTL");
  }
  if (o.try_every_ms >= o.ttl_ms) {
    return InvalidArgumentError("election: a follower trying every " + std::to_string(o.try_every_ms) +
                                " ms (election-try-ms) must try more often than the TTL of " +
                                std::to_string(o.ttl_ms) + " ms (election-ttl-ms)");
  }
  return OkStatus();
}

ElectionOptions ElectionOptionsForTtl(int64_t ttl_ms) {
  ElectionOptions o;
  o.ttl_ms = ttl_ms;
  o.keep_every_ms = std::max<int64_t>(1, ttl_ms / 4);
  o.margin_ms = ttl_ms / 3;
  o.try_every_ms = std::max<int64_t>(1, std::min<int64_t>(250, ttl_ms / 4));
  return o;
}

bool ValidReplicaName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string EncodeLeaderValue(const LeaderValue& v) {
  // Names are plain ASCII without quotes or escapes (ValidReplicaName), and
  // "name" sorts before "term": this is the canonical form.
  return "{\"name\":\"" + v.name + "\",\"term\":" + std::to_string(v.term) + "}";
}

Result<LeaderValue> DecodeLeaderValue(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("leader key: not JSON: ") + e.what());
  }
  if (!j.is_object() || j.size() != 2 || !j.contains("name") || !j.contains("term")) {
    return InvalidArgumentError("leader key: expected {\"name\",\"term\"}");
  }
  const auto& name = j["name"];
  const auto& term = j["term"];
  if (!name.is_string() || !ValidReplicaName(name.get<std::string>())) {
    return InvalidArgumentError("leader key: name must be 1-64 of [A-Za-z0-9_.-]");
  }
  if (!term.is_number_unsigned()) return InvalidArgumentError("leader key: term must be an unsigned integer");
  return LeaderValue{name.get<std::string>(), term.get<uint64_t>()};
}

const char* ReplicaRoleName(ReplicaRole r) { return r == ReplicaRole::kLeader ? "leader" : "follower"; }

Election::Election(std::string name, ElectionOptions options, ClockFn clock)
    : name_(std::move(name)), options_(options), clock_(std::move(clock)) {
  next_ms_ = clock_();
}

void Election::Lose(const std::string& why, int64_t now) {
  if (role_ == ReplicaRole::kLeader) {
    role_ = ReplicaRole::kFollower;
    last_change_ = "stepped down from term " + std::to_string(term_) + ": " + why;
    ++changes_;
  }
  revision_ = 0;
  failed_keeps_ = 0;
  next_ms_ = now + options_.try_every_ms;
}

std::string Election::LapsedLease(int64_t now) const {
  return "no successful keep of the leader key for " + std::to_string(now - kept_sent_ms_) + " ms" +
         (failed_keeps_ > 0 ? " (" + std::to_string(failed_keeps_) + " unanswered: " + last_keep_error_ + ")" : "");
}

void Election::StepDown(const std::string& why) { Lose(why, clock_()); }

Election::Action Election::Next() {
  const int64_t now = clock_();
  Action a;
  // A lapsed lease ends leadership even while a keep is in flight.
  if (role_ == ReplicaRole::kLeader && now >= kept_sent_ms_ + options_.ttl_ms - options_.margin_ms) {
    Lose(LapsedLease(now), now);
    return a;
  }
  if (in_flight_) return a;  // the outcome of the last call first
  if (now < next_ms_) return a;
  in_flight_ = true;
  sent_ms_ = now;
  if (role_ == ReplicaRole::kLeader) {
    a.kind = Action::kUpdate;
    a.revision = revision_;
    a.value = EncodeLeaderValue({name_, term_});
  } else {
    a.kind = Action::kCreate;
    a.value = EncodeLeaderValue({name_, 0});
  }
  return a;
}

void Election::OnCreated(const Result<uint64_t>& revision) {
  in_flight_ = false;
  const int64_t now = clock_();
  if (!revision.ok() || *revision == 0) {
    next_ms_ = now + options_.try_every_ms;
    return;
  }
  // The lease runs from when the create was sent: the key was written no
  // earlier than that.
  if (sent_ms_ + options_.ttl_ms - options_.margin_ms <= now) {
    // The answer came too late to lead safely; the key expires by itself.
    next_ms_ = now + options_.try_every_ms;
    return;
  }
  role_ = ReplicaRole::kLeader;
  term_ = *revision;
  revision_ = *revision;
  kept_sent_ms_ = sent_ms_;
  // The first keep writes the term into the value at once.
  next_ms_ = now;
  last_change_ = "became leader with term " + std::to_string(term_);
  ++changes_;
}

void Election::OnUpdated(const Result<uint64_t>& revision) {
  in_flight_ = false;
  const int64_t now = clock_();
  if (role_ != ReplicaRole::kLeader) return;  // stepped down meanwhile
  if (!revision.ok()) {
    const StatusCode code = revision.status().code();
    if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded) {
      // The bucket did not answer (its stream electing a leader after a
      // NATS node died, a timeout): nobody else wrote the key, as far as
      // this replica knows. Keep trying while the lease lasts, and step
      // down when no retry fits in it, as without an answer at all. An
      // update that landed unanswered makes the retry fail on its
      // revision: a step-down.
      ++failed_keeps_;
      last_keep_error_ = revision.status().message();
      if (now + options_.try_every_ms < kept_sent_ms_ + options_.ttl_ms - options_.margin_ms) {
        next_ms_ = now + options_.try_every_ms;
      } else {
        Lose(LapsedLease(now), now);
      }
      return;
    }
    Lose("the leader key could not be kept (" + revision.status().message() + ")", now);
    return;
  }
  failed_keeps_ = 0;
  if (*revision <= revision_) {
    Lose("the leader key's revision went back from " + std::to_string(revision_) + " to " +
             std::to_string(*revision),
         now);
    return;
  }
  revision_ = *revision;
  kept_sent_ms_ = sent_ms_;
  next_ms_ = sent_ms_ + options_.keep_every_ms;
}

}  // namespace gatos
