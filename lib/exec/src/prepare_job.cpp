// Validating a job and deciding how it runs (prepare_job.h), and the job's
// environment (BuildJobEnv, gatos/exec/exec.h).
#include "prepare_job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

namespace gatos {
namespace exec_internal {
namespace {

namespace fs = std::filesystem;
using exec_protocol::BindPlan;

std::string Errno(int err) { return std::string(std::strerror(err)); }

// Lexically normalizes a manifest cwd; "" for the workspace itself.
Result<std::string> NormalizeCwd(const std::string& cwd) {
  if (cwd.find('\0') != std::string::npos) {
    return InvalidArgumentError("exec: cwd contains a NUL byte; fix the manifest's cwd");
  }
  if (!cwd.empty() && cwd[0] == '/') {
    return InvalidArgumentError("exec: cwd '" + cwd +
                                "' is absolute; a manifest cwd is relative to the job workspace");
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= cwd.size()) {
    size_t j = cwd.find('/', i);
    if (j == std::string::npos) j = cwd.size();
    std::string part = cwd.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) {
        return InvalidArgumentError("exec: cwd '" + cwd +
                                    "' leaves the job workspace; use a path inside it");
      }
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

bool IsUnder(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root == "/" || path[root.size()] == '/'));
}

bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// Resolves argv[0] like execvp, but against the job's PATH. Candidates are
// paths as the job sees them; `to_host` maps one to where it is on the host
// for the check (binds may show a host directory at another path).
template <typename ToHost>
Result<std::string> ResolveProgram(const std::string& prog,
                                   const std::map<std::string, std::string>& env,
                                   const std::string& cwd_abs, ToHost to_host) {
  if (prog.find('/') != std::string::npos) {
    return prog[0] == '/' ? prog : cwd_abs + "/" + prog;
  }
  auto it = env.find("PATH");
  std::string path = it == env.end() ? "" : it->second;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find(':', i);
    if (j == std::string::npos) j = path.size();
    std::string dir = path.substr(i, j - i);
    i = j + 1;
    if (dir.empty()) dir = ".";
    if (dir[0] != '/') dir = cwd_abs + "/" + dir;
    std::string cand = dir + "/" + prog;
    if (IsExecutableFile(to_host(cand))) return cand;
  }
  return NotFoundError("exec: command '" + prog + "' not found in the job's PATH (" + path +
                       "); use an absolute path or set PATH in the manifest's env");
}

// The spec's binds (ro_binds, rw_binds, then binds), checked and normalized.
Result<std::vector<BindPlan>> CheckBinds(const ExecSpec& spec, const std::string& workspace,
                                         const std::string& output_dir) {
  struct Entry {
    std::string source, destination;
    bool writable;
    const char* what;
  };
  std::vector<Entry> all;
  for (const auto& b : spec.ro_binds) all.push_back({b, b, false, "read-only bind"});
  for (const auto& b : spec.rw_binds) all.push_back({b, b, true, "writable bind"});
  for (const auto& b : spec.binds) {
    all.push_back({b.source, b.destination.empty() ? b.source : b.destination, b.writable, "bind"});
  }
  std::vector<BindPlan> out;
  for (const auto& e : all) {
    const std::string what = std::string("exec: ") + e.what + " '" + e.source + "'";
    if (e.source.empty() || e.source[0] != '/' || e.source.find('\0') != std::string::npos) {
      return InvalidArgumentError(what + " must be an absolute path");
    }
    struct stat st;
    if (::stat(e.source.c_str(), &st) != 0) {
      return InvalidArgumentError(what + " does not exist (" + Errno(errno) +
                                  "); binds show existing host paths");
    }
    if (e.writable && !S_ISDIR(st.st_mode) && std::string(e.what) == "writable bind") {
      return InvalidArgumentError(what + " must be an existing absolute directory");
    }
    BindPlan p;
    p.source = CleanPath(e.source);
    p.writable = e.writable;
    p.is_dir = S_ISDIR(st.st_mode);
    if (e.destination.empty() || e.destination[0] != '/' ||
        e.destination.find('\0') != std::string::npos) {
      return InvalidArgumentError(what + ": destination '" + e.destination +
                                  "' must be an absolute path");
    }
    p.destination = CleanPath(e.destination);
    const std::string& d = p.destination;
    if (d == "/" || IsUnder(d, "/proc") || IsUnder(d, "/dev")) {
      return InvalidArgumentError(
          what + ": destination " + d +
          " would replace the sandbox's /, /proc or /dev; pick another path");
    }
    for (const std::string& job_dir : {workspace, output_dir}) {
      if (!job_dir.empty() && IsUnder(job_dir, d)) {
        return InvalidArgumentError(what + ": destination " + d + " would hide the job's " +
                                    (job_dir == workspace ? "workspace " : "output dir ") +
                                    job_dir);
      }
    }
    for (const auto& q : out) {
      if (q.destination == d) {
        return InvalidArgumentError(what + ": destination " + d + " is already bound from " +
                                    q.source);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

std::string CleanPath(const std::string& p) {
  std::string out = std::filesystem::path(p).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

Result<PreparedJob> PrepareJob(const ExecSpec& spec, const Status& sandbox_ok) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgumentError("exec: empty command; the manifest must name a command");
  }
  for (const auto& a : spec.argv) {
    if (a.find('\0') != std::string::npos) {
      return InvalidArgumentError("exec: a command argument contains a NUL byte");
    }
  }
  if (spec.workspace.empty() || spec.workspace[0] != '/') {
    return InvalidArgumentError("exec: workspace '" + spec.workspace +
                                "' must be an absolute path to a directory the worker created");
  }
  std::error_code ec;
  if (!fs::is_directory(spec.workspace, ec)) {
    return InvalidArgumentError("exec: workspace " + spec.workspace +
                                " is not an existing directory; create it before Start");
  }
  if (spec.timeout_ms < 0 || spec.kill_grace_ms < 0) {
    return InvalidArgumentError("exec: timeout_ms and kill_grace_ms must be >= 0");
  }
  for (const auto& b : spec.ro_binds) {
    if (b.empty() || b[0] != '/') {
      return InvalidArgumentError("exec: read-only bind '" + b + "' must be an absolute path");
    }
  }
  for (const auto& b : spec.rw_binds) {
    if (b.empty() || b[0] != '/' || !fs::is_directory(b, ec)) {
      return InvalidArgumentError("exec: writable bind '" + b +
                                  "' must be an existing absolute directory");
    }
  }
  GATOS_ASSIGN_OR_RETURN(std::string rel_cwd, NormalizeCwd(spec.cwd));
  std::string ws_real = fs::canonical(spec.workspace, ec).string();
  if (ec)
    return InternalError("exec: cannot resolve workspace " + spec.workspace + ": " + ec.message());
  std::string cwd_abs = rel_cwd.empty() ? spec.workspace : spec.workspace + "/" + rel_cwd;
  if (!rel_cwd.empty()) {
    fs::create_directories(cwd_abs, ec);
    if (ec) {
      return InvalidArgumentError("exec: cannot create cwd " + cwd_abs + ": " + ec.message() +
                                  "; check the manifest's cwd");
    }
    // A symlink inside the workspace could still point out of it.
    std::string real = fs::canonical(cwd_abs, ec).string();
    if (ec || !IsUnder(real, ws_real)) {
      return InvalidArgumentError("exec: cwd '" + spec.cwd +
                                  "' resolves outside the job workspace; use a path inside it");
    }
  }
  ExecSpec eff = spec;
  if (!spec.output_dir.empty()) {
    eff.output_dir = CleanPath(fs::absolute(spec.output_dir, ec).string());
    fs::create_directories(eff.output_dir, ec);
    if (ec) {
      return InternalError("exec: cannot create output dir " + eff.output_dir + ": " +
                           ec.message() + "; check the worker's state-dir permissions");
    }
  }
  const std::string workspace = CleanPath(spec.workspace);
  GATOS_ASSIGN_OR_RETURN(std::vector<BindPlan> spec_binds,
                         CheckBinds(spec, workspace, eff.output_dir));
  GATOS_RETURN_IF_ERROR(BuildJobEnv(eff, false).status());  // names and values are valid

  PreparedJob job;
  if (spec.sandbox != ExecSpec::Sandbox::kOff) {
    if (sandbox_ok.ok()) {
      job.sandboxed = true;
    } else if (spec.sandbox == ExecSpec::Sandbox::kRequire) {
      return FailedPreconditionError(sandbox_ok.message() +
                                     "; the policy requires a sandbox, so the job was not started");
    } else {
      job.sandbox_note = "running unsandboxed: " + sandbox_ok.message();
    }
  }
  GATOS_ASSIGN_OR_RETURN(auto env, BuildJobEnv(eff, job.sandboxed));
  if (job.sandboxed) {
    job.binds.push_back({workspace, workspace, true, true});
    if (!eff.output_dir.empty()) job.binds.push_back({eff.output_dir, eff.output_dir, true, true});
    job.binds.insert(job.binds.end(), spec_binds.begin(), spec_binds.end());
  }
  // Where a path the job sees is on the host (the last bind that covers it wins).
  auto to_host = [&](const std::string& p) {
    if (!job.sandboxed) return p;
    for (auto it = job.binds.rbegin(); it != job.binds.rend(); ++it) {
      if (IsUnder(p, it->destination)) return it->source + p.substr(it->destination.size());
    }
    return p;
  };
  GATOS_ASSIGN_OR_RETURN(job.program, ResolveProgram(spec.argv[0], env, cwd_abs, to_host));
  job.argv = spec.argv;
  job.argv[0] = job.program;
  for (const auto& [k, v] : env) job.env.push_back(k + "=" + v);
  job.cwd = cwd_abs;
  return job;
}

}  // namespace exec_internal

using exec_internal::CleanPath;

Result<std::map<std::string, std::string>> BuildJobEnv(const ExecSpec& spec, bool sandboxed) {
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", spec.workspace},
                                            {"LANG", "C.UTF-8"},
                                            {"TMPDIR", "/tmp"}};
  std::map<std::string, std::string> bind_env;
  for (const auto& b : spec.binds) {
    if (b.env.empty()) continue;
    bind_env[b.env] =
        sandboxed && !b.destination.empty() ? CleanPath(b.destination) : CleanPath(b.source);
  }
  using Layer = const std::map<std::string, std::string>*;
  for (Layer layer : std::initializer_list<Layer>{&spec.env, &spec.extra_env, &bind_env}) {
    for (const auto& [k, v] : *layer) {
      if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
        return InvalidArgumentError("exec: environment variable name '" + k +
                                    "' is empty or contains '=' or NUL; rename it in the manifest");
      }
      if (v.find('\0') != std::string::npos) {
        // The value itself is not echoed: it may be a credential.
        return InvalidArgumentError("exec: environment variable " + k +
                                    " has a NUL byte in its value; remove it from the manifest");
      }
      env[k] = v;
    }
  }
  if (!spec.output_dir.empty()) env["GATOS_OUTPUT_DIR"] = spec.output_dir;
  return env;
}

}  // namespace gatos
