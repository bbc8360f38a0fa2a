// gatos-scan: scans a git repository's history for secrets. Flags and wiring
// only; see lib/scan/include/gatos/scan/scanner.h and docs/scan.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/live_output.h"
#include "gatos/scan/baseline.h"
#include "gatos/scan/examples.h"
#include "gatos/scan/fingerprint.h"
#include "gatos/scan/rules.h"
#include "gatos/scan/scanner.h"
#include "gatos/sys/flags.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // operational failure (outputs written when possible)
constexpr int kExitUsage = 2;     // bad flags
constexpr int kExitFindings = 3;  // --fail-on-findings and at least one finding
constexpr int kExitBudget = 4;    // partial only because a budget ran out

constexpr const char* kUsage = R"(usage: gatos-scan --repo PATH|file://URL|URL [options]
       gatos-scan --input N [options]        (as a job with git inputs)
       gatos-scan --check-rules FILE [--rules FILE]... [--no-default-rules]

Scans every blob reachable from the selected refs of a git repository for
secrets. Writes findings.jsonl (one line per location), secrets.jsonl (one
line per distinct secret, with its locations), findings.sarif (SARIF 2.1.0)
and summary.json into the output directory. Findings hold rule, blob,
commit, path, line, byte span and a keyed fingerprint; never the secret
itself. A line holding `gatos:allow` reports nothing.

options:
  --repo PATH|URL        repository to scan (local path, file:// or remote URL)
  --input N              scan the job's git input N, which the worker fetched
                         ($GATOS_INPUT_N, at $GATOS_INPUT_N_COMMIT; see
                         docs/inputs.md): no mirror, no network. The default
                         when neither is given and the job has one input
  --ref REF              ref to scan: full name, short branch/tag name or glob
                         (repeatable; default: refs/heads/* and refs/tags/*)
  --state-dir DIR        mirrors, done-ledger and watermarks (or GATOS_STATE_DIR)
  --output-dir DIR       where outputs go (or GATOS_OUTPUT_DIR)
  --rules FILE           extra rules file (repeatable; same id replaces a rule)
  --no-default-rules     use only the --rules files
  --allowlist FILE       extra allow-list file (paths, regexes, stopwords)
  --baseline FILE        accepted findings (by fingerprint): listed apart, as
                         suppressed in the SARIF, not in findings.jsonl
  --write-baseline FILE  write a baseline accepting every current finding
  --check-rules FILE     run the examples (tp/fp) of FILE's rules, together
                         with the default rules and any --rules FILE, and
                         report failures; scans nothing
  --fingerprint-key FILE 32-byte key for fingerprints (or
                         GATOS_FINGERPRINT_KEY_FILE; default: generated once
                         into DIR/fingerprint.key of the state dir)
  --max-seconds N        time budget; a scan that runs out is partial
  --max-blobs N          budget of blobs read; a scan that runs out is partial
  --max-blob-bytes N     skip larger blobs (default 52428800)
  --threads N            scanning threads (default: one per core)
  --json                 print summary.json on stdout instead of a text summary
  --progress             progress on stderr even when it is not a terminal
  --fail-on-findings     exit 3 when the listing has findings
  --help                 this text

exit status: 0 complete (with or without findings), 1 operational failure
(summary says partial when outputs could be written; for --check-rules: an
example failed), 2 usage error,
3 findings with --fail-on-findings, 4 partial because --max-seconds or
--max-blobs ran out (rerun to continue; watermarks did not move).
)";

int Usage(const std::string& msg) {
  std::cerr << "gatos-scan: " << msg << "\n(run gatos-scan --help for usage)\n";
  return kExitUsage;
}

// One progress line (gatos/model/live_output.h, the line protocol) appended
// to the worker's progress file: objects decided of those the walk reached so
// far, bytes scanned, commits walked. The file is opened without following a
// symlink, each time (a line at most a second).
void AppendProgressLine(const std::string& path, const gatos::scan::ScanCounters& c) {
  gatos::Progress p;
  const uint64_t decided =
      c.blobs_scanned + c.blobs_skipped_done + c.blobs_skipped_binary + c.blobs_skipped_too_large;
  const uint64_t seen = std::max(c.blobs_seen, decided);
  p.counters = {{"objects", static_cast<int64_t>(decided), static_cast<int64_t>(seen), 0},
                {"bytes", static_cast<int64_t>(c.bytes_scanned), 0, 0},
                {"commits", static_cast<int64_t>(c.commits_walked), 0, 0}};
  const std::string line = gatos::FormatProgressLine(p) + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = ::write(fd, line.data(), line.size());
  (void)w;
  ::close(fd);
}

int Fail(const std::string& msg) {
  std::cerr << "gatos-scan: error: " << msg << '\n';
  return kExitFailure;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

gatos::Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return gatos::UnavailableError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return gatos::UnavailableError("cannot rename " + tmp + " to " + path);
  }
  return gatos::OkStatus();
}

// --check-rules: the file's rules merged after the defaults (unless
// --no-default-rules) and the --rules files, as a scan would use them; every
// example of every rule is run.
int CheckRules(const std::string& file, const std::vector<std::string>& more_files,
               bool default_rules) {
  using namespace gatos::scan;
  RuleSet rules;
  if (default_rules) {
    gatos::Result<RuleSet> defaults = DefaultRules();
    if (!defaults.ok()) return Fail("built-in rules: " + defaults.status().message());
    rules = std::move(*defaults);
  }
  std::vector<std::string> files = more_files;
  files.push_back(file);
  std::vector<std::string> checked_ids;
  for (const std::string& f : files) {
    gatos::Result<RuleSet> more = LoadRulesFile(f);
    if (!more.ok()) return Usage("rules: " + more.status().message());
    if (f == file) {
      for (const Rule& r : more->rules) checked_ids.push_back(r.id);
    }
    MergeRules(&rules, std::move(*more));
  }
  gatos::Result<ExampleReport> rep = CheckRuleExamples(rules, /*require_both=*/false);
  if (!rep.ok()) return Usage("rules: " + rep.status().message());
  std::cout << FormatExampleReport(*rep);
  for (const std::string& id : rep->incomplete) {
    if (std::find(checked_ids.begin(), checked_ids.end(), id) != checked_ids.end()) {
      std::cout << "gatos-scan: note: rule " << id
                << " lacks true or false positive examples (examples: {tp: [...], fp: [...]})\n";
    }
  }
  return rep->ok() ? kExitOk : kExitFailure;
}

