#include "gatos/model/schedule.h"

#include <algorithm>

#include "gatos/model/scheduling.h"
#include "gatos/model/time_format.h"
#include "gatos/model/yaml_tree.h"
#include "manifest_rules.h"

namespace gatos {
namespace {

using internal::YamlNode;
using Kind = internal::YamlNode::Kind;

constexpr char kInputKind[] = "schedule";

std::string At(std::string_view source, const YamlNode& n, std::string_view field, std::string_view what) {
  return std::string(source) + ":" + std::to_string(n.line) + ":" + std::to_string(n.column) + ": " +
         std::string(field) + ": " + std::string(what);
}

bool TemplateHasTickInput(const Manifest& m) {
  if (!m.inputs || !m.inputs->is_array()) return false;
  for (const auto& in : *m.inputs) {
    if (in.is_object() && in.contains("kind") && in["kind"] == kInputKind) return true;
  }
  return false;
}

}  // namespace

std::string_view CatchUpName(CatchUp c) {
  switch (c) {
    case CatchUp::kNone: return "none";
    case CatchUp::kOne: return "one";
    case CatchUp::kAll: return "all";
  }
  return "one";
}

Result<CatchUp> ParseCatchUp(std::string_view s) {
  if (s == "none") return CatchUp::kNone;
  if (s == "one") return CatchUp::kOne;
  if (s == "all") return CatchUp::kAll;
  return InvalidArgumentError("catch-up rule \"" + std::string(s.substr(0, 40)) + "\" is not none, one or all");
}

Result<int64_t> ParseEvery(std::string_view text) {
  const std::string shown(text.substr(0, 40));
  if (text.empty()) return InvalidArgumentError("interval is empty; write e.g. 30s, 5m, 1h30m, 1d");
  __int128 total = 0;
  size_t i = 0;
  std::string units_seen;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    if (j == i || j - i > 12 || j == text.size()) {
      return InvalidArgumentError("interval \"" + shown +
                                  "\" is not whole numbers with units s, m, h, d (e.g. 30s, 5m, 1h30m, 1d)");
    }
    int64_t n = 0;
    for (size_t k = i; k < j; ++k) n = n * 10 + (text[k] - '0');
    const char u = text[j];
    int64_t unit = 0;
    if (u == 's') unit = 1000;
    else if (u == 'm') unit = 60'000;
    else if (u == 'h') unit = 3'600'000;
    else if (u == 'd') unit = 86'400'000;
    if (unit == 0 || units_seen.find(u) != std::string::npos) {
      return InvalidArgumentError("interval \"" + shown + "\": unit '" + std::string(1, u) +
                                  "' is not s, m, h or d, or is repeated");
    }
    units_seen += u;
    total += static_cast<__int128>(n) * unit;
    if (total > kMaxEveryMs) break;
    i = j + 1;
  }
  if (total < kMinEveryMs || total > kMaxEveryMs) {
    return InvalidArgumentError("interval \"" + shown + "\" is outside 1s..366d");
  }
  return static_cast<int64_t>(total);
}

std::string FormatEvery(int64_t ms) {
  int64_t s = ms / 1000;
  std::string out;
  const std::pair<int64_t, char> units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
  for (auto [len, c] : units) {
    if (s >= len) {
      out += std::to_string(s / len) + c;
      s %= len;
    }
  }
  return out.empty() ? "0s" : out;
}

