// Read-only replies: status and list, and a job's status as JSON.
#include "gatos/ledger/job_service.h"
#include "gatos/model/time_format.h"

#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

std::string JobService::ReadReply(const ServiceRequest& r) {
  int64_t now = writer_->Now();
  auto j = rpc::ParseRequest(r.data, r.subject);
  if (!j.ok()) return Invalid(j.status().message());
  if (r.subject == rpc::kStatus) {
    auto job = rpc::ParseJobField(*j);
    if (!job.ok()) return Invalid(job.status().message());
    auto rec = writer_->Find(*job);
    if (!rec.ok()) return ErrorText(Decision::FromStatus(rec.status()));
    if (!*rec) return Invalid("no job blake3:" + *job + " in this ledger");
    json reply = rpc::OkReply();
    reply["status"] = JobStatusJson(writer_->ledger(), **rec, writer_->policy().settings, now);
    const JobRecord& jr = **rec;
    const std::string pool = jr.pool.empty() ? kDefaultPool : jr.pool;
    json& st = reply["status"];
    st["pool"] = pool;
    st["priority"] = jr.priority;
    if (RecordState(jr, now) == JobState::kPending) {
      // Why it waits, when the scheduler knows (docs/scheduling.md).
      if (writer_->policy().settings.scheduling.paused.count(pool)) {
        st["waiting"] = "pool " + pool + " is paused";
      } else if (LiveWorkersByPool(now)[pool] == 0) {
        st["waiting"] = "no worker serves pool " + pool;
      }
    }
    return rpc::Dump(reply);
  }
  if (r.subject == rpc::kPools) return PoolsReply(now);
  if (r.subject == rpc::kLogs) {
    auto job = rpc::ParseJobField(*j);
    if (!job.ok()) return Invalid(job.status().message());
    auto rec = writer_->Find(*job);
    if (!rec.ok()) return ErrorText(Decision::FromStatus(rec.status()));
    if (!*rec) return Invalid("no job blake3:" + *job + " in this ledger");
    return rpc::Dump(JobOutputReply(writer_->ledger(), **rec, *j));
  }
  auto req = rpc::ParseListRequest(*j);
  if (!req.ok()) return Invalid(req.status().message());
  json reply = ListReply(writer_->index(), writer_->stats(), writer_->live(), *req, now);
  // The ledger's clock, so that a client can tell how far its own is off
  // (leases are judged by it; gatos doctor checks).
  reply["now_ms"] = now;
  return rpc::Dump(reply);
}

namespace {

// The ledger's clock when it granted the claim `claim_commit` (0 if unknown).
int64_t ClaimedMs(Ledger& ledger, const std::string& claim_commit) {
  auto claim = ledger.ReadCommit(claim_commit);
  if (!claim.ok()) return 0;
  auto l = ParseLeaseCommitMessage(claim->message);
  return l.ok() ? l->expires_ms - l->lease_ms : 0;
}

// What an attempt's signed commits say: the result (Worker-Id, poe.json) and
// the claim that opened its epoch (the ledger's clock at the claim). Returns
// the claim time (0 if unknown).
int64_t DescribeResult(Ledger& ledger, const std::string& result_commit, json* a) {
  auto c = ledger.ReadCommit(result_commit);
  if (!c.ok()) return 0;
  if (auto m = ParseCommitMessage(c->message); m.ok()) {
    if (auto w = FindTrailer(m->trailers, "Worker-Id")) (*a)["worker"] = *w;
  }
  if (auto blob = ledger.ReadFileAtCommit(result_commit, "poe.json", 1 << 20); blob.ok()) {
    if (auto poe = ParsePoe(*blob); poe.ok()) {
      (*a)["started"] = poe->started_at;
      (*a)["ended"] = poe->finished_at;
      if (poe->exit_code) (*a)["exit_code"] = *poe->exit_code;
      if (poe->signal) (*a)["signal"] = *poe->signal;
      if (poe->timed_out) (*a)["timed_out"] = true;
      if (!poe->reason.empty()) (*a)["reason"] = poe->reason;
      if (poe->limits.Any()) {
        (*a)["limits"] = {{"memory_mb", poe->limits.memory_mb},
                          {"pids", poe->limits.pids},
                          {"cpu_millis", poe->limits.cpu_millis},
                          {"disk_mb", poe->limits.disk_mb},
                          {"unenforced", poe->unenforced},
                          {"text", JobLimitsText(poe->limits, poe->unenforced)}};
      }
      if (poe->usage.Any()) {
        json u = {{"text", JobUsageText(poe->usage)}};
        if (poe->usage.peak_memory_bytes >= 0)
          u["peak_memory_bytes"] = poe->usage.peak_memory_bytes;
        if (poe->usage.cpu_ms >= 0) u["cpu_ms"] = poe->usage.cpu_ms;
        if (poe->usage.peak_processes >= 0) u["peak_processes"] = poe->usage.peak_processes;
        if (poe->usage.disk_bytes >= 0) u["disk_bytes"] = poe->usage.disk_bytes;
        (*a)["usage"] = std::move(u);
      }
    }
  }
  int64_t claimed = c->parents.size() == 2 ? ClaimedMs(ledger, c->parents[1]) : 0;
  if (claimed) (*a)["claimed"] = FormatRfc3339Millis(claimed);
  return claimed;
}

}  // namespace

