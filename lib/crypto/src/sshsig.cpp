#include "gatos/crypto/sshsig.h"

#include <sodium.h>

#include <cstring>

#include "digest.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ssh_wire.h"

namespace gatos {
namespace {

constexpr std::string_view kMagic = "SSHSIG";
constexpr uint32_t kVersion = 1;
constexpr std::string_view kBegin = "-----BEGIN SSH SIGNATURE-----";
constexpr std::string_view kEnd = "-----END SSH SIGNATURE-----";
constexpr size_t kLineWidth = 70;  // what ssh-keygen -Y sign writes

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

Result<std::string> HashMessage(std::string_view alg, std::string_view message) {
  using crypto_internal::DigestAlg;
  if (alg == "sha512" || alg == "sha256") {
    std::string out(alg == "sha512" ? 64 : 32, '\0');
    crypto_internal::Digest(alg == "sha512" ? DigestAlg::kSha512 : DigestAlg::kSha256, message,
                            reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }
  return InvalidArgumentError("unsupported SSHSIG hash algorithm \"" + ssh::QuoteForError(alg) +
                              "\"; expected sha256 or sha512");
}

// The blob that is actually signed (PROTOCOL.sshsig "Signed Data").
std::string SignedData(std::string_view ns, std::string_view hash_alg, std::string_view hash) {
  ssh::WireWriter w;
  w.WriteBytes(kMagic);
  w.WriteString(ns);
  w.WriteString("");  // reserved
  w.WriteString(hash_alg);
  w.WriteString(hash);
  return w.Release();
}

}  // namespace

Result<std::string> SshSigSign(const Ed25519PrivateKey& key, std::string_view message,
                               std::string_view ns) {
  if (ns.empty()) return InvalidArgumentError("SSHSIG namespace must not be empty");
  GATOS_RETURN_IF_ERROR(ssh::EnsureSodium());
  constexpr std::string_view kAlg = "sha512";
  GATOS_ASSIGN_OR_RETURN(std::string hash, HashMessage(kAlg, message));
  std::array<uint8_t, 64> sig = Ed25519Sign(key, SignedData(ns, kAlg, hash));

  ssh::WireWriter sig_blob;
  sig_blob.WriteString(kSshEd25519);
  sig_blob.WriteString(sig.data(), sig.size());

  ssh::WireWriter w;
  w.WriteBytes(kMagic);
  w.WriteU32(kVersion);
  w.WriteString(key.public_key().WireBlob());
  w.WriteString(ns);
  w.WriteString("");  // reserved
  w.WriteString(kAlg);
  w.WriteString(sig_blob.data());
  const std::string& blob = w.data();
  std::string b64 = Base64Encode(reinterpret_cast<const uint8_t*>(blob.data()), blob.size());
  std::string out = std::string(kBegin) + "\n";
  for (size_t i = 0; i < b64.size(); i += kLineWidth) {
    out.append(b64, i, kLineWidth);
    out.push_back('\n');
  }
  out += std::string(kEnd) + "\n";
  return out;
}

Result<SshSignature> ParseSshSignature(std::string_view armored) {
  if (armored.size() > kMaxSshSignatureSize) {
    return InvalidArgumentError("SSH signature: input is " + std::to_string(armored.size()) +
                                " bytes, more than the " + std::to_string(kMaxSshSignatureSize) +
                                " allowed");
  }
  std::string_view text = Trim(armored);
  if (text.substr(0, kBegin.size()) != kBegin) {
    return InvalidArgumentError("SSH signature: does not start with \"" + std::string(kBegin) +
                                "\"");
  }
  text.remove_prefix(kBegin.size());
  size_t end_at = text.rfind(kEnd);
  if (end_at == std::string_view::npos || end_at + kEnd.size() != text.size()) {
    return InvalidArgumentError("SSH signature: does not end with \"" + std::string(kEnd) +
                                "\" (truncated?)");
  }
  text = text.substr(0, end_at);
  {
    std::string_view before = text;
    while (!before.empty() && (before.back() == ' ' || before.back() == '\t'))
      before.remove_suffix(1);
    if (before.empty() || before.back() != '\n') {
      return InvalidArgumentError("SSH signature: \"" + std::string(kEnd) +
                                  "\" must be on a line of its own");
    }
  }
  // Each base64 line is trimmed (CRLF files, and git's indented header
  // continuation lines); a blank inside a line is an error.
  std::string b64;
  b64.reserve(text.size());
  size_t line_no = 1;  // the BEGIN line
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = Trim(text.substr(pos, nl - pos));
    if (pos == 0 && !line.empty()) {
      return InvalidArgumentError("SSH signature: text after \"" + std::string(kBegin) +
                                  "\" on the same line");
    }
    if (pos != 0) ++line_no;
    pos = nl + 1;
    if (line.find_first_of(" \t\r") != std::string_view::npos) {
      return InvalidArgumentError("SSH signature: armor line " + std::to_string(line_no) +
                                  " has a blank inside the base64 text");
    }
    b64.append(line);
  }
  auto decoded = Base64Decode(b64);
  if (!decoded.ok()) {
    return InvalidArgumentError("SSH signature: invalid base64: " + decoded.status().message());
  }
  std::string_view blob(reinterpret_cast<const char*>(decoded->data()), decoded->size());