Result<ScheduleSpec> ParseSchedule(std::string_view bytes, std::string_view source) {
  if (bytes.size() > (1 << 20)) return InvalidArgumentError(std::string(source) + ": is over 1 MiB");
  if (bytes.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(std::string(source) + ": contains a NUL byte");
  }
  internal::YamlTreeLimits limits;
  YamlNode root;
  internal::YamlTreeError te;
  if (!internal::ParseYamlTree(bytes, limits, &root, &te)) {
    return InvalidArgumentError(std::string(source) + ":" + std::to_string(te.line) + ":" +
                                std::to_string(te.column) + ": " + (te.path.empty() ? "schedule" : te.path) +
                                ": " + te.message);
  }
  std::vector<std::string> errors;
  ScheduleSpec spec;
  if (root.kind != Kind::kMap) {
    return InvalidArgumentError(At(source, root, "schedule",
                                   "is not a mapping; expected name, cron or every, tz, catch_up, template"));
  }
  auto scalar = [&](const YamlNode& v, const std::string& field, std::string* out) {
    if (v.kind != Kind::kScalar || (v.plain && manifest_internal::IsYamlNull(v.value))) {
      errors.push_back(At(source, v, field, "expected a string"));
      return false;
    }
    *out = v.value;
    return true;
  };
  bool have_name = false, have_template = false, have_tz = false;
  const YamlNode* tz_node = &root;
  for (const auto& e : root.entries) {
    const std::string& k = e.key.value;
    const YamlNode& v = e.value;
    std::string s;
    if (k == "name") {
      if (scalar(v, k, &s)) {
        have_name = true;
        if (std::string p = PoolNameProblem(s); !p.empty()) {
          errors.push_back(At(source, v, k, "\"" + s.substr(0, 64) + "\" " + p));
        }
        spec.name = s;
      }
    } else if (k == "every") {
      if (scalar(v, k, &s)) {
        auto ms = ParseEvery(s);
        if (!ms.ok()) errors.push_back(At(source, v, k, ms.status().message()));
        else spec.every_ms = *ms;
      }
    } else if (k == "cron") {
      if (scalar(v, k, &s)) {
        auto c = ParseCron(s);
        if (!c.ok()) errors.push_back(At(source, v, k, c.status().message()));
        spec.cron = s;
      }
    } else if (k == "tz") {
      if (scalar(v, k, &s)) {
        have_tz = true;
        tz_node = &v;
        if (std::string p = ZoneNameProblem(s); !p.empty()) {
          errors.push_back(At(source, v, k, "zone name \"" + s.substr(0, 64) + "\" " + p));
        }
        spec.tz = s;
      }
    } else if (k == "catch_up") {
      if (scalar(v, k, &s)) {
        auto c = ParseCatchUp(s);
        if (!c.ok()) errors.push_back(At(source, v, k, c.status().message()));
        else spec.catch_up = *c;
      }
    } else if (k == "poll") {
      if (scalar(v, k, &s)) {
        auto ms = ParseEvery(s);
        if (!ms.ok()) errors.push_back(At(source, v, k, ms.status().message()));
        else if (*ms > kMaxPollMs) errors.push_back(At(source, v, k, "is over 1d"));
        else spec.poll_ms = *ms;
      }
    } else if (k == "watch") {
      if (v.kind != Kind::kSequence || v.items.empty()) {
        errors.push_back(At(source, v, k, "expected a list of {url, refs}"));
        continue;
      }
      for (const YamlNode& w : v.items) {
        WatchSpec ws;
        bool have_url = false;
        if (w.kind != Kind::kMap) {
          errors.push_back(At(source, w, k, "each entry is a mapping {url, refs}"));
          continue;
        }
        for (const auto& we : w.entries) {
          if (we.key.value == "url") {
            have_url = scalar(we.value, "watch url", &ws.url);
          } else if (we.key.value == "refs") {
            const auto& rv = we.value;
            std::vector<const YamlNode*> items;
            if (rv.kind == Kind::kSequence) {
              for (const auto& it : rv.items) items.push_back(&it);
            } else {
              items.push_back(&rv);
            }
            for (const YamlNode* it : items) {
              std::string r;
              if (scalar(*it, "watch refs", &r)) ws.refs.push_back(r);
            }
          } else {
            errors.push_back(At(source, we.key, "watch", "\"" + we.key.value.substr(0, 64) +
                                                             "\" is not a watch field (url, refs)"));
          }
        }
        if (!have_url) errors.push_back(At(source, w, "watch", "url is missing"));
        spec.watch.push_back(std::move(ws));
      }
      if (std::string p = WatchListProblem(spec.watch); !p.empty()) {
        size_t start = 0;
        while (start <= p.size()) {
          size_t nl = p.find('\n', start);
          errors.push_back(At(source, v, k, p.substr(start, nl == std::string::npos ? std::string::npos : nl - start)));
          if (nl == std::string::npos) break;
          start = nl + 1;
        }
      }
    } else if (k == "template") {
      have_template = true;
      auto m = CheckManifestTree(v, std::string(source) + " template", ManifestLimits{});
      if (!m.ok()) {
        errors.push_back(m.status().message());
      } else if (TemplateHasTickInput(*m)) {
        errors.push_back(At(source, v, k, "has an input of kind schedule; the ledger adds it at each tick"));
      } else {
        spec.job = *m;
      }
    } else {
      errors.push_back(At(source, e.key, k.substr(0, 64),
                          "is not a schedule field (name, cron, every, tz, catch_up, watch, poll, template)"));
    }
  }
  const bool has_cron = root.entries.end() != std::find_if(root.entries.begin(), root.entries.end(),
                                                           [](const auto& e) { return e.key.value == "cron"; });
  const bool has_every = root.entries.end() != std::find_if(root.entries.begin(), root.entries.end(),
                                                            [](const auto& e) { return e.key.value == "every"; });
  if (!have_name) errors.push_back(At(source, root, "name", "is missing"));
  if (!have_template) errors.push_back(At(source, root, "template", "is missing; give the job manifest to fire"));
  auto has = [&](const char* key) {
    return root.entries.end() != std::find_if(root.entries.begin(), root.entries.end(),
                                              [&](const auto& e) { return e.key.value == key; });
  };
  const bool has_watch = has("watch");
  if (int(has_cron) + int(has_every) + int(has_watch) != 1) {
    errors.push_back(At(source, root, "cron", "give exactly one of cron and every (or watch, for a trigger)"));
  }
  if (has_watch && has("catch_up")) {
    errors.push_back(At(source, root, "catch_up",
                        "applies to cron and every; a trigger fires for the latest position of each moved ref"));
  }
  if (has_watch && has("tz")) errors.push_back(At(source, root, "tz", "applies to cron only"));
  if (!has_watch && has("poll")) errors.push_back(At(source, root, "poll", "applies to watch only"));
  if (has_watch && spec.poll_ms == 0) spec.poll_ms = kDefaultPollMs;
  if (has_watch && have_template) {
    for (const auto& w : spec.watch) {
      if (TemplateHasDuplicateInput(spec.job, w.url)) {
        errors.push_back(At(source, root, "template", "has more than one git input with url \"" +
                                                          w.url.substr(0, 80) + "\"; which to pin is ambiguous"));
      }
    }
  }
  if (has_every && have_tz && spec.tz != "UTC") {
    errors.push_back(At(source, *tz_node, "tz", "applies to cron only; an interval ticks in unix time"));
  }
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors) joined += (joined.empty() ? "" : "\n") + e;
    return InvalidArgumentError(joined);
  }
  return spec;
}

