// gatos checkpoint | proof | verify --bundle | witness --checkpoint: the
// ledger's Merkle tree, its signed checkpoints, proof bundles and witness
// cosignatures (docs/auditor-guide.md sections 12-13, docs/ledger-format.md
// section 7b).
#include <algorithm>
#include <iostream>

#include "commands.h"
#include "gatos/audit/checkpoint_check.h"
#include "gatos/audit/checkpoint_store.h"
#include "gatos/audit/log_tree.h"
#include "gatos/audit/proof_bundle.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/crypto/signed_note.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/clock.h"
#include "gatos/model/manifest.h"
#include "gatos/sys/file.h"
#include "gatos/sys/flags.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

std::optional<std::string> RepoOf(const Flags& flags, const std::string& command, int* usage) {
  if (flags.Has("repo") && flags.Has("ledger")) {
    *usage = UsageError(command, "give --repo DIR or --ledger DIR, not both");
    return std::nullopt;
  }
  auto dir = flags.Has("repo") ? flags.Get("repo") : flags.Get("ledger");
  if (!dir) *usage = UsageError(command, "--repo DIR is required (the ledger or a clone of it)");
  return dir;
}

// A witness verifier key: "name+id+base64" given inline or in a file.
Result<NoteVerifierKey> WitnessKeyArg(const std::string& arg) {
  std::string text = arg;
  if (arg.find('+') == std::string::npos) {
    auto f = ReadFileToString(arg, 4096);
    if (!f.ok()) return InvalidArgumentError("--witness-key " + arg + ": " + f.status().message());
    text = *f;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  }
  GATOS_ASSIGN_OR_RETURN(NoteVerifierKey k, ParseNoteVerifierKey(text));
  if (k.type != kNoteTypeCosignatureV1) {
    return InvalidArgumentError("--witness-key: not a cosignature/v1 key (type 0x04)");
  }
  return k;
}

}  // namespace