  ssh::WireReader r(blob, "SSH signature");
  GATOS_ASSIGN_OR_RETURN(std::string_view magic, r.ReadBytes(kMagic.size(), "magic"));
  if (magic != kMagic) return r.Error("bad magic, expected \"SSHSIG\"", 0);
  size_t version_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(uint32_t version, r.ReadU32("version"));
  if (version != kVersion) {
    return r.Error("unsupported version " + std::to_string(version) + ", expected 1", version_at);
  }
  SshSignature out;
  size_t key_at = r.offset() + 4;
  GATOS_ASSIGN_OR_RETURN(std::string_view key_blob, r.ReadString("public key"));
  auto key = ParsePublicKeyBlob(
      key_blob, "SSH signature: public key (starts at offset " + std::to_string(key_at) + ")");
  if (!key.ok()) return key.status();
  out.key = std::move(key).value();
  GATOS_ASSIGN_OR_RETURN(std::string_view ns, r.ReadString("namespace"));
  out.ns = std::string(ns);
  GATOS_ASSIGN_OR_RETURN(std::string_view reserved, r.ReadString("reserved"));
  (void)reserved;  // PROTOCOL.sshsig: verifiers ignore its contents
  size_t alg_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view alg, r.ReadString("hash algorithm"));
  if (alg != "sha256" && alg != "sha512") {
    return r.Error(
        "unsupported hash algorithm \"" + ssh::QuoteForError(alg) + "\"; expected sha256 or sha512",
        alg_at);
  }
  out.hash_alg = std::string(alg);
  size_t sig_at = r.offset() + 4;
  GATOS_ASSIGN_OR_RETURN(std::string_view sig_blob, r.ReadString("signature"));
  GATOS_RETURN_IF_ERROR(r.ExpectEnd());

  ssh::WireReader sr(
      sig_blob, "SSH signature: signature blob (starts at offset " + std::to_string(sig_at) + ")");
  size_t type_at = sr.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view sig_type, sr.ReadString("signature type"));
  if (sig_type != kSshEd25519) {
    return sr.Error("signature type \"" + ssh::QuoteForError(sig_type) +
                        "\" does not match the ssh-ed25519 key",
                    type_at);
  }
  size_t raw_at = sr.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view raw, sr.ReadString("ed25519 signature"));
  if (raw.size() != 64) {
    return sr.Error("ed25519 signature is " + std::to_string(raw.size()) + " bytes, expected 64",
                    raw_at);
  }
  GATOS_RETURN_IF_ERROR(sr.ExpectEnd());
  std::memcpy(out.sig.data(), raw.data(), 64);
  return out;
}

Status SshSigVerify(const SshSignature& sig, std::string_view message,
                    std::string_view expected_ns) {
  if (sig.ns != expected_ns) {
    return PermissionDeniedError("SSH signature namespace is \"" + ssh::QuoteForError(sig.ns) +
                                 "\", expected \"" + ssh::QuoteForError(expected_ns) + "\"");
  }
  GATOS_RETURN_IF_ERROR(ssh::EnsureSodium());
  auto hash = HashMessage(sig.hash_alg, message);
  if (!hash.ok()) return hash.status();
  std::string signed_data = SignedData(sig.ns, sig.hash_alg, *hash);
  Status s = Ed25519Verify(sig.key, signed_data, sig.sig.data());
  if (!s.ok()) {
    return PermissionDeniedError("SSH signature (namespace \"" + ssh::QuoteForError(sig.ns) +
                                 "\") does not verify for key " + sig.key.WorkerId() +
                                 ": the message or the signature was changed");
  }
  return OkStatus();
}

}  // namespace gatos
