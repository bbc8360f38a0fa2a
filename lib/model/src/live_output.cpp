#include "gatos/model/live_output.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

using nlohmann::json;

constexpr int64_t kMaxNumber = int64_t{1} << 53;

bool ValidCounterName(std::string_view n) {
  if (n.empty() || n.size() > 32 || n[0] < 'a' || n[0] > 'z') return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// A decimal integer 0..2^53 without sign or leading '+'.
std::optional<int64_t> ParseCount(std::string_view s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > kMaxNumber) return std::nullopt;
  return v;
}

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status CheckProgress(const Progress& p) {
  if (p.counters.empty() || p.counters.size() > kMaxProgressCounters) {
    return InvalidArgumentError("progress: 1 to " + std::to_string(kMaxProgressCounters) +
                                " counters");
  }
  std::set<std::string> names;
  for (const auto& c : p.counters) {
    if (!ValidCounterName(c.name))
      return InvalidArgumentError("progress: a counter name must match [a-z][a-z0-9_]{0,31}");
    if (!names.insert(c.name).second)
      return InvalidArgumentError("progress: counter " + c.name + " given twice");
    if (c.done < 0 || c.done > kMaxNumber || c.total < 0 || c.total > kMaxNumber) {
      return InvalidArgumentError("progress: " + c.name + ": numbers must be 0..2^53");
    }
    if (c.total > 0 && c.done > c.total) {
      return InvalidArgumentError("progress: " + c.name + ": done is more than total");
    }
    if (!std::isfinite(c.rate) || c.rate < 0 || c.rate > 1e12) {
      return InvalidArgumentError("progress: " + c.name + ": rate out of range");
    }
  }
  return OkStatus();
}

Result<int64_t> Int(const json& j, const char* key, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    return InvalidArgumentError(std::string("live message: ") + key + " must be an integer");
  int64_t v = it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) v = hi + 1;
  if (v < lo || v > hi)
    return InvalidArgumentError(std::string("live message: ") + key + " out of range");
  return v;
}

Result<std::string> Str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return InvalidArgumentError(std::string("live message: ") + key + " must be a string");
  return it->get<std::string>();
}

std::string HumanCount(double v, bool bytes) {
  char buf[48];
  if (bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
      v /= 1024;
      ++u;
    }
    if (u == 0)
      std::snprintf(buf, sizeof buf, "%.0f B", v);
    else
      std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

}  // namespace

std::string LiveOwnerToken(std::string_view owner_hex) {
  return owner_hex.empty() ? std::string(kUnsignedOwner) : std::string(owner_hex);
}

std::string LiveSubject(std::string_view owner_hex, std::string_view job_hex, LiveKind kind) {
  return std::string(kLiveSubjectPrefix) + LiveOwnerToken(owner_hex) + "." + std::string(job_hex) +
         (kind == LiveKind::kOutput ? ".output" : ".progress");
}

std::string LiveJobSubjects(std::string_view owner_hex, std::string_view job_hex) {
  return std::string(kLiveSubjectPrefix) + LiveOwnerToken(owner_hex) + "." + std::string(job_hex) +
         ".*";
}

