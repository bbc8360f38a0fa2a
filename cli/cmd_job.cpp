// gatos job id | canon | validate
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "gatos/model/manifest.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/manifest_file.h"

namespace gatos::cli {
namespace {

constexpr char kJobIdHelp[] =
    "usage: gatos job id FILE\n"
    "\n"
    "Prints the job-id of the manifest FILE (YAML, or JSON when FILE ends in\n"
    ".json): blake3:<64 hex> of the RFC 8785 canonical JSON of the normalized\n"
    "manifest. FILE '-' reads standard input.\n"
    "\n"
    "Exit status: 0 on success, 2 when the manifest is invalid (one line per\n"
    "problem on stderr: FILE:LINE:COL: FIELD: what is wrong).\n";

constexpr char kJobCanonHelp[] =
    "usage: gatos job canon FILE\n"
    "\n"
    "Prints the canonical JSON bytes whose BLAKE3 is the job-id (no trailing\n"
    "newline). The ulid, if any, is not part of them.\n";

constexpr char kJobValidateHelp[] =
    "usage: gatos job validate [--json] FILE...\n"
    "\n"
    "Checks each manifest and prints 'FILE: ok blake3:<hex>' or its problems.\n"
    "Exit status 0 only if every file is valid.\n";

Result<Manifest> LoadOne(const std::string& path) {
  if (path == "-") {
    std::string data;
    char buf[65536];
    size_t n;
    ManifestLimits limits;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
      data.append(buf, n);
      if (data.size() > limits.max_bytes) {
        return InvalidArgumentError("<stdin>: manifest is larger than the limit of " +
                                    std::to_string(limits.max_bytes) + " bytes");
      }
    }
    return ParseManifest(data, "<stdin>");
  }
  return LoadManifestFile(path);
}

// Shared by `job id` and `job canon`: one FILE, prints what `emit` returns.
int RunSingle(const Args& args, const char* name, const char* help,
              std::string (*emit)(const Manifest&), bool newline) {
  Flags flags;
  if (!flags.Parse(args, {})) return UsageError(name, flags.error());
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  if (flags.positional().size() != 1) return UsageError(name, "expects exactly one FILE (see --help)");
  auto m = LoadOne(flags.positional()[0]);
  if (!m.ok()) return ReportError(m.status().message(), kExitUsage);
  std::cout << emit(*m);
  if (newline) std::cout << '\n';
  return kExitOk;
}

}  // namespace

int RunJobId(const Args& args) {
  return RunSingle(args, "job id", kJobIdHelp, [](const Manifest& m) { return JobId(m); }, true);
}

int RunJobCanon(const Args& args) {
  return RunSingle(args, "job canon", kJobCanonHelp,
                   [](const Manifest& m) { return CanonicalManifest(m); }, false);
}

int RunJobValidate(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"json", 0, false}})) return UsageError("job validate", flags.error());
  if (flags.help()) {
    std::cout << kJobValidateHelp;
    return kExitOk;
  }
  if (flags.positional().empty()) return UsageError("job validate", "expects at least one FILE");
  bool json = flags.Has("json");
  nlohmann::json report = nlohmann::json::array();
  int rc = kExitOk;
  for (const auto& path : flags.positional()) {
    auto m = LoadOne(path);
    if (m.ok()) {
      if (json) {
        report.push_back({{"file", path}, {"ok", true}, {"job_id", JobId(*m)}});
      } else {
        std::cout << path << ": ok " << JobId(*m) << '\n';
      }
    } else {
      rc = kExitUsage;
      if (json) {
        report.push_back({{"file", path}, {"ok", false}, {"errors", m.status().message()}});
      } else {
        std::cerr << m.status().message() << '\n';
      }
    }
  }
  if (json) std::cout << report.dump(2) << '\n';
  return rc;
}

}  // namespace gatos::cli
