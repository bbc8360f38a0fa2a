#include "gatos/model/secret_groups.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "gatos/model/blake3.h"

namespace gatos {
namespace {

using nlohmann::json;

// Locations without a time sort after those with one: an unknown time is
// not "older".
bool Older(const FindingLocation& a, const FindingLocation& b) {
  if (a.commit_rank && b.commit_rank && *a.commit_rank != *b.commit_rank) {
    return *a.commit_rank < *b.commit_rank;
  }
  const bool ta = a.commit_time.has_value();
  const bool tb = b.commit_time.has_value();
  if (ta != tb) return ta;
  if (ta && *a.commit_time != *b.commit_time) return *a.commit_time < *b.commit_time;
  return std::tie(a.path, a.line, a.start, a.blob, a.commit) <
         std::tie(b.path, b.line, b.start, b.blob, b.commit);
}

Status Bad(const std::string& what) { return InvalidArgumentError(what); }

Status ReadString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    return Bad(std::string("`") + key + "` missing or not a string");
  }
  *out = it->get<std::string>();
  return OkStatus();
}

Status ReadUint(const json& j, const char* key, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    return Bad(std::string("`") + key + "` missing or not a non-negative integer");
  }
  *out = it->get<uint64_t>();
  return OkStatus();
}

}  // namespace

std::vector<std::string> SecretGroup::paths() const {
  std::set<std::string> s;
  for (const FindingLocation& l : locations) s.insert(l.path);
  return {s.begin(), s.end()};
}

std::string SecretId(std::string_view rule, std::string_view fingerprint) {
  Blake3Hasher h;
  h.Update("gatos-secret/v1");
  h.Update(std::string_view("\0", 1));
  h.Update(rule);
  h.Update(std::string_view("\0", 1));
  h.Update(fingerprint);
  return DigestHex(h.Finalize());
}

std::vector<SecretGroup> GroupBySecret(std::vector<FindingLocation> locations) {
  std::map<std::pair<std::string, std::string>, SecretGroup> by_key;
  for (FindingLocation& l : locations) {
    SecretGroup& g = by_key[{l.rule, l.fingerprint}];
    if (g.locations.empty()) {
      g.rule = l.rule;
      g.fingerprint = l.fingerprint;
      g.id = SecretId(l.rule, l.fingerprint);
    }
    if (l.at_tip.has_value()) {
      g.at_tip = g.at_tip.value_or(false) || *l.at_tip;
    }
    g.locations.push_back(std::move(l));
  }
  std::vector<SecretGroup> out;
  out.reserve(by_key.size());
  for (auto& [key, g] : by_key) {
    // Any location whose presence is unknown makes "not at tip" unknown.
    const bool unknown = std::any_of(g.locations.begin(), g.locations.end(),
                                     [](const FindingLocation& l) { return !l.at_tip; });
    if (unknown && g.at_tip == false) g.at_tip.reset();
    std::sort(g.locations.begin(), g.locations.end(), Older);
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const SecretGroup& a, const SecretGroup& b) {
    if (Older(a.first(), b.first())) return true;
    if (Older(b.first(), a.first())) return false;
    return std::tie(a.rule, a.fingerprint) < std::tie(b.rule, b.fingerprint);
  });
  return out;
}

Result<FindingLocation> ParseFindingLine(std::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("not JSON");
  if (!j.is_object()) return Bad("not a JSON object");
  FindingLocation l;
  GATOS_RETURN_IF_ERROR(ReadString(j, "rule", &l.rule));
  GATOS_RETURN_IF_ERROR(ReadString(j, "fingerprint", &l.fingerprint));
  GATOS_RETURN_IF_ERROR(ReadString(j, "blob", &l.blob));
  GATOS_RETURN_IF_ERROR(ReadString(j, "commit", &l.commit));
  GATOS_RETURN_IF_ERROR(ReadString(j, "path", &l.path));
  GATOS_RETURN_IF_ERROR(ReadUint(j, "line", &l.line));
  GATOS_RETURN_IF_ERROR(ReadUint(j, "start", &l.start));
  GATOS_RETURN_IF_ERROR(ReadUint(j, "end", &l.end));
  if (auto it = j.find("path_encoding"); it != j.end()) {
    l.path_percent = it->is_string() && it->get<std::string>() == "percent";
  }
  if (auto it = j.find("commit_time"); it != j.end()) {
    if (!it->is_number_integer()) return Bad("`commit_time` is not an integer");
    l.commit_time = it->get<int64_t>();
  }
  if (auto it = j.find("commit_rank"); it != j.end()) {
    if (!it->is_number_integer()) return Bad("`commit_rank` is not an integer");
    l.commit_rank = it->get<int64_t>();
  }
  if (auto it = j.find("at_tip"); it != j.end()) {
    if (!it->is_boolean()) return Bad("`at_tip` is not true or false");
    l.at_tip = it->get<bool>();
  }
  return l;
}

Result<std::vector<FindingLocation>> ParseFindingsJsonl(std::string_view text) {
  std::vector<FindingLocation> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty()) continue;
    Result<FindingLocation> l = ParseFindingLine(line);
    if (!l.ok()) return Bad("line " + std::to_string(line_no) + ": " + l.status().message());
    out.push_back(std::move(*l));
  }
  return out;
}

json LocationJson(const FindingLocation& l) {
  json j = {
      {"rule", l.rule},       {"fingerprint", l.fingerprint}, {"blob", l.blob},
      {"commit", l.commit},   {"path", l.path},               {"line", l.line},
      {"start", l.start},     {"end", l.end},                 {"secret", SecretId(l.rule, l.fingerprint)},
  };
  if (l.path_percent) j["path_encoding"] = "percent";
  if (l.commit_time) j["commit_time"] = *l.commit_time;
  if (l.commit_rank) j["commit_rank"] = *l.commit_rank;
  if (l.at_tip) j["at_tip"] = *l.at_tip;
  return j;
}

json GroupJson(const SecretGroup& g, bool with_locations) {
  json j = {
      {"secret", g.id},
      {"rule", g.rule},
      {"fingerprint", g.fingerprint},
      {"location_count", g.locations.size()},
      {"first_commit", g.first().commit},
      {"last_commit", g.last().commit},
      {"at_tip", g.at_tip ? json(*g.at_tip) : json(nullptr)},
      {"paths", g.paths()},
  };
  if (g.first().commit_time) j["first_time"] = *g.first().commit_time;
  if (g.last().commit_time) j["last_time"] = *g.last().commit_time;
  if (with_locations) {
    json all = json::array();
    for (const FindingLocation& l : g.locations) all.push_back(LocationJson(l));
    j["locations"] = std::move(all);
  }
  return j;
}

}  // namespace gatos
