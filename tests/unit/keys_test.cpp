#include "gatos/crypto/keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

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
constexpr std::string_view kVectorPublic =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMV2Yk37L5C0lNUKlR4QnoSOQW05VaFWKzODz6Qh8Sn9 test";
constexpr std::string_view kVectorHex =
    "c576624dfb2f90b494d50a951e109e848e416d3955a1562b3383cfa421f129fd";

// `ssh-keygen -t ed25519 -N pw -C enc`.
constexpr std::string_view kEncryptedPrivate =
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABDDgZpWA5\n"
    "xUv66d23ekyzthAAAAEAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAILfV/z7XKI5PWWxk\n"
    "yrX7B99kDkVDNoyF+kyIvlRJLZmWAAAAkLtFHiDaIeInE+3cxBtCRKyKIe7O6VjaCHTRLf\n"
    "ea3fqSt64dOsooW288zwkZN6kOJ2S0m7MyiZyV7hgImfmHhiCv5MB9epeZOIxKG2hQBE40\n"
    "mzqMtZKOB4do6Xo8PvV4SEWSI670kHHQTxqNysJggdHBkpvX2d2VHo92gbwsfH32kg+E49\n"
    "MpAS1/fjB2pV5oSw==\n"
    "-----END OPENSSH PRIVATE KEY-----\n";

// `ssh-keygen -t rsa -b 1024 -N '' -C r` (test only).
constexpr std::string_view kRsaPrivate =
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAlwAAAAdzc2gtcn\n"
    "NhAAAAAwEAAQAAAIEA3s56+x1eeZELQ3Mz+5gy9mSB+tH/T2Ad46yRZvVqu8uvOfyx2HI2\n"
    "snImi+WwgooOauqzC2nW9scka9n92CiAcaqMl1ziN7XRj6S0YGJOh8B5bNePHfjTO1BYmc\n"
    "irQG+c/LJqr0E91OdlbnrdUnP4kaargiWL9rChpUq78CFkbkUAAAH4WCPE8lgjxPIAAAAH\n"
    "c3NoLXJzYQAAAIEA3s56+x1eeZELQ3Mz+5gy9mSB+tH/T2Ad46yRZvVqu8uvOfyx2HI2sn\n"
    "Imi+WwgooOauqzC2nW9scka9n92CiAcaqMl1ziN7XRj6S0YGJOh8B5bNePHfjTO1BYmcir\n"
    "QG+c/LJqr0E91OdlbnrdUnP4kaargiWL9rChpUq78CFkbkUAAAADAQABAAAAgBMKsIX/l5\n"
    "BqLf1AvkOVWV2nb1hhVCGThFpt6CtVdB7CpKIfD5ABCt2rVdIE+lXduKe4kT67d+y1Tk6N\n"
    "Xd14cKmdZ9lovlPlvJGMTcy7sOYoVrzHpuQw7ysWi3S3mmMWeFhBHQ+aXmh5AUy8UMzCdw\n"
    "Ga+82pRvZ8G68bd80ncNkhAAAAQG/1K5CQsXHQxzQdRX11wm9qOxhBz8Ni2f+Yklwecet4\n"
    "KA1b3F4cfN1LBW8sIxl/0AcMEnHM7QYajPZrUksTd+oAAABBAPDwjPag/Rm9K/NhPumYY3\n"
    "2Ufu4OFAcA3zlukk70jJVbhMLbX6B6dCO5XZKzjrtO+6a5Qfz3ui5lgbXkfyqktA0AAABB\n"
    "AOy7xOYnDkWVFblOshAyygbLpf+kDpGjvQuZkw8q/jkTgDAJZ7IKI2hoS7PZ0jK1X/nB3T\n"
    "N5avFibk3RhElW/RkAAAABcgEC\n"
    "-----END OPENSSH PRIVATE KEY-----\n";
constexpr std::string_view kRsaPublic =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDeznr7HV55kQtDczP7mDL2ZIH60f9PYB3jrJFm9Wq7y685/"
    "LHYcjayciaL5bCCig5q6rMLadb2xyRr2f3YKIBxqoyXXOI3tdGPpLRgYk6HwHls148d+NM7UFiZyKtAb5z8smqvQT3U"
    "52Vuet1Sc/iRpquCJYv2sKGlSrvwIWRuRQ== r";