Result<std::optional<Progress>> ParseProgressLine(std::string_view line) {
  if (line.size() > kMaxProgressLineBytes)
    return InvalidArgumentError("progress line longer than 1024 bytes");
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (i < line.size() && space(line[i])) ++i;
  if (i == line.size() || line[i] == '#') return std::optional<Progress>();
  Progress p;
  while (i < line.size()) {
    size_t j = i;
    while (j < line.size() && !space(line[j])) ++j;
    std::string_view tok = line.substr(i, j - i);
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgumentError("progress: expected NAME=DONE[/TOTAL], not a token without '='");
    ProgressCounter c;
    c.name = std::string(tok.substr(0, eq));
    std::string_view val = tok.substr(eq + 1);
    size_t slash = val.find('/');
    auto done = ParseCount(val.substr(0, slash));
    if (!done)
      return InvalidArgumentError("progress: " + c.name.substr(0, 32) +
                                  ": DONE must be a decimal integer 0..2^53");
    c.done = *done;
    if (slash != std::string_view::npos) {
      auto total = ParseCount(val.substr(slash + 1));
      if (!total)
        return InvalidArgumentError("progress: " + c.name.substr(0, 32) +
                                    ": TOTAL must be a decimal integer 0..2^53");
      c.total = *total;
    }
    if (!ValidCounterName(c.name))
      return InvalidArgumentError("progress: a counter name must match [a-z][a-z0-9_]{0,31}");
    if (p.counters.size() == kMaxProgressCounters)
      return InvalidArgumentError("progress: more than 8 counters");
    p.counters.push_back(std::move(c));
    i = j;
    while (i < line.size() && space(line[i])) ++i;
  }
  GATOS_RETURN_IF_ERROR(CheckProgress(p));
  return std::optional<Progress>(std::move(p));
}

std::string FormatProgressLine(const Progress& p) {
  std::string out;
  for (const auto& c : p.counters) {
    if (!out.empty()) out += ' ';
    out += c.name + "=" + std::to_string(c.done);
    if (c.total > 0) out += "/" + std::to_string(c.total);
  }
  return out;
}

std::string EncodeLiveMessage(const LiveMessage& m) {
  json j = {
      {"v", 1}, {"job", m.job_hex}, {"attempt", m.attempt}, {"seq", m.seq}, {"at_ms", m.at_ms}};
  if (m.kind == LiveKind::kOutput) {
    j["kind"] = "output";
    j["stream"] = m.stream;
    j["offset"] = m.offset;
    j["data"] = Base64Encode(reinterpret_cast<const uint8_t*>(m.data.data()), m.data.size());
  } else {
    j["kind"] = "progress";
    json cs = json::array();
    for (const auto& c : m.progress.counters) {
      json cj = {{"name", c.name}, {"done", c.done}};
      if (c.total > 0) cj["total"] = c.total;
      // Rates in thousandths: integers keep the message exact and simple to check.
      if (c.rate > 0) cj["rate_milli"] = static_cast<int64_t>(std::llround(c.rate * 1000));
      cs.push_back(std::move(cj));
    }
    j["counters"] = std::move(cs);
  }
  return j.dump();
}

