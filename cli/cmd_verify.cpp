// gatos verify | attest: offline audit of a ledger clone (docs/auditor-guide.md)
// and export of standard attestations (docs/attestations.md).
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "gatos/flags.h"
#include "gatos/attest.h"
#include "gatos/ledger.h"
#include "gatos/manifest.h"
#include "gatos/verify.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

// Reads a small text file given on the command line. NotFound names the flag.
Result<std::string> ReadTextFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(flag + " " + path + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The repository: --repo DIR, or --ledger DIR as the other commands spell it.
std::optional<std::string> RepoFlag(const Flags& flags, const std::string& command, int* usage) {
  if (flags.Has("repo") && flags.Has("ledger")) {
    *usage = UsageError(command, "give --repo DIR or --ledger DIR, not both");
    return std::nullopt;
  }
  auto dir = flags.Has("repo") ? flags.Get("repo") : flags.Get("ledger");
  if (!dir) *usage = UsageError(command, "--repo DIR is required (a clone of the ledger)");
  return dir;
}

// "blake3:<hex>" or "<hex>" -> "<hex>"; "" when malformed.
std::string JobHexArg(const std::string& arg) {
  std::string hex = arg.rfind("blake3:", 0) == 0 ? arg.substr(7) : arg;
  return IsJobIdHex(hex) ? hex : "";
}

std::string Line(const AuditReport& r) {
  std::string id = "blake3:" + r.job_hex;
  if (const ResultCheck* bad = r.first_failure()) {
    return "FAIL " + id + " " + bad->name + ": " + bad->detail;
  }
  std::string out = "ok " + id + " " + r.state;
  if (!r.has_result) out += ", no result";
  if (r.dev_mode) out += " (DEV MODE: job commit not signed by a submitter)";
  return out;
}

std::string Dump(const json& j) {
  // Details quote repository bytes, which need not be UTF-8.
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

const char kVerifyHelp[] =
    "usage: gatos verify --repo DIR (--all | JOB-ID...) [--allowed-signers FILE]\n"
    "                    [--only-allowed-signers] [--trusted-programs FILE]\n"
    "                    [--ledger-key KEY.pub] [--require-results] [--require-provenance]\n"
    "                    [--json]\n"
    "\n"
    "Verifies jobs and results offline, from a clone of the ledger alone (git clone\n"
    "--mirror LEDGER, or git fetch LEDGER 'refs/gatos/*:refs/gatos/*'). For each job:\n"
    "job.yaml recomputes to the job id, the job commit is signed by a submitter of\n"
    "the policy in force, and the result is the one the worker signed (poe.json, its\n"
    "hash, every file of the tree, Attest-Sig, the SSH commit signature), made under\n"
    "a ledger-signed claim of the same worker and epoch that was never taken over,\n"
    "by a worker the policy allowed; attestation.intoto.json is checked when present.\n"
    "\n"
    "Prints one line per job ('ok blake3:<id> <state>' or 'FAIL blake3:<id> <check>:\n"
    "<reason>') and a summary. Exit status: 0 when every job verifies, 1 when one does\n"
    "not, 2 for usage errors. docs/auditor-guide.md lists every check.\n"
    "\n"
    "  --repo DIR              the ledger clone (--ledger DIR is accepted too)\n"
    "  --all                   every job under refs/gatos/jobs/\n"
    "  --allowed-signers FILE  OpenSSH allowed_signers of workers you trust, in\n"
    "                          addition to the policy's workers\n"
    "  --only-allowed-signers  trust only --allowed-signers for workers, not the policy\n"
    "  --trusted-programs FILE worker binaries you trust: lines of blake3:<hex> or\n"
    "                          b3sum output; Attest-Program must be one of them\n"
    "  --ledger-key KEY.pub    pin the ledger key: the first policy commit must be\n"
    "                          signed by it\n"
    "  --require-results       a job without a result fails\n"
    "  --require-provenance    a result without attestation.intoto.json fails\n"
    "  --json                  one JSON document with every check of every job\n";

}  // namespace

int RunVerify(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"repo"},
                          {"ledger"},
                          {"all", 0, false},
                          {"allowed-signers"},
                          {"only-allowed-signers", 0, false},
                          {"trusted-programs"},
                          {"ledger-key"},
                          {"require-results", 0, false},
                          {"require-provenance", 0, false},
                          {"json", 0, false}})) {
    return UsageError("verify", flags.error());
  }
  if (flags.help()) {
    std::cout << kVerifyHelp;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoFlag(flags, "verify", &usage);
  if (!dir) return usage;
  bool all = flags.Has("all");
  if (all == !flags.positional().empty()) {
    return UsageError("verify", all ? "give --all or JOB-IDs, not both"
                                    : "name the jobs to verify (JOB-ID...) or give --all");
  }
  std::vector<std::string> jobs;
  for (const std::string& arg : flags.positional()) {
    std::string hex = JobHexArg(arg);
    if (hex.empty()) {
      return UsageError(
          "verify", "\"" + arg.substr(0, 80) + "\" is not a job id (blake3:<64 lowercase hex>)");
    }
    jobs.push_back(hex);
  }

  VerifyOptions opt;
  opt.require_results = flags.Has("require-results");
  opt.require_provenance = flags.Has("require-provenance");
  if (auto path = flags.Get("allowed-signers")) {
    auto text = ReadTextFile(*path, "--allowed-signers");
    if (!text.ok()) return ReportError(text.status().message(), kExitUsage);
    auto signers = ParseAllowedSigners(*text, *path);
    if (!signers.ok()) {
      return ReportError("--allowed-signers: " + signers.status().message(), kExitUsage);
    }
    opt.extra_workers = std::move(*signers);
  }
  if (flags.Has("only-allowed-signers")) {
    if (!opt.extra_workers) {
      return UsageError("verify", "--only-allowed-signers needs --allowed-signers FILE");
    }
    opt.trust_policy_workers = false;
  }
  if (auto path = flags.Get("trusted-programs")) {
    auto text = ReadTextFile(*path, "--trusted-programs");
    if (!text.ok()) return ReportError(text.status().message(), kExitUsage);
    auto programs = ParseTrustedPrograms(*text, *path);
    if (!programs.ok()) return ReportError(programs.status().message(), kExitUsage);
    opt.trusted_programs = std::move(*programs);
  }
  if (auto path = flags.Get("ledger-key")) {
    auto key = ReadPublicKeyFile(*path);
    if (!key.ok()) return ReportError("--ledger-key: " + key.status().message(), kExitUsage);
    opt.ledger_key = *key;
  }

  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  Auditor auditor(ledger->get(), opt);
  AuditSummary summary;
  if (all) {
    auto s = auditor.VerifyAll();
    if (!s.ok()) return ReportError(s.status().message(), kExitFailure);
    summary = std::move(*s);
  } else {
    for (const std::string& hex : jobs) {
      auto r = auditor.VerifyJob(hex);
      if (!r.ok()) return ReportError(r.status().message(), kExitFailure);
      if (!r->ok()) {
        ++summary.failed;
      } else if (r->has_result) {
        ++summary.verified;
      } else {
        ++summary.without_result;
      }
      summary.jobs.push_back(std::move(*r));
    }
  }
  size_t dev = 0;
  for (const auto& r : summary.jobs) dev += r.ok() && r.dev_mode ? 1 : 0;

  if (flags.Has("json")) {
    json out = {{"repo", *dir},
                {"ok", summary.ok()},
                {"summary",
                 {{"jobs", summary.jobs.size()},
                  {"verified", summary.verified},
                  {"without_result", summary.without_result},
                  {"failed", summary.failed},
                  {"dev_mode", dev}}},
                {"jobs", json::array()}};
    for (const auto& r : summary.jobs) out["jobs"].push_back(AuditReportToJson(r));
    std::cout << Dump(out) << '\n';
  } else {
    for (const auto& r : summary.jobs) std::cout << Line(r) << '\n';
    std::cout << summary.jobs.size() << " jobs: " << summary.verified << " results verified, "
              << summary.without_result << " without a result, " << summary.failed << " failed";
    if (dev) std::cout << "; " << dev << " accepted only in DEV MODE";
    std::cout << '\n';
  }
  return summary.ok() ? kExitOk : kExitFailure;
}