// Byte offsets in the vector's binary blob (see PROTOCOL.key).
constexpr size_t kCipherLenAt = 15;
constexpr size_t kPrivSectionLenAt = 94;
constexpr size_t kCheck2At = 102;

// The binary blob inside an OpenSSH private key PEM.
std::string Body(std::string_view pem) {
  std::string b64;
  std::string_view s = pem;
  s.remove_prefix(s.find('\n') + 1);
  s = s.substr(0, s.find("-----END"));
  for (char c : s) {
    if (c != '\n') b64.push_back(c);
  }
  auto bytes = Base64Decode(b64);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return std::string(bytes->begin(), bytes->end());
}

std::string Armor(std::string_view blob) {
  std::string b64 = Base64Encode(reinterpret_cast<const uint8_t*>(blob.data()), blob.size());
  std::string out = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 70) out += b64.substr(i, 70) + "\n";
  return out + "-----END OPENSSH PRIVATE KEY-----\n";
}

void PutU32(std::string& s, size_t at, uint32_t v) {
  s[at] = static_cast<char>(v >> 24);
  s[at + 1] = static_cast<char>(v >> 16);
  s[at + 2] = static_cast<char>(v >> 8);
  s[at + 3] = static_cast<char>(v);
}

void ExpectInvalid(const Result<Ed25519PrivateKey>& r, std::string_view substring) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(substring), std::string::npos) << r.status().ToString();
}

TEST(KeysTest, GenerateFormatParseRoundTrip) {
  auto key = GenerateEd25519Key("worker@host");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  std::string text = FormatOpenSshPrivateKey(*key);
  auto parsed = ParseOpenSshPrivateKey(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->public_key(), key->public_key());
  EXPECT_EQ(parsed->comment(), "worker@host");
  EXPECT_EQ(FormatOpenSshPrivateKey(*parsed), text);
  auto sig = Ed25519Sign(*parsed, "msg");
  EXPECT_EQ(sig, Ed25519Sign(*key, "msg"));
  EXPECT_TRUE(Ed25519Verify(key->public_key(), "msg", sig.data()).ok());
}

TEST(KeysTest, GeneratedKeysDiffer) {
  auto a = GenerateEd25519Key("a");
  auto b = GenerateEd25519Key("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->public_key(), b->public_key());
}

TEST(KeysTest, SshKeygenVectorParsesAndFormatsByteForByte) {
  auto key = ParseOpenSshPrivateKey(kVectorPrivate);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->public_key().Hex(), kVectorHex);
  EXPECT_EQ(key->comment(), "test");
  EXPECT_EQ(key->public_key().ToOpenSsh(), kVectorPublic);
  EXPECT_EQ(FormatOpenSshPrivateKey(*key), kVectorPrivate);
}

TEST(KeysTest, CrlfAndSurroundingBlankLinesAccepted) {
  std::string crlf;
  for (char c : kVectorPrivate) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto key = ParseOpenSshPrivateKey("\n\n" + crlf + "\n\n");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->public_key().Hex(), kVectorHex);
}

TEST(KeysTest, FromSeedIsDeterministic) {
  std::array<uint8_t, 32> seed{};
  seed[0] = 7;
  auto a = Ed25519PrivateKey::FromSeed(seed, "x");
  auto b = Ed25519PrivateKey::FromSeed(seed, "y");
  EXPECT_EQ(a.public_key(), b.public_key());
  EXPECT_EQ(Ed25519Sign(a, "m"), Ed25519Sign(b, "m"));
}

