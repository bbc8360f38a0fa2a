// gatos batch submit | batch status
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "commands.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"
#include "ledger_client.h"
#include "progress_bar.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

constexpr size_t kMaxRepos = 100000;

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces every "{{repo}}" in the template text. The repository is inserted
// as a YAML double-quoted scalar's content, so quotes and backslashes in it
// cannot change the manifest's structure.
std::string Render(const std::string& tmpl, const std::string& repo) {
  std::string escaped;
  for (char c : repo) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  std::string out;
  size_t pos = 0, hit;
  while ((hit = tmpl.find("{{repo}}", pos)) != std::string::npos) {
    out.append(tmpl, pos, hit - pos);
    out += escaped;
    pos = hit + 8;
  }
  out.append(tmpl, pos, std::string::npos);
  return out;
}

Result<json> ReadBatch(const std::string& target, const std::string& batch_hex) {
  if (ClassifyLedger(target) == LedgerKind::kDirectory) {
    GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(target));
    GATOS_ASSIGN_OR_RETURN(std::string commit, ledger->ResolveRef(kBatchPrefix + batch_hex));
    if (commit.empty()) return NotFoundError("no batch blake3:" + batch_hex + " in " + target);
    GATOS_ASSIGN_OR_RETURN(std::string text,
                           ledger->ReadFileAtCommit(commit, "batch.json", 64 << 20));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return DataLossError("batch.json of batch " + batch_hex + " is not JSON");
    return j;
  }
  return InvalidArgumentError("--ledger " + target +
                              ": batches are read from the ledger directory (a clone works)");
}

std::string Bar(size_t done, size_t total, int width) {
  size_t filled = total ? done * static_cast<size_t>(width) / total : 0;
  return "[" + std::string(filled, '#') + std::string(static_cast<size_t>(width) - filled, '.') +
         "]";
}

// "state<TAB>repo", and a running job's progress after it.
std::string RowText(const json& r) {
  std::string out = r["state"].get<std::string>() + "\t" + r["repo"].get<std::string>();
  if (r.contains("progress")) out += "\t" + r["progress"].value("text", "");
  return out;
}

// A relative local path in the repository list, made absolute (the worker
// cannot know the submitter's directory; a git input's url must be absolute).
// Anything else is returned as it is.
std::string AbsoluteIfLocal(const std::string& repo) {
  if (repo.empty() || repo[0] == '/' || repo.find("://") != std::string::npos) return repo;
  std::error_code ec;
  if (!std::filesystem::exists(repo, ec)) return repo;  // scp-like host:path, or a typo
  std::filesystem::path p = std::filesystem::canonical(repo, ec);
  return ec ? repo : p.string();
}

// The commit `ref` names in the repository at `url`, by `git ls-remote`
// (the submitter's own git and credentials; never a prompt). "" when it
// cannot be resolved from here: the worker then resolves the ref at run
// time. `why` says what went wrong.
std::string LsRemote(const std::string& url, const std::string& ref, std::string* why) {
  SpawnOptions so;
  so.env = Environment::CurrentWith({{"GIT_TERMINAL_PROMPT", "0"},
                                     {"GIT_ASKPASS", "/bin/false"},
                                     {"SSH_ASKPASS", "/bin/false"},
                                     {"LC_ALL", "C"}});
  so.new_process_group = true;
  auto r = RunAndCapture({"git", "ls-remote", "--", url, ref}, so, {}, std::chrono::seconds(30));
  if (!r.ok()) {
    *why = r.status().message();
    return "";
  }
  if (r->timed_out) {
    *why = "git ls-remote took longer than 30 s";
    return "";
  }
  if (!r->status.ok()) {
    std::string err = r->err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    if (size_t nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);
    *why = "git ls-remote failed: " + TruncateUtf8(err, 200);
    return "";
  }
  // git's order for a short name: tags before branches; an annotated tag's
  // commit is its peeled line ("^{}").
  std::map<std::string, std::string> refs;
  std::istringstream lines(r->out);
  std::string line;
  while (std::getline(lines, line)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    refs[line.substr(tab + 1)] = line.substr(0, tab);
  }
  std::vector<std::string> candidates;
  if (ref == "HEAD" || ref.rfind("refs/", 0) == 0) {
    candidates = {ref + "^{}", ref};
  } else {
    candidates = {"refs/tags/" + ref + "^{}", "refs/tags/" + ref, "refs/heads/" + ref};
  }
  for (const std::string& c : candidates) {
    auto it = refs.find(c);
    if (it != refs.end() && IsGitCommitId(it->second)) return it->second;
  }
  *why = "ref " + ref + " not found by git ls-remote";
  return "";
}