int RunAttest(const Args& args) {
  const char* help =
      "usage: gatos attest JOB-ID --repo DIR [--provenance]\n"
      "\n"
      "Prints a standard DSSE envelope for a job's result, after verifying the job as\n"
      "'gatos verify' does (a result that fails verification is refused):\n"
      "  default       the Proof-Of-Execution, rebuilt from the ledger alone:\n"
      "                payloadType application/vnd.gatos.poe.v1+json, payload poe.json,\n"
      "                signature Attest-Sig (keyid = the worker id)\n"
      "  --provenance  the worker's in-toto Statement v1 (SLSA provenance v1),\n"
      "                attestation.intoto.json of the result tree\n"
      "docs/attestations.md shows how supply-chain tools consume both.\n";
  Flags flags;
  if (!flags.Parse(args, {{"repo"}, {"ledger"}, {"provenance", 0, false}})) {
    return UsageError("attest", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoFlag(flags, "attest", &usage);
  if (!dir) return usage;
  if (flags.positional().size() != 1) return UsageError("attest", "expects one JOB-ID");
  std::string hex = JobHexArg(flags.positional()[0]);
  if (hex.empty()) {
    return UsageError("attest", "\"" + flags.positional()[0].substr(0, 80) +
                                    "\" is not a job id (blake3:<64 lowercase hex>)");
  }
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto report = VerifyJob(**ledger, hex, {});
  if (!report.ok()) return ReportError(report.status().message(), kExitFailure);
  std::string id = "blake3:" + hex;
  if (const ResultCheck* bad = report->first_failure()) {
    return ReportError("job " + id + " does not verify (" + bad->name + ": " + bad->detail +
                           "); no attestation is printed. 'gatos verify --repo " + *dir + " " + id +
                           " --json' shows every check",
                       kExitFailure);
  }
  if (!report->has_result) {
    return ReportError(
        "job " + id + " has no result yet (" + report->state + "); there is nothing to attest",
        kExitFailure);
  }
  if (flags.Has("provenance")) {
    if (!report->has_provenance) {
      return ReportError("the result of job " + id + " has no " + kProvenanceFileName +
                             " (its worker predates provenance); use 'gatos attest' without "
                             "--provenance for the PoE envelope",
                         kExitFailure);
    }
    auto bytes =
        (*ledger)->ReadFileAtCommit(report->result_commit, kProvenanceFileName, kMaxEnvelopeBytes);
    if (!bytes.ok()) return ReportError(bytes.status().message(), kExitFailure);
    std::cout << *bytes << '\n';
    return kExitOk;
  }
  auto env = PoeDsseEnvelope(LedgerLookup(ledger->get()), report->result_commit);
  if (!env.ok()) return ReportError(env.status().message(), kExitFailure);
  std::cout << *env << '\n';
  return kExitOk;
}

}  // namespace gatos::cli
