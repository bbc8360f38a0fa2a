#include "gatos/lease.h"

#include <cstdio>
#include <ctime>

namespace gatos {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kClaimed: return "claimed";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kTimedOut: return "timed-out";
    case JobState::kAborted: return "aborted";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kPending, JobState::kClaimed, JobState::kSucceeded,
                     JobState::kFailed, JobState::kTimedOut, JobState::kAborted}) {
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) {
  return s != JobState::kPending && s != JobState::kClaimed;
}

JobView DeriveView(const JobSnapshot& snap, int64_t now_ms) {
  JobView v;
  v.cancel_requested = !snap.cancel_commit.empty();
  if (!snap.result_commit.empty()) {
    auto st = ParseJobState(snap.result_status);
    // A result is terminal by construction; an unknown status (only possible
    // in a corrupt ledger) reads as failed rather than as running forever.
    v.state = st && IsTerminal(*st) ? *st : JobState::kFailed;
    return v;
  }
  if (snap.lease) {
    v.lease_expired = now_ms >= snap.lease->expires_ms;
    v.state = v.cancel_requested && v.lease_expired ? JobState::kAborted : JobState::kClaimed;
    return v;
  }
  v.state = v.cancel_requested ? JobState::kAborted : JobState::kPending;
  return v;
}

std::string_view TransitionErrorName(TransitionError e) {
  switch (e) {
    case TransitionError::kNone: return "ok";
    case TransitionError::kLostRace: return "lost_race";
    case TransitionError::kStaleOwner: return "stale_owner";
    case TransitionError::kTerminal: return "terminal";
    case TransitionError::kCancelled: return "cancelled";
    case TransitionError::kInvalid: return "invalid";
    case TransitionError::kUnauthorized: return "unauthorized";
    case TransitionError::kRetry: return "retry";
  }
  return "invalid";
}

TransitionError ParseTransitionError(std::string_view name) {
  for (TransitionError e :
       {TransitionError::kNone, TransitionError::kLostRace, TransitionError::kStaleOwner,
        TransitionError::kTerminal, TransitionError::kCancelled, TransitionError::kInvalid,
        TransitionError::kUnauthorized, TransitionError::kRetry}) {
    if (TransitionErrorName(e) == name) return e;
  }
  return TransitionError::kInvalid;
}

namespace {
Decision Fail(TransitionError e, std::string m) { return Decision{e, std::move(m)}; }
}  // namespace

Decision DecideClaim(const JobSnapshot& snap, std::string_view worker_hex, int64_t now_ms,
                     ClaimDecision* out) {
  if (!snap.result_commit.empty()) {
    return Fail(TransitionError::kTerminal, "job " + snap.job_hex + " already has a result (" +
                                                snap.result_status + ")");
  }
  if (!snap.cancel_commit.empty()) {
    return Fail(TransitionError::kCancelled, "job " + snap.job_hex + " was cancelled");
  }
  if (!snap.lease) {
    *out = ClaimDecision{1, false, ""};
    return {};
  }
  if (now_ms < snap.lease->expires_ms) {
    return Fail(TransitionError::kLostRace,
                "job " + snap.job_hex + " is leased to " + snap.lease->worker_hex.substr(0, 16) +
                    " until " + FormatRfc3339Millis(snap.lease->expires_ms));
  }
  *out = ClaimDecision{snap.lease->epoch + 1, true, snap.lease->commit};
  return {};
}

namespace {
// Shared by renew and result: the caller must hold the current lease.
Decision CheckHolder(const JobSnapshot& snap, std::string_view worker_hex, int64_t epoch,
                     int64_t now_ms, int64_t grace_ms, const char* what) {
  if (!snap.result_commit.empty()) {
    return Fail(TransitionError::kTerminal, std::string(what) + " refused: job " + snap.job_hex +
                                                " already has a result (" + snap.result_status +
                                                ")");
  }
  if (!snap.lease) {
    return Fail(TransitionError::kStaleOwner,
                std::string(what) + " refused: job " + snap.job_hex + " has no lease");
  }
  const LeaseInfo& l = *snap.lease;
  if (l.worker_hex != worker_hex || l.epoch != epoch) {
    return Fail(TransitionError::kStaleOwner,
                std::string(what) + " refused: stale owner; the lease of job " + snap.job_hex +
                    " is held by " + l.worker_hex.substr(0, 16) + " at epoch " +
                    std::to_string(l.epoch) + ", not by " +
                    std::string(worker_hex.substr(0, 16)) + " at epoch " + std::to_string(epoch));
  }
  if (now_ms >= l.expires_ms + grace_ms) {
    return Fail(TransitionError::kStaleOwner,
                std::string(what) + " refused: stale owner; the lease of job " + snap.job_hex +
                    " expired at " + FormatRfc3339Millis(l.expires_ms));
  }
  return {};
}
}  // namespace

Decision DecideRenew(const JobSnapshot& snap, std::string_view worker_hex, int64_t epoch,
                     int64_t now_ms) {
  return CheckHolder(snap, worker_hex, epoch, now_ms, 0, "renew");
}

Decision DecideResult(const JobSnapshot& snap, std::string_view worker_hex, int64_t epoch,
                      int64_t now_ms, int64_t grace_ms) {
  return CheckHolder(snap, worker_hex, epoch, now_ms, grace_ms, "result");
}

Decision DecideCancel(const JobSnapshot& snap, bool* already) {
  *already = false;
  if (!snap.result_commit.empty()) {
    return Fail(TransitionError::kTerminal, "job " + snap.job_hex + " already finished (" +
                                                snap.result_status + "); nothing to cancel");
  }
  if (!snap.cancel_commit.empty()) *already = true;
  return {};
}

std::string FormatRfc3339Millis(int64_t unix_ms) {
  int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  int ms = static_cast<int>(unix_ms - secs * 1000);
  time_t t = static_cast<time_t>(secs);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

Result<int64_t> ParseRfc3339Millis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("\"" + std::string(text.substr(0, 40)) +
                                "\" is not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SS[.fff]Z)");
  };
  if (text.size() < 20 || text.size() > 40 || text.back() != 'Z') return bad();
  auto digits = [&](size_t pos, size_t n, int* v) {
    *v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      *v = *v * 10 + (text[i] - '0');
    }
    return true;
  };
  int y, mo, d, h, mi, s;
  if (!digits(0, 4, &y) || text[4] != '-' || !digits(5, 2, &mo) || text[7] != '-' ||
      !digits(8, 2, &d) || text[10] != 'T' || !digits(11, 2, &h) || text[13] != ':' ||
      !digits(14, 2, &mi) || text[16] != ':' || !digits(17, 2, &s)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  int ms = 0;
  size_t pos = 19;
  if (text[pos] == '.') {
    size_t start = ++pos;
    int scale = 100;
    while (pos < text.size() - 1) {
      char c = text[pos];
      if (c < '0' || c > '9') return bad();
      if (scale > 0) ms += (c - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad();
  }
  if (pos != text.size() - 1) return bad();
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  int64_t secs = static_cast<int64_t>(timegm(&tm));
  return secs * 1000 + ms;
}

}  // namespace gatos
