#include "gatos/model/trigger.h"

#include <set>

#include "gatos/model/canonical_json.h"
#include "gatos/model/git_input.h"

namespace gatos {
namespace {

constexpr char kScheduleInputKind[] = "schedule";

std::string Quoted(std::string_view s) { return "\"" + std::string(s.substr(0, 80)) + "\""; }

// A url as an error shows it: without any user or password it carries.
std::string ShownUrl(std::string_view url) { return Quoted(GitUrlKey(url)); }

bool IsUrlInput(const nlohmann::json& in, std::string_view url) {
  return IsGitInputJson(in) && in.contains("url") && in["url"].is_string() &&
         in["url"].get<std::string>() == url;
}

}  // namespace

std::string RefPatternProblem(std::string_view pattern) {
  if (pattern == "HEAD") return "";
  if (!IsValidUtf8(pattern)) return "a ref pattern is not UTF-8";
  if (pattern.rfind("refs/", 0) != 0) {
    return Quoted(pattern) +
           " is not a full ref name; write refs/heads/main, refs/heads/* or refs/tags/v* (or HEAD)";
  }
  const size_t star = pattern.find('*');
  if (star != std::string_view::npos && pattern.find('*', star + 1) != std::string_view::npos) {
    return Quoted(pattern) + " has more than one '*'";
  }
  std::string as_ref(pattern);
  if (star != std::string_view::npos) as_ref[star] = 'x';
  if (std::string p = GitRefProblem(as_ref); !p.empty()) {
    return "ref pattern " + Quoted(pattern) + ": " + p;
  }
  if (as_ref.size() <= 5 || as_ref.find('/', 5) == std::string::npos) {
    return Quoted(pattern) + " names no ref under refs/ (e.g. refs/heads/main)";
  }
  return "";
}

bool RefPatternMatches(std::string_view pattern, std::string_view ref) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == ref;
  const std::string_view head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return ref.size() >= head.size() + tail.size() && ref.substr(0, head.size()) == head &&
         ref.substr(ref.size() - tail.size()) == tail;
}

bool WatchMatches(const WatchSpec& w, std::string_view ref) {
  for (const auto& p : w.refs) {
    if (RefPatternMatches(p, ref)) return true;
  }
  return false;
}

std::string WatchListProblem(const std::vector<WatchSpec>& watches) {
  std::vector<std::string> problems;
  if (watches.empty()) problems.push_back("watch: give at least one repository to watch");
  if (watches.size() > kMaxWatches) {
    problems.push_back("watch: " + std::to_string(watches.size()) +
                       " repositories, over the limit of " + std::to_string(kMaxWatches));
  }
  std::set<std::string> urls;
  for (const auto& w : watches) {
    if (!IsValidUtf8(w.url)) {
      problems.push_back("a watch url is not UTF-8");
      continue;
    }
    if (std::string p = GitUrlProblem(w.url); !p.empty()) {
      problems.push_back("watch url " + ShownUrl(w.url) + ": " + p +
                         (p.find("credentials") != std::string::npos
                              ? " (for a trigger, gatosd serve --input-credentials FILE)"
                              : ""));
    }
    if (!urls.insert(w.url).second)
      problems.push_back("watch url " + ShownUrl(w.url) + " is given twice");
    if (w.refs.empty()) {
      problems.push_back("watch url " + ShownUrl(w.url) +
                         " has no ref pattern (give --refs PATTERN after --watch URL)");
    }
    if (w.refs.size() > kMaxRefPatterns) {
      problems.push_back("watch url " + ShownUrl(w.url) + ": more than " +
                         std::to_string(kMaxRefPatterns) + " ref patterns");
    }
    for (const auto& r : w.refs) {
      if (std::string p = RefPatternProblem(r); !p.empty()) problems.push_back(p);
    }
  }
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "\n") + p;
  return out;
}

Result<std::map<std::string, std::string>> ParseLsRemote(std::string_view out) {
  if (out.size() > kMaxLsRemoteBytes)
    return InvalidArgumentError("git ls-remote printed more than 64 MiB");
  std::map<std::string, std::string> refs, peeled;
  size_t line_no = 0;
  while (!out.empty()) {
    ++line_no;
    const size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    const std::string_view id = tab == std::string_view::npos ? line : line.substr(0, tab);
    if (tab == std::string_view::npos || !IsGitCommitId(id)) {
      return InvalidArgumentError("git ls-remote output line " + std::to_string(line_no) +
                                  " is not an object id, a tab and a ref name");
    }
    std::string_view ref = line.substr(tab + 1);
    bool is_peeled = false;
    if (ref.size() > 3 && ref.substr(ref.size() - 3) == "^{}") {
      ref.remove_suffix(3);
      is_peeled = true;
    }
    if (ref != "HEAD" && !GitRefProblem(ref).empty()) {
      return InvalidArgumentError("git ls-remote output line " + std::to_string(line_no) +
                                  " has an invalid ref name");
    }
    (is_peeled ? peeled : refs)[std::string(ref)] = std::string(id);
  }
  for (auto& [ref, id] : peeled) refs[ref] = id;  // an annotated tag: the commit it names
  return refs;
}

