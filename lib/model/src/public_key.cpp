#include "gatos/model/public_key.h"

#include <string.h>

#include <cerrno>
#include <cstring>

#include "gatos/model/encoding.h"
#include "gatos/model/ssh_wire.h"

namespace gatos {
namespace {


bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view AsView(const Bytes& b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

Status UnsupportedType(std::string_view type) {
  return InvalidArgumentError("unsupported key type \"" + ssh::QuoteForError(type) +
                              "\"; only ssh-ed25519 keys are supported");
}

}  // namespace

namespace ssh {

// Reads string "ssh-ed25519" + string key(32) from `r`.
Result<std::array<uint8_t, 32>> ReadEd25519PublicKey(ssh::WireReader& r, std::string_view field) {
  size_t type_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view type, r.ReadString(std::string(field) + " key type"));
  if (type != kSshEd25519) {
    return r.Error("unsupported key type \"" + ssh::QuoteForError(type) + "\" in " +
                       std::string(field) + "; only ssh-ed25519 keys are supported",
                   type_at);
  }
  size_t key_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view key, r.ReadString(std::string(field) + " key"));
  if (key.size() != 32) {
    return r.Error(std::string(field) + " ed25519 key is " + std::to_string(key.size()) +
                       " bytes, expected 32",
                   key_at);
  }
  std::array<uint8_t, 32> out;
  std::memcpy(out.data(), key.data(), 32);
  return out;
}

}  // namespace ssh

std::string Ed25519PublicKey::Hex() const { return HexEncode(bytes.data(), bytes.size()); }

std::string Ed25519PublicKey::WorkerId() const { return "ed25519:" + Hex(); }

std::string Ed25519PublicKey::WireBlob() const {
  ssh::WireWriter w;
  w.WriteString(kSshEd25519);
  w.WriteString(bytes.data(), bytes.size());
  return w.Release();
}

std::string Ed25519PublicKey::ToOpenSsh() const {
  std::string blob = WireBlob();
  std::string out = std::string(kSshEd25519) + " " +
                    Base64Encode(reinterpret_cast<const uint8_t*>(blob.data()), blob.size());
  if (!comment.empty()) out += " " + comment;
  return out;
}

Result<Ed25519PublicKey> ParsePublicKeyBlob(std::string_view blob, std::string_view what) {
  ssh::WireReader r(blob, std::string(what));
  Ed25519PublicKey key;
  GATOS_ASSIGN_OR_RETURN(key.bytes, ssh::ReadEd25519PublicKey(r, "public key blob"));
  GATOS_RETURN_IF_ERROR(r.ExpectEnd());
  return key;
}

Result<Ed25519PublicKey> ParseOpenSshPublicKey(std::string_view line) {
  std::string_view s = Trim(line);
  if (s.empty()) return InvalidArgumentError("public key: empty input");
  if (s.find('\n') != std::string_view::npos) {
    return InvalidArgumentError("public key: expected a single line, found " +
                                std::to_string(s.find('\n') + 1) + " bytes then a newline");
  }
  size_t sp = s.find_first_of(" \t");
  std::string_view type = s.substr(0, sp);
  if (type != kSshEd25519) {
    return UnsupportedType(type).WithContext("public key");
  }
  if (sp == std::string_view::npos) {
    return InvalidArgumentError("public key: missing base64 key data after \"ssh-ed25519\"");
  }
  s = Trim(s.substr(sp));
  size_t sp2 = s.find_first_of(" \t");
  std::string_view b64 = s.substr(0, sp2);
  std::string_view comment = sp2 == std::string_view::npos ? "" : Trim(s.substr(sp2));
  auto blob = Base64Decode(b64);
  if (!blob.ok()) return blob.status().WithContext("public key: invalid base64 key data");
  GATOS_ASSIGN_OR_RETURN(Ed25519PublicKey key,
                         ParsePublicKeyBlob(AsView(*blob), "public key base64 blob"));
  key.comment = std::string(comment);
  return key;
}

Result<Ed25519PublicKey> ParseWorkerId(std::string_view text) {
  constexpr std::string_view kPrefix = "ed25519:";
  if (text.substr(0, kPrefix.size()) != kPrefix) {
    return InvalidArgumentError("worker id \"" + ssh::QuoteForError(text) +
                                "\" does not start with \"ed25519:\"");
  }
  std::string_view hex = text.substr(kPrefix.size());
  if (!IsLowerHex(hex, 64)) {
    return InvalidArgumentError("worker id \"" + ssh::QuoteForError(text) +
                                "\": expected 64 lowercase hex characters after \"ed25519:\"");
  }
  GATOS_ASSIGN_OR_RETURN(Bytes b, HexDecode(hex));
  Ed25519PublicKey key;
  std::memcpy(key.bytes.data(), b.data(), 32);
  return key;
}

}  // namespace gatos
