#include "gatos/model/job_record.h"

#include <nlohmann/json.hpp>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/refs.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/time_format.h"

namespace gatos {
namespace {

Decision Fail(TransitionError e, std::string m) { return Decision{e, std::move(m)}; }

std::string Short(std::string_view hex) { return std::string(hex.substr(0, 12)); }

bool HoldsLease(const JobRecord& r) { return !r.worker_hex.empty(); }

}  // namespace

bool LeaseExpired(const JobRecord& r, int64_t now_ms) {
  return HoldsLease(r) && now_ms >= r.expires_ms;
}

bool LeaseLive(const JobRecord& r, int64_t now_ms) { return HoldsLease(r) && now_ms < r.expires_ms; }

bool HoldsResult(const JobRecord& r, const std::string& result_commit) {
  if (r.result_commit == result_commit) return true;
  for (const auto& a : r.attempts) {
    if (a.result_commit == result_commit) return true;
  }
  return false;
}

JobState RecordState(const JobRecord& r, int64_t now_ms) {
  if (!r.result_commit.empty()) {
    auto st = ParseJobState(r.result_status);
    // A final result is terminal by construction; an unknown status (only
    // possible in a corrupt ledger) reads as failed rather than running.
    return st && IsTerminal(*st) ? *st : JobState::kFailed;
  }
  if (!r.cancel_commit.empty() && !LeaseLive(r, now_ms)) return JobState::kAborted;
  if (HoldsLease(r)) return JobState::kClaimed;
  return JobState::kPending;
}

bool RecordTerminal(const JobRecord& r, int64_t now_ms) { return IsTerminal(RecordState(r, now_ms)); }

bool RecordDead(const JobRecord& r, int64_t now_ms) {
  JobState s = RecordState(r, now_ms);
  return s == JobState::kFailed || s == JobState::kTimedOut;
}

std::map<std::string, std::string> JobRefs(const JobRecord& r) {
  std::map<std::string, std::string> refs;
  if (r.pruned_ms) return refs;
  refs[JobRef(r.job_hex, "job")] = r.job_commit;
  if (!r.lease_commit.empty()) refs[JobRef(r.job_hex, "lease")] = r.lease_commit;
  for (const auto& [w, c] : r.claims) refs[ClaimRef(r.job_hex, w)] = c;
  if (!r.cancel_commit.empty()) refs[JobRef(r.job_hex, "cancel")] = r.cancel_commit;
  if (!r.retry_commit.empty()) refs[JobRef(r.job_hex, "retry")] = r.retry_commit;
  if (!r.result_commit.empty()) refs[JobRef(r.job_hex, "result")] = r.result_commit;
  for (const auto& a : r.attempts) refs[AttemptRef(r.job_hex, a.n)] = a.result_commit;
  return refs;
}

namespace {

// Canonical JSON (RFC 8785) written directly: every key is ASCII and every
// string value is hex or a state name, so no escaping is needed and the keys
// below are in JCS order by construction. (canonical_json.h gives the same
// bytes; the record test pins that.)
class RecordWriter {
 public:
  void Int(const char* k, int64_t v) {
    Key(k);
    out_ += std::to_string(v);
  }
  void Str(const char* k, const std::string& v) {
    Key(k);
    out_ += '"';
    out_ += v;
    out_ += '"';
  }
  void Key(const char* k) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += k;
    out_ += "\":";
  }
  void Open() {
    out_ += '{';
    first_ = true;
  }
  void Close() {
    out_ += '}';
    first_ = false;
  }
  void OpenArray(const char* k) {
    Key(k);
    out_ += '[';
    first_ = true;
  }
  void CloseArray() {
    out_ += ']';
    first_ = false;
  }
  void Separate() {
    if (!first_) out_ += ',';
    first_ = true;
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  bool first_ = true;
};

}  // namespace

std::string EncodeJobRecord(const JobRecord& r) {
  RecordWriter w;
  w.Open();
  w.Int("attempt", r.attempt);
  if (!r.attempts.empty()) {
    w.OpenArray("attempts");
    for (const auto& x : r.attempts) {
      w.Separate();
      w.Open();
      w.Int("epoch", x.epoch);
      w.Int("finished_ms", x.finished_ms);
      w.Int("n", x.n);
      w.Str("result", x.result_commit);
      w.Str("status", x.status);
      w.Close();
    }
    w.CloseArray();
  }
  if (!r.cancel_commit.empty()) w.Str("cancel", r.cancel_commit);
  if (!r.claim_commit.empty()) w.Str("claim", r.claim_commit);
  if (!r.claims.empty()) {
    w.Key("claims");
    w.Open();
    for (const auto& [worker, commit] : r.claims) w.Str(worker.c_str(), commit);
    w.Close();
  }
  if (r.epoch) w.Int("epoch", r.epoch);
  if (!r.worker_hex.empty()) w.Int("expires_ms", r.expires_ms);
  if (r.finished_ms) w.Int("finished_ms", r.finished_ms);
  w.Str("job", r.job_hex);
  w.Str("job_commit", r.job_commit);
  if (!r.lease_commit.empty()) w.Str("lease", r.lease_commit);
  if (r.not_before_ms) w.Int("not_before_ms", r.not_before_ms);
  // A job in the default pool at the default priority is recorded as
  // before pools and priorities existed.
  if (!r.pool.empty()) w.Str("pool", r.pool);
  if (r.priority != kDefaultPriority) w.Int("priority", r.priority);
  if (r.pruned_ms) w.Int("pruned_ms", r.pruned_ms);
  if (r.requested_at_ms) w.Int("requested_at_ms", r.requested_at_ms);
  if (!r.result_commit.empty()) w.Str("result", r.result_commit);
  if (!r.retry_commit.empty()) w.Str("retry", r.retry_commit);
  if (!r.result_commit.empty()) w.Str("status", r.result_status);
  w.Int("submitted_ms", r.submitted_ms);
  if (!r.submitter_hex.empty()) w.Str("submitter", r.submitter_hex);
  w.Int("v", 1);
  if (!r.worker_hex.empty()) w.Str("worker", r.worker_hex);
  w.Close();
  return w.Take();
}

namespace {

class Reader {
 public:
  explicit Reader(const nlohmann::json& j) : j_(j) {}
  Status status() const { return status_; }
  bool Has(const char* k) const { return j_.contains(k); }

