// poe.json read without a JSON parser when it is in the one form
// CanonicalPoe writes (poe.h, poe_internal::ReadCanonicalPoe): the auditor
// reads one per result, and nlohmann's tree costs more than the rest of
// the parse.
#include "gatos/model/poe.h"

#include "gatos/model/canonical_json_cursor.h"

namespace gatos {
namespace poe_internal {

std::optional<Poe> ReadCanonicalPoe(std::string_view bytes) {
  CanonicalJsonCursor c(bytes);
  Poe p;
  int64_t n = 0;
  // Keys in byte order, optional members where CanonicalPoe writes them.
  if (!(c.Lit("{\"exit\":{\"code\":") && c.IntOrNull(&p.exit_code) && c.Lit(",\"signal\":") &&
        c.IntOrNull(&p.signal) && c.Lit(",\"timed_out\":") && c.Bool(&p.timed_out) &&
        c.Lit("},\"finished_at\":") && c.Str(&p.finished_at))) {
    return std::nullopt;
  }
  if (c.Lit(",\"inputs\":[")) {
    do {
      PoeInput in;
      if (!(c.Lit("{\"commit\":") && c.Str(&in.commit) && c.Lit(",\"index\":") && c.Int(&in.index))) {
        return std::nullopt;
      }
      if (c.Lit(",\"ref\":") && !(c.Str(&in.ref) && !in.ref.empty())) return std::nullopt;
      if (!(c.Lit(",\"url\":") && c.Str(&in.url) && c.Lit("}"))) return std::nullopt;
      p.inputs.push_back(std::move(in));
    } while (c.Lit(","));
    if (!c.Lit("]")) return std::nullopt;
  }
  if (!(c.Lit(",\"job_id\":") && c.Str(&p.job_id) && c.Lit(",\"lease_epoch\":") && c.Int(&p.lease_epoch))) {
    return std::nullopt;
  }
  if (c.Lit(",\"limits\":{\"cpu_millis\":")) {
    if (!(c.Int(&p.limits.cpu_millis) && c.Lit(",\"disk_mb\":") && c.Int(&p.limits.disk_mb) &&
          c.Lit(",\"memory_mb\":") && c.Int(&p.limits.memory_mb) && c.Lit(",\"pids\":") &&
          c.Int(&p.limits.pids))) {
      return std::nullopt;
    }
    if (c.Lit(",\"unenforced\":[")) {
      do {
        std::string u;
        if (!c.Str(&u)) return std::nullopt;
        p.unenforced.push_back(std::move(u));
      } while (c.Lit(","));
      if (!c.Lit("]")) return std::nullopt;
    }
    if (!c.Lit("}") || !p.limits.Any()) return std::nullopt;
  }
  if (!c.Lit(",\"outputs\":[")) return std::nullopt;
  if (!c.Lit("]")) {
    do {
      PoeOutput o;
      if (!(c.Lit("{\"hash\":") && c.Str(&o.hash) && c.Lit(",\"path\":") && c.Str(&o.path) &&
            c.Lit(",\"size\":") && c.Int(&n) && n >= 0 && c.Lit("}"))) {
        return std::nullopt;
      }
      o.size = static_cast<uint64_t>(n);
      p.outputs.push_back(std::move(o));
    } while (c.Lit(","));
    if (!c.Lit("]")) return std::nullopt;
  }
  if (!(c.Lit(",\"reason\":") && c.Str(&p.reason) && c.Lit(",\"runner\":{\"platform\":") &&
        c.Str(&p.runner_platform) && c.Lit(",\"program\":") && c.Str(&p.runner_program) &&
        c.Lit(",\"version\":") && c.Str(&p.runner_version) && c.Lit("},\"started_at\":") &&
        c.Str(&p.started_at) && c.Lit(",\"status\":") && c.Str(&p.status) && c.Lit(",\"stdout_cap\":") &&
        c.Int(&p.stdout_cap))) {
    return std::nullopt;
  }
  if (c.Lit(",\"transient\":true")) p.transient = true;
  if (!(c.Lit(",\"truncated\":{\"stderr\":") && c.Bool(&p.stderr_truncated) && c.Lit(",\"stdout\":") &&
        c.Bool(&p.stdout_truncated) && c.Lit("}"))) {
    return std::nullopt;
  }
  if (c.Lit(",\"usage\":{")) {
    const std::pair<const char*, int64_t*> fields[] = {{"\"cpu_ms\":", &p.usage.cpu_ms},
                                                       {"\"disk_bytes\":", &p.usage.disk_bytes},
                                                       {"\"peak_memory_bytes\":", &p.usage.peak_memory_bytes},
                                                       {"\"peak_processes\":", &p.usage.peak_processes}};
    bool first = true;
    for (const auto& [key, dst] : fields) {
      if (!c.Peek(first ? key : std::string(",") + key)) continue;
      if (!(c.Lit(first ? "" : ",") && c.Lit(key) && c.Int(dst) && *dst >= 0)) return std::nullopt;
      first = false;
    }
    if (first || !c.Lit("}")) return std::nullopt;
  }
  if (!(c.Lit(",\"worker_id\":") && c.Str(&p.worker_id) && c.Lit("}") && c.done())) return std::nullopt;
  return p;
}

}  // namespace poe_internal
}  // namespace gatos
