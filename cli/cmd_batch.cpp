// gatos findings | batch submit | batch status
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/flags.h"
#include "gatos/blake3.h"
#include "gatos/canonical_json.h"
#include "gatos/ledger.h"
#include "gatos/ledger_writer.h"
#include "gatos/manifest.h"
#include "gatos/rpc.h"
#include "ledger_client.h"

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
    GATOS_ASSIGN_OR_RETURN(std::string text, ledger->ReadFileAtCommit(commit, "batch.json", 64 << 20));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return DataLossError("batch.json of batch " + batch_hex + " is not JSON");
    return j;
  }
  return InvalidArgumentError("--ledger " + target + ": batches are read from the ledger directory (a clone works)");
}

std::string Bar(size_t done, size_t total, int width) {
  size_t filled = total ? done * static_cast<size_t>(width) / total : 0;
  return "[" + std::string(filled, '#') + std::string(static_cast<size_t>(width) - filled, '.') + "]";
}

}  // namespace

int RunFindings(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"repo"}, {"json", 0, false}})) return UsageError("findings", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos findings JOB-ID --repo DIR [--json]\n\n"
                 "Prints the secret-scan findings recorded in a scan job's signed result\n"
                 "(outputs/findings.jsonl and outputs/summary.json): rule, repository path,\n"
                 "line, commit, blob and fingerprint. Findings never hold the secret itself.\n"
                 "DIR is the ledger or any clone of it.\n";
    return kExitOk;
  }
  auto repo = flags.Get("repo");
  if (!repo) repo = LedgerTarget(std::nullopt);
  if (!repo) return UsageError("findings", "--repo DIR is required");
  if (flags.positional().size() != 1) return UsageError("findings", "expects one JOB-ID");
  auto hex = ParseJobArg(flags.positional()[0]);
  if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
  // The job's record in the log names its result, also after its refs were pruned.
  auto view = LedgerView::Open(*repo);
  if (!view.ok()) return ReportError(view.status().message(), kExitFailure);
  auto rec = (*view)->Find(*hex);
  if (!rec.ok()) return ReportError(rec.status().message(), kExitFailure);
  if (!*rec) return ReportError("no job blake3:" + *hex + " in " + *repo, kExitFailure);
  if ((*rec)->result_commit.empty()) return ReportError("job blake3:" + *hex + " has no result yet", kExitFailure);
  auto result = std::make_optional((*rec)->result_commit);
  Ledger* ledger = &(*view)->ledger();
  auto lines = ledger->ReadFileAtCommit(*result, "outputs/findings.jsonl", 256 << 20);
  auto summary = ledger->ReadFileAtCommit(*result, "outputs/summary.json", 1 << 20);
  if (!lines.ok() || !summary.ok()) {
    return ReportError("the result of job blake3:" + *hex +
                           " holds no outputs/findings.jsonl and outputs/summary.json (is it a gatos-scan job?)",
                       kExitFailure);
  }
  json sj = json::parse(*summary, nullptr, false);
  std::vector<json> findings;
  std::istringstream in(*lines);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json f = json::parse(line, nullptr, false);
    if (f.is_discarded()) return ReportError("outputs/findings.jsonl: a line is not JSON", kExitFailure);
    findings.push_back(std::move(f));
  }
  if (flags.Has("json")) {
    std::cout << json{{"job", "blake3:" + *hex}, {"result", *result}, {"summary", sj}, {"findings", findings}}.dump()
              << "\n";
    return kExitOk;
  }
  for (const auto& f : findings) {
    std::cout << f.value("rule", "?") << "  " << f.value("path", "?") << ":" << f.value("line", 0) << "  commit "
              << f.value("commit", "").substr(0, 12) << "  blob " << f.value("blob", "").substr(0, 12) << "  "
              << f.value("fingerprint", "") << "\n";
  }
  std::cout << findings.size() << " finding(s)";
  if (sj.is_object()) {
    for (const char* k : {"complete", "status"}) {
      if (sj.contains(k)) std::cout << "; " << k << ": " << sj[k].dump();
    }
  }
  std::cout << "\n";
  return kExitOk;
}

