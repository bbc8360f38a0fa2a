// gatos: the command-line interface of the GATOS job plane.
#include <iostream>
#include <sstream>

#include "commands.h"
#include "gatos/sys/flags.h"

namespace gatos::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {{"job", "id"}, "print the job-id (blake3:<hex>) of a manifest", RunJobId},
      {{"job", "canon"}, "print the canonical JSON of a manifest", RunJobCanon},
      {{"job", "validate"}, "check manifests and report every problem", RunJobValidate},
      {{"keygen"}, "create an Ed25519 key pair in OpenSSH format", RunKeygen},
      {{"key", "show"}, "print the ed25519:<hex> id of a key file", RunKeyShow},
      {{"policy", "show"}, "print a ledger's policy", RunPolicyShow},
      {{"policy", "allow-submitter"}, "allow a key to sign job commits", RunPolicyAllowSubmitter},
      {{"policy", "allow-worker"}, "allow a worker key to claim and report", RunPolicyAllowWorker},
      {{"policy", "allow-operator"},
       "allow a key to cancel and re-run any job",
       RunPolicyAllowOperator},
      {{"policy", "revoke-submitter"}, "take a submitter key back", RunPolicyRevokeSubmitter},
      {{"policy", "revoke-worker"},
       "take a worker key back (its leases end at once)",
       RunPolicyRevokeWorker},
      {{"policy", "revoke-operator"}, "take an operator key back", RunPolicyRevokeOperator},
      {{"policy", "set"}, "change policy settings (retries, retention, limits)", RunPolicySet},
      {{"policy", "rotate-ledger-key"},
       "replace the ledger key (signed by the old one)",
       RunPolicyRotateLedgerKey},
      {{"policy", "limits"},
       "set admission and running limits per submitter or pool (or show them)",
       RunPolicyLimits},
      {{"pool", "ls"}, "per pool: pending, running, paused, workers serving it", RunPoolLs},
      {{"pool", "pause"}, "stop offering a pool's jobs (running ones finish)", RunPoolPause},
      {{"pool", "resume"}, "offer a paused pool's jobs again", RunPoolResume},
      {{"schedule", "add"}, "add a signed schedule (cron or interval) that fires a job template", RunScheduleAdd},
      {{"schedule", "ls"}, "list schedules: state, cron or interval, zone, next tick", RunScheduleLs},
      {{"schedule", "pause"}, "stop a schedule's ticks (signed, logged)", RunSchedulePause},
      {{"schedule", "resume"}, "resume a paused schedule", RunScheduleResume},
      {{"schedule", "rm"}, "remove a schedule (signed, logged)", RunScheduleRm},
      {{"submit"}, "submit a manifest as a signed job; prints its id", RunSubmit},
      {{"status"}, "show a job's state (or counts per state)", RunStatus},
      {{"ls"}, "list jobs, optionally in one state", RunLs},
      {{"wait"}, "wait for jobs to finish; exit 0 only if all succeeded", RunWait},
      {{"logs"}, "print a job's captured output, or follow a running job's (-f)", RunLogs},
      {{"hooks", "install"},
       "install a commit-msg hook that adds the Job-Id trailer of job.yaml",
       RunHooksInstall},
      {{"hooks", "commit-msg"},
       "what that hook runs: check job.yaml, set the message's Job-Id trailer",
       RunHooksCommitMsg},
      {{"verify"}, "verify jobs and results offline from a ledger clone", RunVerify},
      {{"mirror"},
       "make or update an auditor's mirror of a ledger (consistent while gatosd writes)",
       RunMirror},
      {{"witness"},
       "sign \"the log of this ledger at sequence N is commit C\" with your key",
       RunWitness},
      {{"checkpoint"},
       "sign a checkpoint of the ledger's Merkle tree (C2SP tlog-checkpoint); add cosignatures",
       RunCheckpoint},
      {{"proof"}, "write a job's proof bundle: checked offline by gatos verify --bundle", RunProof},
      {{"attest"}, "print a result's DSSE envelope (PoE, or in-toto with --provenance)", RunAttest},
      {{"findings"}, "print a scan job's findings, one entry per distinct secret", RunFindings},
      {{"batch", "submit"},
       "one job per repository from a template, plus a batch record",
       RunBatchSubmit},
      {{"batch", "status"}, "done/total and per-repository state of a batch", RunBatchStatus},
      {{"doctor"},
       "check this node of a deployment (NATS, keys, ledger, clock, sandbox)",
       RunDoctor},
      {{"nats-config"},
       "nats-server configuration that admits only the policy's keys (one server or a cluster "
       "node)",
       RunNatsConfig},
      {{"cluster", "status"}, "each replica of a replicated ledger: role, term, log sequence, lag",
       RunClusterStatus},
      {{"up"}, "run a local stack (nats-server, gatosd, workers) until Ctrl-C", RunUp},
      {{"cancel"}, "cancel a job (pending: aborted now; running: told to stop)", RunCancel},
      {{"retry"}, "re-run a job that ended failed or timed-out (same id, next attempt)", RunRetry},
  };
  return kCommands;
}

int UsageError(const std::string& command, const std::string& message) {
  std::cerr << "gatos " << command << ": " << message << '\n';
  return kExitUsage;
}

int ReportError(const std::string& message, int code) {
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) std::cerr << "error: " << line << '\n';
  return code;
}

namespace {

void PrintHelp(std::ostream& out) {
  out << "usage: gatos <command> [options]\n\ncommands:\n";
  for (const auto& c : AllCommands()) {
    std::string name;
    for (const auto& w : c.words) name += (name.empty() ? "" : " ") + w;
    out << "  " << name << std::string(name.size() < 20 ? 20 - name.size() : 1, ' ') << c.synopsis
        << '\n';
  }
  out << "\nRun 'gatos <command> --help' for a command's options.\n";
}

}  // namespace
}  // namespace gatos::cli

int main(int argc, char** argv) {
  using namespace gatos::cli;
  using gatos::kExitOk, gatos::kExitUsage;
  Args args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    PrintHelp(args.empty() ? std::cerr : std::cout);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "gatos 0.1.0\n";
    return kExitOk;
  }
  const Command* best = nullptr;
  for (const auto& c : AllCommands()) {
    if (c.words.size() > args.size()) continue;
    if (!std::equal(c.words.begin(), c.words.end(), args.begin())) continue;
    if (!best || c.words.size() > best->words.size()) best = &c;
  }
  if (!best) {
    // A group word alone ("gatos job") lists its subcommands.
    bool group = false;
    for (const auto& c : AllCommands()) {
      if (c.words.size() > 1 && c.words[0] == args[0]) {
        if (!group) std::cerr << "gatos " << args[0] << ": subcommands:\n";
        group = true;
        std::cerr << "  gatos " << args[0] << ' ' << c.words[1] << "  " << c.synopsis << '\n';
      }
    }
    if (!group) std::cerr << "gatos: unknown command '" << args[0] << "' (see gatos --help)\n";
    return kExitUsage;
  }
  return best->run(Args(args.begin() + static_cast<long>(best->words.size()), args.end()));
}
