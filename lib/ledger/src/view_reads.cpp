// Read requests answered from a LedgerView (a replica's own repository).
#include "gatos/ledger/view_reads.h"

#include <exception>
#include <map>

#include "gatos/ledger/job_service.h"
#include "service_internal.h"

namespace gatos {
using namespace service_internal;  // NOLINT: this library's own internals

bool IsViewRead(std::string_view subject) {
  return subject == rpc::kStatus || subject == rpc::kList || subject == rpc::kLogs;
}

namespace {

std::string Annotated(json reply, const json& annotate) {
  if (reply.value("ok", false) && annotate.is_object()) {
    for (const auto& [k, v] : annotate.items()) reply[k] = v;
  }
  return rpc::Dump(reply);
}

std::string Answer(LedgerView& view, const Policy& policy, std::string_view subject, std::string_view data,
                   int64_t now, const json& annotate) {
  if (!IsViewRead(subject)) return Invalid("unknown subject " + TruncateUtf8(std::string(subject), 80));
  auto j = rpc::ParseRequest(data, subject);
  if (!j.ok()) return Invalid(j.status().message());
  if (subject == rpc::kStatus || subject == rpc::kLogs) {
    auto job = rpc::ParseJobField(*j);
    if (!job.ok()) return Invalid(job.status().message());
    auto rec = view.Find(*job);
    if (!rec.ok()) return ErrorText(Decision::FromStatus(rec.status()));
    if (!*rec) return Invalid("no job blake3:" + *job + " in this ledger");
    if (subject == rpc::kLogs) return Annotated(JobOutputReply(view.ledger(), **rec, *j), annotate);
    json reply = rpc::OkReply();
    reply["status"] = JobStatusJson(view.ledger(), **rec, policy.settings, now);
    reply["status"]["pool"] = (*rec)->pool.empty() ? std::string(kDefaultPool) : (*rec)->pool;
    reply["status"]["priority"] = (*rec)->priority;
    return Annotated(std::move(reply), annotate);
  }
  auto req = rpc::ParseListRequest(*j);
  if (!req.ok()) return Invalid(req.status().message());
  auto stats = view.index().Stats();
  if (!stats.ok()) return ErrorText(Decision::FromStatus(stats.status()));
  std::map<std::string, JobRecord> live;
  Status s = view.index().ForEachLive([&](const JobRecord& r) {
    live[r.job_hex] = r;
    return OkStatus();
  });
  if (!s.ok()) return ErrorText(Decision::FromStatus(s));
  json reply = ListReply(view.index(), *stats, live, *req, now);
  reply["now_ms"] = now;
  return Annotated(std::move(reply), annotate);
}

}  // namespace

std::string ViewReadReply(LedgerView& view, const Policy& policy, std::string_view subject,
                          std::string_view data, int64_t now_ms, const json& annotate) {
  try {
    return Answer(view, policy, subject, data, now_ms, annotate);
  } catch (const std::exception& e) {
    return ErrorText(TransitionError::kInternal, "read failed: " + TruncateUtf8(e.what(), 200));
  }
}

}  // namespace gatos
