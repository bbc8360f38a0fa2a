#include "replica_init.h"

#include <filesystem>

#include "gatos/audit/log_audit.h"
#include "gatos/crypto/keys.h"
#include "gatos/git/ledger.h"
#include "gatos/sys/file.h"
#include "gatos/sys/process.h"
#include "ledger_setup.h"

namespace gatos::gatosd {
namespace {

Status Git(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions so;
  so.env = Environment::Current();
  GATOS_ASSIGN_OR_RETURN(Captured c, RunAndCapture(argv, std::move(so)));
  if (!c.status.ok()) {
    // git's own message about the clone (paths, "not a repository"), not a secret.
    std::string err = c.err.substr(0, 2000);
    return UnavailableError("git " + args[0] + " " + c.status.ToString() + ": " + err);
  }
  return OkStatus();
}

}  // namespace

Status InitReplica(const std::string& dir, const ReplicaInitOptions& o) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    return FailedPreconditionError(dir + " exists and is not empty");
  }
  GATOS_ASSIGN_OR_RETURN(std::string pem, ReadFileToString(o.key_file, 64 << 10));
  GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, ParseOpenSshPrivateKey(pem));
  GATOS_RETURN_IF_ERROR(Git({"clone", "--mirror", "--quiet", o.source, dir}));
  GATOS_RETURN_IF_ERROR(Git({"-C", dir, "remote", "remove", "origin"}));
  {
    GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
    LogAuditOptions ao;
    ao.verify.ledger_key = key.public_key();
    // A clone of a ledger that is writing is not a snapshot: its view refs
    // may be a batch off its log. The log is what is verified; the
    // replica's first start rewrites the view refs from it.
    ao.compare_refs = false;
    GATOS_ASSIGN_OR_RETURN(LogAuditReport report, AuditLog(*ledger, ao));
    if (!report.ok()) {
      const LogProblem& p = report.problems.front();
      return PermissionDeniedError("the clone of " + o.source + " does not verify against the key " +
                                   key.public_key().WorkerId() + " (" + p.check + ": " + p.detail +
                                   "); is it the ledger's key?");
    }
    GATOS_ASSIGN_OR_RETURN(Policy policy, ledger->ReadPolicy());
    if (policy.ledger_key != key.public_key()) {
      return PermissionDeniedError("the key " + key.public_key().WorkerId() + " is not the ledger key in force (" +
                                   policy.ledger_key.WorkerId() + ")");
    }
  }
  std::filesystem::create_directories(dir + "/gatos", ec);
  GATOS_RETURN_IF_ERROR(WriteKeyPair(LedgerKeyPath(dir), key));
  return InstallHooks(dir, o.gatosd_path);
}

}  // namespace gatos::gatosd