std::string EncodeSchedule(const ScheduleSpec& s) {
  std::string out = "name: " + nlohmann::json(s.name).dump() + "\n";
  if (s.is_trigger()) {
    nlohmann::json w = nlohmann::json::array();
    for (const auto& x : s.watch) w.push_back({{"url", x.url}, {"refs", x.refs}});
    out += "watch: " + w.dump() + "\n";
    out += "poll: " + FormatEvery(s.poll_ms) + "\n";
    out += "template: " + ManifestJson(s.job).dump() + "\n";
    return out;
  }
  if (s.every_ms > 0) {
    out += "every: " + FormatEvery(s.every_ms) + "\n";
  } else {
    out += "cron: " + nlohmann::json(s.cron).dump() + "\n";
    out += "tz: " + nlohmann::json(s.tz).dump() + "\n";
  }
  out += "catch_up: " + std::string(CatchUpName(s.catch_up)) + "\n";
  out += "template: " + ManifestJson(s.job).dump() + "\n";
  return out;
}

Result<ScheduleClock> ScheduleClock::Make(const ScheduleSpec& spec, const TimeZone& tz) {
  ScheduleClock c;
  if (spec.is_trigger()) {
    c.trigger_ = true;
    return c;
  }
  if (spec.every_ms > 0) {
    c.every_ms_ = spec.every_ms;
    return c;
  }
  if (tz.name() != spec.tz) {
    return InvalidArgumentError("zone " + tz.name() + " is not the schedule's zone " + spec.tz);
  }
  auto cron = ParseCron(spec.cron);
  if (!cron.ok()) return cron.status();
  c.cron_ = *cron;
  c.tz_ = tz;
  return c;
}

