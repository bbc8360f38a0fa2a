// gatos verify | attest: offline audit of a ledger clone (docs/auditor-guide.md)
// and export of standard attestations (docs/attestations.md).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "gatos/audit/attest.h"
#include "gatos/audit/log_audit.h"
#include "gatos/audit/verify.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/clock.h"
#include "gatos/model/git_input.h"
#include "gatos/model/job_state.h"
#include "gatos/model/log_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"
#include "progress_bar.h"

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

// Exit status of a mirror whose refs are newer than its log (fetch again).
constexpr int kExitFetchAgain = 3;

// True when `args` holds --name or --name=VALUE (before a "--").
bool HasFlag(const Args& args, const std::string& name) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
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
    "                    [--log-only] [--state FILE] [--witnesses] [--json]\n"
    "\n"
    "Verifies jobs and results offline, from a clone of the ledger alone (git clone\n"
    "--mirror LEDGER, or git fetch LEDGER 'refs/gatos/*:refs/gatos/*'). For each job:\n"
    "job.yaml recomputes to the job id, the job commit is signed by a submitter of\n"
    "the policy in force, and the result is the one the worker signed (poe.json, its\n"
    "hash, every file of the tree, Attest-Sig, the SSH commit signature), made under\n"
    "a claim the ledger logged (or, in older ledgers, signed) of the same worker and\n"
    "epoch that was never taken over, by a worker the policy allowed;\n"
    "attestation.intoto.json is checked when present.\n"
    "\n"
    "With --all it first replays the ledger log (refs/gatos/log) from its root: every\n"
    "log commit signed by the ledger key in force, sequence numbers without gaps,\n"
    "every transition (submit, claim, renew, takeover, result, retried attempt,\n"
    "cancel, re-run, abort, revoke, prune, policy change, witness) valid under the\n"
    "policy in force at that point, and the replayed state equal to the refs present:\n"
    "a deleted, added or moved ref is reported by name. Jobs that ran more than once\n"
    "are listed with every attempt.\n"
    "\n"
    "Prints one line per job ('ok blake3:<id> <state>' or 'FAIL blake3:<id> <check>:\n"
    "<reason>') and a summary. Exit status: 0 when every job verifies, 1 when one does\n"
    "not, 2 for usage errors, 3 when the mirror holds refs newer than its log (it was\n"
    "fetched while the ledger wrote): 'mirror is behind its refs: fetch again', not a\n"
    "tamper finding. docs/auditor-guide.md lists every check.\n"
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
    "  --log-only              with --all: the log replay alone (it verifies every\n"
    "                          result once), not the second pass over each job's refs\n"
    "  --state FILE            remember the log head verified; the next run replays\n"
    "                          only what was added since and fails if the log does not\n"
    "                          descend from it (rewritten or rolled back). Implies\n"
    "                          --all --log-only; created on the first run\n"
    "  --checkpoint NOTE       with --state: the ledger's signed checkpoint (gatos\n"
    "                          checkpoint); this log must have its root, and it must\n"
    "                          be consistent with the checkpoint the last run kept\n"
    "                          (FILE.checkpoint): a rewritten log fails\n"
    "  --threads N             threads in all: N - 1 check the result and lease\n"
    "                          commits of the log ahead of the replay (default 0: one\n"
    "                          per CPU besides it; 1: the replay alone; each is\n"
    "                          checked once), and N verify jobs in the per-job pass\n"
    "                          (0: one per CPU); the report is the same\n"
    "  --witnesses             check every witness (refs/gatos/witness*/ and the log's;\n"
    "                          alone: with the log replay only):\n"
    "                          a witness of another commit at the same sequence proves\n"
    "                          that the ledger showed different histories\n"
    "  --json                  one JSON document with every check of every job\n"
    "\n"
    "gatos verify --bundle FILE --ledger-key KEY.pub checks a proof bundle written by\n"
    "'gatos proof' without a clone: 'gatos verify --bundle FILE --help'.\n";