// The git input `n` the worker fetched for this job, from the variables
// it sets (gatos/exec/inputs.h ExposeInputs).
gatos::Result<gatos::scan::PreparedRepo> InputRepo(const std::string& n) {
  const std::string var = "GATOS_INPUT_" + n;
  gatos::scan::PreparedRepo p;
  p.path = Env(var.c_str());
  p.commit = Env((var + "_COMMIT").c_str());
  const std::string url = Env((var + "_URL").c_str());
  const std::string ref = Env((var + "_REF").c_str());
  if (p.path.empty() || p.commit.empty() || url.empty()) {
    const std::string have = Env("GATOS_INPUTS");
    return gatos::NotFoundError(
        "--input " + n + ": this job has no git input " + n + " (" + var + " is not set; " +
        (have.empty() ? std::string("the job declares no git inputs") : "its inputs are: " + have) +
        "); declare it in the manifest's inputs (docs/inputs.md)");
  }
  if (!gatos::IsGitCommitId(p.commit)) {
    return gatos::InvalidArgumentError(var + "_COMMIT is not a commit id");
  }
  p.key = gatos::GitUrlKey(url);
  // Watermarks are kept per ref: the input's ref, or HEAD for a bare commit.
  p.ref = ref.empty() ? "HEAD" : ref;
  return p;
}

