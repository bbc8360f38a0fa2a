#include "gatos/crypto/sshsig.h"

#include <gtest/gtest.h>

#include "gatos/model/encoding.h"
#include "gatos/model/ssh_wire.h"

namespace gatos {
namespace {

// Made with `ssh-keygen -t ed25519 -N '' -C test -f x` (OpenSSH 9.2p1).
constexpr std::string_view kVectorPrivate =
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDFdmJN+y+QtJTVCpUeEJ6EjkFtOVWhViszg8+kIfEp/QAAAIhjzzXFY881\n"
    "xQAAAAtzc2gtZWQyNTUxOQAAACDFdmJN+y+QtJTVCpUeEJ6EjkFtOVWhViszg8+kIfEp/Q\n"
    "AAAEBhRfiiyMwj1j3qat7wrarKrGAPJ/9b2uk7JnHS4CmwYMV2Yk37L5C0lNUKlR4QnoSO\n"
    "QW05VaFWKzODz6Qh8Sn9AAAABHRlc3QB\n"
    "-----END OPENSSH PRIVATE KEY-----\n";
constexpr std::string_view kVectorHex =
    "c576624dfb2f90b494d50a951e109e848e416d3955a1562b3383cfa421f129fd";
constexpr std::string_view kMessage = "hello\n";

// `printf 'hello\n' > msg; ssh-keygen -Y sign -f x -n file msg`.
constexpr std::string_view kSigSha512 =
    "-----BEGIN SSH SIGNATURE-----\n"
    "U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgxXZiTfsvkLSU1QqVHhCehI5BbT\n"
    "lVoVYrM4PPpCHxKf0AAAAEZmlsZQAAAAAAAAAGc2hhNTEyAAAAUwAAAAtzc2gtZWQyNTUx\n"
    "OQAAAEDKQCVv9kSLyN30LQ9EBNPZ0Tsu69x0ZcP86roXVQbqOW1A2aP2YZuaR5JGixCzUU\n"
    "dSaGUna0LQAj17Ult+6uQB\n"
    "-----END SSH SIGNATURE-----\n";
// Same, with `-O hashalg=sha256`.
constexpr std::string_view kSigSha256 =
    "-----BEGIN SSH SIGNATURE-----\n"
    "U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgxXZiTfsvkLSU1QqVHhCehI5BbT\n"
    "lVoVYrM4PPpCHxKf0AAAAEZmlsZQAAAAAAAAAGc2hhMjU2AAAAUwAAAAtzc2gtZWQyNTUx\n"
    "OQAAAECua8He6d5a9ydV/a5JNnd3mXO5OKujDycfhIkUnjEaNwngGYvsOltZTP7x9a7DqU\n"
    "7zSJzT3zg6+d3GMui0A3EA\n"
    "-----END SSH SIGNATURE-----\n";

Ed25519PrivateKey VectorKey() {
  auto key = ParseOpenSshPrivateKey(kVectorPrivate);
  EXPECT_TRUE(key.ok()) << key.status().ToString();
  return *key;
}

std::string ArmorBlob(std::string_view blob) {
  std::string b64 = Base64Encode(reinterpret_cast<const uint8_t*>(blob.data()), blob.size());
  std::string out = "-----BEGIN SSH SIGNATURE-----\n";
  for (size_t i = 0; i < b64.size(); i += 70) out += b64.substr(i, 70) + "\n";
  return out + "-----END SSH SIGNATURE-----\n";
}

// An SSHSIG blob with chosen fields, for rejection tests.
std::string MakeBlob(uint32_t version, std::string_view key_type, std::string_view alg,
                     size_t sig_len, std::string_view trailing = "") {
  ssh::WireWriter key;
  key.WriteString(key_type);
  key.WriteString(std::string(32, 'k'));
  ssh::WireWriter sig;
  sig.WriteString("ssh-ed25519");
  sig.WriteString(std::string(sig_len, 's'));
  ssh::WireWriter w;
  w.WriteBytes("SSHSIG");
  w.WriteU32(version);
  w.WriteString(key.data());
  w.WriteString("file");
  w.WriteString("");
  w.WriteString(alg);
  w.WriteString(sig.data());
  w.WriteBytes(trailing);
  return w.Release();
}

void ExpectInvalid(const Result<SshSignature>& r, std::string_view substring) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(substring), std::string::npos) << r.status().ToString();
}