void PrintLogReport(const LogAuditReport& r) {
  std::cout << "log: ledger " << r.ledger_root.substr(0, 12) << ", head " << r.head.substr(0, 12)
            << " at sequence " << r.seq << "; "
            << (r.incremental && r.commits == 0
                    ? "incremental, nothing new since the recorded head"
                    : std::string(r.incremental ? "incremental, " : "") + "verified sequences " +
                          std::to_string(r.from_seq) + ".." + std::to_string(r.seq))
            << ": " << r.commits << " log commits, " << r.transitions << " transitions, "
            << r.results << " results, " << r.jobs_touched << " jobs, " << r.refs_checked
            << " refs compared";
  if (r.refs_behind) {
    std::cout << " (" << r.refs_behind << " behind: newer than the log head fetched)";
  }
  if (r.refs_settling) {
    std::cout << " (" << r.refs_settling << " settling: moved by batches after sequence "
              << r.settling_after << " while the mirror was fetched)";
  }
  std::cout << "\n";
  if (r.fires) std::cout << "schedules: " << r.fires << " fires checked\n";
  for (const auto& m : r.missed_ticks) {
    std::cout << "warning: schedule " << m.schedule << ": " << m.count << (m.count >= 100000 ? "+" : "")
              << " tick(s) due while it was active did not fire (" << FormatRfc3339Millis(m.first_ms)
              << (m.count > 1 ? " .. " + FormatRfc3339Millis(m.last_ms) : "")
              << "): gatosd was down, or the catch-up rule skipped them\n";
  }
  for (const auto& j : r.reruns) {
    std::cout << "ran " << j.runs.size() << " times: blake3:" << j.job_hex << "\n";
    for (const auto& x : j.runs) {
      std::cout << "  attempt " << x.attempt << " epoch " << x.epoch
                << " worker ed25519:" << x.worker_hex.substr(0, 16) << "… "
                << (x.status.empty() ? "no result" : x.status)
                << (x.result_commit.empty() ? "" : " " + x.result_commit.substr(0, 12))
                << (x.final ? " (final)" : "") << "\n";
    }
  }
  for (const auto& w : r.witnesses) {
    std::cout << (w.ok ? "ok" : "FAIL") << " witness " << w.ref << " "
              << (w.key_hex.empty() ? "" : "ed25519:" + w.key_hex.substr(0, 16) + "… ")
              << (w.seq ? "sequence " + std::to_string(w.seq) + " " : "") << w.detail << "\n";
  }
  for (const auto& p : r.problems) {
    std::cout << "FAIL log " << p.check
              << (p.seq ? " (sequence " + std::to_string(p.seq) + ")" : "") << ": " << p.detail
              << "\n";
  }
  if (r.forked)
    std::cout << "FORKED HISTORY: witnesses prove that the ledger showed different logs\n";
  bool ref_problems = false;
  for (const auto& p : r.problems) ref_problems |= p.check.rfind("ref_", 0) == 0;
  if (ref_problems && r.settling_after < 0) {
    std::cout << "hint: a fetch is not a snapshot; if this mirror was fetched while the ledger was "
                 "writing, "
                 "fetch it with 'gatos mirror LEDGER DIR' and verify again\n";
  }
  std::cout << "log: " << (r.ok() ? "ok" : std::to_string(r.problems.size()) + " problem(s)")
            << "\n";
}

// Writes a small file atomically (temporary file + rename).
Status ReplaceFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << text;
    out.flush();
    if (!out) return UnavailableError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return UnavailableError("cannot rename " + tmp + " to " + path);
  return OkStatus();
}

Status WriteStateFile(const std::string& path, const AuditState& s) {
  return ReplaceFile(path, EncodeAuditState(s));
}

// Reads --state FILE: nullopt when it does not exist yet.
Result<std::optional<AuditState>> ReadStateFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::optional<AuditState>();
  auto text = ReadTextFile(path, "--state");
  if (!text.ok()) return text.status();
  auto s = ParseAuditState(*text);
  if (!s.ok()) return InvalidArgumentError("--state " + path + ": " + s.status().message());
  return std::optional<AuditState>(*s);
}

// A mirror made by `gatos mirror` records the log heads around its last
// fetch: refs the batches in between moved may show any of their values
// then. Applies only while the mirror's log is still the one fetched (a
// later plain `git fetch` voids the record: refs are then compared exactly).
// When git last wrote the refs of the clone `dir` (packed-refs by git clone,
// FETCH_HEAD by git fetch), in unix ms; 0 when neither exists.
int64_t RefsFetchedAtMs(const std::string& dir) {
  int64_t latest = 0;
  for (const char* f : {"packed-refs", "FETCH_HEAD"}) {
    struct stat st;
    if (::stat((dir + "/" + f).c_str(), &st) != 0) continue;
    latest = std::max<int64_t>(latest, int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000);
  }
  return latest;
}

