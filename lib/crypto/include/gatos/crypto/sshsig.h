// OpenSSH signatures (PROTOCOL.sshsig): the format of `ssh-keygen -Y sign`
// and of git's SSH commit signatures (namespace "git").
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef GATOS_SSHSIG_H_
#define GATOS_SSHSIG_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/crypto/keys.h"
#include "gatos/model/status.h"

namespace gatos {

// Largest armored signature ParseSshSignature accepts. An ed25519 SSHSIG is
// about 300 bytes; the bound keeps hostile input cheap.
inline constexpr size_t kMaxSshSignatureSize = 64 * 1024;

// Signs `message` under namespace `ns` (non-empty, e.g. "git" or "file")
// with hash sha512, as `ssh-keygen -Y sign` does. Returns the armored text
// ("-----BEGIN SSH SIGNATURE-----", 70-column base64 lines like ssh-keygen,
// "-----END SSH SIGNATURE-----\n"). Ed25519 is deterministic, so the output
// is byte-identical to ssh-keygen's for the same key, message and namespace.
// InvalidArgument if `ns` is empty.
Result<std::string> SshSigSign(const Ed25519PrivateKey& key, std::string_view message,
                               std::string_view ns);

struct SshSignature {
  Ed25519PublicKey key;
  std::string ns;
  std::string hash_alg;  // "sha256" or "sha512"
  std::array<uint8_t, 64> sig{};
};

// Parses armored SSHSIG text (leading/trailing whitespace and CRLF tolerated).
// InvalidArgument (with a byte offset into the decoded blob where relevant)
// for: input over kMaxSshSignatureSize, missing BEGIN/END lines, bad base64,
// wrong magic or version, non-ed25519 keys, hash algorithms other than
// sha256/sha512, and trailing data.
Result<SshSignature> ParseSshSignature(std::string_view armored);

// OK if `sig` is a valid signature of `message` under `expected_ns`.
// PermissionDenied if the namespace differs or the signature does not verify.
// Says nothing about whether the key is trusted: check that against an
// AllowedSigners list.
Status SshSigVerify(const SshSignature& sig, std::string_view message,
                    std::string_view expected_ns);

}  // namespace gatos

#endif  // GATOS_SSHSIG_H_