// Pins every git input of `m` that names a ref but no commit to the commit
// the ref names now, so that the job id names exactly what is read: an
// unchanged repository is the same job, a new commit a new job. Returns a
// line per input saying what was done.
std::vector<std::string> PinGitInputs(Manifest* m) {
  std::vector<std::string> notes;
  if (!m->inputs || !m->inputs->is_array()) return notes;
  for (size_t i = 0; i < m->inputs->size(); ++i) {
    json& in = (*m->inputs)[i];
    if (!IsGitInputJson(in) || in.contains("commit") || !in.contains("ref")) continue;
    if (!in["url"].is_string() || !in["ref"].is_string()) continue;
    const std::string url = in["url"], ref = in["ref"];
    std::string why;
    std::string commit = LsRemote(url, ref, &why);
    if (commit.empty()) {
      notes.push_back("input " + std::to_string(i) + " " + GitUrlKey(url) + ": not pinned (" + why +
                      "); the worker resolves " + ref + " when the job runs");
      continue;
    }
    in["commit"] = commit;
    notes.push_back("input " + std::to_string(i) + " " + GitUrlKey(url) + ": pinned " + ref +
                    " at " + commit);
  }
  return notes;
}

}  // namespace

int RunBatchSubmit(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"template"},
                          {"repos"},
                          {"ledger"},
                          {"sign-key"},
                          {"json", 0, false},
                          {"no-pin", 0, false},
                          {"priority"},
                          {"leader-wait"},
                          {"nonce"}})) {
    return UsageError("batch submit", flags.error());
  }
  if (std::string e = ApplyLeaderWaitFlag(flags.Get("leader-wait")); !e.empty()) return UsageError("batch submit", e);
  int64_t priority = 5;
  std::string priority_error;
  if (!PriorityFlag(flags.Get("priority"), &priority, &priority_error)) {
    return UsageError("batch submit", priority_error);
  }
  if (flags.help()) {
    std::cout
        << "usage: gatos batch submit --template T.yaml --repos FILE --ledger "
           "DIR|nats://...|GIT-URL\n"
           "                          [--sign-key KEY] [--no-pin] [--nonce TEXT] [--priority N] [--json]\n\n"
           "--priority N: every job's Priority trailer, 0-9 (default 5; docs/scheduling.md).\n"
        << kLeaderWaitHelp
        << "Creates one job per repository listed in FILE (one per line; blank lines and\n"
           "'#' comments ignored): every {{repo}} in the template is replaced by the\n"
           "repository, and each job is submitted as 'gatos submit' does. Then a batch\n"
           "record (batch.json: template hash, repo -> job) is written to\n"
           "refs/gatos/batches/<batch-id> when --ledger is a directory. The batch id is\n"
           "the BLAKE3 of that record, so submitting the same batch again is a no-op;\n"
           "one repository's failure never blocks the others. Prints the batch id.\n\n"
           "A relative local path in FILE is made absolute. The template should\n"
           "declare the repository as a git input (docs/inputs.md), e.g.\n"
           "  inputs: [{kind: git, url: \"{{repo}}\", ref: HEAD}]\n"
           "so the worker fetches it and the sandboxed job reads it without network\n"
           "(examples/templates/scan.yaml). Each git input with a ref and no commit is pinned to\n"
           "the commit the ref names now (git ls-remote, with your git credentials),\n"
           "so the job id names exactly what is read: submitting again an unchanged\n"
           "repository is the same job, a new commit a new job. When it cannot be\n"
           "resolved from here, the worker resolves the ref at run time; each input's\n"
           "outcome is said on stderr. --no-pin leaves refs to the worker. --nonce TEXT\n"
           "sets every git input's nonce: a scheduled re-run (e.g. --nonce $(date +%F))\n"
           "is a new set of jobs even when nothing was pinned.\n";
    return kExitOk;
  }
  auto tmpl_path = flags.Get("template");
  auto repos_path = flags.Get("repos");
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!tmpl_path || !repos_path || !target) {
    return UsageError("batch submit", "--template, --repos and --ledger are required");
  }
  auto tmpl = ReadText(*tmpl_path);
  if (!tmpl.ok()) return ReportError(tmpl.status().message(), kExitUsage);
  if (tmpl->find("{{repo}}") == std::string::npos) {
    return ReportError(*tmpl_path + ": the template has no {{repo}} placeholder", kExitUsage);
  }
  auto list = ReadText(*repos_path);
  if (!list.ok()) return ReportError(list.status().message(), kExitUsage);
  std::vector<std::string> repos;
  std::istringstream in(*list);
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    repos.push_back(AbsoluteIfLocal(line.substr(start)));
  }
  std::sort(repos.begin(), repos.end());
  repos.erase(std::unique(repos.begin(), repos.end()), repos.end());
  if (repos.empty()) return ReportError(*repos_path + ": no repositories listed", kExitUsage);
  if (repos.size() > kMaxRepos)
    return ReportError(*repos_path + ": more than 100000 repositories", kExitUsage);
  std::optional<Ed25519PrivateKey> key;
  if (auto k = flags.Get("sign-key")) {
    auto loaded = ReadPrivateKeyFile(*k);
    if (!loaded.ok()) return ReportError(loaded.status().message(), kExitUsage);
    key = std::move(*loaded);
    UseNatsKey(*key);
  }
  json jobs = json::array();
  int failures = 0;
  bool warned_no_input = false;
  ProgressBar bar("submitting jobs");  // on a terminal only
  for (size_t i = 0; i < repos.size(); ++i) {
    std::string bytes = Render(*tmpl, repos[i]);
    auto m = ParseManifest(bytes, "template for " + repos[i], ManifestFormat::kYaml);
    if (!m.ok()) {
      std::cerr << "gatos batch: " << repos[i] << ": " << m.status().message() << "\n";
      ++failures;
      jobs.push_back({{"repo", repos[i]}, {"job", nullptr}, {"error", m.status().message()}});
      continue;
    }
    auto git_inputs = GitInputs(*m);
    if (git_inputs.ok() && git_inputs->empty() && !warned_no_input) {
      warned_no_input = true;
      std::cerr
          << "gatos batch: note: the template declares no git input; a sandboxed job cannot read a "
             "repository path it is only given as an argument. Declare it: inputs: [{kind: git, "
             "url: \"{{repo}}\", ref: HEAD}] (docs/inputs.md)\n";
    }
    if (git_inputs.ok() && !git_inputs->empty()) {
      bool changed = false;
      if (auto nonce = flags.Get("nonce")) {
        for (auto& in : *m->inputs) {
          if (IsGitInputJson(in)) in["nonce"] = *nonce;
        }
        changed = true;
      }
      if (!flags.Has("no-pin")) {
        std::vector<std::string> notes = PinGitInputs(&*m);
        for (const std::string& n : notes) std::cerr << "gatos batch: " << n << "\n";
        changed |= std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
          return n.find(": pinned ") != std::string::npos;
        });
      }
      if (changed) {
        // The pinned manifest, as its normalized JSON (YAML reads it too).
        bytes = ManifestJson(*m).dump(2) + "\n";
        auto again = ParseManifest(bytes, "pinned manifest for " + repos[i], ManifestFormat::kYaml);
        if (!again.ok()) {
          std::cerr << "gatos batch: " << repos[i] << ": " << again.status().message() << "\n";
          ++failures;
          jobs.push_back(
              {{"repo", repos[i]}, {"job", nullptr}, {"error", again.status().message()}});
          continue;
        }
        m = std::move(again);
      }
    }
    std::string hex = JobIdHex(*m);
    SubmitOutcome out;
    int rc =
        SubmitBytes(*target, bytes, hex, "batch job for " + repos[i], key ? &*key : nullptr, &out,
                    30000, priority);
    if (rc != kExitOk) {
      ++failures;
      jobs.push_back(
          {{"repo", repos[i]}, {"job", "blake3:" + hex}, {"error", "submission failed"}});
      continue;
    }
    jobs.push_back({{"repo", repos[i]}, {"job", "blake3:" + hex}});
    bar.Update(i + 1, repos.size());
  }
  bar.Done();
  json record = {{"version", 1}, {"template", Blake3Tagged(*tmpl)}, {"jobs", jobs}};
  auto canonical = CanonicalJson(record);
  if (!canonical.ok()) return ReportError(canonical.status().message(), kExitFailure);
  std::string batch_hex = Blake3Tagged(*canonical).substr(7);
  bool existing = false;
  if (ClassifyLedger(*target) == LedgerKind::kDirectory) {
    auto reply = LedgerCall(*target, rpc::kLocalBatch, *canonical, 30000);
    if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
    if (!reply->value("ok", false))
      return ReportError(reply->value("message", "batch record refused"), kExitFailure);
    existing = reply->value("existing", false);
  } else {
    std::cerr
        << "gatos batch: note: the batch record is kept in the ledger only when --ledger is its "
           "directory;\n"
           "the jobs were submitted, and 'gatos batch status' needs the directory (or a clone)\n";
  }
  if (flags.Has("json")) {
    std::cout
        << json{{"batch", "blake3:" + batch_hex}, {"existing", existing}, {"jobs", jobs}}.dump()
        << "\n";
  } else {
    std::cout << "blake3:" << batch_hex << "\n";
    if (existing) std::cerr << "note: this batch already existed; nothing new was queued\n";
  }
  return failures == 0 ? kExitOk : kExitFailure;
}

