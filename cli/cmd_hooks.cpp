// gatos hooks install | commit-msg: stock git submission without hand-made
// trailers. The installed commit-msg hook runs `gatos hooks commit-msg`,
// which reads the job.yaml being committed (from the index git prepared for
// this commit), refuses the commit with the manifest's errors when it is
// invalid, and otherwise sets the message's `Job-Id:` trailer with git's own
// `git interpret-trailers`.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "gatos/model/manifest.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"

namespace gatos::cli {
namespace {

constexpr char kMarker[] = "# gatos-commit-msg-hook v1";

constexpr char kInstallHelp[] =
    "usage: gatos hooks install [--repo DIR] [--force]\n\n"
    "Installs a commit-msg hook in the git repository DIR (default: the current\n"
    "directory; core.hooksPath is honoured). When a commit holds a job.yaml at\n"
    "the top of the repository, the hook checks it and\n"
    "  - refuses the commit with the manifest's errors when it is invalid;\n"
    "  - otherwise adds (or corrects) the trailer 'Job-Id: blake3:<id>' the\n"
    "    ledger requires, so that 'git commit -S' and 'git push' are enough.\n"
    "Commits without a job.yaml are left alone. An existing commit-msg hook that\n"
    "gatos did not install is kept unless --force.\n";

constexpr char kCommitMsgHelp[] =
    "usage: gatos hooks commit-msg MESSAGE-FILE\n\n"
    "What the installed hook runs (git passes MESSAGE-FILE): checks the job.yaml\n"
    "staged for this commit and sets its Job-Id trailer in MESSAGE-FILE.\n"
    "Exit 0 when the commit may go on, 1 (with the reasons) when not.\n";

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// Runs git with `args`; its stdout in *out, its stderr in *err.
int Git(const std::vector<std::string>& args, std::string* out, std::string* err = nullptr) {
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions o;
  o.env =
      Environment::Current();  // GIT_DIR, GIT_INDEX_FILE and the rest, as git gave them to the hook
  auto r = RunAndCapture(argv, std::move(o));
  if (!r.ok()) {
    if (err) *err = r.status().message();
    return -1;
  }
  if (out) *out = r->out;
  if (err) *err = r->err;
  return r->status.exited() ? r->status.code : -1;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

int RunHooksInstall(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"repo"}, {"force", 0, false}}))
    return UsageError("hooks install", flags.error());
  if (flags.help()) {
    std::cout << kInstallHelp;
    return kExitOk;
  }
  if (!flags.positional().empty())
    return UsageError("hooks install", "takes no arguments (--repo DIR)");
  std::string repo = flags.Get("repo").value_or(".");
  std::string hooks, err;
  if (Git({"-C", repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks"}, &hooks,
          &err) != 0) {
    return ReportError(repo + " is not a git repository: " + Trim(err), kExitUsage);
  }
  hooks = Trim(hooks);
  ::mkdir(hooks.c_str(), 0755);
  const std::string path = hooks + "/commit-msg";
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream old;
      old << in.rdbuf();
      if (old.str().find(kMarker) == std::string::npos && !flags.Has("force")) {
        return ReportError(
            path + " exists and was not installed by gatos; merge it by hand or use --force",
            kExitFailure);
      }
    }
  }
  // The gatos that installed it, or the one on PATH if that one moved.
  const std::string self = SelfPath();
  std::string script =
      std::string("#!/bin/sh\n") + kMarker +
      "\n"
      "# Installed by 'gatos hooks install': sets the Job-Id trailer of a commit that\n"
      "# holds job.yaml, and refuses an invalid manifest.\n"
      "gatos=" +
      ShellQuote(self) +
      "\n"
      "[ -x \"$gatos\" ] || gatos=gatos\n"
      "exec \"$gatos\" hooks commit-msg \"$1\"\n";
  const std::string tmp = path + ".gatos-tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << script;
    if (!out.good()) return ReportError("cannot write " + tmp, kExitFailure);
  }
  if (::chmod(tmp.c_str(), 0755) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return ReportError("cannot install " + path, kExitFailure);
  }
  std::cout << "installed " << path << "\n";
  return kExitOk;
}

int RunHooksCommitMsg(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {})) return UsageError("hooks commit-msg", flags.error());
  if (flags.help()) {
    std::cout << kCommitMsgHelp;
    return kExitOk;
  }
  if (flags.positional().size() != 1)
    return UsageError("hooks commit-msg", "expects the MESSAGE-FILE git passes");
  const std::string& msg_file = flags.positional()[0];
  // The index this commit is made from (git sets GIT_INDEX_FILE for hooks,
  // also for 'git commit -a' and 'git commit FILE').
  std::string listed;
  if (Git({"ls-files", "--cached", "--", ":(top)job.yaml"}, &listed) != 0 || Trim(listed).empty()) {
    return kExitOk;  // not a job commit
  }
  std::string bytes, err;
  if (Git({"cat-file", "blob", ":job.yaml"}, &bytes, &err) != 0) {
    // cat-file resolves ":job.yaml" relative to the top only from there.
    std::string top;
    Git({"rev-parse", "--show-toplevel"}, &top);
    if (Git({"-C", Trim(top), "cat-file", "blob", ":job.yaml"}, &bytes, &err) != 0) {
      return ReportError("gatos commit-msg hook: cannot read the staged job.yaml: " + Trim(err),
                         kExitFailure);
    }
  }
  auto m = ParseManifest(bytes, "job.yaml");
  if (!m.ok()) {
    std::cerr << "gatos commit-msg hook: job.yaml is not a valid job manifest; commit refused:\n";
    return ReportError(m.status().message(), kExitFailure);
  }
  const std::string trailer = "Job-Id: " + JobId(*m);
  std::string out;
  if (Git({"interpret-trailers", "--in-place", "--if-exists", "replace", "--trailer", trailer,
           msg_file},
          &out, &err) != 0) {
    return ReportError("gatos commit-msg hook: git interpret-trailers failed: " + Trim(err),
                       kExitFailure);
  }
  return kExitOk;
}

}  // namespace gatos::cli