TEST(KeysTest, RFC8032TestVector1) {
  // RFC 8032 section 7.1, TEST 1 (empty message).
  auto seed_bytes = HexDecode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
  ASSERT_TRUE(seed_bytes.ok());
  std::array<uint8_t, 32> seed;
  std::copy(seed_bytes->begin(), seed_bytes->end(), seed.begin());
  auto key = Ed25519PrivateKey::FromSeed(seed, "");
  EXPECT_EQ(key.public_key().Hex(),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  auto sig = Ed25519Sign(key, "");
  EXPECT_EQ(HexEncode(sig.data(), sig.size()),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
}

TEST(KeysTest, VerifyRejectsTamperedMessageAndSignature) {
  auto key = ParseOpenSshPrivateKey(kVectorPrivate);
  ASSERT_TRUE(key.ok());
  auto sig = Ed25519Sign(*key, "payload");
  Status s = Ed25519Verify(key->public_key(), "payloaD", sig.data());
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.ToString();
  sig[10] ^= 1;
  EXPECT_EQ(Ed25519Verify(key->public_key(), "payload", sig.data()).code(),
            StatusCode::kPermissionDenied);
}

TEST(KeysTest, PublicKeyParseAndFormat) {
  auto pub = ParseOpenSshPublicKey(std::string(kVectorPublic) + "\n");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->Hex(), kVectorHex);
  EXPECT_EQ(pub->comment, "test");
  EXPECT_EQ(pub->WorkerId(), "ed25519:" + std::string(kVectorHex));
  EXPECT_EQ(pub->ToOpenSsh(), kVectorPublic);

  auto no_comment = ParseOpenSshPublicKey(kVectorPublic.substr(0, kVectorPublic.size() - 5));
  ASSERT_TRUE(no_comment.ok()) << no_comment.status().ToString();
  EXPECT_EQ(no_comment->comment, "");
  EXPECT_EQ(no_comment->ToOpenSsh(), kVectorPublic.substr(0, kVectorPublic.size() - 5));
  EXPECT_EQ(*no_comment, *pub);  // comments don't take part in equality

  auto spaced = ParseOpenSshPublicKey(
      "ssh-ed25519\tAAAAC3NzaC1lZDI1NTE5AAAAIMV2Yk37L5C0lNUKlR4QnoSOQW05VaFWKzODz6Qh8Sn9  two "
      "words ");
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(spaced->comment, "two words");
}

TEST(KeysTest, PublicKeyRejections) {
  auto rsa = ParseOpenSshPublicKey(kRsaPublic);
  ASSERT_FALSE(rsa.ok());
  EXPECT_EQ(rsa.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rsa.status().message().find("unsupported key type \"ssh-rsa\""), std::string::npos)
      << rsa.status().ToString();

  auto mismatch = ParseOpenSshPublicKey("ssh-ed25519 " + std::string(kRsaPublic.substr(8)));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("unsupported key type \"ssh-rsa\""), std::string::npos)
      << mismatch.status().ToString();

  auto no_data = ParseOpenSshPublicKey("ssh-ed25519");
  EXPECT_EQ(no_data.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_data.status().message().find("missing base64"), std::string::npos);

  auto bad_b64 = ParseOpenSshPublicKey("ssh-ed25519 AAAA*AAA");
  EXPECT_EQ(bad_b64.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_b64.status().message().find("invalid base64"), std::string::npos);

  // A 31-byte key inside a well-formed blob.
  ssh::WireWriter w;
  w.WriteString("ssh-ed25519");
  w.WriteString(std::string(31, 'k'));
  std::string b64 =
      Base64Encode(reinterpret_cast<const uint8_t*>(w.data().data()), w.data().size());
  auto short_key = ParseOpenSshPublicKey("ssh-ed25519 " + b64);
  EXPECT_EQ(short_key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_key.status().message().find("is 31 bytes, expected 32"), std::string::npos)
      << short_key.status().ToString();

  // Trailing bytes after the key in the blob.
  w.mutable_data().clear();
  w.WriteString("ssh-ed25519");
  w.WriteString(std::string(32, 'k'));
  w.WriteBytes("xx");
  b64 = Base64Encode(reinterpret_cast<const uint8_t*>(w.data().data()), w.data().size());
  auto trailing = ParseOpenSshPublicKey("ssh-ed25519 " + b64);
  EXPECT_EQ(trailing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trailing.status().message().find("2 unexpected trailing bytes at offset 51"),
            std::string::npos)
      << trailing.status().ToString();

  auto two_lines =
      ParseOpenSshPublicKey(std::string(kVectorPublic) + "\n" + std::string(kVectorPublic));
  EXPECT_EQ(two_lines.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(two_lines.status().message().find("single line"), std::string::npos);
}

TEST(KeysTest, WorkerIdRoundTrip) {
  auto pub = ParseWorkerId("ed25519:" + std::string(kVectorHex));
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->Hex(), kVectorHex);

  auto upper =
      ParseWorkerId("ed25519:C576624DFB2F90B494D50A951E109E848E416D3955A1562B3383CFA421F129FD");
  EXPECT_EQ(upper.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(upper.status().message().find("64 lowercase hex"), std::string::npos);
  auto no_prefix = ParseWorkerId(kVectorHex);
  EXPECT_EQ(no_prefix.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_prefix.status().message().find("does not start with \"ed25519:\""),
            std::string::npos);
  auto short_hex = ParseWorkerId("ed25519:abcd");
  EXPECT_EQ(short_hex.status().code(), StatusCode::kInvalidArgument);
}

TEST(KeysTest, RejectsEncryptedKey) {
  ExpectInvalid(ParseOpenSshPrivateKey(kEncryptedPrivate), "encrypted keys are not supported");
  ExpectInvalid(ParseOpenSshPrivateKey(kEncryptedPrivate), "aes256-ctr");
}

TEST(KeysTest, RejectsRsaKey) {
  ExpectInvalid(ParseOpenSshPrivateKey(kRsaPrivate), "unsupported key type \"ssh-rsa\"");
}

TEST(KeysTest, RejectsOtherPemFormats) {
  ExpectInvalid(ParseOpenSshPrivateKey("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n"
                                       "-----END RSA PRIVATE KEY-----\n"),
                "line 1: unsupported format");
  ExpectInvalid(ParseOpenSshPrivateKey(""), "no \"-----BEGIN OPENSSH PRIVATE KEY-----\" line");
  ExpectInvalid(ParseOpenSshPrivateKey("hello"), "line 1: expected");
}

TEST(KeysTest, RejectsTruncatedText) {
  std::string text(kVectorPrivate);
  text = text.substr(0, text.find("-----END"));
  ExpectInvalid(ParseOpenSshPrivateKey(text), "missing \"-----END OPENSSH PRIVATE KEY-----\"");
  // Whole base64 line missing: the body is still valid base64 but short.
  std::string cut(kVectorPrivate);
  size_t line4 = cut.find("AAAEBh");
  cut.erase(line4, cut.find('\n', line4) - line4 + 1);
  auto r = ParseOpenSshPrivateKey(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(KeysTest, RejectsTruncatedBinary) {
  std::string body = Body(kVectorPrivate);
  for (size_t n : {size_t{0}, size_t{10}, size_t{20}, size_t{60}, size_t{100}, body.size() - 1}) {
    auto r = ParseOpenSshPrivateKey(Armor(body.substr(0, n)));
    ASSERT_FALSE(r.ok()) << "length " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("at offset"), std::string::npos)
        << n << ": " << r.status().ToString();
  }
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(body.substr(0, 10))),
                "truncated magic: needs 15 bytes but only 10 remain at offset 0");
}