int RunBatchStatus(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"nats"}, {"json", 0, false}, {"wait", 0, false}})) {
    return UsageError("batch status", flags.error());
  }
  if (flags.help()) {
    std::cout
        << "usage: gatos batch status BATCH-ID --ledger DIR [--nats URL] [--json] [--wait]\n\n"
           "Shows done/total for a batch (a progress bar on a terminal, plain lines\n"
           "otherwise) and the state of each repository's job. --wait refreshes until\n"
           "every job has finished. Exit 0 when every job succeeded.\n"
           "--nats URL asks gatosd for the jobs' states, with a running job's progress\n"
           "(objects scanned of those reached, its rate) as its worker reports it.\n";
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("batch status", "--ledger DIR is required");
  if (flags.positional().size() != 1) return UsageError("batch status", "expects one BATCH-ID");
  std::string id = flags.positional()[0];
  if (id.rfind("blake3:", 0) == 0) id = id.substr(7);
  if (!IsJobIdHex(id))
    return ReportError("\"" + flags.positional()[0] + "\" is not a batch id (blake3:<64 hex>)",
                       kExitUsage);
  auto batch = ReadBatch(*target, id);
  if (!batch.ok()) return ReportError(batch.status().message(), kExitFailure);
  bool tty = isatty(1) && !flags.Has("json");
  while (true) {
    json rows = json::array();
    size_t done = 0, ok = 0, total = 0;
    for (const auto& j : (*batch)["jobs"]) {
      ++total;
      std::string state = "not submitted";
      json progress;  // a running scan's latest report (gatosd only)
      if (j["job"].is_string()) {
        auto st = JobStatus(flags.GetOr("nats", *target), j["job"].get<std::string>().substr(7));
        state = st.ok() ? st->value("state", "?") : "missing";
        if (st.ok() && st->contains("progress")) progress = (*st)["progress"];
      }
      auto parsed = ParseJobState(state);
      bool finished = !parsed || IsTerminal(*parsed);
      done += finished;
      ok += state == "succeeded";
      rows.push_back({{"repo", j["repo"]}, {"job", j["job"]}, {"state", state}});
      if (!progress.is_null()) rows.back()["progress"] = progress;
    }
    bool all_done = done == total;
    if (flags.Has("json")) {
      if (all_done || !flags.Has("wait")) {
        std::cout << json{{"batch", "blake3:" + id},
                          {"done", done},
                          {"total", total},
                          {"succeeded", ok},
                          {"jobs", rows}}
                         .dump()
                  << "\n";
      }
    } else if (tty) {
      std::cout << "\x1b[2J\x1b[H" << Bar(done, total, 40) << " " << done << "/" << total
                << " done, " << ok << " succeeded\n";
      for (const auto& r : rows) std::cout << "  " << RowText(r) << "\n";
      std::cout << std::flush;
    } else if (all_done || !flags.Has("wait")) {
      std::cout << "batch blake3:" << id << ": " << done << "/" << total << " done, " << ok
                << " succeeded\n";
      for (const auto& r : rows) std::cout << RowText(r) << "\n";
    }
    if (all_done || !flags.Has("wait")) return ok == total ? kExitOk : kExitFailure;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace gatos::cli
