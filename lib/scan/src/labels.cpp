#include "gatos/scan/labels.h"

#include <git2.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "git/git_util.h"

namespace gatos::scan {
namespace {

using nlohmann::json;

constexpr size_t kMaxLabelsBytes = 64 << 20;

bool ValidCorpus(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

Status Bad(const std::string& where, const std::string& what) {
  return InvalidArgumentError(where + ": " + what);
}

std::string Percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
  return buf;
}

struct RepoFree {
  void operator()(git_repository* r) const { git_repository_free(r); }
};

}  // namespace

Result<std::vector<Label>> ParseLabels(std::string_view text, const std::string& origin) {
  if (text.size() > kMaxLabelsBytes) {
    return InvalidArgumentError(origin + ": larger than 64 MiB; split the labels");
  }
  std::vector<Label> out;
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    const std::string where = origin + ":" + std::to_string(line_no);
    if (line.empty() || line[0] == '#') continue;
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Bad(where, "not a JSON object");
    Label l;
    l.origin = where;
    bool has_label = false;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (k == "label") {
        if (!it->is_boolean()) return Bad(where, "`label` must be true or false");
        l.truth = it->get<bool>();
        has_label = true;
        continue;
      }
      std::string* dst = k == "corpus"     ? &l.corpus
                         : k == "rule"     ? &l.rule
                         : k == "match_b3" ? &l.match_b3
                         : k == "path"     ? &l.path
                         : k == "commit"   ? &l.commit
                         : k == "reason"   ? &l.reason
                                           : nullptr;
      if (dst == nullptr) {
        return Bad(where, "unknown key `" + k +
                              "` (expected corpus, rule, match_b3, label, path, commit, reason)");
      }
      if (!it->is_string()) return Bad(where, "`" + k + "` must be a string");
      *dst = it->get<std::string>();
    }
    if (!ValidCorpus(l.corpus)) return Bad(where, "`corpus` must be 1-100 characters of [a-z0-9._-]");
    if (l.rule.empty()) return Bad(where, "`rule` is missing");
    if (!IsLowerHex(l.match_b3, 64)) return Bad(where, "`match_b3` must be 64 lowercase hex digits");
    if (!has_label) return Bad(where, "`label` is missing (true: a real secret, false: not one)");
    if (!seen.insert({l.corpus, l.rule, l.match_b3}).second) {
      return Bad(where, "this finding (corpus, rule, match_b3) is labelled twice");
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<Label>> LoadLabelsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read labels file " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return ParseLabels(s.str(), path);
}

std::string LabelJson(const Label& l) {
  json j = {{"corpus", l.corpus}, {"rule", l.rule},     {"match_b3", l.match_b3},
            {"label", l.truth},   {"path", l.path},     {"commit", l.commit},
            {"reason", l.reason}};
  Result<std::string> s = CanonicalJson(j);
  return s.ok() ? *s : j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::vector<HashedFinding>> HashMatches(const std::string& git_dir,
                                               const std::vector<FindingLocation>& findings) {
  git::EnsureInit();
  git_repository* raw = nullptr;
  if (int rc = git_repository_open_bare(&raw, git_dir.c_str()); rc != 0) {
    return git::GitError(rc, "opening " + git_dir);
  }
  std::unique_ptr<git_repository, RepoFree> repo(raw);
  git_odb* odb_raw = nullptr;
  if (int rc = git_repository_odb(&odb_raw, repo.get()); rc != 0) {
    return git::GitError(rc, "opening the objects of " + git_dir);
  }
  git::OdbPtr odb(odb_raw);
  std::vector<HashedFinding> out;
  out.reserve(findings.size());
  for (const FindingLocation& f : findings) {
    GATOS_ASSIGN_OR_RETURN(git_oid id, git::ParseOid(f.blob));
    git_odb_object* obj_raw = nullptr;
    if (int rc = git_odb_read(&obj_raw, odb.get(), &id); rc != 0) {
      return git::GitError(rc, "reading blob " + f.blob + " of a finding in " + git_dir);
    }
    std::unique_ptr<git_odb_object, decltype(&git_odb_object_free)> obj(obj_raw,
                                                                         &git_odb_object_free);
    const size_t size = git_odb_object_size(obj.get());
    if (f.start > f.end || f.end > size) {
      return InvalidArgumentError("finding span [" + std::to_string(f.start) + ", " +
                                  std::to_string(f.end) + ") is outside blob " + f.blob + " (" +
                                  std::to_string(size) + " bytes)");
    }
    const std::string_view bytes(static_cast<const char*>(git_odb_object_data(obj.get())) + f.start,
                                 f.end - f.start);
    out.push_back({f, DigestHex(Blake3(bytes))});
  }
  return out;
}

double LabelScore::precision() const {
  const size_t labelled = true_findings + false_findings;
  return labelled == 0 ? 1.0 : static_cast<double>(true_findings) / labelled;
}

double LabelScore::secret_precision() const {
  const size_t labelled = true_secrets + false_secrets;
  return labelled == 0 ? 1.0 : static_cast<double>(true_secrets) / labelled;
}

LabelReport EvaluateLabels(const std::string& corpus, const std::vector<Label>& labels,
                           const std::vector<HashedFinding>& findings) {
  LabelReport r;
  r.corpus = corpus;
  std::map<std::pair<std::string, std::string>, const Label*> by_key;
  for (const Label& l : labels) {
    if (l.corpus != corpus) continue;
    by_key[{l.rule, l.match_b3}] = &l;
    r.true_labels += l.truth ? 1 : 0;
  }
  std::set<std::pair<std::string, std::string>> secrets;  // distinct (rule, match_b3) found
  for (const HashedFinding& f : findings) {
    const std::pair<std::string, std::string> key{f.location.rule, f.match_b3};
    const bool first = secrets.insert(key).second;
    LabelScore& rule = r.by_rule[f.location.rule];
    auto it = by_key.find(key);
    for (LabelScore* s : {&rule, &r.total}) {
      if (it == by_key.end()) {
        ++s->unlabelled_findings;
        s->unlabelled_secrets += first ? 1 : 0;
      } else if (it->second->truth) {
        ++s->true_findings;
        s->true_secrets += first ? 1 : 0;
      } else {
        ++s->false_findings;
        s->false_secrets += first ? 1 : 0;
      }
    }
    if (!first) continue;
    if (it == by_key.end()) {
      r.unlabelled.push_back(f);
    } else if (!it->second->truth) {
      r.found_false.push_back(*it->second);
    }
  }
  for (const auto& [key, label] : by_key) {
    if (label->truth && !secrets.count(key)) r.missing_true.push_back(*label);
  }
  return r;
}

std::string FormatLabelReport(const LabelReport& r) {
  std::ostringstream o;
  o << "corpus " << r.corpus << ": precision " << Percent(r.total.precision()) << " by finding ("
    << r.total.true_findings << " true, " << r.total.false_findings << " false, "
    << r.total.unlabelled_findings << " unlabelled), " << Percent(r.total.secret_precision())
    << " by secret (" << r.total.true_secrets << " true, " << r.total.false_secrets << " false, "
    << r.total.unlabelled_secrets << " unlabelled); true secrets found: "
    << r.true_labels - r.missing_true.size() << " of " << r.true_labels << "\n";
  for (const auto& [rule, s] : r.by_rule) {
    o << "  " << rule << ": " << Percent(s.precision()) << " by finding (" << s.true_findings
      << " true, " << s.false_findings << " false, " << s.unlabelled_findings << " unlabelled), "
      << Percent(s.secret_precision()) << " by secret (" << s.true_secrets << "/"
      << s.true_secrets + s.false_secrets << ")\n";
  }
  for (const Label& l : r.missing_true) {
    o << "  MISSING true " << l.rule << " " << l.path << " " << l.commit.substr(0, 12) << " "
      << l.match_b3.substr(0, 16) << " (" << l.origin << ")\n";
  }
  for (const Label& l : r.found_false) {
    o << "  FALSE " << l.rule << " " << l.path << " " << l.commit.substr(0, 12) << " "
      << l.match_b3.substr(0, 16) << ": " << l.reason << " (" << l.origin << ")\n";
  }
  for (const HashedFinding& f : r.unlabelled) {
    o << "  UNLABELLED " << f.location.rule << " " << f.location.path << ":" << f.location.line
      << " " << f.location.commit.substr(0, 12) << " " << f.match_b3.substr(0, 16) << "\n";
  }
  return o.str();
}

std::string LabelStubs(const LabelReport& r) {
  std::string out;
  for (const HashedFinding& f : r.unlabelled) {
    Label l;
    l.corpus = r.corpus;
    l.rule = f.location.rule;
    l.match_b3 = f.match_b3;
    l.path = f.location.path;
    l.commit = f.location.commit;
    l.reason = "unlabelled";
    out += LabelJson(l) + "\n";
  }
  return out;
}

}  // namespace gatos::scan