  std::string Oid(const char* k, bool required = false) { return Hex(k, 40, required); }
  std::string Hex(const char* k, size_t len, bool required = false) {
    auto it = j_.find(k);
    if (it == j_.end()) {
      if (required) Bad(std::string(k) + " is missing");
      return "";
    }
    if (!it->is_string() || !IsLowerHex(it->get_ref<const std::string&>(), len)) {
      Bad(std::string(k) + " must be " + std::to_string(len) + " lowercase hex characters");
      return "";
    }
    return it->get<std::string>();
  }
  int64_t Int(const char* k, bool required = false) {
    auto it = j_.find(k);
    if (it == j_.end()) {
      if (required) Bad(std::string(k) + " is missing");
      return 0;
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      Bad(std::string(k) + " must be a non-negative integer");
      return 0;
    }
    return it->get<int64_t>();
  }
  std::string Status_(const char* k) {
    auto it = j_.find(k);
    if (it == j_.end()) return "";
    if (!it->is_string()) {
      Bad(std::string(k) + " must be a string");
      return "";
    }
    std::string s = it->get<std::string>();
    auto st = ParseJobState(s);
    if (!st || !IsTerminal(*st)) Bad(std::string(k) + " must be a terminal state name");
    return s;
  }
  void Bad(std::string m) {
    if (status_.ok()) status_ = InvalidArgumentError("job record: " + m);
  }