json JobStatusJson(Ledger& ledger, const JobRecord& r, const PolicySettings& settings,
                   int64_t now_ms) {
  json j = rpc::RecordJson(r, now_ms);
  j["max_attempts"] = settings.max_attempts;
  json attempts = json::array();
  int64_t prev_finished = 0;  // when the ledger recorded the attempt before
  // "waited_ms": from the record of the attempt before to this attempt's
  // claim, both on the ledger's clock (the backoff as it happened).
  auto waited = [&](int64_t claimed, json* a) {
    if (claimed && prev_finished && claimed >= prev_finished)
      (*a)["waited_ms"] = claimed - prev_finished;
  };
  for (const auto& x : r.attempts) {
    json a = {{"n", x.n},
              {"epoch", x.epoch},
              {"status", x.status},
              {"result_commit", x.result_commit},
              {"finished", FormatRfc3339Millis(x.finished_ms)}};
    waited(DescribeResult(ledger, x.result_commit, &a), &a);
    prev_finished = x.finished_ms;
    attempts.push_back(std::move(a));
  }
  // The current attempt.
  JobState st = RecordState(r, now_ms);
  json cur = {{"n", r.attempt}, {"status", std::string(JobStateName(st))}};
  if (!r.result_commit.empty()) {
    cur["epoch"] = r.epoch;
    cur["result_commit"] = r.result_commit;
    if (r.finished_ms) cur["finished"] = FormatRfc3339Millis(r.finished_ms);
    waited(DescribeResult(ledger, r.result_commit, &cur), &cur);
  } else if (!r.worker_hex.empty()) {
    cur["epoch"] = r.epoch;
    cur["worker"] = "ed25519:" + r.worker_hex;
    int64_t claimed = ClaimedMs(ledger, r.claim_commit);
    if (claimed) cur["claimed"] = FormatRfc3339Millis(claimed);
    waited(claimed, &cur);
  } else if (r.finished_ms) {
    cur["finished"] = FormatRfc3339Millis(r.finished_ms);  // aborted while pending
  }
  if (r.result_commit.empty() && r.not_before_ms) {
    cur["not_before"] = FormatRfc3339Millis(r.not_before_ms);
    if (!r.attempts.empty() && r.attempts.back().n == r.attempt - 1) {
      int64_t backoff = r.not_before_ms - r.attempts.back().finished_ms;
      cur["backoff_ms"] = backoff;
      j["backoff_ms"] = backoff;
    }
  }
  attempts.push_back(std::move(cur));
  j["attempts"] = std::move(attempts);
  return j;
}

