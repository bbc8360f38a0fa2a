#include "ledger_setup.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gatos/ledger.h"
#include "gatos/ledger_writer.h"
#include "gatos/refs.h"

namespace gatos::gatosd {

std::string LedgerKeyPath(const std::string& ledger_dir) { return ledger_dir + "/gatos/ledger_key"; }

Status InstallHooks(const std::string& dir, const std::string& gatosd_path) {
  std::error_code ec;
  std::filesystem::remove(dir + "/hooks/post-receive", ec);  // earlier versions adopted jobs there
  for (const char* hook : {"pre-receive", "proc-receive"}) {
    std::string path = dir + "/hooks/" + hook;
    std::ofstream f(path, std::ios::trunc);
    f << "#!/bin/sh\n"
         "# Installed by gatosd init: every push is checked and recorded by the GATOS ledger.\n"
         "exec '" << gatosd_path << "' hook " << hook << "\n";
    f.close();
    if (!f || chmod(path.c_str(), 0755) != 0) return InternalError("cannot write hook " + path);
  }
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  // A push costs the same at any ledger size: receive-pack advertises none
  // of the ledger's own refs (fetch still serves them all), and pushes go to
  // refs proc-receive takes without creating them.
  for (const char* hidden : {"refs/gatos/jobs", "refs/gatos/log", "refs/gatos/policy", "refs/gatos/witness", "refs/gatos/batches"}) {
    GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.hideRefs", hidden));
  }
  for (const char* taken : {"refs/gatos/submit", "refs/gatos/results", "refs/gatos/witnesses"}) {
    GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.procReceiveRefs", taken));
  }
  return OkStatus();
}

Status InitLedger(const std::string& dir, const InitOptions& options) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/refs", ec) || std::filesystem::exists(dir + "/gatos", ec)) {
    auto existing = Ledger::Open(dir);
    if (existing.ok() && !(*existing)->ResolveRef(kLogRef).value_or("").empty()) {
      return FailedPreconditionError(dir + " is already a ledger (its log is at " + std::string(kLogRef) + ")");
    }
  }
  GATOS_RETURN_IF_ERROR(Ledger::InitRepository(dir));
  std::filesystem::create_directories(dir + "/gatos", ec);
  if (ec) return InternalError("cannot create " + dir + "/gatos: " + ec.message());
  ::chmod((dir + "/gatos").c_str(), 0700);
  GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, GenerateEd25519Key("gatos-ledger"));
  GATOS_RETURN_IF_ERROR(WriteKeyPair(LedgerKeyPath(dir), key));
  GATOS_RETURN_IF_ERROR(InstallHooks(dir, options.gatosd_path));
  Policy p;
  p.settings = options.settings;
  p.ledger_key = key.public_key();
  p.submitters_text =
      "# Keys allowed to sign job commits (OpenSSH allowed_signers format).\n"
      "# Add one with: gatos policy allow-submitter --ledger DIR KEY.pub\n";
  p.workers_text =
      "# Worker keys allowed to claim jobs and report results.\n"
      "# Add one with: gatos policy allow-worker --ledger DIR KEY.pub\n";
  p.operators_text =
      "# Keys that may cancel and re-run any job (a submitter may for its own jobs).\n"
      "# Add one with: gatos policy allow-operator --ledger DIR KEY.pub\n";
  GATOS_RETURN_IF_ERROR(ParseAllowedSigners(p.operators_text, "operators").status());
  return LedgerWriter::Initialize(dir, p, key, SystemNowMs());
}

}  // namespace gatos::gatosd