 private:
  const nlohmann::json& j_;
  Status status_;
};

}  // namespace

Result<JobRecord> DecodeJobRecord(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("job record: not a JSON object");
  static const char* kKnown[] = {"v",      "job",        "job_commit",  "submitted_ms", "attempt",
                                 "submitter", "epoch",   "lease",       "worker",       "expires_ms",
                                 "requested_at_ms", "claim", "claims",   "cancel",       "retry",
                                 "result", "status",     "attempts",    "not_before_ms", "finished_ms",
                                 "pruned_ms", "pool", "priority"};
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    for (const char* n : kKnown) known = known || k == n;
    if (!known) return InvalidArgumentError("job record: unknown field \"" + k.substr(0, 40) + "\"");
  }
  if (!j.contains("v") || !j["v"].is_number_integer() || j["v"].get<int64_t>() != 1) {
    return InvalidArgumentError("job record: version must be 1");
  }
  Reader rd(j);
  JobRecord r;
  r.job_hex = rd.Hex("job", 64, true);
  r.job_commit = rd.Oid("job_commit", true);
  r.submitted_ms = rd.Int("submitted_ms", true);
  r.attempt = rd.Int("attempt", true);
  r.submitter_hex = rd.Hex("submitter", 64);
  r.epoch = rd.Int("epoch");
  r.lease_commit = rd.Oid("lease");
  r.worker_hex = rd.Hex("worker", 64);
  r.expires_ms = rd.Int("expires_ms");
  r.requested_at_ms = rd.Int("requested_at_ms");
  r.claim_commit = rd.Oid("claim");
  r.cancel_commit = rd.Oid("cancel");
  r.retry_commit = rd.Oid("retry");
  r.result_commit = rd.Oid("result");
  r.result_status = rd.Status_("status");
  r.not_before_ms = rd.Int("not_before_ms");
  r.finished_ms = rd.Int("finished_ms");
  r.pruned_ms = rd.Int("pruned_ms");
  if (j.contains("pool")) {
    const auto& p = j["pool"];
    if (!p.is_string() || !PoolNameProblem(p.get_ref<const std::string&>()).empty() ||
        p.get_ref<const std::string&>() == kDefaultPool) {
      rd.Bad("pool must be a pool name other than \"default\"");
    } else {
      r.pool = p.get<std::string>();
    }
  }
  if (j.contains("priority")) {
    r.priority = rd.Int("priority");
    if (r.priority > kMaxPriority || r.priority == kDefaultPriority) rd.Bad("priority must be 0-9 other than 5");
  }
  if (j.contains("claims")) {
    if (!j["claims"].is_object()) {
      rd.Bad("claims must be an object");
    } else {
      for (const auto& [w, c] : j["claims"].items()) {
        if (!IsLowerHex(w, 64) || !c.is_string() || !IsLowerHex(c.get_ref<const std::string&>(), 40)) {
          rd.Bad("claims must map worker keys (64 hex) to commit ids (40 hex)");
          break;
        }
        r.claims[w] = c.get<std::string>();
      }
    }
  }
  if (j.contains("attempts")) {
    if (!j["attempts"].is_array()) {
      rd.Bad("attempts must be an array");
    } else {
      for (const auto& a : j["attempts"]) {
        if (!a.is_object()) {
          rd.Bad("attempts must hold objects");
          break;
        }
        Reader ar(a);
        AttemptRecord x;
        x.n = ar.Int("n", true);
        x.result_commit = ar.Oid("result", true);
        x.status = ar.Status_("status");
        x.epoch = ar.Int("epoch", true);
        x.finished_ms = ar.Int("finished_ms", true);
        if (!ar.status().ok()) {
          rd.Bad("attempts: " + ar.status().message());
          break;
        }
        r.attempts.push_back(std::move(x));
      }
    }
  }
  GATOS_RETURN_IF_ERROR(rd.status());
  if (r.attempt < 1) return InvalidArgumentError("job record: attempt must be at least 1");
  if (!r.worker_hex.empty() && r.lease_commit.empty()) {
    return InvalidArgumentError("job record: a lease holder needs a lease commit");
  }
  if (r.result_commit.empty() != r.result_status.empty()) {
    return InvalidArgumentError("job record: result and status go together");
  }
  return r;
}

Decision DecideClaim(const JobRecord& r, std::string_view worker_hex, int64_t want_epoch,
                     int64_t now_ms, ClaimPlan* out) {
  if (!r.result_commit.empty()) {
    return Fail(TransitionError::kTerminal,
                "job " + r.job_hex + " already has a result (" + r.result_status + ")");
  }
  if (!r.cancel_commit.empty()) return Fail(TransitionError::kCancelled, "job " + r.job_hex + " was cancelled");
  if (LeaseLive(r, now_ms)) {
    return Fail(TransitionError::kLostRace, "job " + r.job_hex + " is leased to " +
                                                r.worker_hex.substr(0, 16) + " until " +
                                                FormatRfc3339Millis(r.expires_ms));
  }
  if (want_epoch != r.epoch + 1) {
    // The epoch a request asks for is granted at most once: a request for an
    // epoch already taken (by anyone) is a lost race, never a second grant.
    return Fail(TransitionError::kLostRace, "job " + r.job_hex + " is at epoch " +
                                                std::to_string(r.epoch) + "; a claim of epoch " +
                                                std::to_string(want_epoch) + " cannot be granted");
  }
  if (!HoldsLease(r) && r.not_before_ms && now_ms < r.not_before_ms) {
    return Fail(TransitionError::kRetry, "job " + r.job_hex + " is waiting to retry (attempt " +
                                             std::to_string(r.attempt) + ") until " +
                                             FormatRfc3339Millis(r.not_before_ms));
  }
  *out = ClaimPlan{r.epoch + 1, HoldsLease(r), r.lease_commit};
  return {};
}

