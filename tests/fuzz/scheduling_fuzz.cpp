// libFuzzer target: scheduling's parsers and its decision logic
// (gatos/model/scheduling.h, scheduler.h, rpc.h DecodeHeartbeat).
// The first byte picks what the rest is:
//   0: a worker heartbeat (DecodeHeartbeat): accepted ones re-encode to a
//      heartbeat that decodes to the same thing;
//   1: policy.json (ParsePolicySettings): accepted settings serialize to
//      text that parses back to the same scheduling section;
//   2: a scheduling change (JSON) applied to an empty section: accepted
//      changes leave a section that survives the policy.json round trip;
//   3: a Priority value, a pool name and a pool list;
//   4+: a program for the Scheduler: Ready / Running / Remove / Next /
//      Admit on a few jobs, pools and submitters. Invariants: counts never
//      go negative, a job is never offered twice without becoming ready
//      again, and a paused pool offers nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "gatos/model/policy.h"
#include "gatos/model/rpc.h"
#include "gatos/model/scheduler.h"
#include "gatos/model/scheduling.h"

namespace {

void RunScheduler(std::string_view prog) {
  gatos::Scheduler s;
  gatos::SchedulingPolicy policy;
  policy.paused.insert("p3");
  policy.pool_max_running["p1"] = 2;
  policy.default_limits.max_running = 3;
  std::set<std::string> offered;  // offered and not ready again since
  const char* pools[] = {"", "p1", "p2", "p3"};
  int64_t now = 0;
  for (size_t i = 0; i + 1 < prog.size(); i += 2) {
    const unsigned op = static_cast<unsigned char>(prog[i]) % 6;
    const unsigned arg = static_cast<unsigned char>(prog[i + 1]);
    const std::string job = "j" + std::to_string(arg % 16);
    gatos::ScheduledJob sj{job, pools[(arg / 16) % 4], "s" + std::to_string((arg / 64) % 3),
                           static_cast<int64_t>(arg % 10)};
    now += arg % 50;
    switch (op) {
      case 0:
        if (s.StateOf(job) == "running" || s.StateOf(job).empty()) offered.erase(job);
        s.Ready(sj);
        break;
      case 1:
        s.Running(sj, now);
        break;
      case 2:
        s.Remove(job);
        offered.erase(job);
        break;
      case 3:
        for (const auto& j : s.Next(policy, now)) {
          if (!offered.insert(j).second) abort();  // offered twice
        }
        break;
      case 4: {
        gatos::EffectiveLimits l{static_cast<int64_t>(arg % 4), 0, static_cast<int64_t>(arg % 3)};
        if (s.Admit(sj.submitter, l, now).ok()) s.Admitted(sj.submitter, l, now);
        break;
      }
      case 5:
        s.EndBatch();
        break;
    }
    for (const auto& [pool, c] : s.Pools()) {
      if (c.queued < 0 || c.offered < 0 || c.running < 0) abort();
      if (pool == "p3" && c.offered > 0 && op == 3) {
        // Offers in a paused pool can only predate the pause; this pool
        // was paused from the start.
        abort();
      }
    }
    for (const char* sub : {"s0", "s1", "s2"}) {
      if (s.Pending(sub) < 0 || s.RunningOf(sub) < 0) abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto h = gatos::rpc::DecodeHeartbeat(text);
      if (h.ok()) {
        auto again = gatos::rpc::DecodeHeartbeat(gatos::rpc::EncodeHeartbeat(*h));
        if (!again.ok() || again->worker_hex != h->worker_hex || again->pools != h->pools) abort();
      }
      break;
    }
    case 1: {
      auto p = gatos::ParsePolicySettings(text);
      if (p.ok()) {
        auto again = gatos::ParsePolicySettings(gatos::SerializePolicySettings(*p));
        if (!again.ok() || !(again->scheduling == p->scheduling)) abort();
      }
      break;
    }
    case 2: {
      nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      gatos::SchedulingPolicy s;
      bool changed = false;
      if (!j.is_discarded() && gatos::ApplySchedulingChange(&s, j, &changed).ok()) {
        gatos::PolicySettings ps;
        ps.scheduling = s;
        auto again = gatos::ParsePolicySettings(gatos::SerializePolicySettings(ps));
        if (!again.ok() || !(again->scheduling == s)) abort();
      }
      break;
    }
    case 3: {
      auto pr = gatos::ParsePriority(text);
      if (pr.ok() && (*pr < 0 || *pr > 9)) abort();
      (void)gatos::PoolNameProblem(text);
      auto list = gatos::ParsePoolList(text);
      if (list.ok()) {
        for (const auto& p : *list) {
          if (!gatos::PoolNameProblem(p).empty()) abort();
        }
      }
      break;
    }
    default:
      RunScheduler(text);
  }
  return 0;
}