// Run as a job (the worker sets GATOS_JOB_ID and, for scan jobs only,
// GATOS_STATE_DIR; a manifest can set neither), the flags are the
// submitter's and the state is the worker's: keys, the baselines and
// mirrors of every other repository scanned here. No flag may read or
// write inside it, and the state and key are the worker's own.
// `paths`: flag name -> value, for every path flag given.
std::string JobPathProblem(const std::vector<std::pair<std::string, std::string>>& paths) {
  const std::string state = Env("GATOS_STATE_DIR");
  if (Env("GATOS_JOB_ID").empty() || state.empty()) return "";
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(state, ec);
  if (ec) return "the worker's scan state " + state + " cannot be resolved";
  for (const auto& [flag, value] : paths) {
    if (flag == "state-dir" || flag == "fingerprint-key") {
      return "--" + flag + " is not for scan jobs: a scan job uses the worker's scan state and key";
    }
    // Symlinks resolved, as far as the path exists; the rest lexically.
    const std::string path = value.starts_with("file://") ? value.substr(7) : value;
    const std::filesystem::path p =
        std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    if (ec) return "--" + flag + ": " + gatos::TruncateUtf8(value, 200) + " cannot be resolved";
    auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
    if (r == root.end()) {
      return "--" + flag + ": " + gatos::TruncateUtf8(value, 200) +
             " is inside the worker's scan state, which no job may name";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gatos::scan;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::string> repo, input, state_dir, output_dir, allowlist, key_file, baseline,
      write_baseline, check_rules;
  std::vector<std::string> refs, rule_files;
  std::optional<double> max_seconds;
  std::optional<uint64_t> max_blobs;
  uint64_t max_blob_bytes = kDefaultMaxBlobBytes;
  int threads = 0;
  bool json = false, progress = false, fail_on_findings = false, default_rules = true;

  // Value flags are repeatable so that, as always, the last one counts; the
  // few that must be given once say why below.
  gatos::Flags flags;
  if (!flags.Parse(args, {{"repo", 0, true, true},
                          {"input", 0, true, true},
                          {"ref", 0, true, true},
                          {"state-dir", 0, true, true},
                          {"output-dir", 0, true, true},
                          {"rules", 0, true, true},
                          {"allowlist", 0, true, true},
                          {"fingerprint-key", 0, true, true},
                          {"baseline", 0, true, true},
                          {"write-baseline", 0, true, true},
                          {"check-rules", 0, true, true},
                          {"max-seconds", 0, true, true},
                          {"max-blobs", 0, true, true},
                          {"max-blob-bytes", 0, true, true},
                          {"threads", 0, true, true},
                          {"json", 0, false},
                          {"progress", 0, false},
                          {"fail-on-findings", 0, false},
                          {"no-default-rules", 0, false}})) {
    if (flags.error_kind() == gatos::FlagErrorKind::kUnknown) {
      return Usage("unknown argument \"" + flags.error_flag() + "\"");
    }
    return Usage(flags.error());
  }
  if (flags.help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (!flags.positional().empty()) {
    return Usage("unknown argument \"" + gatos::TruncateUtf8(flags.positional()[0], 64) + "\"");
  }
  if (flags.GetAll("repo").size() > 1)
    return Usage("--repo given twice; scan one repository per run");
  if (flags.GetAll("allowlist").size() > 1)
    return Usage("--allowlist given twice; merge the files");
  if (flags.GetAll("baseline").size() > 1) return Usage("--baseline given twice; merge the files");
  if (flags.GetAll("check-rules").size() > 1)
    return Usage("--check-rules given twice; check one file per run");
  if (flags.GetAll("input").size() > 1)
    return Usage("--input given twice; scan one repository per run");
  repo = flags.Get("repo");
  input = flags.Get("input");
  refs = flags.GetAll("ref");
  state_dir = flags.Get("state-dir");
  output_dir = flags.Get("output-dir");
  rule_files = flags.GetAll("rules");
  allowlist = flags.Get("allowlist");
  key_file = flags.Get("fingerprint-key");
  baseline = flags.Get("baseline");
  write_baseline = flags.Get("write-baseline");
  check_rules = flags.Get("check-rules");
  {
    std::vector<std::pair<std::string, std::string>> paths;
    for (const char* f : {"repo", "state-dir", "output-dir", "rules", "allowlist",
                          "fingerprint-key", "baseline", "write-baseline", "check-rules"}) {
      for (const std::string& v : flags.GetAll(f)) paths.emplace_back(f, v);
    }
    if (std::string problem = JobPathProblem(paths); !problem.empty()) return Usage(problem);
  }
  double seconds = 0;
  uint64_t blobs = 0;
  if (!flags.GetDouble("max-seconds", 0, HUGE_VAL, &seconds) ||
      !flags.GetUint("max-blobs", 0, UINT64_MAX, &blobs) ||
      !flags.GetUint("max-blob-bytes", 0, UINT64_MAX, &max_blob_bytes) ||
      !flags.GetInt("threads", 1, 1024, &threads)) {
    return Usage(flags.error());
  }
  if (flags.Has("max-seconds")) max_seconds = seconds;
  if (flags.Has("max-blobs")) max_blobs = blobs;
  json = flags.Has("json");
  progress = flags.Has("progress");
  fail_on_findings = flags.Has("fail-on-findings");
  default_rules = !flags.Has("no-default-rules");
  if (check_rules) return CheckRules(*check_rules, rule_files, default_rules);
  if (repo && input) return Usage("give --repo or --input, not both");
  if (!repo && !input) {
    // As a job with exactly one git input, that input is the repository.
    const std::string inputs = Env("GATOS_INPUTS");
    if (!inputs.empty() && inputs.find(' ') == std::string::npos) input = inputs;
  }
  if (!repo && !input)
    return Usage("--repo is required (or --input N when run as a job with git inputs)");
  if (input && !refs.empty()) {
    return Usage(
        "--ref does not apply to --input: the input names its commit (set ref or commit in the "
        "manifest's input)");
  }
  std::optional<PreparedRepo> prepared;
  if (input) {
    if (input->empty() || input->find_first_not_of("0123456789") != std::string::npos) {
      return Usage("--input expects an input index (0, 1, ...), got \"" +
                   gatos::TruncateUtf8(*input, 64) + "\"");
    }
    gatos::Result<PreparedRepo> p = InputRepo(*input);
    if (!p.ok()) return Fail(p.status().message());
    prepared = std::move(*p);
  }
  if (!state_dir) state_dir = Env("GATOS_STATE_DIR");
  if (state_dir->empty()) {
    return Usage(
        "no state directory: give --state-dir DIR or set GATOS_STATE_DIR "
        "(it keeps mirrors, the done-ledger and watermarks between runs)");
  }
  if (!output_dir) output_dir = Env("GATOS_OUTPUT_DIR");
  if (output_dir->empty()) {
    return Usage("no output directory: give --output-dir DIR or set GATOS_OUTPUT_DIR");
  }
  if (::access(output_dir->c_str(), W_OK) != 0) {
    return Fail("output directory " + *output_dir +
                " does not exist or is not writable (create it first)");
  }

  ScanOptions opts;
  if (prepared) {
    opts.prepared = std::move(prepared);
  } else {
    opts.repo = *repo;
  }
  opts.refs = refs;
  opts.state_dir = *state_dir;
  opts.max_seconds = max_seconds;
  opts.max_blobs = max_blobs;
  opts.max_blob_bytes = max_blob_bytes;
  opts.threads = threads;
  if (default_rules) {
    gatos::Result<RuleSet> defaults = DefaultRules();
    if (!defaults.ok()) return Fail("built-in rules: " + defaults.status().message());
    opts.rules = std::move(*defaults);
  } else if (rule_files.empty()) {
    return Usage("--no-default-rules needs at least one --rules FILE");
  }
  for (const std::string& f : rule_files) {
    gatos::Result<RuleSet> more = LoadRulesFile(f);
    if (!more.ok()) return Usage("rules: " + more.status().message());
    MergeRules(&opts.rules, std::move(*more));
  }
  if (allowlist) {
    gatos::Result<Allowlist> al = LoadAllowlistFile(*allowlist);
    if (!al.ok()) return Usage("allowlist: " + al.status().message());
    MergeAllowlist(&opts.rules.allowlist, *al);
  }
  if (baseline) {
    gatos::Result<Baseline> b = LoadBaselineFile(*baseline);
    if (!b.ok()) return Usage("baseline: " + b.status().message());
    opts.baseline = std::move(*b);
  }

  if (!key_file) {
    std::string env_key = Env("GATOS_FINGERPRINT_KEY_FILE");
    if (!env_key.empty()) key_file = env_key;
  }
  gatos::Result<gatos::Digest32> key = [&]() -> gatos::Result<gatos::Digest32> {
    if (key_file) return ReadFingerprintKey(*key_file);
    if (::mkdir(state_dir->c_str(), 0700) != 0 && errno != EEXIST) {
      return gatos::UnavailableError("cannot create state directory " + *state_dir);
    }
    return LoadOrCreateFingerprintKey(*state_dir + "/fingerprint.key");
  }();
  if (!key.ok()) return Fail(key.status().message());
  opts.fingerprint_key = *key;

  const bool tty = ::isatty(STDERR_FILENO) == 1;
  // Under a worker: progress lines for the job's progress file (counts only,
  // never a path or a finding; docs/worker-execution.md, "Progress").
  const char* progress_file = std::getenv("GATOS_PROGRESS_FILE");
  const std::string progress_path = progress_file && *progress_file ? progress_file : "";
  if (progress || tty || !progress_path.empty()) {
    const bool to_stderr = progress || tty;
    opts.progress = [tty, to_stderr, progress_path](const ScanCounters& c) {
      if (!progress_path.empty()) AppendProgressLine(progress_path, c);
      if (!to_stderr) return;
      std::cerr << (tty ? "\r" : "") << "gatos-scan: " << c.commits_walked << " commits, "
                << c.blobs_scanned << " blobs / " << (c.bytes_scanned >> 20) << " MiB scanned, "
                << c.blobs_skipped_done << " already done, " << c.findings_new << " findings"
                << (tty ? "   " : "\n") << std::flush;
    };
  }
  if (const char* pace = std::getenv("SCAN_PACE_MS"); pace && *pace) {
    opts.pace_ms = std::min<int64_t>(std::max<int64_t>(std::atoll(pace), 0), 10000);
  }

  gatos::Result<ScanReport> report = RunScan(opts);
  if (tty && opts.progress) std::cerr << '\n';
  if (!report.ok()) {
    return report.status().code() == gatos::StatusCode::kInvalidArgument &&
                   report.status().message().find("rule") != std::string::npos
               ? Usage(report.status().message())
               : Fail(report.status().message());
  }
  if (gatos::Status s = WriteOutputs(*report, *output_dir); !s.ok()) return Fail(s.message());
  if (write_baseline) {
    std::vector<ListedFinding> all = report->findings;
    all.insert(all.end(), report->accepted.begin(), report->accepted.end());
    if (gatos::Status s = WriteTextFile(*write_baseline, BaselineJson(all)); !s.ok()) {
      return Fail(s.message());
    }
  }

  if (json) {
    std::cout << SummaryJson(*report) << '\n';
  } else {
    const ScanCounters& c = report->counters;
    std::cout << "gatos-scan: " << report->repo_key << ": "
              << (report->complete ? "complete" : "PARTIAL") << ", " << c.blobs_scanned
              << " blobs (" << c.bytes_scanned << " bytes) scanned, " << c.blobs_skipped_done
              << " already done, " << c.blobs_skipped_binary << " binary, "
              << c.blobs_skipped_too_large << " too large; " << report->findings.size()
              << " findings of " << report->secrets.size() << " distinct secrets ("
              << c.findings_new << " new)";
    if (report->baseline_used) std::cout << ", " << report->accepted.size() << " in the baseline";
    std::cout << (report->force_pushed ? "; force-push detected" : "") << '\n';
    for (const std::string& r : report->partial_reasons) {
      std::cout << "gatos-scan: note: " << r << '\n';
    }
  }
  if (!report->complete) {
    // Only budget problems (and ref notes) make a partial run exit 4.
    if (report->budget_exhausted) return kExitBudget;
    for (const std::string& r : report->partial_reasons)
      std::cerr << "gatos-scan: error: " << r << '\n';
    return kExitFailure;
  }
  if (fail_on_findings && !report->findings.empty()) return kExitFindings;
  return kExitOk;
}