TEST(KeysTest, RejectsBadCheckint) {
  std::string body = Body(kVectorPrivate);
  body[kCheck2At] ^= 0x55;
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(body)), "checkints differ");
}

TEST(KeysTest, RejectsBadPadding) {
  std::string body = Body(kVectorPrivate);
  ASSERT_EQ(body.back(), '\x01');
  body.back() = '\x02';
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(body)), "invalid padding byte (expected 1)");
}

TEST(KeysTest, RejectsTrailingGarbage) {
  std::string body = Body(kVectorPrivate);
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(body + "junk")),
                "4 unexpected trailing bytes at offset " + std::to_string(body.size()));
  ExpectInvalid(ParseOpenSshPrivateKey(std::string(kVectorPrivate) + "extra\n"),
                "line 8: unexpected text after");
  // Extra padding that keeps the block size: 8 more bytes in the section.
  std::string padded = body;
  uint32_t len = static_cast<uint32_t>(body.size() - kPrivSectionLenAt - 4);
  PutU32(padded, kPrivSectionLenAt, len + 8);
  for (int i = 2; i <= 9; ++i) padded.push_back(static_cast<char>(i));
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(padded)), "9 bytes of padding");
}

TEST(KeysTest, RejectsHugeLengthFields) {
  std::string body = Body(kVectorPrivate);
  std::string huge = body;
  PutU32(huge, kCipherLenAt, 0xffffffffu);
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(huge)),
                "length 4294967295 of cipher name exceeds the");
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(huge)), "at offset 15");
  huge = body;
  PutU32(huge, kPrivSectionLenAt, 0x7fffffffu);
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(huge)),
                "length 2147483647 of private key section exceeds");
  std::string big(70 * 1024, 'A');
  ExpectInvalid(ParseOpenSshPrivateKey(big), "more than the 65536");
}