std::map<std::string, std::string> WatchedRefs(const WatchSpec& w,
                                               const std::map<std::string, std::string>& all) {
  std::map<std::string, std::string> out;
  for (const auto& [ref, id] : all) {
    if (out.size() >= kMaxWatchedRefs) break;
    // A ref a job input cannot name (git allows any bytes; a manifest holds
    // UTF-8 ref names within its limits) is not watched.
    if (!IsValidUtf8(ref) || (ref != "HEAD" && !GitRefProblem(ref).empty())) continue;
    if (WatchMatches(w, ref)) out.emplace(ref, id);
  }
  return out;
}

std::string TriggerNonce(std::string_view ref, std::string_view commit) {
  return std::string(ref) + "@" + std::string(commit);
}

Manifest TriggeredManifest(const Manifest& job_template, std::string_view schedule,
                           std::string_view url, std::string_view ref, std::string_view commit) {
  Manifest m = job_template;
  nlohmann::json inputs = m.inputs ? *m.inputs : nlohmann::json::array();
  bool pinned = false;
  for (auto& in : inputs) {
    if (pinned || !IsUrlInput(in, url)) continue;
    in["ref"] = std::string(ref);
    in["commit"] = std::string(commit);
    pinned = true;
  }
  if (!pinned) {
    inputs.push_back({{"kind", kGitInputKind},
                      {"url", std::string(url)},
                      {"ref", std::string(ref)},
                      {"commit", std::string(commit)}});
  }
  inputs.push_back({{"kind", kScheduleInputKind},
                    {"schedule", std::string(schedule)},
                    {"nonce", TriggerNonce(ref, commit)}});
  m.inputs = inputs;
  return m;
}

bool TemplateHasDuplicateInput(const Manifest& job_template, std::string_view url) {
  if (!job_template.inputs || !job_template.inputs->is_array()) return false;
  int n = 0;
  for (const auto& in : *job_template.inputs) n += IsUrlInput(in, url) ? 1 : 0;
  return n > 1;
}

std::string EncodeWatchPositions(const WatchPositions& p) {
  nlohmann::json refs = nlohmann::json::object();
  for (const auto& [url, m] : p.refs) refs[url] = m;
  return nlohmann::json{{"schedule_commit", p.schedule_commit}, {"refs", refs}}.dump() + "\n";
}

Result<WatchPositions> ParseWatchPositions(std::string_view text) {
  auto bad = [](const std::string& m) { return InvalidArgumentError("positions.json: " + m); };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("is not a JSON object");
  if (j.size() != 2 || !j.contains("schedule_commit") || !j.contains("refs")) {
    return bad("expected exactly schedule_commit and refs");
  }
  WatchPositions p;
  if (!j["schedule_commit"].is_string() ||
      !IsGitCommitId(j["schedule_commit"].get<std::string>()) ||
      j["schedule_commit"].get<std::string>().size() != 40) {
    return bad("schedule_commit is not a commit id");
  }
  p.schedule_commit = j["schedule_commit"].get<std::string>();
  const auto& refs = j["refs"];
  if (!refs.is_object() || refs.size() > kMaxWatches)
    return bad("refs is not an object of at most 16 urls");
  for (const auto& [url, m] : refs.items()) {
    if (!GitUrlProblem(url).empty()) return bad("a url is not a git input url");
    if (!m.is_object() || m.size() > kMaxWatchedRefs)
      return bad("refs of a url are not an object of refs");
    auto& out = p.refs[url];
    for (const auto& [ref, id] : m.items()) {
      if (ref != "HEAD" && !GitRefProblem(ref).empty()) return bad("a ref name is not valid");
      if (!id.is_string() || !IsGitCommitId(id.get<std::string>()))
        return bad("a position is not an object id");
      out[ref] = id.get<std::string>();
    }
  }
  return p;
}

}  // namespace gatos
