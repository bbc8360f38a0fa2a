// Ed25519 public keys in OpenSSH formats: "ssh-ed25519 AAAA... comment" lines,
// SSH wire blobs, and the protocol's worker id "ed25519:<64 hex>". Parsing
// only: no crypto library is needed (signing and verification are keys.h).
//
// Thread-safety: functions are safe to call concurrently; keys are values.
#ifndef GATOS_PUBLIC_KEY_H_
#define GATOS_PUBLIC_KEY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr std::string_view kSshEd25519 = "ssh-ed25519";

struct Ed25519PublicKey {
  std::array<uint8_t, 32> bytes{};
  std::string comment;  // free text after the key; never part of identity

  std::string Hex() const;       // 64 lowercase hex
  std::string WorkerId() const;  // "ed25519:<hex>"
  // "ssh-ed25519 AAAA... comment" (no trailing newline; no comment part when
  // the comment is empty).
  std::string ToOpenSsh() const;
  // The SSH wire blob: string "ssh-ed25519", string key(32).
  std::string WireBlob() const;
  // Compares key bytes only; comments don't matter.
  bool operator==(const Ed25519PublicKey& other) const { return bytes == other.bytes; }
  bool operator!=(const Ed25519PublicKey& other) const { return !(*this == other); }
};

// "ssh-ed25519 <base64 blob> [comment]" (one line; surrounding whitespace and
// a final newline are ignored). InvalidArgument for other key types (the
// message names the type), bad base64, or a blob that is not exactly
// string "ssh-ed25519" + string key(32) matching the type token.
Result<Ed25519PublicKey> ParseOpenSshPublicKey(std::string_view line);

// Parses an SSH wire public key blob (e.g. from SSHSIG). `what` names the
// blob in error messages.
Result<Ed25519PublicKey> ParsePublicKeyBlob(std::string_view blob, std::string_view what);

// "ed25519:<64 lowercase hex>".
Result<Ed25519PublicKey> ParseWorkerId(std::string_view text);


}  // namespace gatos

#endif  // GATOS_PUBLIC_KEY_H_
