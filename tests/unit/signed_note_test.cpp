#include "gatos/crypto/signed_note.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gatos/crypto/checkpoint.h"
#include "gatos/model/encoding.h"
#include "gatos/sys/file.h"

namespace gatos {
namespace {

// Vectors from sumdb/note and the C2SP specification: tests/data/tlog/notes.
std::string Data(const std::string& name) {
  auto r = ReadFileToString(std::string(GATOS_SOURCE_DIR) + "/tests/data/tlog/notes/" + name, 1 << 20);
  EXPECT_TRUE(r.ok()) << name;
  return r.ok() ? *r : "";
}
std::string Line(const std::string& name) {
  std::string s = Data(name);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// sumdb/note's private key encoding: PRIVATE+KEY+<name>+<id>+base64(0x01 || seed).
Ed25519PrivateKey SumdbPrivateKey(const std::string& skey) {
  size_t at = 0;
  for (int i = 0; i < 4; ++i) at = skey.find('+', at) + 1;  // past PRIVATE+KEY+<name>+<id>+
  auto b64 = skey.substr(at);
  auto raw = Base64Decode(b64);
  EXPECT_TRUE(raw.ok());
  EXPECT_EQ(raw->size(), 33u);
  std::array<uint8_t, 32> seed{};
  std::memcpy(seed.data(), raw->data() + 1, 32);
  return Ed25519PrivateKey::FromSeed(seed, "");
}

TEST(SignedNoteTest, SigningReproducesSumdbNoteTestSign) {
  Ed25519PrivateKey key = SumdbPrivateKey(Line("peter.skey"));
  auto vkey = ParseNoteVerifierKey(Line("peter.vkey"));
  ASSERT_TRUE(vkey.ok()) << vkey.status().ToString();
  EXPECT_EQ(vkey->key, key.public_key());
  EXPECT_EQ(FormatNoteVerifierKey(MakeNoteVerifierKey("PeterNeumann", kNoteTypeEd25519, key.public_key())),
            Line("peter.vkey"));
  Note note;
  note.text =
      "If you think cryptography is the answer to your problem,\n"
      "then you don't know what your problem is.\n";
  note.sigs.push_back(SignNoteText("PeterNeumann", key, note.text));
  EXPECT_EQ(FormatNote(note), Data("peter.note"));
}

TEST(SignedNoteTest, OpensSumdbNoteTestOpen) {
  auto peter = ParseNoteVerifierKey(Line("peter.vkey"));
  auto enoch = ParseNoteVerifierKey(Line("enoch.vkey"));
  ASSERT_TRUE(peter.ok() && enoch.ok());
  auto note = ParseNote(Data("peter_enoch.note"));
  ASSERT_TRUE(note.ok()) << note.status().ToString();
  ASSERT_EQ(note->sigs.size(), 2u);
  EXPECT_EQ(note->sigs[0].key_id, 0xc74f20a3u);
  EXPECT_EQ(note->sigs[1].key_id, 0xaf0cfe78u);
  EXPECT_TRUE(NoteSignatureIsBy(note->sigs[0], *peter));
  EXPECT_FALSE(NoteSignatureIsBy(note->sigs[0], *enoch));
  EXPECT_TRUE(VerifyNoteSignature(*peter, note->text, note->sigs[0]).ok());
  EXPECT_TRUE(VerifyNoteSignature(*enoch, note->text, note->sigs[1]).ok());
  EXPECT_EQ(FormatNote(*note), Data("peter_enoch.note"));
  // A changed text fails.
  EXPECT_EQ(VerifyNoteSignature(*peter, note->text + "x\n", note->sigs[0]).code(),
            StatusCode::kPermissionDenied);
}

TEST(SignedNoteTest, OpensTheC2spSpecificationExample) {
  auto foo = ParseNoteVerifierKey(Line("c2sp_foo.vkey"));
  ASSERT_TRUE(foo.ok()) << foo.status().ToString();
  auto note = ParseNote(Data("c2sp_foo.note"));
  ASSERT_TRUE(note.ok());
  EXPECT_EQ(note->text, "This is an example message.\n");
  ASSERT_EQ(note->sigs.size(), 1u);
  EXPECT_TRUE(VerifyNoteSignature(*foo, note->text, note->sigs[0]).ok());
}

TEST(SignedNoteTest, ParsesTheC2spCosignedCheckpoint) {
  auto note = ParseNote(Data("c2sp_cosigned_checkpoint.note"));
  ASSERT_TRUE(note.ok()) << note.status().ToString();
  auto cp = ParseCheckpointText(note->text);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_EQ(cp->origin, "example.com/behind-the-sofa");
  EXPECT_EQ(cp->size, 20852163u);
  EXPECT_EQ(MerkleHashBase64(cp->root), "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=");
  ASSERT_EQ(note->sigs.size(), 2u);
  EXPECT_EQ(note->sigs[0].sig.size(), 64u);  // the log's Ed25519 signature
  ASSERT_EQ(note->sigs[1].sig.size(), 72u);  // timestamp + Ed25519
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) t = (t << 8) | static_cast<uint8_t>(note->sigs[1].sig[i]);
  EXPECT_EQ(t, 1679315147u);  // the "time" line of the specification's signed message
  EXPECT_EQ(FormatNote(*note), Data("c2sp_cosigned_checkpoint.note"));
}

TEST(SignedNoteTest, RefusesManglings) {
  std::string vkey = Line("peter.vkey");
  for (size_t i = 0; i < vkey.size(); ++i) {
    std::string b = vkey;
    b[i]++;
    EXPECT_FALSE(ParseNoteVerifierKey(b).ok()) << b;
  }
  EXPECT_FALSE(ParseNoteVerifierKey(vkey.substr(0, vkey.size() - 4)).ok());
  std::string note = Data("peter.note");
  EXPECT_FALSE(ParseNote(note.substr(0, note.size() - 1)).ok());  // no final newline
  EXPECT_FALSE(ParseNote("text\n").ok());                          // no signatures
  EXPECT_FALSE(ParseNote("text\n\n").ok());
  EXPECT_FALSE(ParseNote("te\x01xt\n\n\xE2\x80\x94 a AAAAAAA=\n").ok());
  EXPECT_FALSE(ParseNote("text\n\n- a AAAAAAA=\n").ok());
  EXPECT_FALSE(ParseNote("text\n\n\xE2\x80\x94 a+b AAAAAAA=\n").ok());
  EXPECT_FALSE(ParseNote("text\n\n\xE2\x80\x94 a AAAA\n").ok());  // fewer than 5 bytes
  EXPECT_TRUE(ParseNote("text\n\n\xE2\x80\x94 a AAAAAAA=\n").ok());
  EXPECT_FALSE(ParseNote("t\xff\n\n\xE2\x80\x94 a AAAAAAA=\n").ok());
}

TEST(CheckpointTest, SignOpenCosignAndQuorum) {
  auto ledger = Ed25519PrivateKey::FromSeed({1}, "");
  auto w1 = Ed25519PrivateKey::FromSeed({2}, "");
  auto w2 = Ed25519PrivateKey::FromSeed({3}, "");
  Checkpoint c{LedgerOrigin(std::string(40, 'a')), 42, MerkleLeafHash("x"), {}};
  std::string note = SignCheckpoint(c, ledger);
  NoteVerifierKey lk;
  lk.key = ledger.public_key();
  auto wk1 = MakeNoteVerifierKey("witness.example/w1", kNoteTypeCosignatureV1, w1.public_key());
  auto wk2 = MakeNoteVerifierKey("witness.example/w2", kNoteTypeCosignatureV1, w2.public_key());
  auto opened = OpenCheckpoint(note, lk, {wk1, wk2});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->checkpoint, c);
  EXPECT_TRUE(opened->cosigners.empty());

