#include "ledger_setup.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gatos/job_plane.h"
#include "gatos/ledger.h"

namespace gatos::gatosd {

std::string LedgerKeyPath(const std::string& ledger_dir) { return ledger_dir + "/gatos/ledger_key"; }

Status InstallHooks(const std::string& dir, const std::string& gatosd_path) {
  for (const char* hook : {"pre-receive", "post-receive"}) {
    std::string path = dir + "/hooks/" + hook;
    std::ofstream f(path, std::ios::trunc);
    f << "#!/bin/sh\n"
         "# Installed by gatosd init: every push is checked by the GATOS ledger.\n"
         "exec '" << gatosd_path << "' hook " << hook << "\n";
    f.close();
    if (!f || chmod(path.c_str(), 0755) != 0) return InternalError("cannot write hook " + path);
  }
  return OkStatus();
}

Status InitLedger(const std::string& dir, const InitOptions& options) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/refs", ec) || std::filesystem::exists(dir + "/gatos", ec)) {
    auto existing = Ledger::Open(dir);
    if (existing.ok() && !(*existing)->ResolveRef(kPolicyRef).value_or("").empty()) {
      return FailedPreconditionError(dir + " is already a ledger (its policy is at " +
                                     std::string(kPolicyRef) + ")");
    }
  }
  GATOS_RETURN_IF_ERROR(Ledger::InitRepository(dir));
  std::filesystem::create_directories(dir + "/gatos", ec);
  if (ec) return InternalError("cannot create " + dir + "/gatos: " + ec.message());
  GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, GenerateEd25519Key("gatos-ledger"));
  GATOS_RETURN_IF_ERROR(WriteKeyPair(LedgerKeyPath(dir), key));
  GATOS_RETURN_IF_ERROR(InstallHooks(dir, options.gatosd_path));
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  Policy p;
  p.settings = options.settings;
  p.ledger_key = key.public_key();
  p.submitters_text =
      "# Keys allowed to sign job commits (OpenSSH allowed_signers format).\n"
      "# Add one with: gatos policy allow-submitter --ledger DIR KEY.pub\n";
  p.workers_text =
      "# Worker keys allowed to claim jobs and report results.\n"
      "# Add one with: gatos policy allow-worker --ledger DIR KEY.pub\n";
  GATOS_RETURN_IF_ERROR(
      ledger->WritePolicy(p, std::string("gatos: initial policy") +
                                 (p.settings.dev_mode ? " (dev mode: unsigned jobs accepted)" : "") +
                                 "\n",
                          key, SystemNowMs())
          .status());
  return OkStatus();
}

Result<Ed25519PrivateKey> LoadLedgerKey(const std::string& ledger_dir) {
  auto k = ReadPrivateKeyFile(LedgerKeyPath(ledger_dir));
  if (!k.ok()) return k.status().WithContext("ledger key");
  return k;
}

}  // namespace gatos::gatosd