TEST(SshSigTest, SignIsByteIdenticalToSshKeygen) {
  auto armored = SshSigSign(VectorKey(), kMessage, "file");
  ASSERT_TRUE(armored.ok()) << armored.status().ToString();
  EXPECT_EQ(*armored, kSigSha512);
}

TEST(SshSigTest, VerifiesSshKeygenSignatures) {
  for (std::string_view text : {kSigSha512, kSigSha256}) {
    auto sig = ParseSshSignature(text);
    ASSERT_TRUE(sig.ok()) << sig.status().ToString();
    EXPECT_EQ(sig->key.Hex(), kVectorHex);
    EXPECT_EQ(sig->ns, "file");
    Status s = SshSigVerify(*sig, kMessage, "file");
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(ParseSshSignature(kSigSha512)->hash_alg, "sha512");
  EXPECT_EQ(ParseSshSignature(kSigSha256)->hash_alg, "sha256");
}

TEST(SshSigTest, SignVerifyRoundTrip) {
  auto key = GenerateEd25519Key("rt");
  ASSERT_TRUE(key.ok());
  std::string message(100000, 'x');
  auto armored = SshSigSign(*key, message, "gatos-test");
  ASSERT_TRUE(armored.ok());
  EXPECT_EQ(armored->back(), '\n');
  auto sig = ParseSshSignature(*armored);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->key, key->public_key());
  EXPECT_TRUE(SshSigVerify(*sig, message, "gatos-test").ok());
}

TEST(SshSigTest, WrongNamespaceIsPermissionDenied) {
  auto sig = ParseSshSignature(kSigSha512);
  ASSERT_TRUE(sig.ok());
  Status s = SshSigVerify(*sig, kMessage, "git");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("namespace is \"file\", expected \"git\""), std::string::npos)
      << s.ToString();
  // Relabelling the namespace does not help: the namespace is signed.
  SshSignature relabelled = *sig;
  relabelled.ns = "git";
  s = SshSigVerify(relabelled, kMessage, "git");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.ToString();
}

TEST(SshSigTest, TamperedMessageIsPermissionDenied) {
  auto sig = ParseSshSignature(kSigSha512);
  ASSERT_TRUE(sig.ok());
  Status s = SshSigVerify(*sig, "hello!\n", "file");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("does not verify for key ed25519:" + std::string(kVectorHex)),
            std::string::npos)
      << s.ToString();
  SshSignature flipped = *sig;
  flipped.sig[0] ^= 0x80;
  EXPECT_EQ(SshSigVerify(flipped, kMessage, "file").code(), StatusCode::kPermissionDenied);
  SshSignature other_key = *sig;
  other_key.key.bytes[0] ^= 1;
  EXPECT_EQ(SshSigVerify(other_key, kMessage, "file").code(), StatusCode::kPermissionDenied);
}

TEST(SshSigTest, ArmorVariantsAccepted) {
  // CRLF, surrounding blank lines, and git-style indented lines.
  std::string crlf;
  for (char c : kSigSha512) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  EXPECT_TRUE(ParseSshSignature("\n" + crlf + "\n").ok());
  std::string indented;
  for (char c : kSigSha512) {
    indented += c;
    if (c == '\n') indented += ' ';
  }
  auto sig = ParseSshSignature(indented);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  std::string no_final_newline(kSigSha512.substr(0, kSigSha512.size() - 1));
  EXPECT_TRUE(ParseSshSignature(no_final_newline).ok());
}