  auto n = *ParseNote(note);
  n.sigs.push_back(CosignNoteText(wk1.name, w1, n.text, 1700000000));
  auto cosigned = OpenCheckpoint(FormatNote(n), lk, {wk1, wk2});
  ASSERT_TRUE(cosigned.ok()) << cosigned.status().ToString();
  ASSERT_EQ(cosigned->cosigners.size(), 1u);
  EXPECT_EQ(cosigned->cosigners[0].name, wk1.name);
  EXPECT_EQ(cosigned->cosigners[0].timestamp, 1700000000u);

  // Another key's signature under the ledger's name is ignored; without the
  // ledger's own it fails.
  auto other = Ed25519PrivateKey::FromSeed({9}, "");
  auto forged = OpenCheckpoint(SignCheckpoint(c, other), lk, {});
  EXPECT_EQ(forged.status().code(), StatusCode::kPermissionDenied);
  // A bad signature by a known key fails the whole note.
  auto bad = n;
  bad.sigs.back().sig[20] ^= 1;
  EXPECT_EQ(OpenCheckpoint(FormatNote(bad), lk, {wk1}).status().code(), StatusCode::kPermissionDenied);
  // ... unless the key is not one the verifier knows.
  EXPECT_TRUE(OpenCheckpoint(FormatNote(bad), lk, {wk2}).ok());
  // A cosignature over another checkpoint does not verify.
  Checkpoint c2 = c;
  c2.size = 43;
  auto n2 = *ParseNote(SignCheckpoint(c2, ledger));
  n2.sigs.push_back(n.sigs.back());
  EXPECT_EQ(OpenCheckpoint(FormatNote(n2), lk, {wk1}).status().code(), StatusCode::kPermissionDenied);
}

TEST(CheckpointTest, TextIsStrict) {
  EXPECT_TRUE(ParseCheckpointText("o\n1\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\n").ok());
  EXPECT_TRUE(ParseCheckpointText("o\n0\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\next\n").ok());
  EXPECT_FALSE(ParseCheckpointText("o\n01\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\n").ok());
  EXPECT_FALSE(ParseCheckpointText("o\n-1\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\n").ok());
  EXPECT_FALSE(ParseCheckpointText("\n1\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\n").ok());
  EXPECT_FALSE(ParseCheckpointText("o\n1\nAAAA\n").ok());
  EXPECT_FALSE(ParseCheckpointText("o\n1\n").ok());
  EXPECT_FALSE(ParseCheckpointText("o\n99999999999999999999\n" + MerkleHashBase64(MerkleEmptyRoot()) + "\n").ok());
}

}  // namespace
}  // namespace gatos
