#include "gatos/crypto/checkpoint.h"

#include <charconv>

#include "gatos/model/encoding.h"

namespace gatos {

std::string LedgerOrigin(std::string_view root_log_commit) {
  return "gatos/ledger/" + std::string(root_log_commit);
}

std::string FormatCheckpointText(const Checkpoint& c) {
  std::string out = c.origin + "\n" + std::to_string(c.size) + "\n" + MerkleHashBase64(c.root) + "\n";
  for (const std::string& e : c.extensions) out += e + "\n";
  return out;
}

Result<Checkpoint> ParseCheckpointText(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return InvalidArgumentError("checkpoint: last line has no newline");
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  if (lines.size() < 3) return InvalidArgumentError("checkpoint: fewer than three lines");
  Checkpoint c;
  if (lines[0].empty()) return InvalidArgumentError("checkpoint line 1: empty origin");
  c.origin = std::string(lines[0]);
  std::string_view size = lines[1];
  if (size.empty() || size.size() > 19 || (size.size() > 1 && size[0] == '0')) {
    return InvalidArgumentError("checkpoint line 2: not a tree size");
  }
  auto [ptr, ec] = std::from_chars(size.data(), size.data() + size.size(), c.size);
  if (ec != std::errc() || ptr != size.data() + size.size() || c.size > (uint64_t{1} << 63) - 1) {
    return InvalidArgumentError("checkpoint line 2: not a tree size");
  }
  auto root = ParseMerkleHashBase64(lines[2]);
  if (!root.ok()) return InvalidArgumentError("checkpoint line 3: " + root.status().message());
  c.root = *root;
  for (size_t i = 3; i < lines.size(); ++i) {
    if (lines[i].empty()) {
      return InvalidArgumentError("checkpoint line " + std::to_string(i + 1) + ": empty");
    }
    c.extensions.emplace_back(lines[i]);
  }
  return c;
}

std::string SignCheckpoint(const Checkpoint& c, const Ed25519PrivateKey& key) {
  Note note;
  note.text = FormatCheckpointText(c);
  note.sigs.push_back(SignNoteText(c.origin, key, note.text));
  return FormatNote(note);
}

Result<OpenedCheckpoint> OpenCheckpoint(std::string_view text, const NoteVerifierKey& ledger,
                                        const std::vector<NoteVerifierKey>& witnesses) {
  OpenedCheckpoint out;
  GATOS_ASSIGN_OR_RETURN(out.note, ParseNote(text));
  GATOS_ASSIGN_OR_RETURN(out.checkpoint, ParseCheckpointText(out.note.text));
  NoteVerifierKey lk = ledger;
  if (lk.name.empty()) lk = MakeNoteVerifierKey(out.checkpoint.origin, kNoteTypeEd25519, ledger.key);
  if (lk.name != out.checkpoint.origin) {
    return PermissionDeniedError("checkpoint: origin " + TruncateUtf8(out.checkpoint.origin, 80) +
                                 " is not the ledger " + lk.name);
  }
  bool signed_by_ledger = false;
  for (const NoteSignature& s : out.note.sigs) {
    if (NoteSignatureIsBy(s, lk)) {
      GATOS_RETURN_IF_ERROR(VerifyNoteSignature(lk, out.note.text, s).WithContext("checkpoint"));
      signed_by_ledger = true;
      continue;
    }
    for (const NoteVerifierKey& w : witnesses) {
      if (!NoteSignatureIsBy(s, w)) continue;
      uint64_t t = 0;
      GATOS_RETURN_IF_ERROR(VerifyNoteSignature(w, out.note.text, s, &t).WithContext("checkpoint"));
      bool seen = false;
      for (const auto& c : out.cosigners) seen = seen || c.name == w.name;
      if (!seen) out.cosigners.push_back({w.name, t});
    }
  }
  if (!signed_by_ledger) {
    return PermissionDeniedError("checkpoint: not signed by the ledger key (" +
                                 FormatNoteVerifierKey(lk) + ")");
  }
  return out;
}

}  // namespace gatos
