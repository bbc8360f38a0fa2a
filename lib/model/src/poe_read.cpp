// poe.json read without a JSON parser when it is in the one form
// CanonicalPoe writes (poe.h, poe_internal::ReadCanonicalPoe): the auditor
// reads one per result, and nlohmann's tree costs more than the rest of
// the parse.
#include "gatos/model/poe.h"

#include <cstring>

namespace gatos {
namespace poe_internal {
namespace {

// A cursor over canonical JSON text. Each reader consumes its token and
// returns true, or returns false (the caller gives up: nullopt).
class Cursor {
 public:
  explicit Cursor(std::string_view t) : t_(t) {}
  bool done() const { return i_ == t_.size(); }
  bool Peek(std::string_view lit) const { return t_.substr(i_, lit.size()) == lit; }
  bool Lit(std::string_view lit) {
    if (!Peek(lit)) return false;
    i_ += lit.size();
    return true;
  }
  // A string as CanonicalJsonWriter escapes one: \" \\ \b \f \n \r \t and
  // \u00xx (lowercase hex) for the other control characters; other bytes
  // as they are (their UTF-8 is checked when the result is written back).
  bool Str(std::string* out) {
    if (!Lit("\"")) return false;
    out->clear();
    size_t run = i_;
    while (i_ < t_.size()) {
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        out->append(t_.data() + run, i_ - run);
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c != '\\') {
        ++i_;
        continue;
      }
      out->append(t_.data() + run, i_ - run);
      if (i_ + 1 >= t_.size()) return false;
      const char e = t_[i_ + 1];
      i_ += 2;
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (i_ + 4 > t_.size() || t_.substr(i_, 2) != "00") return false;
          int hi = Hex(t_[i_ + 2]), lo = Hex(t_[i_ + 3]);
          if (hi < 0 || lo < 0) return false;
          out->push_back(static_cast<char>(hi << 4 | lo));
          i_ += 4;
          break;
        }
        default: return false;
      }
      run = i_;
    }
    return false;
  }
  // An integer as the writer spells one: -?(0|[1-9][0-9]*), at most 16
  // digits (canonical integers stay within +-(2^53-1)).
  bool Int(int64_t* v) {
    bool neg = Lit("-");
    size_t start = i_;
    int64_t n = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      if (i_ - start == 16) return false;  // a 17th digit: no canonical integer
      n = n * 10 + (t_[i_++] - '0');
    }
    size_t digits = i_ - start;
    if (digits == 0 || digits > 16 || (digits > 1 && t_[start] == '0')) return false;
    *v = neg ? -n : n;
    return true;
  }
  bool Bool(bool* v) {
    if (Lit("true")) return *v = true, true;
    if (Lit("false")) return *v = false, true;
    return false;
  }
  bool IntOrNull(std::optional<int64_t>* v) {
    if (Lit("null")) return v->reset(), true;
    int64_t n;
    if (!Int(&n)) return false;
    *v = n;
    return true;
  }

 private:
  static int Hex(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }
  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

std::optional<Poe> ReadCanonicalPoe(std::string_view bytes) {
  Cursor c(bytes);
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
      if (c.Lit(",\"ref\":") && !c.Str(&in.ref)) return std::nullopt;
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
    if (!c.Lit("}")) return std::nullopt;
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
