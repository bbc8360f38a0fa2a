#include "gatos/exec/git_command.h"

namespace gatos {
namespace {

std::string ShellQuote(const std::string& s) {
  // Paths were checked to hold no single quote (input_credentials.cpp).
  return "'" + s + "'";
}

}  // namespace

GitCommand InputGitCommand(const std::string& git_program, const std::string& home,
                           const InputCredential* cred) {
  GitCommand out;
  Environment& env = out.env;
  env.Set("PATH", "/usr/local/bin:/usr/bin:/bin")
      .Set("HOME", home)
      .Set("LANG", "C")
      .Set("LC_ALL", "C")
      .Set("GIT_TERMINAL_PROMPT", "0")
      .Set("GIT_CONFIG_NOSYSTEM", "1")
      .Set("GIT_CONFIG_GLOBAL", "/dev/null")
      .Set("GIT_ALLOW_PROTOCOL", "https:http:ssh:git:file")
      .Set("GIT_PROTOCOL_FROM_USER", "0");
  std::string ssh =
      "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none"
      " -o StrictHostKeyChecking=yes -o ConnectTimeout=30";
  if (cred && !cred->ssh_key.empty()) {
    ssh += " -o IdentityFile=" + ShellQuote(cred->ssh_key);
    if (!cred->known_hosts.empty()) {
      ssh += " -o UserKnownHostsFile=" + ShellQuote(cred->known_hosts) +
             " -o GlobalKnownHostsFile=/dev/null";
    }
  } else {
    // Never the user's own keys: only configured credentials are used.
    ssh += " -o IdentityFile=none";
  }
  env.Set("GIT_SSH_COMMAND", ssh);

  // clang-format off
  out.argv = {git_program,
              "-c", "credential.helper=",
              "-c", "core.askPass=",
              "-c", "http.followRedirects=false",
              "-c", "http.lowSpeedLimit=1",
              "-c", "http.lowSpeedTime=120",
              "-c", "gc.auto=0",
              "-c", "maintenance.auto=false",
              "-c", "fetch.writeCommitGraph=false",
              "-c", "core.hooksPath=/dev/null"};
  // clang-format on
  if (cred && cred->is_token()) {
    // git asks the helper; the helper prints the file's line into git's pipe.
    out.argv.insert(out.argv.end(),
                    {"-c", "credential.helper=!f() { test \"$1\" = get || exit 0; echo username=" +
                               cred->username + "; printf password=; head -n 1 " +
                               ShellQuote(cred->token_file) + "; }; f"});
  }
  return out;
}

}  // namespace gatos
