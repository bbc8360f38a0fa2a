#include "progress_board.h"

#include "gatos/model/time_format.h"
#include "gatos/model/rpc.h"

namespace gatos {

using nlohmann::json;

json ProgressJson(const Progress& p) {
  json counters = json::array();
  for (const ProgressCounter& c : p.counters) {
    json cj = {{"name", c.name}, {"done", c.done}};
    if (c.total > 0) cj["total"] = c.total;
    if (c.rate > 0) cj["rate"] = c.rate;
    counters.push_back(std::move(cj));
  }
  return json{{"counters", std::move(counters)}, {"text", DescribeProgress(p)}};
}

void ProgressBoard::Record(std::string_view data, int64_t now_ms) {
  auto m = ParseLiveMessage(data);
  std::lock_guard<std::mutex> l(mu_);
  if (!m.ok() || m->kind != LiveKind::kProgress) {
    ++ignored_;
    return;
  }
  auto it = jobs_.find(m->job_hex);
  if (it != jobs_.end()) {
    // Older attempts and reordered reports do not replace a newer one.
    const LiveMessage& old = it->second.report;
    if (m->attempt < old.attempt || (m->attempt == old.attempt && m->seq < old.seq)) return;
  } else if (jobs_.size() >= kMaxJobs) {
    auto oldest = jobs_.begin();
    for (auto j = jobs_.begin(); j != jobs_.end(); ++j) {
      if (j->second.received_ms < oldest->second.received_ms) oldest = j;
    }
    jobs_.erase(oldest);
  }
  Entry& e = jobs_[m->job_hex];
  e.report = std::move(*m);
  e.received_ms = now_ms;
}

std::optional<json> ProgressBoard::Get(const std::string& job_hex, int64_t attempt,
                                       int64_t now_ms) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(job_hex);
  if (it == jobs_.end() || it->second.report.attempt != attempt) return std::nullopt;
  int64_t age = now_ms - it->second.received_ms;
  if (age > kMaxAgeMs) return std::nullopt;
  json j = ProgressJson(it->second.report.progress);
  j["attempt"] = attempt;
  j["reported"] = FormatRfc3339Millis(it->second.report.at_ms);
  j["age_ms"] = age;
  return j;
}

std::string ProgressBoard::Annotate(const std::string& status_reply, int64_t now_ms) const {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (jobs_.empty()) return status_reply;
  }
  json r = json::parse(status_reply, nullptr, false);
  if (r.is_discarded() || !r.is_object() || !r.value("ok", false) || !r.contains("status"))
    return status_reply;
  json& st = r["status"];
  if (!st.is_object() || st.value("state", "") != "claimed") return status_reply;
  std::string job = st.value("job", "");
  if (job.rfind("blake3:", 0) == 0) job = job.substr(7);
  auto p = Get(job, st.value("attempt", int64_t{1}), now_ms);
  if (!p) return status_reply;
  st["progress"] = std::move(*p);
  return rpc::Dump(r);
}

int64_t ProgressBoard::ignored() const {
  std::lock_guard<std::mutex> l(mu_);
  return ignored_;
}

}  // namespace gatos
