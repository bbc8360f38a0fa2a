#include "gatos/crypto/signed_note.h"

#include <sodium.h>

#include <cstring>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

constexpr std::string_view kSigPrefix = "\xE2\x80\x94 ";  // U+2014 EM DASH, space
constexpr size_t kMaxNoteBytes = 1 << 20;
constexpr size_t kMaxSignatures = 100;

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == ' ' || c == '+' || c == '\n') return false;
  }
  return true;
}

std::string CosignedMessage(std::string_view text, uint64_t timestamp) {
  std::string m = "cosignature/v1\ntime " + std::to_string(timestamp) + "\n";
  m.append(text);
  return m;
}

std::string KeyIdBytes(uint32_t id) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(id >> 24);
  s[1] = static_cast<char>(id >> 16);
  s[2] = static_cast<char>(id >> 8);
  s[3] = static_cast<char>(id);
  return s;
}

std::string Hex8(uint32_t id) {
  static const char* d = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, id >>= 4) s[i] = d[id & 15];
  return s;
}

}  // namespace

Result<Note> ParseNote(std::string_view message) {
  if (message.size() > kMaxNoteBytes) return InvalidArgumentError("note: larger than 1 MiB");
  if (TruncateUtf8(message, message.size()) != message) {
    return InvalidArgumentError("note: not valid UTF-8");
  }
  for (size_t i = 0; i < message.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(message[i]);
    if (c < 0x20 && c != '\n') {
      return InvalidArgumentError("note: control character at byte " + std::to_string(i));
    }
  }
  if (message.empty() || message.back() != '\n') {
    return InvalidArgumentError("note: does not end in a newline");
  }
  size_t split = message.rfind("\n\n");
  if (split == std::string_view::npos) {
    return InvalidArgumentError("note: no empty line before the signatures");
  }
  Note note;
  note.text = std::string(message.substr(0, split + 1));
  std::string_view sigs = message.substr(split + 2);
  size_t line_no = 0;
  while (!sigs.empty()) {
    size_t nl = sigs.find('\n');  // present: the message ends in '\n'
    std::string_view line = sigs.substr(0, nl);
    sigs.remove_prefix(nl + 1);
    ++line_no;
    std::string where = "note: signature line " + std::to_string(line_no);
    if (note.sigs.size() == kMaxSignatures) return InvalidArgumentError("note: more than 100 signatures");
    if (line.substr(0, kSigPrefix.size()) != kSigPrefix) {
      return InvalidArgumentError(where + " does not start with \"\xE2\x80\x94 \"");
    }
    line.remove_prefix(kSigPrefix.size());
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return InvalidArgumentError(where + " has no signature");
    std::string_view name = line.substr(0, sp);
    if (!ValidName(name)) return InvalidArgumentError(where + ": bad key name");
    auto raw = Base64Decode(line.substr(sp + 1));
    if (!raw.ok() || raw->size() < 5) return InvalidArgumentError(where + ": bad signature base64");
    NoteSignature s;
    s.name = std::string(name);
    s.key_id = (uint32_t{(*raw)[0]} << 24) | (uint32_t{(*raw)[1]} << 16) | (uint32_t{(*raw)[2]} << 8) |
               uint32_t{(*raw)[3]};
    s.sig.assign(reinterpret_cast<const char*>(raw->data()) + 4, raw->size() - 4);
    note.sigs.push_back(std::move(s));
  }
  if (note.sigs.empty()) return InvalidArgumentError("note: no signature");
  return note;
}