json JobOutputReply(Ledger& ledger, const JobRecord& r, const json& request) {
  auto invalid = [](const std::string& m) { return rpc::ErrorReply(TransitionError::kInvalid, m); };
  auto int_field = [&](const char* key, int64_t def, int64_t lo, int64_t hi, int64_t* out) {
    auto it = request.find(key);
    if (it == request.end()) {
      *out = def;
      return true;
    }
    if (!it->is_number_integer()) return false;
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) return false;
    *out = it->get<int64_t>();
    return *out >= lo && *out <= hi;
  };
  std::string stream = "stdout";
  if (auto it = request.find("stream"); it != request.end()) {
    if (!it->is_string() || (*it != "stdout" && *it != "stderr"))
      return invalid("stream must be stdout or stderr");
    stream = it->get<std::string>();
  }
  int64_t offset = 0, limit = 0, attempt = 0;
  if (!int_field("offset", 0, 0, int64_t{1} << 53, &offset))
    return invalid("offset must be an integer >= 0");
  if (!int_field("limit", kMaxLogsPage, 1, kMaxLogsPage, &limit)) {
    return invalid("limit must be an integer 1.." + std::to_string(kMaxLogsPage));
  }
  if (!int_field("attempt", 0, 1, 1'000'000, &attempt))
    return invalid("attempt must be an integer >= 1");
  std::string commit, status;
  if (attempt == 0 || attempt == r.attempt) {
    if (!r.result_commit.empty()) {
      attempt = r.attempt;
      commit = r.result_commit;
      status = r.result_status;
    } else if (attempt == 0 && !r.attempts.empty()) {
      attempt = r.attempts.back().n;
      commit = r.attempts.back().result_commit;
      status = r.attempts.back().status;
    } else {
      attempt = r.attempt;
    }
  } else {
    for (const auto& a : r.attempts) {
      if (a.n == attempt) {
        commit = a.result_commit;
        status = a.status;
      }
    }
    if (commit.empty() && attempt > r.attempt) {
      return invalid("job blake3:" + r.job_hex + " has no attempt " + std::to_string(attempt) +
                     " (it is at attempt " + std::to_string(r.attempt) + ")");
    }
  }
  if (commit.empty()) {
    return invalid("attempt " + std::to_string(attempt) + " of job blake3:" + r.job_hex +
                   " has no result yet ('gatos logs -f' follows a running job)");
  }
  auto data = ledger.ReadFileAtCommit(commit, stream, size_t{1} << 30);
  std::string bytes =
      data.ok() ? std::move(*data) : std::string();  // a result may hold no stream (too large)
  json reply = rpc::OkReply();
  reply["job"] = "blake3:" + r.job_hex;
  reply["attempt"] = attempt;
  reply["status"] = status;
  reply["result_commit"] = commit;
  reply["stream"] = stream;
  reply["size"] = static_cast<int64_t>(bytes.size());
  reply["offset"] = offset;
  size_t from = std::min(bytes.size(), static_cast<size_t>(offset));
  size_t n = std::min(bytes.size() - from, static_cast<size_t>(limit));
  reply["data"] = Base64Encode(reinterpret_cast<const uint8_t*>(bytes.data()) + from, n);
  if (!data.ok()) reply["missing"] = true;
  if (auto blob = ledger.ReadFileAtCommit(commit, "poe.json", 1 << 20); blob.ok()) {
    if (auto poe = ParsePoe(*blob); poe.ok()) {
      reply["truncated"] = stream == "stdout" ? poe->stdout_truncated : poe->stderr_truncated;
      reply["cap"] = poe->stdout_cap;
      if (poe->exit_code) reply["exit_code"] = *poe->exit_code;
      if (poe->signal) reply["signal"] = *poe->signal;
    }
  }
  return reply;
}

json ListReply(StateIndex& index, const IndexStats& st,
               const std::map<std::string, JobRecord>& live, const rpc::ListRequest& req,
               int64_t now) {
  json jobs = json::array();
  std::string next;
  auto matches = [&](const JobRecord& rec) {
    if (!req.state) return true;
    if (*req.state == "dead") return RecordDead(rec, now);
    return JobStateName(RecordState(rec, now)) == *req.state;
  };
  if (req.state && (*req.state == "pending" || *req.state == "claimed")) {
    for (auto it = req.after.empty() ? live.begin() : live.upper_bound(req.after); it != live.end();
         ++it) {
      if (!matches(it->second)) continue;
      jobs.push_back(rpc::RecordJson(it->second, now));
      if (static_cast<int64_t>(jobs.size()) >= req.limit) {
        next = it->first;
        break;
      }
    }
  } else {
    // Finished states: walk the index in id order, at most a bounded number
    // of records per request; "next" continues where this page stopped.
    constexpr int64_t kBudget = 50'000;
    int64_t seen = 0;
    Status s = index.ForEachJob(req.after, [&](const JobRecord& committed) {
      ++seen;
      auto l = live.find(committed.job_hex);
      const JobRecord& rec = l == live.end() ? committed : l->second;
      if (matches(rec)) jobs.push_back(rpc::RecordJson(rec, now));
      if (static_cast<int64_t>(jobs.size()) >= req.limit || seen >= kBudget) {
        next = committed.job_hex;
        return false;
      }
      return true;
    });
    if (!s.ok()) return rpc::ErrorReply(Decision::FromStatus(s).error, s.message());
  }
  json reply = rpc::OkReply();
  reply["jobs"] = std::move(jobs);
  if (!next.empty()) reply["next"] = "blake3:" + next;
  json counts = json::object();
  for (size_t i = 0; i < 6; ++i)
    counts[std::string(JobStateName(static_cast<JobState>(i)))] = st.by_state[i];
  counts["dead"] = st.by_state[static_cast<size_t>(JobState::kFailed)] +
                   st.by_state[static_cast<size_t>(JobState::kTimedOut)];
  reply["counts"] = counts;
  reply["jobs_total"] = st.jobs;
  return reply;
}

}  // namespace gatos
