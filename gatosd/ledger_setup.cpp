#include "ledger_setup.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gatos/git/ledger.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/refs.h"
#include "gatos/sys/file.h"
#include "gatos/sys/private_state.h"

namespace gatos::gatosd {

std::string LedgerKeyPath(const std::string& ledger_dir) { return ledger_dir + "/gatos/ledger_key"; }

namespace {

constexpr const char* kPushedPrefixes[] = {"refs/gatos/submit", "refs/gatos/results", "refs/gatos/witnesses",
                                           "refs/gatos/submit-schedule"};

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return InternalError("cannot write " + path);
  return OkStatus();
}

// `hook_args` follow "gatosd hook <name>" (e.g. the front door's --ledger).
Status WriteHooks(const std::string& git_dir, const std::string& gatosd_path, const std::string& hook_args) {
  for (const char* hook : {"pre-receive", "proc-receive"}) {
    std::string path = git_dir + "/hooks/" + hook;
    GATOS_RETURN_IF_ERROR(WriteTextFile(path, "#!/bin/sh\n"
                                              "# Installed by gatosd: every push is checked and recorded by the "
                                              "GATOS ledger.\n"
                                              "exec '" + gatosd_path + "' hook " + hook + hook_args + "\n"));
    if (chmod(path.c_str(), 0755) != 0) return InternalError("cannot make hook " + path + " executable");
  }
  return OkStatus();
}

}  // namespace

Status InstallHooks(const std::string& dir, const std::string& gatosd_path) {
  std::error_code ec;
  std::filesystem::remove(dir + "/hooks/post-receive", ec);  // earlier versions adopted jobs there
  GATOS_RETURN_IF_ERROR(WriteHooks(dir, gatosd_path, ""));
  GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(dir));
  // Pushes straight to the ledger still work (receive-pack then reads every
  // ref of the ledger, which costs more with every job): the ledger's own
  // refs are hidden from them and refused, and pushes go to refs
  // proc-receive takes without creating them. The front door is the cheap
  // way in.
  for (const char* hidden : {"refs/gatos/jobs", "refs/gatos/log", "refs/gatos/policy", "refs/gatos/witness", "refs/gatos/batches",
                              "refs/gatos/schedules", "refs/gatos/fires", "refs/gatos/watch"}) {
    GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.hideRefs", hidden));
  }
  for (const char* taken : kPushedPrefixes) {
    GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.procReceiveRefs", taken));
  }
  // gatosd repacks the ledger itself; a gc started by a push would also pack
  // every ref while gatosd writes them.
  GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.autogc", "false"));
  return InstallFrontDoor(dir, gatosd_path);
}

Status InstallFrontDoor(const std::string& ledger_dir, const std::string& gatosd_path) {
  const std::string door = LedgerPushPath(ledger_dir);
  std::error_code ec;
  for (const char* sub : {"", "/refs/heads", "/refs/tags", "/hooks"}) {
    std::filesystem::create_directories(door + sub, ec);
    if (ec) return InternalError("cannot create " + door + sub + ": " + ec.message());
  }
  // The ledger's objects, through a relative link (the ledger may move): a
  // push's quarantine and the objects it lands are the ledger's, as if it
  // had pushed to the ledger itself.
  const std::string objects = door + "/objects";
  if (std::filesystem::is_symlink(objects, ec)) {
    if (std::filesystem::read_symlink(objects, ec) != "../objects") std::filesystem::remove(objects, ec);
  }
  if (!std::filesystem::is_symlink(objects, ec)) {
    if (std::filesystem::exists(objects, ec)) {
      return FailedPreconditionError(objects + " exists and is not the link to the ledger's objects; move it away");
    }
    std::filesystem::create_directory_symlink("../objects", objects, ec);
    if (ec) return InternalError("cannot link " + objects + " to the ledger's objects: " + ec.message());
  }
  GATOS_RETURN_IF_ERROR(WriteTextFile(door + "/HEAD", "ref: refs/heads/main\n"));
  // preciousObjects: git refuses to gc, repack -d or prune here, where no ref
  // reaches the ledger's objects. No gc after a push either.
  // alternateRefsCommand: during a push git sees the objects directory as an
  // alternate (the quarantine's), takes the ledger for its repository, and
  // would list every ledger ref for the connectivity check; `true` lists
  // none (the check then walks only what the push brought).
  std::string config =
      "# The push front door of a GATOS ledger (written by gatosd; see docs/ledger-format.md).\n"
      "[core]\n\trepositoryformatversion = 1\n\tbare = true\n\talternateRefsCommand = true\n"
      "[extensions]\n\tpreciousObjects = true\n"
      "[gc]\n\tauto = 0\n"
      "[receive]\n\tautogc = false\n";
  for (const char* taken : kPushedPrefixes) config += std::string("\tprocReceiveRefs = ") + taken + "\n";
  GATOS_RETURN_IF_ERROR(WriteTextFile(door + "/config", config));
  GATOS_RETURN_IF_ERROR(WriteTextFile(door + "/description", "Push jobs, results and witnesses here.\n"));
  return WriteHooks(door, gatosd_path, " --ledger ..");
}

Status UpgradePushTargets(const std::string& ledger_dir, const std::string& gatosd_path) {
  const std::string newest = kPushedPrefixes[std::size(kPushedPrefixes) - 1];
  auto has = [&](const std::string& config) {
    auto text = ReadFileToString(config, 1 << 20);
    return text.ok() && text->find(newest) != std::string::npos;
  };
  if (!has(LedgerPushPath(ledger_dir) + "/config")) GATOS_RETURN_IF_ERROR(InstallFrontDoor(ledger_dir, gatosd_path));
  if (!has(ledger_dir + "/config")) {
    GATOS_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(ledger_dir));
    GATOS_RETURN_IF_ERROR(ledger->AddConfigValue("receive.procReceiveRefs", newest));
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
  // Its key and private objects: never a job's input (private_state.h).
  GATOS_RETURN_IF_ERROR(MarkPrivate(dir));
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