std::optional<int64_t> ScheduleClock::Next(int64_t after_ms) const {
  if (trigger_) return std::nullopt;
  if (every_ms_ > 0) {
    const int64_t k = after_ms >= 0 ? after_ms / every_ms_ : -((-after_ms + every_ms_ - 1) / every_ms_);
    return (k + 1) * every_ms_;
  }
  const int64_t after_s = after_ms >= 0 ? after_ms / 1000 : -((-after_ms + 999) / 1000);
  auto t = NextCronTick(cron_, tz_, after_s);
  if (!t) return std::nullopt;
  return *t * 1000;
}

DueTicks DueTicksAt(const ScheduleClock& clock, CatchUp rule, int64_t last_ms, int64_t now_ms,
                    size_t max_fires) {
  DueTicks d;
  d.after_ms = last_ms;
  const int64_t on_time_from = now_ms - kFireGraceMs;  // ticks > this are on time
  if (rule == CatchUp::kAll) {
    for (auto t = clock.Next(last_ms); t && *t <= now_ms && d.fire.size() < max_fires; t = clock.Next(*t)) {
      d.fire.push_back(*t);
      d.after_ms = *t;
    }
    if (d.fire.size() < max_fires) d.after_ms = std::max(last_ms, now_ms);
    return d;
  }
  // The missed ticks: in (last_ms, on_time_from]. Count them (up to a
  // bound; a count beyond it is "at least") and keep the newest.
  std::optional<int64_t> newest_missed;
  if (on_time_from > last_ms) {
    constexpr int64_t kCountCap = 100000;
    auto t = clock.Next(last_ms);
    for (; t && *t <= on_time_from && d.missed < kCountCap; t = clock.Next(*t)) {
      newest_missed = *t;
      ++d.missed;
    }
    if (t && *t <= on_time_from) {
      // A long outage of a frequent schedule: the newest is in the last day.
      for (auto u = clock.Next(std::max(*t, on_time_from - 86'400'000)); u && *u <= on_time_from;
           u = clock.Next(*u)) {
        newest_missed = *u;
      }
    }
  }
  if (newest_missed && rule == CatchUp::kOne) {
    d.fire.push_back(*newest_missed);
    d.missed -= 1;
  }
  for (auto t = clock.Next(std::max(last_ms, on_time_from)); t && *t <= now_ms; t = clock.Next(*t)) {
    d.fire.push_back(*t);
  }
  d.after_ms = std::max(last_ms, now_ms);
  return d;
}

std::string TickNonce(int64_t tick_ms) { return FormatRfc3339Millis(tick_ms); }

Manifest FiredManifest(const ScheduleSpec& spec, int64_t tick_ms) {
  Manifest m = spec.job;
  nlohmann::json inputs = m.inputs ? *m.inputs : nlohmann::json::array();
  inputs.push_back({{"kind", kInputKind}, {"schedule", spec.name}, {"nonce", TickNonce(tick_ms)}});
  m.inputs = inputs;
  return m;
}

}  // namespace gatos