namespace {
// Shared by renew and result: the caller must hold the current lease.
Decision CheckHolder(const JobRecord& r, std::string_view worker_hex, int64_t epoch,
                     int64_t now_ms, int64_t grace_ms, const char* what) {
  if (!r.result_commit.empty()) {
    return Fail(TransitionError::kTerminal, std::string(what) + " refused: job " + r.job_hex +
                                                " already has a result (" + r.result_status + ")");
  }
  if (!HoldsLease(r)) {
    return Fail(TransitionError::kStaleOwner,
                std::string(what) + " refused: job " + r.job_hex + " has no live lease");
  }
  if (r.worker_hex != worker_hex || r.epoch != epoch) {
    return Fail(TransitionError::kStaleOwner,
                std::string(what) + " refused: stale owner; the lease of job " + r.job_hex +
                    " is held by " + r.worker_hex.substr(0, 16) + " at epoch " +
                    std::to_string(r.epoch) + ", not by " + std::string(worker_hex.substr(0, 16)) +
                    " at epoch " + std::to_string(epoch));
  }
  if (now_ms >= r.expires_ms + grace_ms) {
    return Fail(TransitionError::kStaleOwner, std::string(what) +
                                                  " refused: stale owner; the lease of job " +
                                                  r.job_hex + " expired at " +
                                                  FormatRfc3339Millis(r.expires_ms));
  }
  return {};
}
}  // namespace

Decision DecideRenew(const JobRecord& r, std::string_view worker_hex, int64_t epoch,
                     int64_t requested_at_ms, int64_t now_ms) {
  Decision d = CheckHolder(r, worker_hex, epoch, now_ms, 0, "renew");
  if (!d.ok()) return d;
  if (requested_at_ms <= r.requested_at_ms) {
    return Fail(TransitionError::kUnauthorized,
                "renew refused: the request (" + FormatRfc3339Millis(requested_at_ms) +
                    ") is not newer than the last one accepted for this lease (" +
                    FormatRfc3339Millis(r.requested_at_ms) + "); a request is accepted once");
  }
  return {};
}

Decision DecideResult(const JobRecord& r, std::string_view worker_hex, int64_t epoch,
                      int64_t now_ms, int64_t grace_ms) {
  return CheckHolder(r, worker_hex, epoch, now_ms, grace_ms, "result");
}

Decision DecideCancel(const JobRecord& r, int64_t now_ms, bool* already) {
  *already = false;
  if (!r.result_commit.empty()) {
    return Fail(TransitionError::kTerminal, "job " + r.job_hex + " already finished (" +
                                                r.result_status + "); nothing to cancel");
  }
  if (!r.cancel_commit.empty()) *already = true;
  (void)now_ms;
  return {};
}

bool RetryAfterResult(const JobRecord& r, const PolicySettings& s, std::string_view status,
                      std::string_view reason, bool transient) {
  return r.cancel_commit.empty() && r.result_commit.empty() && r.attempt < s.max_attempts &&
         RetriesAttempt(s, status, reason, transient);
}

Decision DecideRetry(const JobRecord& r, int64_t want_attempt, int64_t now_ms) {
  JobState s = RecordState(r, now_ms);
  if (s != JobState::kFailed && s != JobState::kTimedOut) {
    return Fail(TransitionError::kInvalid,
                "job " + Short(r.job_hex) + " is " + std::string(JobStateName(s)) +
                    "; only a job that ended failed or timed-out can be re-run");
  }
  if (want_attempt != r.attempt + 1) {
    return Fail(TransitionError::kLostRace, "job " + Short(r.job_hex) + " is at attempt " +
                                                std::to_string(r.attempt) + "; a re-run of attempt " +
                                                std::to_string(want_attempt) + " cannot be granted");
  }
  return {};
}

JobState RecordedState(const JobRecord& r) {
  if (!r.result_commit.empty()) {
    auto st = ParseJobState(r.result_status);
    return st && IsTerminal(*st) ? *st : JobState::kFailed;
  }
  if (!r.worker_hex.empty()) return JobState::kClaimed;
  if (!r.cancel_commit.empty()) return JobState::kAborted;
  return JobState::kPending;
}

}  // namespace gatos