int RunBatchSubmit(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"template"}, {"repos"}, {"ledger"}, {"sign-key"}, {"json", 0, false}})) {
    return UsageError("batch submit", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos batch submit --template T.yaml --repos FILE --ledger DIR|nats://...|GIT-URL\n"
                 "                          [--sign-key KEY] [--json]\n\n"
                 "Creates one job per repository listed in FILE (one per line; blank lines and\n"
                 "'#' comments ignored): every {{repo}} in the template is replaced by the\n"
                 "repository, and each job is submitted as 'gatos submit' does. Then a batch\n"
                 "record (batch.json: template hash, repo -> job) is written to\n"
                 "refs/gatos/batches/<batch-id> when --ledger is a directory. The batch id is\n"
                 "the BLAKE3 of that record, so submitting the same batch again is a no-op;\n"
                 "one repository's failure never blocks the others. Prints the batch id.\n";
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
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    repos.push_back(line.substr(start));
  }
  std::sort(repos.begin(), repos.end());
  repos.erase(std::unique(repos.begin(), repos.end()), repos.end());
  if (repos.empty()) return ReportError(*repos_path + ": no repositories listed", kExitUsage);
  if (repos.size() > kMaxRepos) return ReportError(*repos_path + ": more than 100000 repositories", kExitUsage);
  std::optional<Ed25519PrivateKey> key;
  if (auto k = flags.Get("sign-key")) {
    auto loaded = ReadPrivateKeyFile(*k);
    if (!loaded.ok()) return ReportError(loaded.status().message(), kExitUsage);
    key = std::move(*loaded);
    UseNatsKey(*key);
  }
  json jobs = json::array();
  int failures = 0;
  for (size_t i = 0; i < repos.size(); ++i) {
    std::string bytes = Render(*tmpl, repos[i]);
    auto m = ParseManifest(bytes, "template for " + repos[i], ManifestFormat::kYaml);
    if (!m.ok()) {
      std::cerr << "gatos batch: " << repos[i] << ": " << m.status().message() << "\n";
      ++failures;
      jobs.push_back({{"repo", repos[i]}, {"job", nullptr}, {"error", m.status().message()}});
      continue;
    }
    std::string hex = JobIdHex(*m);
    SubmitOutcome out;
    int rc = SubmitBytes(*target, bytes, hex, "batch job for " + repos[i], key ? &*key : nullptr, &out);
    if (rc != kExitOk) {
      ++failures;
      jobs.push_back({{"repo", repos[i]}, {"job", "blake3:" + hex}, {"error", "submission failed"}});
      continue;
    }
    jobs.push_back({{"repo", repos[i]}, {"job", "blake3:" + hex}});
    if (isatty(2)) std::cerr << "\r" << Bar(i + 1, repos.size(), 30) << " " << i + 1 << "/" << repos.size() << std::flush;
  }
  if (isatty(2)) std::cerr << "\n";
  json record = {{"version", 1}, {"template", Blake3Tagged(*tmpl)}, {"jobs", jobs}};
  auto canonical = CanonicalJson(record);
  if (!canonical.ok()) return ReportError(canonical.status().message(), kExitFailure);
  std::string batch_hex = Blake3Tagged(*canonical).substr(7);
  bool existing = false;
  if (ClassifyLedger(*target) == LedgerKind::kDirectory) {
    auto reply = LedgerCall(*target, rpc::kLocalBatch, *canonical, 30000);
    if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
    if (!reply->value("ok", false)) return ReportError(reply->value("message", "batch record refused"), kExitFailure);
    existing = reply->value("existing", false);
  } else {
    std::cerr << "gatos batch: note: the batch record is kept in the ledger only when --ledger is its directory;\n"
                 "the jobs were submitted, and 'gatos batch status' needs the directory (or a clone)\n";
  }
  if (flags.Has("json")) {
    std::cout << json{{"batch", "blake3:" + batch_hex}, {"existing", existing}, {"jobs", jobs}}.dump() << "\n";
  } else {
    std::cout << "blake3:" << batch_hex << "\n";
    if (existing) std::cerr << "note: this batch already existed; nothing new was queued\n";
  }
  return failures == 0 ? kExitOk : kExitFailure;
}

int RunBatchStatus(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}, {"wait", 0, false}})) {
    return UsageError("batch status", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos batch status BATCH-ID --ledger DIR [--json] [--wait]\n\n"
                 "Shows done/total for a batch (a progress bar on a terminal, plain lines\n"
                 "otherwise) and the state of each repository's job. --wait refreshes until\n"
                 "every job has finished. Exit 0 when every job succeeded.\n";
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("batch status", "--ledger DIR is required");
  if (flags.positional().size() != 1) return UsageError("batch status", "expects one BATCH-ID");
  std::string id = flags.positional()[0];
  if (id.rfind("blake3:", 0) == 0) id = id.substr(7);
  if (!IsJobIdHex(id)) return ReportError("\"" + flags.positional()[0] + "\" is not a batch id (blake3:<64 hex>)", kExitUsage);
  auto batch = ReadBatch(*target, id);
  if (!batch.ok()) return ReportError(batch.status().message(), kExitFailure);
  bool tty = isatty(1) && !flags.Has("json");
  while (true) {
    json rows = json::array();
    size_t done = 0, ok = 0, total = 0;
    for (const auto& j : (*batch)["jobs"]) {
      ++total;
      std::string state = "not submitted";
      if (j["job"].is_string()) {
        auto st = JobStatus(*target, j["job"].get<std::string>().substr(7));
        state = st.ok() ? st->value("state", "?") : "missing";
      }
      auto parsed = ParseJobState(state);
      bool finished = !parsed || IsTerminal(*parsed);
      done += finished;
      ok += state == "succeeded";
      rows.push_back({{"repo", j["repo"]}, {"job", j["job"]}, {"state", state}});
    }
    bool all_done = done == total;
    if (flags.Has("json")) {
      if (all_done || !flags.Has("wait")) {
        std::cout << json{{"batch", "blake3:" + id}, {"done", done}, {"total", total}, {"succeeded", ok}, {"jobs", rows}}.dump()
                  << "\n";
      }
    } else if (tty) {
      std::cout << "\x1b[2J\x1b[H" << Bar(done, total, 40) << " " << done << "/" << total << " done, " << ok
                << " succeeded\n";
      for (const auto& r : rows) std::cout << "  " << r["state"].get<std::string>() << "\t" << r["repo"].get<std::string>() << "\n";
      std::cout << std::flush;
    } else if (all_done || !flags.Has("wait")) {
      std::cout << "batch blake3:" << id << ": " << done << "/" << total << " done, " << ok << " succeeded\n";
      for (const auto& r : rows) std::cout << r["state"].get<std::string>() << "\t" << r["repo"].get<std::string>() << "\n";
    }
    if (all_done || !flags.Has("wait")) return ok == total ? kExitOk : kExitFailure;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace gatos::cli
