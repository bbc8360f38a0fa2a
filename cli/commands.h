// The gatos subcommands. Each takes the arguments after its own words and
// returns a process exit code (flags.h: kExitOk, kExitFailure, kExitUsage).
#ifndef GATOS_CLI_COMMANDS_H_
#define GATOS_CLI_COMMANDS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <optional>

#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/model/status.h"

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
// Sends one policy change (rpc::kLocalPolicy) to the ledger directory's
// writer and prints the outcome (`done` on success).
int PolicyChange(const std::string& name, const std::string& dir, const nlohmann::json& req,
                 const std::string& done);
// Prints each line of a (possibly multi-line) error to stderr, prefixed
// "error: "; returns `code`.
int ReportError(const std::string& message, int code);

int RunClusterStatus(const Args& args);
int RunJobId(const Args& args);
int RunJobCanon(const Args& args);
int RunJobValidate(const Args& args);
int RunKeygen(const Args& args);
int RunKeyShow(const Args& args);
int RunPolicyShow(const Args& args);
int RunPolicyAllowSubmitter(const Args& args);
int RunPolicyAllowWorker(const Args& args);
int RunPolicyAllowOperator(const Args& args);
int RunPolicyRevokeSubmitter(const Args& args);
int RunPolicyRevokeWorker(const Args& args);
int RunPolicyRevokeOperator(const Args& args);
int RunPolicySet(const Args& args);
int RunPolicyRotateLedgerKey(const Args& args);
int RunPolicyLimits(const Args& args);
int RunPoolPause(const Args& args);
int RunPoolResume(const Args& args);
int RunPoolLs(const Args& args);
int RunScheduleAdd(const Args& args);
int RunScheduleLs(const Args& args);
int RunSchedulePause(const Args& args);
int RunScheduleResume(const Args& args);
int RunScheduleRm(const Args& args);
int RunRetry(const Args& args);
int RunSubmit(const Args& args);
int RunStatus(const Args& args);
int RunLs(const Args& args);
int RunWait(const Args& args);
int RunCancel(const Args& args);
int RunUp(const Args& args);
int RunDoctor(const Args& args);
// gatos nats-config --cluster ... --node NAME (cmd_nats_config.cpp).
int RunNatsClusterConfig(const Args& args);
int RunFindings(const Args& args);
int RunVerify(const Args& args);
int RunAttest(const Args& args);
int RunWitness(const Args& args);
// cmd_proof.cpp: the Merkle tree's checkpoints, proof bundles, cosignatures.
int RunCheckpoint(const Args& args);
int RunProof(const Args& args);
int RunVerifyBundle(const Args& args);    // gatos verify --bundle
int RunWitnessCosign(const Args& args);   // gatos witness --checkpoint
// gatos verify --state FILE --checkpoint NOTE: NOTE against the clone in
// `repo` and against the checkpoint kept in `kept` by the last run, which it
// replaces when both hold. The ledger key: `pinned`, else the policy's.
Status CheckCheckpointState(const std::string& repo, Ledger& ledger, const std::string& note_path,
                            const std::string& kept, const std::optional<Ed25519PublicKey>& pinned);
int RunMirror(const Args& args);
int RunBatchSubmit(const Args& args);
int RunBatchStatus(const Args& args);
int RunNatsConfig(const Args& args);
int RunLogs(const Args& args);
int RunHooksInstall(const Args& args);
int RunHooksCommitMsg(const Args& args);

// The files `gatos nats-config --dir` writes (and `gatos up` uses).
struct NatsConfigFiles {
  std::string config, auth, pid, store;
  size_t users = 0;
};
Result<NatsConfigFiles> WriteNatsConfig(const std::string& ledger_dir, const std::string& out_dir,
                                        const std::string& host, int port);

struct SubmitOutcome {
  bool existing = false;
  std::string commit;
};
// Submits manifest bytes (already validated; `hex` is its job id) to a
// ledger directory, gatosd (nats://) or a git remote, as `gatos submit`
// does. Prints errors itself; returns an exit code. A `priority` other
// than 5 is written as the job commit's Priority trailer.
int SubmitBytes(const std::string& target, const std::string& bytes, const std::string& hex,
                const std::string& name, const Ed25519PrivateKey* key, SubmitOutcome* out,
                int timeout_ms = 30000, int64_t priority = 5);
// --priority N of submit and batch submit: 0-9, 5 when absent. Usage
// error text in *error otherwise.
bool PriorityFlag(const std::optional<std::string>& value, int64_t* priority, std::string* error);

}  // namespace gatos::cli

#endif  // GATOS_CLI_COMMANDS_H_