void ApplyMirrorRecord(const std::string& dir, Ledger& ledger, LogAuditOptions* lo) {
  std::string path = dir + "/" + kMirrorRecordFile;
  struct stat st;
  lo->fetched_at_ms = RefsFetchedAtMs(dir);
  if (::stat(path.c_str(), &st) != 0) return;
  auto text = ReadTextFile(path, "mirror record");
  auto rec = text.ok() ? ParseMirrorRecord(*text) : Result<MirrorRecord>(text.status());
  if (!rec.ok()) {
    std::cerr << "warning: " << path << ": " << rec.status().message()
              << "; refs are compared exactly\n";
    return;
  }
  auto head = ledger.ResolveRef(kLogRef);
  if (!head.ok() || *head != rec->log_after) {
    std::cerr << "note: " << path << " describes log head " << rec->log_after.substr(0, 12)
              << ", not the mirror's; it is not used (update the mirror with 'gatos mirror')\n";
    return;
  }
  lo->settling_after = rec->seq_before - 1;
  lo->fetched_at_ms = 0;
}

// Fetches refs/gatos/log from `source` into the mirror `dir`; its head and
// sequence.
Result<std::pair<std::string, int64_t>> FetchLog(const std::string& source, const std::string& dir,
                                                 const SpawnOptions& so) {
  auto r = RunAndCapture({"git", "-C", dir, "fetch", "-q", "--no-write-fetch-head", "--", source,
                          "+" + std::string(kLogRef) + ":" + kLogRef},
                         so);
  if (!r.ok()) return r.status();
  if (!r->status.ok()) {
    std::string err = r->err.substr(0, 2000);
    while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
    return UnavailableError("git fetch " + std::string(kLogRef) + " from " + GitUrlKey(source) +
                            " failed" + (err.empty() ? "" : ": " + err) +
                            "\n(is it a gatos ledger, and can you read it?)");
  }
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  GATOS_ASSIGN_OR_RETURN(std::string head, ledger->ResolveRef(kLogRef));
  if (head.empty())
    return NotFoundError(GitUrlKey(source) + " has no " + std::string(kLogRef) +
                         ": not a gatos ledger");
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger->ReadCommit(head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo info, ParseLogMessage(c.message));
  return std::make_pair(head, info.seq);
}

}  // namespace