TEST(SshSigTest, TruncatedArmorRejected) {
  std::string text(kSigSha512);
  ExpectInvalid(ParseSshSignature(text.substr(0, text.find("-----END"))),
                "does not end with \"-----END SSH SIGNATURE-----\"");
  ExpectInvalid(ParseSshSignature(text.substr(10)), "does not start with");
  ExpectInvalid(ParseSshSignature(""), "does not start with");
  // Drop the last base64 line.
  std::string cut = text;
  size_t last = cut.find("dSaGUna0");
  cut.erase(last, cut.find('\n', last) - last + 1);
  ExpectInvalid(ParseSshSignature(cut), "invalid base64");
  // Valid base64 of a truncated blob: the signature string runs past the end.
  auto full = ParseSshSignature(text);
  ASSERT_TRUE(full.ok());
  std::string blob = MakeBlob(1, "ssh-ed25519", "sha512", 64);
  ExpectInvalid(ParseSshSignature(ArmorBlob(blob.substr(0, blob.size() - 1))),
                "length 83 of signature exceeds the 82 bytes that remain at offset 87");
  // Drop a few characters: broken base64.
  std::string broken = text;
  broken.erase(broken.find("dSaGUna0"), 3);
  ExpectInvalid(ParseSshSignature(broken), "invalid base64");
  ExpectInvalid(ParseSshSignature("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----"),
                "truncated magic");
}

TEST(SshSigTest, ArmorLayoutErrors) {
  std::string text(kSigSha512);
  std::string inner = text;
  inner.insert(inner.find("lVoV") + 4, " ");
  ExpectInvalid(ParseSshSignature(inner), "armor line 3 has a blank inside");
  std::string same_line = text;
  same_line.insert(same_line.find('\n'), "AAAA");
  ExpectInvalid(ParseSshSignature(same_line), "text after \"-----BEGIN SSH SIGNATURE-----\"");
  std::string end_glued = text;
  end_glued.erase(end_glued.find("\n-----END"), 1);
  ExpectInvalid(ParseSshSignature(end_glued), "must be on a line of its own");
}

TEST(SshSigTest, OversizedInputRejected) {
  std::string big = std::string(kSigSha512) + std::string(kMaxSshSignatureSize, '\n');
  ExpectInvalid(ParseSshSignature(big), "more than the 65536 allowed");
}

TEST(SshSigTest, BlobFieldErrors) {
  ExpectInvalid(ParseSshSignature(ArmorBlob(MakeBlob(2, "ssh-ed25519", "sha512", 64))),
                "unsupported version 2, expected 1 at offset 6");
  ExpectInvalid(ParseSshSignature(ArmorBlob(MakeBlob(1, "ssh-rsa", "sha512", 64))),
                "unsupported key type \"ssh-rsa\"");
  ExpectInvalid(ParseSshSignature(ArmorBlob(MakeBlob(1, "ssh-ed25519", "md5", 64))),
                "unsupported hash algorithm \"md5\"");
  ExpectInvalid(ParseSshSignature(ArmorBlob(MakeBlob(1, "ssh-ed25519", "sha512", 63))),
                "ed25519 signature is 63 bytes, expected 64");
  std::string blob = MakeBlob(1, "ssh-ed25519", "sha512", 64, "zz");
  ExpectInvalid(ParseSshSignature(ArmorBlob(blob)),
                "2 unexpected trailing bytes at offset " + std::to_string(blob.size() - 2));
  std::string bad_magic = MakeBlob(1, "ssh-ed25519", "sha512", 64);
  bad_magic[0] = 'X';
  ExpectInvalid(ParseSshSignature(ArmorBlob(bad_magic)), "bad magic");
  ExpectInvalid(
      ParseSshSignature(ArmorBlob(MakeBlob(1, "ssh-ed25519", "sha512", 64).substr(0, 30))),
      "at offset");
}

TEST(SshSigTest, EmptyNamespaceCannotSign) {
  auto r = SshSigSign(VectorKey(), "m", "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("namespace must not be empty"), std::string::npos);
}

}  // namespace
}  // namespace gatos