std::string FormatNote(const Note& note) {
  std::string out = note.text;
  out += '\n';
  for (const NoteSignature& s : note.sigs) {
    std::string raw = KeyIdBytes(s.key_id) + s.sig;
    out += kSigPrefix;
    out += s.name;
    out += ' ';
    out += Base64Encode(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
    out += '\n';
  }
  return out;
}

uint32_t NoteKeyId(std::string_view name, uint8_t type, const Ed25519PublicKey& key) {
  std::string input(name);
  input += '\n';
  input += static_cast<char>(type);
  input.append(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(input.data()), input.size());
  return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
}

NoteVerifierKey MakeNoteVerifierKey(std::string name, uint8_t type, const Ed25519PublicKey& key) {
  NoteVerifierKey k;
  k.key_id = NoteKeyId(name, type, key);
  k.name = std::move(name);
  k.type = type;
  k.key = key;
  return k;
}

Result<NoteVerifierKey> ParseNoteVerifierKey(std::string_view vkey) {
  size_t p1 = vkey.find('+');
  size_t p2 = p1 == std::string_view::npos ? p1 : vkey.find('+', p1 + 1);
  if (p2 == std::string_view::npos) {
    return InvalidArgumentError("verifier key: not <name>+<key id>+<key>");
  }
  std::string_view name = vkey.substr(0, p1);
  std::string_view id_hex = vkey.substr(p1 + 1, p2 - p1 - 1);
  if (!ValidName(name)) return InvalidArgumentError("verifier key: bad name");
  if (!IsLowerHex(id_hex, 8)) return InvalidArgumentError("verifier key: key id is not 8 hex digits");
  auto raw = Base64Decode(vkey.substr(p2 + 1));
  if (!raw.ok() || raw->size() != 33) {
    return InvalidArgumentError("verifier key: key is not base64 of a type byte and 32 key bytes");
  }
  uint8_t type = (*raw)[0];
  if (type != kNoteTypeEd25519 && type != kNoteTypeCosignatureV1) {
    return InvalidArgumentError("verifier key: unknown signature type " + std::to_string(type));
  }
  Ed25519PublicKey pub;
  std::memcpy(pub.bytes.data(), raw->data() + 1, 32);
  NoteVerifierKey k = MakeNoteVerifierKey(std::string(name), type, pub);
  if (Hex8(k.key_id) != id_hex) {
    return InvalidArgumentError("verifier key: key id " + std::string(id_hex) +
                                " does not match the name and key (" + Hex8(k.key_id) + ")");
  }
  return k;
}

std::string FormatNoteVerifierKey(const NoteVerifierKey& k) {
  std::string raw(1, static_cast<char>(k.type));
  raw.append(reinterpret_cast<const char*>(k.key.bytes.data()), 32);
  return k.name + "+" + Hex8(k.key_id) + "+" +
         Base64Encode(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

NoteSignature SignNoteText(std::string_view name, const Ed25519PrivateKey& key, std::string_view text) {
  NoteSignature s;
  s.name = std::string(name);
  s.key_id = NoteKeyId(name, kNoteTypeEd25519, key.public_key());
  auto sig = Ed25519Sign(key, text);
  s.sig.assign(reinterpret_cast<const char*>(sig.data()), sig.size());
  return s;
}

NoteSignature CosignNoteText(std::string_view name, const Ed25519PrivateKey& key, std::string_view text,
                             uint64_t timestamp) {
  NoteSignature s;
  s.name = std::string(name);
  s.key_id = NoteKeyId(name, kNoteTypeCosignatureV1, key.public_key());
  auto sig = Ed25519Sign(key, CosignedMessage(text, timestamp));
  for (int i = 7; i >= 0; --i) s.sig += static_cast<char>(timestamp >> (8 * i));
  s.sig.append(reinterpret_cast<const char*>(sig.data()), sig.size());
  return s;
}

bool NoteSignatureIsBy(const NoteSignature& sig, const NoteVerifierKey& key) {
  return sig.name == key.name && sig.key_id == key.key_id;
}

Status VerifyNoteSignature(const NoteVerifierKey& key, std::string_view text, const NoteSignature& sig,
                           uint64_t* timestamp) {
  if (!NoteSignatureIsBy(sig, key)) {
    return PermissionDeniedError("signature by " + sig.name + " is not by key " + key.name);
  }
  if (key.type == kNoteTypeEd25519) {
    if (sig.sig.size() != 64) return PermissionDeniedError("note signature of " + key.name + ": not 64 bytes");
    return Ed25519Verify(key.key, text, reinterpret_cast<const uint8_t*>(sig.sig.data()))
        .WithContext("note signature of " + key.name);
  }
  if (sig.sig.size() != 72) return PermissionDeniedError("cosignature of " + key.name + ": not 72 bytes");
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) t = (t << 8) | static_cast<uint8_t>(sig.sig[i]);
  if (t > (uint64_t{1} << 63) - 1) return PermissionDeniedError("cosignature of " + key.name + ": bad time");
  GATOS_RETURN_IF_ERROR(Ed25519Verify(key.key, CosignedMessage(text, t),
                                      reinterpret_cast<const uint8_t*>(sig.sig.data()) + 8)
                            .WithContext("cosignature of " + key.name));
  if (timestamp) *timestamp = t;
  return OkStatus();
}

}  // namespace gatos