int RunMirror(const Args& args) {
  const char* help =
      "usage: gatos mirror SOURCE DIR [--json]\n"
      "\n"
      "Makes DIR a mirror of the ledger at SOURCE (a git URL or path), or brings an\n"
      "existing one up to date, for 'gatos verify' and 'gatos witness'. It fetches\n"
      "refs/gatos/log, then every ref under refs/gatos/ (deleting those the ledger\n"
      "pruned), then refs/gatos/log again, and records both log heads in\n"
      "DIR/gatos-mirror.\n"
      "\n"
      "Why: a fetch is not a snapshot. While gatosd writes, the refs fetched can mix\n"
      "the states of several batches, and a mirror kept with plain 'git fetch' can\n"
      "show refs the fetched log does not explain yet. gatosd writes each batch's log\n"
      "commit before its refs, so with the log fetched last no ref is ahead of it;\n"
      "'gatos verify' then accepts, for the refs that batches landing during the\n"
      "fetch moved, any value they held in that window (reported as settling), and\n"
      "compares every other ref exactly. Exit status 0 on success, 1 when a fetch\n"
      "fails, 2 for usage errors.\n"
      "\n"
      "  --json   one JSON object: dir, seq_before, seq_after, log_before, log_after\n";
  Flags flags;
  if (!flags.Parse(args, {{"json", 0, false}})) return UsageError("mirror", flags.error());
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  if (flags.positional().size() != 2)
    return UsageError("mirror", "give SOURCE and DIR (see gatos mirror --help)");
  const std::string source = flags.positional()[0];
  const std::string dir = flags.positional()[1];
  if (source.rfind("-", 0) == 0) return UsageError("mirror", "SOURCE must not start with '-'");
  SpawnOptions so;
  so.env = Environment::Current();
  struct stat st;
  bool created = false;
  if (::stat((dir + "/HEAD").c_str(), &st) != 0) {
    created = ::stat(dir.c_str(), &st) != 0;
    auto init = RunAndCapture({"git", "init", "-q", "--bare", "--", dir}, so);
    if (!init.ok() || !init->status.ok()) {
      return ReportError("cannot create a bare repository in " + dir +
                             (init.ok() ? ": " + init->err : ": " + init.status().message()),
                         kExitFailure);
    }
  }
  auto before = FetchLog(source, dir, so);
  if (!before.ok()) {
    // Leave nothing behind that this run made.
    if (created) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
    return ReportError(before.status().message(), kExitFailure);
  }
  if (!flags.Has("json")) std::cerr << "fetching refs/gatos/* from " << GitUrlKey(source) << "\n";
  SpawnOptions all = so;
  all.out = Stdio::Null();
  if (flags.Has("json")) all.err = Stdio::Null();
  std::vector<std::string> argv = {"git", "-C", dir, "fetch", "--prune", "--no-write-fetch-head"};
  // git prints progress on a terminal; keep it there for a large first fetch.
  if (flags.Has("json") || !::isatty(2)) argv.push_back("-q");
  argv.insert(argv.end(), {"--", source, "+refs/gatos/*:refs/gatos/*"});
  auto p = Process::Spawn(argv, all);
  if (!p.ok()) return ReportError(p.status().message(), kExitFailure);
  ExitStatus fetched = p->Wait();
  if (!fetched.ok())
    return ReportError(
        "git fetch of refs/gatos/* from " + GitUrlKey(source) + " ended with " + fetched.ToString(),
        kExitFailure);
  auto after = FetchLog(source, dir, so);
  if (!after.ok()) return ReportError(after.status().message(), kExitFailure);
  MirrorRecord rec{before->first, before->second, after->first, after->second, SystemNowMs()};
  Status written = ReplaceFile(dir + "/" + kMirrorRecordFile, EncodeMirrorRecord(rec));
  if (!written.ok()) return ReportError(written.message(), kExitFailure);
  if (flags.Has("json")) {
    std::cout << Dump(json{{"dir", dir},
                           {"seq_before", rec.seq_before},
                           {"seq_after", rec.seq_after},
                           {"log_before", rec.log_before},
                           {"log_after", rec.log_after}})
              << '\n';
  } else {
    std::cout << "mirrored " << GitUrlKey(source) << " into " << dir << ": log at sequence "
              << rec.seq_after;
    if (rec.seq_after > rec.seq_before) {
      std::cout << " (batches " << rec.seq_before << ".." << rec.seq_after
                << " landed while fetching)";
    }
    std::cout << "\n";
  }
  return kExitOk;
}