Result<LiveMessage> ParseLiveMessage(std::string_view text) {
  if (text.size() > kMaxLiveMessageBytes) return InvalidArgumentError("live message over 64 KiB");
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgumentError("live message: not a JSON object");
  GATOS_ASSIGN_OR_RETURN(int64_t v, Int(j, "v", 1, 1));
  (void)v;
  LiveMessage m;
  GATOS_ASSIGN_OR_RETURN(m.job_hex, Str(j, "job"));
  if (!IsHex64(m.job_hex))
    return InvalidArgumentError("live message: job must be 64 lowercase hex digits");
  GATOS_ASSIGN_OR_RETURN(m.attempt, Int(j, "attempt", 1, 1'000'000));
  GATOS_ASSIGN_OR_RETURN(m.seq, Int(j, "seq", 0, kMaxNumber));
  GATOS_ASSIGN_OR_RETURN(m.at_ms, Int(j, "at_ms", 0, kMaxNumber));
  GATOS_ASSIGN_OR_RETURN(std::string kind, Str(j, "kind"));
  size_t expected_keys = 6;
  if (kind == "output") {
    m.kind = LiveKind::kOutput;
    GATOS_ASSIGN_OR_RETURN(m.stream, Str(j, "stream"));
    if (m.stream != "stdout" && m.stream != "stderr")
      return InvalidArgumentError("live message: stream must be stdout or stderr");
    GATOS_ASSIGN_OR_RETURN(m.offset, Int(j, "offset", 0, kMaxNumber));
    GATOS_ASSIGN_OR_RETURN(std::string b64, Str(j, "data"));
    auto raw = Base64Decode(b64);
    if (!raw.ok()) return InvalidArgumentError("live message: data is not base64");
    if (raw->size() > kMaxLiveChunkBytes)
      return InvalidArgumentError("live message: data over 16 KiB");
    m.data.assign(raw->begin(), raw->end());
    expected_keys += 3;
  } else if (kind == "progress") {
    m.kind = LiveKind::kProgress;
    auto it = j.find("counters");
    if (it == j.end() || !it->is_array())
      return InvalidArgumentError("live message: counters must be an array");
    if (it->size() > kMaxProgressCounters)
      return InvalidArgumentError("live message: more than 8 counters");
    for (const auto& cj : *it) {
      if (!cj.is_object()) return InvalidArgumentError("live message: a counter must be an object");
      ProgressCounter c;
      GATOS_ASSIGN_OR_RETURN(c.name, Str(cj, "name"));
      GATOS_ASSIGN_OR_RETURN(c.done, Int(cj, "done", 0, kMaxNumber));
      size_t keys = 2;
      if (cj.contains("total")) {
        GATOS_ASSIGN_OR_RETURN(c.total, Int(cj, "total", 1, kMaxNumber));
        ++keys;
      }
      if (cj.contains("rate_milli")) {
        GATOS_ASSIGN_OR_RETURN(int64_t r, Int(cj, "rate_milli", 1, int64_t{1'000'000'000'000'000}));
        c.rate = static_cast<double>(r) / 1000.0;
        ++keys;
      }
      if (cj.size() != keys)
        return InvalidArgumentError("live message: unknown field in a counter");
      m.progress.counters.push_back(std::move(c));
    }
    GATOS_RETURN_IF_ERROR(CheckProgress(m.progress));
    expected_keys += 1;
  } else {
    return InvalidArgumentError("live message: kind must be output or progress");
  }
  if (j.size() != expected_keys) return InvalidArgumentError("live message: unknown field");
  return m;
}

std::string EscapeForTerminal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char c) {
    static const char d[] = "0123456789abcdef";
    out += "\\x";
    out += d[c >> 4];
    out += d[c & 15];
  };
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence of a character outside C1 (U+0080..U+009F).
    size_t len = c >= 0xf0 && c <= 0xf4   ? 4
                 : c >= 0xe0              ? (c <= 0xef ? 3 : 0)
                 : c >= 0xc2 && c <= 0xdf ? 2
                                          : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = 0;
    if (ok) {
      cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
      for (size_t k = 1; k < len; ++k) {
        unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (cc & 0x3f);
      }
    }
    if (ok) {
      uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) &&
           !(cp >= 0x80 && cp <= 0x9f) && cp != 0x2028 && cp != 0x2029 &&
           !(cp >= 0x202a && cp <= 0x202e) && !(cp >= 0x2066 && cp <= 0x2069);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      hex(c);
      ++i;
    }
  }
  return out;
}

std::string DescribeProgress(const Progress& p) {
  std::string out;
  for (const auto& c : p.counters) {
    if (!out.empty()) out += "  ";
    bool bytes = c.name == "bytes" ||
                 (c.name.size() > 6 && c.name.compare(c.name.size() - 6, 6, "_bytes") == 0);
    out += c.name + " " + HumanCount(static_cast<double>(c.done), bytes);
    if (c.total > 0) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%",
                    100.0 * static_cast<double>(c.done) / static_cast<double>(c.total));
      out += "/" + HumanCount(static_cast<double>(c.total), bytes) + " (" + pct;
      if (c.rate > 0) out += ", " + HumanCount(c.rate, bytes) + "/s";
      out += ")";
    } else if (c.rate > 0) {
      out += " (" + HumanCount(c.rate, bytes) + "/s)";
    }
  }
  return out;
}

}  // namespace gatos
