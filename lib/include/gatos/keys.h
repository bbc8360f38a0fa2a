// Ed25519 keys in OpenSSH formats: "ssh-ed25519 AAAA... comment" public keys,
// "openssh-key-v1" private key files (unencrypted only), and the protocol's
// worker id "ed25519:<64 hex>".
//
// A key made by `ssh-keygen -t ed25519 -N ''` loads here, and a key written
// here loads in ssh-keygen/ssh/git (byte-compatible file layout).
//
// Thread-safety: all functions are safe to call concurrently; key objects are
// values (copy them between threads, don't share one mutably).
#ifndef GATOS_KEYS_H_
#define GATOS_KEYS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/status.h"

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

// An Ed25519 secret key. The secret bytes are wiped (sodium_memzero) when the
// object is destroyed; copies are independent and each wipes its own bytes.
// The secret is never included in any error message or log.
class Ed25519PrivateKey {
 public:
  Ed25519PrivateKey(const Ed25519PrivateKey&) = default;
  Ed25519PrivateKey& operator=(const Ed25519PrivateKey&) = default;
  Ed25519PrivateKey(Ed25519PrivateKey&&) = default;
  Ed25519PrivateKey& operator=(Ed25519PrivateKey&&) = default;
  ~Ed25519PrivateKey();

  // Deterministic key from a 32-byte seed (RFC 8032 secret key). For tests
  // and for deriving keys; use GenerateEd25519Key for new identities.
  static Ed25519PrivateKey FromSeed(const std::array<uint8_t, 32>& seed, std::string comment);

  const Ed25519PublicKey& public_key() const { return public_key_; }
  const std::string& comment() const { return public_key_.comment; }
  void set_comment(std::string comment) { public_key_.comment = std::move(comment); }

 private:
  Ed25519PrivateKey() = default;

  friend Result<Ed25519PrivateKey> GenerateEd25519Key(std::string comment);
  friend Result<Ed25519PrivateKey> ParseOpenSshPrivateKey(std::string_view pem);
  friend std::string FormatOpenSshPrivateKey(const Ed25519PrivateKey& key);
  friend std::array<uint8_t, 64> Ed25519Sign(const Ed25519PrivateKey& key,
                                             std::string_view message);

  std::array<uint8_t, 64> secret_{};  // libsodium layout: seed(32) || public(32)
  Ed25519PublicKey public_key_;
  // The file's "checkint": random, kept so that parse -> format reproduces a
  // file byte for byte.
  uint32_t checkint_ = 0;
};

// New random key. Internal only if libsodium cannot initialise.
Result<Ed25519PrivateKey> GenerateEd25519Key(std::string comment);

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

// "-----BEGIN OPENSSH PRIVATE KEY-----" text, openssh-key-v1, cipher "none"
// and kdf "none" only. InvalidArgument for encrypted keys ("encrypted keys
// are not supported; ..."), non-ed25519 keys, mismatched checkints, public
// and private halves that disagree, bad padding, trailing data, or any
// truncation/length field that runs past the end (errors give byte offsets).
Result<Ed25519PrivateKey> ParseOpenSshPrivateKey(std::string_view pem);

// The private key file text, laid out exactly as ssh-keygen writes it
// (70-column base64 lines, final newline).
std::string FormatOpenSshPrivateKey(const Ed25519PrivateKey& key);

// File variants. Errors are prefixed with the path. NotFound if the file does
// not exist; InvalidArgument if it is not a valid key.
Result<Ed25519PrivateKey> ReadPrivateKeyFile(const std::string& path);
Result<Ed25519PublicKey> ReadPublicKeyFile(const std::string& path);

// Writes `path` (mode 0600) and `path + ".pub"` (mode 0644, one line).
// AlreadyExists if either file exists: never overwrites a key. On failure no
// partial files are left behind.
Status WriteKeyPair(const std::string& path, const Ed25519PrivateKey& key);

// Plain Ed25519 (RFC 8032) over `message`.
std::array<uint8_t, 64> Ed25519Sign(const Ed25519PrivateKey& key, std::string_view message);
// OK if `sig` is a valid signature of `message` by `key`; PermissionDenied
// otherwise.
Status Ed25519Verify(const Ed25519PublicKey& key, std::string_view message, const uint8_t sig[64]);

}  // namespace gatos

#endif  // GATOS_KEYS_H_