int RunVerify(const Args& args) {
  if (HasFlag(args, "bundle")) return RunVerifyBundle(args);
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
                          {"log-only", 0, false},
                          {"state"},
                          {"checkpoint"},
                          {"threads"},
                          {"witnesses", 0, false},
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
  auto state_path = flags.Get("state");
  // --witnesses alone: the log replay with the witness checks.
  bool witnesses_alone = flags.Has("witnesses") && !flags.Has("all") && flags.positional().empty();
  bool all = flags.Has("all") || state_path.has_value() || witnesses_alone;
  bool log_only = flags.Has("log-only") || state_path.has_value() || witnesses_alone;
  if (log_only && !flags.positional().empty()) {
    return UsageError("verify", "--log-only and --state replay the whole log; do not name jobs");
  }
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
  opt.threads = 0;  // every core
  if (auto t = flags.Get("threads")) {
    char* end = nullptr;
    long v = std::strtol(t->c_str(), &end, 10);
    if (t->empty() || *end != '\0' || v < 0 || v > 256) {
      return UsageError("verify", "--threads takes a number from 0 (one per CPU) to 256");
    }
    opt.threads = static_cast<size_t>(v);
  }
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

  // A full replay reads every object of the ledger about once (Ledger::DisableObjectCache).
  if (all && !state_path) Ledger::DisableObjectCache();
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);

  // ---- the log replay ----
  std::optional<LogAuditReport> log;
  std::optional<AuditState> prior;
  if (all || flags.Has("witnesses")) {
    LogAuditOptions lo;
    lo.verify = opt;
    lo.witnesses = flags.Has("witnesses");
    lo.threads = opt.threads;
    ApplyMirrorRecord(*dir, **ledger, &lo);
    if (state_path) {
      auto st = ReadStateFile(*state_path);
      if (!st.ok()) return ReportError(st.status().message(), kExitUsage);
      prior = *st;
      lo.since = prior;
    }
    // The per-job pass after the replay does not verify again the
    // signatures of the results the replay checked.
    std::shared_ptr<ReplayVerified> verified;
    if (!log_only) {
      verified = std::make_shared<ReplayVerified>();
      lo.verified = verified.get();
    }
    auto r = AuditLog(**ledger, lo);
    if (!r.ok()) return ReportError(r.status().message(), kExitFailure);
    log = std::move(*r);
    opt.replay_verified = std::move(verified);
    if (auto cp = flags.Get("checkpoint"); cp && log->ok()) {
      if (!state_path) return UsageError("verify", "--checkpoint needs --state FILE (where the last one is kept)");
      Status c = CheckCheckpointState(*dir, **ledger, *cp, *state_path + ".checkpoint", opt.ledger_key);
      if (!c.ok()) log->problems.push_back({"checkpoint", c.message(), 0, "", ""});
    }
    if (state_path && log->ok() && log->refs_behind == 0) {
      AuditState next = log->state();
      next.verified_at_ms = SystemNowMs();
      Status w = WriteStateFile(*state_path, next);
      if (!w.ok()) return ReportError(w.message(), kExitFailure);
    }
  }
  // Refs newer than the log this mirror holds: not a tamper finding, and
  // not verified either. The per-job pass would read them: skip it.
  bool behind = log && log->ok() && log->refs_behind > 0;
  if (log_only || behind) {
    if (flags.Has("json")) {
      json out = LogAuditReportToJson(*log);
      out["repo"] = *dir;
      if (state_path) out["state_file"] = *state_path;
      std::cout << Dump(out) << '\n';
    } else {
      PrintLogReport(*log);
    }
    if (behind) {
      std::cerr << "mirror is behind its refs: fetch again (" << log->refs_behind
                << " refs are newer than the log head it holds, e.g. " << log->behind_refs.front()
                << "; 'gatos mirror LEDGER " << *dir << "' makes a consistent copy)\n";
      return kExitFetchAgain;
    }
    return log->ok() ? kExitOk : kExitFailure;
  }

  // On a terminal only: piped or --json output is unchanged.
  ProgressBar bar("verifying jobs", !flags.Has("json"));
  if (all && bar.enabled())
    opt.progress = [&bar](size_t done, size_t total) { bar.Update(done, total); };
  Auditor auditor(ledger->get(), opt);
  AuditSummary summary;
  if (all) {
    auto s = auditor.VerifyAll();
    bar.Done();
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
    if (log) {
      out["log"] = LogAuditReportToJson(*log);
      out["ok"] = summary.ok() && log->ok();
    }
    std::cout << Dump(out) << '\n';
  } else {
    if (log) PrintLogReport(*log);
    for (const auto& r : summary.jobs) std::cout << Line(r) << '\n';
    std::cout << summary.jobs.size() << " jobs: " << summary.verified << " results verified, "
              << summary.without_result << " without a result, " << summary.failed << " failed";
    if (dev) std::cout << "; " << dev << " accepted only in DEV MODE";
    std::cout << '\n';
  }
  return summary.ok() && (!log || log->ok()) ? kExitOk : kExitFailure;
}