TEST(KeysTest, RejectsMismatchedHalves) {
  std::string body = Body(kVectorPrivate);
  // Flip a byte of the secret seed: the derived public key no longer matches.
  std::string seed_flip = body;
  size_t sk_at = body.find(std::string("\x00\x00\x00\x40", 4)) + 4;
  seed_flip[sk_at] ^= 1;
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(seed_flip)), "does not belong to the public key");
  // Flip the outer public key.
  std::string pub_flip = body;
  pub_flip[kPrivSectionLenAt - 1] ^= 1;
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(pub_flip)), "differs from the file's public key");
}

TEST(KeysTest, RejectsMultipleKeys) {
  std::string body = Body(kVectorPrivate);
  PutU32(body, 35, 2);
  ExpectInvalid(ParseOpenSshPrivateKey(Armor(body)), "holds 2 keys; exactly 1 is supported");
}

class KeysFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gatos-keys-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(KeysFileTest, WriteAndReadKeyPair) {
  auto key = GenerateEd25519Key("file-test");
  ASSERT_TRUE(key.ok());
  std::string path = dir_ + "/id_ed25519";
  ASSERT_TRUE(WriteKeyPair(path, *key).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((path + ".pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  auto priv = ReadPrivateKeyFile(path);
  ASSERT_TRUE(priv.ok()) << priv.status().ToString();
  EXPECT_EQ(priv->public_key(), key->public_key());
  auto pub = ReadPublicKeyFile(path + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(*pub, key->public_key());
  EXPECT_EQ(pub->comment, "file-test");

  Status again = WriteKeyPair(path, *key);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find(path + ".pub: already exists"), std::string::npos)
      << again.ToString();
}

TEST_F(KeysFileTest, RefusesToOverwritePrivateKeyAndLeavesNoPartialFiles) {
  auto key = GenerateEd25519Key("");
  ASSERT_TRUE(key.ok());
  std::string path = dir_ + "/k";
  { std::ofstream(path) << "existing"; }
  Status s = WriteKeyPair(path, *key);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find(path + ": already exists"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path + ".pub"));

  Status no_dir = WriteKeyPair(dir_ + "/missing/k", *key);
  EXPECT_EQ(no_dir.code(), StatusCode::kNotFound);
  EXPECT_NE(no_dir.message().find(dir_ + "/missing/k: cannot create"), std::string::npos);
}

TEST_F(KeysFileTest, ReadErrorsNameThePath) {
  auto missing = ReadPrivateKeyFile(dir_ + "/nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir_ + "/nope"), std::string::npos);

  std::string enc = dir_ + "/enc";
  { std::ofstream(enc) << kEncryptedPrivate; }
  auto r = ReadPrivateKeyFile(enc);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind(enc + ": encrypted keys are not supported", 0), 0u)
      << r.status().ToString();

  std::string rsa = dir_ + "/rsa.pub";
  { std::ofstream(rsa) << kRsaPublic << "\n"; }
  auto p = ReadPublicKeyFile(rsa);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(rsa + ": public key: unsupported key type"),
            std::string::npos)
      << p.status().ToString();
}

TEST(KeysWireTest, ReaderNeverReadsPastTheEnd) {
  std::string data(
      "\x00\x00\x00\x05"
      "abc",
      7);
  ssh::WireReader r(data, "test blob");
  auto s = r.ReadString("name");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "test blob: length 5 of name exceeds the 3 bytes that remain at offset 0");
  EXPECT_EQ(r.offset(), 0u);
  auto u = ssh::WireReader(std::string_view("\x01\x02", 2), "b").ReadU32("count");
  EXPECT_EQ(u.status().message(),
            "b: truncated count: needs 4 bytes but only 2 remain at offset 0");
}

TEST(KeysWireTest, WriterReaderRoundTrip) {
  ssh::WireWriter w;
  w.WriteU32(0xdeadbeef);
  w.WriteString("hello");
  w.WriteString("");
  ssh::WireReader r(w.data(), "x");
  EXPECT_EQ(*r.ReadU32("a"), 0xdeadbeefu);
  EXPECT_EQ(*r.ReadString("b"), "hello");
  EXPECT_EQ(*r.ReadString("c"), "");
  EXPECT_TRUE(r.ExpectEnd().ok());
  Status bad = ssh::WireReader(w.data(), "x").ExpectString("nope", "magic");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
