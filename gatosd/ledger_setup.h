// Creating a ledger and the git hooks that guard it.
#ifndef GATOS_GATOSD_LEDGER_SETUP_H_
#define GATOS_GATOSD_LEDGER_SETUP_H_

#include <string>

#include "gatos/crypto/keys.h"
#include "gatos/model/policy.h"
#include "gatos/model/status.h"

namespace gatos::gatosd {

// <ledger>/gatos/ledger_key: the ledger's private key (mode 0600). It lives
// in the repository directory but outside the object store, so it is never
// fetched or pushed.
std::string LedgerKeyPath(const std::string& ledger_dir);

struct InitOptions {
  PolicySettings settings;
  std::string gatosd_path;  // absolute path the hooks exec
};

// Creates a bare repository, the ledger key, the hooks, the push
// configuration (hidden refs, proc-receive targets) and the log with the
// first policy. FailedPrecondition if `dir` already holds a ledger.
Status InitLedger(const std::string& dir, const InitOptions& options);

// (Re)writes hooks/pre-receive and hooks/proc-receive to exec gatosd, and
// the receive-pack configuration they need, then the front door.
Status InstallHooks(const std::string& dir, const std::string& gatosd_path);

// (Re)creates the ledger's push front door, LedgerPushPath(dir): a bare
// repository with no refs whose objects directory is a link to the ledger's,
// with the hooks and the receive-pack configuration (proc-receive takes the
// submit, results and witnesses refs; no gc).
Status InstallFrontDoor(const std::string& ledger_dir, const std::string& gatosd_path);

// Ledgers made by an earlier version: the push targets added since (the
// front door's and the ledger's receive.procReceiveRefs), so a push to one
// is taken by the hook and never creates a ref. No-op when up to date.
Status UpgradePushTargets(const std::string& ledger_dir, const std::string& gatosd_path);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_LEDGER_SETUP_H_
