// The gatos subcommands. Each takes the arguments after its own words and
// returns a process exit code (flags.h: kExitOk, kExitFailure, kExitUsage).
#ifndef GATOS_CLI_COMMANDS_H_
#define GATOS_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace gatos::cli {

using Args = std::vector<std::string>;

struct Command {
  std::vector<std::string> words;  // e.g. {"job", "id"}
  std::string synopsis;            // one line for `gatos --help`
  int (*run)(const Args& args);
};

const std::vector<Command>& AllCommands();

// Prints "gatos <words>: <message>" to stderr; returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);
// Prints each line of a (possibly multi-line) error to stderr, prefixed
// "error: "; returns `code`.
int ReportError(const std::string& message, int code);

int RunJobId(const Args& args);
int RunJobCanon(const Args& args);
int RunJobValidate(const Args& args);
int RunKeygen(const Args& args);
int RunKeyShow(const Args& args);
int RunPolicyShow(const Args& args);
int RunPolicyAllowSubmitter(const Args& args);
int RunPolicyAllowWorker(const Args& args);
int RunSubmit(const Args& args);
int RunStatus(const Args& args);
int RunLs(const Args& args);
int RunWait(const Args& args);
int RunCancel(const Args& args);
int RunUp(const Args& args);

}  // namespace gatos::cli

#endif  // GATOS_CLI_COMMANDS_H_
