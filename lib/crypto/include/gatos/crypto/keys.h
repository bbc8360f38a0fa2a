// Ed25519 private keys in OpenSSH's "openssh-key-v1" file format (unencrypted
// only), signing and verification (libsodium). Public keys and their text
// forms are in public_key.h (gatos_model, no crypto library).
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

#include "gatos/model/public_key.h"
#include "gatos/model/status.h"

namespace gatos {

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

namespace ssh {
// Initialises libsodium exactly once (thread-safe). Internal if it fails;
// every crypto entry point calls it before using libsodium.
Status EnsureSodium();
}  // namespace ssh

}  // namespace gatos

#endif  // GATOS_KEYS_H_