int RunCheckpoint(const Args& args) {
  const char* help =
      "usage: gatos checkpoint --ledger DIR [--add-cosignatures FILE] [--json]\n"
      "\n"
      "Brings the ledger's Merkle tree (DIR/gatos/tlog, C2SP tlog-tiles) up to the\n"
      "log head, signs a checkpoint of it with the ledger key (C2SP tlog-checkpoint:\n"
      "origin gatos/ledger/<root log commit>, size, root) and stores it in\n"
      "DIR/gatos/tlog/checkpoint, then prints it. With --add-cosignatures FILE (the\n"
      "output of 'gatos witness --checkpoint'), adds the witnesses' cosignature lines\n"
      "of the same checkpoint to the stored one. Needs the ledger key (run on the\n"
      "ledger's host).\n";
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"repo"}, {"add-cosignatures"}, {"json", 0, false}})) {
    return UsageError("checkpoint", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoOf(flags, "checkpoint", &usage);
  if (!dir) return usage;
  if (auto add = flags.Get("add-cosignatures")) {
    auto in = ReadFileToString(*add, 1 << 20);
    if (!in.ok()) return ReportError("--add-cosignatures: " + in.status().message(), kExitUsage);
    auto extra = ParseNote(*in);
    if (!extra.ok()) return ReportError("--add-cosignatures: " + extra.status().message(), kExitUsage);
    auto cur = ReadFileToString(CheckpointPath(*dir), 1 << 20);
    if (!cur.ok()) return ReportError("no stored checkpoint: " + cur.status().message(), kExitFailure);
    auto note = ParseNote(*cur);
    if (!note.ok()) return ReportError(CheckpointPath(*dir) + ": " + note.status().message(), kExitFailure);
    if (note->text != extra->text) {
      return ReportError("the cosigned checkpoint is not the stored one (the ledger signed a newer one since)",
                         kExitFailure);
    }
    size_t added = 0;
    for (const auto& s : extra->sigs) {
      if (s.sig.size() != 72) continue;  // only cosignatures; the ledger's own is there
      if (std::find(note->sigs.begin(), note->sigs.end(), s) != note->sigs.end()) continue;
      note->sigs.push_back(s);
      ++added;
    }
    Status w = WriteFileAtomically(CheckpointPath(*dir), FormatNote(*note), 0644, false);
    if (!w.ok()) return ReportError(w.message(), kExitFailure);
    std::cerr << added << " cosignature(s) added\n";
    std::cout << FormatNote(*note);
    return kExitOk;
  }
  auto key = LoadLedgerKey(*dir);
  if (!key.ok()) return ReportError(key.status().message(), kExitFailure);
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto tree = UpdatedLogTree(**ledger, *dir);
  if (!tree.ok()) return ReportError(tree.status().message(), kExitFailure);
  auto note = SignAndStoreCheckpoint(*tree, *dir, *key);
  if (!note.ok()) return ReportError(note.status().message(), kExitFailure);
  if (flags.Has("json")) {
    std::cout << Dump({{"checkpoint", *note},
                       {"size", tree->size()},
                       {"ledger_vkey", FormatNoteVerifierKey(MakeNoteVerifierKey(
                                           ParseCheckpointText(ParseNote(*note)->text)->origin, kNoteTypeEd25519,
                                           key->public_key()))}})
              << "\n";
  } else {
    std::cout << *note;
  }
  return kExitOk;
}

int RunProof(const Args& args) {
  const char* help =
      "usage: gatos proof JOB-ID --repo DIR [-o FILE] [--checkpoint FILE]\n"
      "\n"
      "Writes one file that proves, offline and without a clone, that the job's final\n"
      "result is genuine and in the ledger's append-only log: the job commit and\n"
      "job.yaml, the result commit and its tree, the log commits that adopted the job\n"
      "and recorded the result and the checkpoint's last log commit (whose signed\n"
      "state names that result as final), their Merkle inclusion proofs, and the\n"
      "newest checkpoint with its witness cosignatures. Check it with\n"
      "  gatos verify --bundle FILE --ledger-key ledger.pub [--witness-key W]...\n"
      "\n"
      "  --repo DIR         the ledger, or a mirror of it (--ledger DIR works too)\n"
      "  -o, --output FILE  where to write the bundle (default: stdout)\n"
      "  --checkpoint FILE  the signed checkpoint to prove against (default:\n"
      "                     DIR/gatos/tlog/checkpoint; on the ledger's host a fresh\n"
      "                     one is signed when the stored one is older than the log)\n";
  Flags flags;
  if (!flags.Parse(args, {{"repo"}, {"ledger"}, {"output", 'o'}, {"checkpoint"}})) {
    return UsageError("proof", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoOf(flags, "proof", &usage);
  if (!dir) return usage;
  if (flags.positional().size() != 1) return UsageError("proof", "name one job (JOB-ID)");
  std::string arg = flags.positional()[0];
  std::string hex = arg.rfind("blake3:", 0) == 0 ? arg.substr(7) : arg;
  if (!IsJobIdHex(hex)) {
    return UsageError("proof", "\"" + arg.substr(0, 80) + "\" is not a job id (blake3:<64 lowercase hex>)");
  }
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto tree = UpdatedLogTree(**ledger, *dir);
  if (!tree.ok()) return ReportError(tree.status().message(), kExitFailure);
  std::string note;
  if (auto cp = flags.Get("checkpoint")) {
    auto t = ReadFileToString(*cp, 1 << 20);
    if (!t.ok()) return ReportError("--checkpoint: " + t.status().message(), kExitUsage);
    note = *t;
  } else {
    auto stored = ReadFileToString(CheckpointPath(*dir), 1 << 20);
    bool fresh = false;
    if (stored.ok()) {
      auto n = ParseNote(*stored);
      auto c = n.ok() ? ParseCheckpointText(n->text) : Result<Checkpoint>(n.status());
      fresh = c.ok() && c->size == tree->size();
      note = *stored;
    }
    if (!fresh) {
      auto key = LoadLedgerKey(*dir);
      if (key.ok()) {
        auto signed_note = SignAndStoreCheckpoint(*tree, *dir, *key);
        if (!signed_note.ok()) return ReportError(signed_note.status().message(), kExitFailure);
        note = *signed_note;
      } else if (note.empty()) {
        return ReportError("no checkpoint: run 'gatos checkpoint --ledger LEDGER' on the ledger's host and "
                           "give it with --checkpoint FILE",
                           kExitFailure);
      }
    }
  }
  auto bundle = BuildProofBundle(**ledger, *tree, hex, note);
  if (!bundle.ok()) return ReportError(bundle.status().message(), kExitFailure);
  std::string text = EncodeProofBundle(*bundle);
  if (auto out = flags.Get("output"); out && *out != "-") {
    Status w = WriteFileAtomically(*out, text, 0644, true);
    if (!w.ok()) return ReportError(w.message(), kExitFailure);
  } else {
    std::cout << text;
  }
  return kExitOk;
}

int RunVerifyBundle(const Args& args) {
  const char* help =
      "usage: gatos verify --bundle FILE --ledger-key KEY.pub [--witness-key W]...\n"
      "                    [--min-witnesses N] [--json]\n"
      "\n"
      "Checks a proof bundle written by 'gatos proof' offline, without a clone: the\n"
      "checkpoint is signed by the ledger key, at least N of the given witnesses\n"
      "cosigned it, each log commit of the bundle is in the checkpoint's tree\n"
      "(inclusion proofs) and signed by the ledger key, the job and result commits\n"
      "are the ones those log commits record and the ledger's state names, job.yaml\n"
      "recomputes to the job id, and the result is the one its worker signed\n"
      "(poe.json, every file, Attest-Sig, the commit signature). Exit status: 0 when\n"
      "it verifies, 1 when not (the failing check and why), 2 for usage errors.\n"
      "\n"
      "  --ledger-key KEY.pub   the ledger's public key (OpenSSH), pinned out of band\n"
      "  --witness-key W        a witness's verifier key (name+id+base64, type 0x04,\n"
      "                         as 'gatos witness --checkpoint' prints it), inline or\n"
      "                         in a file; repeatable\n"
      "  --min-witnesses N      cosignatures required from the given witnesses\n"
      "                         (default: 0)\n"
      "  --json                 every check as JSON\n";
  Flags flags;
  if (!flags.Parse(args, {{"bundle"},
                          {"ledger-key"},
                          {"witness-key", 0, true, true},
                          {"min-witnesses"},
                          {"json", 0, false}})) {
    return UsageError("verify", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  auto path = flags.Get("bundle");
  if (!path) return UsageError("verify", "--bundle FILE is required");
  if (!flags.positional().empty()) return UsageError("verify", "--bundle takes no job ids");
  auto key_path = flags.Get("ledger-key");
  if (!key_path) return UsageError("verify", "--bundle needs --ledger-key KEY.pub (the ledger's public key)");
  BundleVerifyOptions opt;
  auto lk = ReadPublicKeyFile(*key_path);
  if (!lk.ok()) return ReportError("--ledger-key: " + lk.status().message(), kExitUsage);
  opt.ledger_key = *lk;
  for (const std::string& w : flags.GetAll("witness-key")) {
    auto k = WitnessKeyArg(w);
    if (!k.ok()) return ReportError(k.status().message(), kExitUsage);
    opt.witnesses.push_back(*k);
  }
  if (auto m = flags.Get("min-witnesses")) {
    char* end = nullptr;
    long v = std::strtol(m->c_str(), &end, 10);
    if (m->empty() || *end != '\0' || v < 0 || v > 1000) {
      return UsageError("verify", "--min-witnesses takes a number");
    }
    opt.min_witnesses = static_cast<size_t>(v);
    if (opt.min_witnesses > opt.witnesses.size()) {
      return UsageError("verify", "--min-witnesses " + *m + " but only " + std::to_string(opt.witnesses.size()) +
                                      " --witness-key given");
    }
  }
  auto text = ReadFileToString(*path, kMaxProofBundleBytes);
  if (!text.ok()) return ReportError("--bundle: " + text.status().message(), kExitUsage);
  BundleReport rep;
  auto bundle = ParseProofBundle(*text);
  if (!bundle.ok()) {
    rep.checks.push_back({"bundle", false, bundle.status().message()});
  } else {
    rep = VerifyProofBundle(*bundle, opt);
  }
  if (flags.Has("json")) {
    json j = BundleReportToJson(rep);
    j["bundle"] = *path;
    std::cout << Dump(j) << "\n";
  } else if (const BundleCheck* bad = rep.first_failure()) {
    std::cout << "FAIL " << *path << " " << bad->name << ": " << bad->detail << "\n";
  } else {
    std::cout << "ok blake3:" << rep.job_hex << " " << rep.result_status << " by " << rep.worker_id
              << ", in " << rep.origin << " at tree size " << rep.tree_size << ", "
              << rep.cosigners.size() << " witness cosignature(s)\n";
  }
  return rep.ok() ? kExitOk : kExitFailure;
}

Status CheckCheckpointState(const std::string& repo, Ledger& ledger, const std::string& note_path,
                            const std::string& kept, const std::optional<Ed25519PublicKey>& pinned) {
  auto note = ReadFileToString(note_path, 1 << 20);
  if (!note.ok()) return note.status().WithContext("--checkpoint " + note_path);
  Ed25519PublicKey key;
  if (pinned) {
    key = *pinned;
  } else {
    GATOS_ASSIGN_OR_RETURN(Policy p, ledger.ReadPolicy());
    key = p.ledger_key;
  }
  std::optional<std::string> previous;
  auto prev = ReadFileToString(kept, 1 << 20);
  if (prev.ok()) {
    previous = *prev;
  } else if (prev.status().code() != StatusCode::kNotFound) {
    return prev.status();
  }
  GATOS_ASSIGN_OR_RETURN(LogTree tree, LogTree::Open(LogTree::DirFor(repo)));
  GATOS_RETURN_IF_ERROR(CheckCheckpoint(ledger, tree, *note, key, previous).status());
  return WriteFileAtomically(kept, *note, 0644, true);
}

int RunWitnessCosign(const Args& args) {
  const char* help =
      "usage: gatos witness --checkpoint FILE --repo DIR --key KEY --ledger-key KEY.pub\n"
      "                     [--name NAME] [--state FILE] [--json]\n"
      "\n"
      "Cosigns the ledger's checkpoint FILE (C2SP tlog-cosignature/v1) after checking\n"
      "it against DIR, your own clone: the checkpoint is signed by the ledger key, and\n"
      "the Merkle tree of DIR's log at the checkpoint's size has the checkpoint's root.\n"
      "With --state FILE (the last checkpoint you cosigned), the new one must be\n"
      "consistent with it (a consistency proof from DIR's tree); FILE is then\n"
      "replaced. Prints the checkpoint with your cosignature added; the ledger's\n"
      "operator adds it with 'gatos checkpoint --add-cosignatures'. Your verifier key\n"
      "(for --witness-key) is printed on stderr.\n";
  Flags flags;
  if (!flags.Parse(args, {{"checkpoint"},
                          {"repo"},
                          {"ledger"},
                          {"key"},
                          {"ledger-key"},
                          {"name"},
                          {"state"},
                          {"json", 0, false}})) {
    return UsageError("witness", flags.error());
  }
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  int usage = kExitUsage;
  auto dir = RepoOf(flags, "witness", &usage);
  if (!dir) return usage;
  auto cp_path = flags.Get("checkpoint");
  auto key_path = flags.Get("key");
  auto lk_path = flags.Get("ledger-key");
  if (!cp_path || !key_path || !lk_path) {
    return UsageError("witness", "--checkpoint FILE, --key KEY and --ledger-key KEY.pub are required");
  }
  auto key = ReadPrivateKeyFile(*key_path);
  if (!key.ok()) return ReportError("--key: " + key.status().message(), kExitUsage);
  auto lk = ReadPublicKeyFile(*lk_path);
  if (!lk.ok()) return ReportError("--ledger-key: " + lk.status().message(), kExitUsage);
  auto text = ReadFileToString(*cp_path, 1 << 20);
  if (!text.ok()) return ReportError("--checkpoint: " + text.status().message(), kExitUsage);
  auto state_path = flags.Get("state");
  std::optional<std::string> previous;
  if (state_path) {
    auto prev = ReadFileToString(*state_path, 1 << 20);
    if (prev.ok()) {
      previous = *prev;
    } else if (prev.status().code() != StatusCode::kNotFound) {
      return ReportError(*state_path + ": " + prev.status().message(), kExitUsage);
    }
  }
  auto ledger = Ledger::Open(*dir);
  if (!ledger.ok()) return ReportError(ledger.status().message(), kExitFailure);
  auto tree = LogTree::Open(LogTree::DirFor(*dir));
  if (!tree.ok()) return ReportError(tree.status().message(), kExitFailure);
  auto opened = CheckCheckpoint(**ledger, *tree, *text, *lk, previous);
  if (!opened.ok()) return ReportError(opened.status().message() + "; not cosigned", kExitFailure);
  const Checkpoint& cp = opened->checkpoint;
  std::string name = flags.Get("name").value_or("gatos-witness/" + key->public_key().Hex().substr(0, 16));
  NoteVerifierKey mine = MakeNoteVerifierKey(name, kNoteTypeCosignatureV1, key->public_key());
  Note note = opened->note;
  note.sigs.erase(std::remove_if(note.sigs.begin(), note.sigs.end(),
                                 [&](const NoteSignature& s) { return NoteSignatureIsBy(s, mine); }),
                  note.sigs.end());
  note.sigs.push_back(CosignNoteText(name, *key, note.text, static_cast<uint64_t>(SystemNowMs() / 1000)));
  std::string out = FormatNote(note);
  if (state_path) {
    Status w = WriteFileAtomically(*state_path, *text, 0644, true);
    if (!w.ok()) return ReportError(w.message(), kExitFailure);
  }
  if (flags.Has("json")) {
    std::cout << Dump({{"checkpoint", out}, {"size", cp.size}, {"witness_vkey", FormatNoteVerifierKey(mine)}}) << "\n";
  } else {
    std::cerr << "cosigned " << cp.origin << " at size " << cp.size << " as " << FormatNoteVerifierKey(mine) << "\n";
    std::cout << out;
  }
  return kExitOk;
}

}  // namespace gatos::cli