int RunWitness(const Args& args) {
  const char* help =
      "usage: gatos witness --repo DIR --key KEY [--state FILE] [--push REMOTE] [--json]\n"
      "\n"
      "Verifies the ledger log of DIR (a mirror kept with git fetch) as 'gatos verify\n"
      "--all --log-only' does (incrementally with --state FILE), then signs with KEY\n"
      "(an OpenSSH Ed25519 private key: the auditor's) the statement \"the log of\n"
      "ledger L at sequence N is commit C\" as a git commit, stores it in DIR at\n"
      "refs/gatos/witnesses/<key hex> and prints it. Push it to the ledger with\n"
      "  git -C DIR push LEDGER/push refs/gatos/witnesses/<key hex>\n"
      "(or --push REMOTE): the ledger checks it and records it in its log at\n"
      "refs/gatos/witness/<key hex>. 'gatos verify --witnesses' compares witnesses:\n"
      "two of them naming different commits at one sequence prove that the ledger\n"
      "showed different histories. Nothing is signed when the log does not verify.\n"
      "With --checkpoint FILE it cosigns the ledger's checkpoint instead (C2SP\n"
      "tlog-cosignature): 'gatos witness --checkpoint FILE --help'.\n";
  if (HasFlag(args, "checkpoint")) return RunWitnessCosign(args);
  Flags flags;
  if (!flags.Parse(args, {{"repo"},
                          {"ledger"},
                          {"key"},
                          {"state"},
                          {"push"},
                          {"ledger-key"},
                          {"json", 0, false}})) {
    return UsageError("witness", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoFlag(flags, "witness", &usage);
  if (!dir) return usage;
  if (!flags.positional().empty()) return UsageError("witness", "takes no positional arguments");
  auto key_path = flags.Get("key");
  if (!key_path)
    return UsageError("witness", "--key KEY is required (the auditor's SSH Ed25519 private key)");
  auto key = ReadPrivateKeyFile(*key_path);
  if (!key.ok()) return ReportError("--key: " + key.status().message(), kExitUsage);
  LogAuditOptions lo;
  if (auto path = flags.Get("ledger-key")) {
    auto lk = ReadPublicKeyFile(*path);
    if (!lk.ok()) return ReportError("--ledger-key: " + lk.status().message(), kExitUsage);
    lo.verify.ledger_key = *lk;
  }
  auto state_path = flags.Get("state");
  if (state_path) {
    auto st = ReadStateFile(*state_path);
    if (!st.ok()) return ReportError(st.status().message(), kExitUsage);
    lo.since = *st;
  }
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  ApplyMirrorRecord(*dir, **ledger, &lo);
  auto log = AuditLog(**ledger, lo);
  if (!log.ok()) return ReportError(log.status().message(), kExitFailure);
  if (!log->ok()) {
    if (!flags.Has("json")) PrintLogReport(*log);
    return ReportError("the log does not verify; no witness is signed", kExitFailure);
  }
  WitnessStatement w;
  w.ledger_root = log->ledger_root;
  w.seq = log->seq;
  w.log_commit = log->head;
  w.time_ms = SystemNowMs();
  auto commit = BuildWitnessCommit(w, *key);
  if (!commit.ok()) return ReportError(commit.status().message(), kExitFailure);
  auto written = (*ledger)->WriteRawObject(commit->type, commit->data);
  if (!written.ok()) return ReportError(written.status().message(), kExitFailure);
  std::string hex = key->public_key().Hex();
  std::string ref = WitnessPushRef(hex);
  auto cur = (*ledger)->ResolveRef(ref);
  if (!cur.ok()) return ReportError(cur.status().message(), kExitFailure);
  Status moved = (*ledger)->UpdateRefs({{ref, *cur, commit->id}}, "gatos witness");
  if (!moved.ok()) return ReportError(moved.message(), kExitFailure);
  if (state_path) {
    AuditState next = log->state();
    next.verified_at_ms = w.time_ms;
    Status ws = WriteStateFile(*state_path, next);
    if (!ws.ok()) return ReportError(ws.message(), kExitFailure);
  }
  int rc = kExitOk;
  std::string pushed;
  if (auto remote = flags.Get("push")) {
    std::string cmd = "git -C '" + *dir + "' push -q '" + *remote + "' '" + ref + ":" + ref + "'";
    if (dir->find('\'') != std::string::npos || remote->find('\'') != std::string::npos) {
      return ReportError("--push: paths with a single quote are not supported", kExitUsage);
    }
    rc = std::system(cmd.c_str()) == 0 ? kExitOk : kExitFailure;
    pushed = rc == kExitOk ? "pushed" : "push failed";
  }
  if (flags.Has("json")) {
    std::cout << Dump({{"witness", commit->id},
                       {"ref", ref},
                       {"ledger", w.ledger_root},
                       {"seq", w.seq},
                       {"log_commit", w.log_commit},
                       {"key", key->public_key().WorkerId()},
                       {"pushed", pushed}})
              << '\n';
  } else {
    std::cout << "witness " << commit->id << ": log of ledger " << w.ledger_root << " at " << w.seq
              << " is " << w.log_commit << "\n";
    std::cout << "stored at " << ref << " in " << *dir << "; "
              << (pushed.empty() ? "push it with: git -C " + *dir + " push LEDGER/push " + ref
                                 : pushed)
              << "\n";
  }
  if (rc != kExitOk) return ReportError("git push of the witness failed", kExitFailure);
  return kExitOk;
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
