// Signed notes (C2SP signed-note, the format of golang.org/x/mod/sumdb/note):
// a UTF-8 text ending in a newline, an empty line, then one or more lines
// "— <key name> <base64(4-byte key id || signature)>". Key ids are
// SHA-256(name || "\n" || type || public key)[:4], big-endian. Two
// signature types are made and checked here:
//   0x01  Ed25519 over the note text (the ledger's checkpoint signature);
//   0x04  C2SP tlog-cosignature/v1: Ed25519 over "cosignature/v1\ntime
//         <t>\n" || the note text, the signature carrying the 8-byte
//         big-endian timestamp before the 64 signature bytes (a witness).
// Verifier keys are "<name>+<8 hex key id>+<base64(type || key)>".
//
// Tested against the examples of the C2SP specification and of
// sumdb/note's tests (tests/data/tlog/notes, tests/unit/signed_note_test.cpp).
//
// Thread-safety: pure functions on values.
#ifndef GATOS_SIGNED_NOTE_H_
#define GATOS_SIGNED_NOTE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/model/public_key.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr uint8_t kNoteTypeEd25519 = 0x01;
inline constexpr uint8_t kNoteTypeCosignatureV1 = 0x04;

struct NoteSignature {
  std::string name;
  uint32_t key_id = 0;
  std::string sig;  // the bytes after the key id
  bool operator==(const NoteSignature&) const = default;
};

struct Note {
  std::string text;  // ends in "\n"; the separating empty line is not part of it
  std::vector<NoteSignature> sigs;
};

// Strict: valid UTF-8, no control character but newline, the text ends in a
// newline and is separated from the signatures by the last empty line, at
// least one and at most 100 signature lines, each "— name base64" with a
// non-empty name without spaces or '+' and at least 5 decoded bytes, the
// whole note at most 1 MiB. InvalidArgument says what and where.
Result<Note> ParseNote(std::string_view message);
// Text, empty line, one line per signature, in order.
std::string FormatNote(const Note& note);

uint32_t NoteKeyId(std::string_view name, uint8_t type, const Ed25519PublicKey& key);

struct NoteVerifierKey {
  std::string name;
  uint32_t key_id = 0;
  uint8_t type = kNoteTypeEd25519;
  Ed25519PublicKey key;
};
// "<name>+<8 hex>+<base64(type || 32-byte key)>"; the key id must be the one
// NoteKeyId computes and the type 0x01 or 0x04. InvalidArgument otherwise.
Result<NoteVerifierKey> ParseNoteVerifierKey(std::string_view vkey);
std::string FormatNoteVerifierKey(const NoteVerifierKey& k);
NoteVerifierKey MakeNoteVerifierKey(std::string name, uint8_t type, const Ed25519PublicKey& key);

// A type 0x01 signature of `text` by `key` under `name`.
NoteSignature SignNoteText(std::string_view name, const Ed25519PrivateKey& key, std::string_view text);
// A tlog-cosignature/v1 (type 0x04) signature of the checkpoint `text` made at
// `timestamp` (POSIX seconds).
NoteSignature CosignNoteText(std::string_view name, const Ed25519PrivateKey& key, std::string_view text,
                             uint64_t timestamp);

// True when `sig` is by `key` (same name and key id); verifiers ignore
// signatures of other keys.
bool NoteSignatureIsBy(const NoteSignature& sig, const NoteVerifierKey& key);
// Checks a signature NoteSignatureIsBy `key` over `text`, of the key's type.
// For a cosignature, *timestamp receives its time. PermissionDenied when it
// does not verify (or is of the wrong length).
Status VerifyNoteSignature(const NoteVerifierKey& key, std::string_view text, const NoteSignature& sig,
                           uint64_t* timestamp = nullptr);

}  // namespace gatos

#endif  // GATOS_SIGNED_NOTE_H_
