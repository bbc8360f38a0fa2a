// gatos findings: a scan job's findings, one entry per distinct secret.
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/secret_groups.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

std::string Short(const std::string& id) { return id.substr(0, 12); }

// "2024-03-01" (UTC) or "" when unknown.
std::string Day(const std::optional<int64_t>& t) {
  if (!t) return "";
  const std::time_t secs = static_cast<std::time_t>(*t);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string Seen(const FindingLocation& l) {
  const std::string day = Day(l.commit_time);
  return Short(l.commit) + (day.empty() ? "" : " (" + day + ")");
}

void PrintGroup(const SecretGroup& g, bool all) {
  std::cout << g.rule << "  secret " << Short(g.id) << "  " << g.fingerprint << "\n  "
            << g.locations.size() << (g.locations.size() == 1 ? " location" : " locations")
            << ", first seen in " << Seen(g.first());
  if (g.locations.size() > 1) std::cout << ", last in " << Seen(g.last());
  std::cout << (!g.at_tip ? "; presence at the scanned tips unknown"
                : *g.at_tip ? "; still at a scanned tip"
                            : "; no longer at any scanned tip")
            << "\n";
  if (all) {
    for (const FindingLocation& l : g.locations) {
      std::cout << "  " << l.path << ":" << l.line << "  commit " << Short(l.commit) << "  blob "
                << Short(l.blob) << "\n";
    }
    return;
  }
  std::cout << "  in";
  const std::vector<std::string> paths = g.paths();
  for (size_t i = 0; i < paths.size(); ++i) std::cout << (i ? ", " : " ") << paths[i];
  std::cout << "\n";
}

}  // namespace

int RunFindings(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"repo"}, {"json", 0, false}, {"all", 0, false}})) {
    return UsageError("findings", flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: gatos findings JOB-ID --repo DIR [--all] [--json]\n\n"
                 "Prints the secret-scan findings recorded in a scan job's signed result\n"
                 "(outputs/findings.jsonl and outputs/summary.json), one entry per distinct\n"
                 "secret: its rule, keyed fingerprint, number of locations, the first and\n"
                 "last commit it was seen in, whether it is still at a scanned tip, and the\n"
                 "paths it is in. Findings never hold the secret itself.\n"
                 "DIR is the ledger or any clone of it.\n\n"
                 "  --all   every location (path, line, commit, blob) of each secret\n"
                 "  --json  {job, result, summary, secrets: [each with its locations],\n"
                 "          findings: [every location]}\n";
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
  const std::string result = (*rec)->result_commit;
  Ledger* ledger = &(*view)->ledger();
  auto lines = ledger->ReadFileAtCommit(result, "outputs/findings.jsonl", 256 << 20);
  auto summary = ledger->ReadFileAtCommit(result, "outputs/summary.json", 1 << 20);
  if (!lines.ok() || !summary.ok()) {
    return ReportError("the result of job blake3:" + *hex +
                           " holds no outputs/findings.jsonl and outputs/summary.json (is it a gatos-scan job?)",
                       kExitFailure);
  }
  json sj = json::parse(*summary, nullptr, false);
  Result<std::vector<FindingLocation>> locations = ParseFindingsJsonl(*lines);
  if (!locations.ok()) {
    return ReportError("outputs/findings.jsonl of job blake3:" + *hex + ": " + locations.status().message(),
                       kExitFailure);
  }
  const size_t location_count = locations->size();
  json flat = json::array();
  for (const FindingLocation& l : *locations) flat.push_back(LocationJson(l));
  const std::vector<SecretGroup> groups = GroupBySecret(std::move(*locations));
  if (flags.Has("json")) {
    json secrets = json::array();
    for (const SecretGroup& g : groups) secrets.push_back(GroupJson(g, /*with_locations=*/true));
    std::cout << json{{"job", "blake3:" + *hex}, {"result", result}, {"summary", sj}, {"secrets", secrets},
                      {"findings", flat}}
                     .dump(-1, ' ', false, json::error_handler_t::replace)
              << "\n";
    return kExitOk;
  }
  for (const SecretGroup& g : groups) PrintGroup(g, flags.Has("all"));
  std::cout << groups.size() << (groups.size() == 1 ? " secret" : " secrets") << " in " << location_count
            << (location_count == 1 ? " location" : " locations");
  if (sj.is_object()) {
    for (const char* k : {"complete", "status"}) {
      if (sj.contains(k)) std::cout << "; " << k << ": " << sj[k].dump();
    }
  }
  std::cout << "\n";
  return kExitOk;
}

}  // namespace gatos::cli
