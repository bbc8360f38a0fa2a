#include "gatos/model/allowed_signers.h"
#include "gatos/crypto/keys.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

constexpr std::string_view kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMV2Yk37L5C0lNUKlR4QnoSOQW05VaFWKzODz6Qh8Sn9";
constexpr std::string_view kRsa =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDeznr7HV55kQtDczP7mDL2ZIH60f9PYB3jrJFm9Wq7y685/"
    "LHYcjayciaL5bCCig5q6rMLadb2xyRr2f3YKIBxqoyXXOI3tdGPpLRgYk6HwHls148d+NM7UFiZyKtAb5z8smqvQT3U"
    "52Vuet1Sc/iRpquCJYv2sKGlSrvwIWRuRQ==";

// 2024-01-01T00:00:00Z and 2025-01-01T00:00:00Z.
constexpr int64_t k2024 = 1704067200;
constexpr int64_t k2025 = 1735689600;

Ed25519PublicKey KeyA() { return *ParseOpenSshPublicKey(kKeyA); }

Ed25519PublicKey KeyB() {
  std::array<uint8_t, 32> seed{};
  seed[3] = 9;
  return Ed25519PrivateKey::FromSeed(seed, "").public_key();
}

AllowedSigners MustParse(std::string_view text) {
  auto r = ParseAllowedSigners(text, "signers");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : AllowedSigners();
}

void ExpectError(std::string_view text, std::string_view message) {
  auto r = ParseAllowedSigners(text, "signers");
  ASSERT_FALSE(r.ok()) << "parsed: " << text;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().ToString();
}

TEST(AllowedSignersTest, PrincipalListsAndComments) {
  std::string text = "# trust list\n\n   \n  # indented comment\nalice@example.com,bob " +
                     std::string(kKeyA) + " the comment\n" + "carol " + KeyB().ToOpenSsh() + "\n";
  AllowedSigners s = MustParse(text);
  ASSERT_EQ(s.entries().size(), 2u);
  const AllowedSigner& e = s.entries()[0];
  EXPECT_EQ(e.principals, (std::vector<std::string>{"alice@example.com", "bob"}));
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.key, KeyA());
  EXPECT_EQ(e.key.comment, "the comment");
  EXPECT_FALSE(e.cert_authority);
  EXPECT_TRUE(e.namespaces.empty());
  EXPECT_FALSE(e.valid_after.has_value());
  EXPECT_EQ(s.entries()[1].line, 6);

  EXPECT_TRUE(s.IsAllowed("alice@example.com", KeyA(), "git", 0));
  EXPECT_TRUE(s.IsAllowed("bob", KeyA(), "file", 0));
  EXPECT_FALSE(s.IsAllowed("carol", KeyA(), "git", 0));
  EXPECT_TRUE(s.IsAllowed("carol", KeyB(), "git", 0));
  EXPECT_FALSE(s.IsAllowed("alice", KeyA(), "git", 0));
  EXPECT_EQ(s.FindKey(KeyB(), "git", 0), &s.entries()[1]);
}

TEST(AllowedSignersTest, PatternsAndNegation) {
  AllowedSigners s = MustParse("*@example.com,!mallory@example.com,ci-?? " + std::string(kKeyA));
  EXPECT_TRUE(s.IsAllowed("alice@example.com", KeyA(), "git", 0));
  EXPECT_FALSE(s.IsAllowed("mallory@example.com", KeyA(), "git", 0));
  EXPECT_TRUE(s.IsAllowed("ci-01", KeyA(), "git", 0));
  EXPECT_FALSE(s.IsAllowed("ci-001", KeyA(), "git", 0));
  EXPECT_FALSE(s.IsAllowed("alice@example.org", KeyA(), "git", 0));

  EXPECT_TRUE(MatchPattern("", "*"));
  EXPECT_TRUE(MatchPattern("abc", "a*c"));
  EXPECT_TRUE(MatchPattern("abc", "*b*"));
  EXPECT_FALSE(MatchPattern("abc", "a?"));
  EXPECT_FALSE(MatchPattern("Abc", "abc"));  // case-sensitive, like OpenSSH here
  EXPECT_TRUE(MatchPattern(std::string(5000, 'a'), std::string(50, '*') + "b*") == false);
  EXPECT_EQ(MatchPatternList("x", {"!x", "*"}), -1);
  EXPECT_EQ(MatchPatternList("x", {"y"}), 0);
  EXPECT_EQ(MatchPatternList("x", {"y", "?"}), 1);
}

TEST(AllowedSignersTest, QuotedPrincipals) {
  AllowedSigners s = MustParse("\"Alice Smith,bob\" " + std::string(kKeyA));
  ASSERT_EQ(s.entries().size(), 1u);
  EXPECT_EQ(s.entries()[0].principals, (std::vector<std::string>{"Alice Smith", "bob"}));
  EXPECT_TRUE(s.IsAllowed("Alice Smith", KeyA(), "git", 0));
}

TEST(AllowedSignersTest, NamespacesOption) {
  AllowedSigners s = MustParse("alice namespaces=\"git,file-*\" " + std::string(kKeyA) + "\n" +
                               "alice NAMESPACES=\"gatos\" " + KeyB().ToOpenSsh());
  ASSERT_EQ(s.entries().size(), 2u);
  EXPECT_EQ(s.entries()[0].namespaces, (std::vector<std::string>{"git", "file-*"}));
  EXPECT_NE(s.FindKey(KeyA(), "git", 0), nullptr);
  EXPECT_NE(s.FindKey(KeyA(), "file-backup", 0), nullptr);
  EXPECT_EQ(s.FindKey(KeyA(), "gatos", 0), nullptr);
  EXPECT_FALSE(s.IsAllowed("alice", KeyA(), "gatos", 0));
  EXPECT_TRUE(s.IsAllowed("alice", KeyB(), "gatos", 0));
  EXPECT_FALSE(s.IsAllowed("alice", KeyB(), "git", 0));
}

TEST(AllowedSignersTest, ValidityWindow) {
  AllowedSigners s =
      MustParse("alice valid-after=\"20240101\",valid-before=\"20250101Z\" " + std::string(kKeyA));
  // valid-after without Z is local time (as in OpenSSH); check the UTC one.
  ASSERT_EQ(s.entries().size(), 1u);
  EXPECT_EQ(*s.entries()[0].valid_before, k2025);
  EXPECT_TRUE(s.entries()[0].valid_after.has_value());

  AllowedSigners utc =
      MustParse("alice valid-after=\"20240101000000Z\",valid-before=\"202501010000UTC\" " +
                std::string(kKeyA));
  const AllowedSigner& e = utc.entries()[0];
  EXPECT_EQ(*e.valid_after, k2024);
  EXPECT_EQ(*e.valid_before, k2025);
  EXPECT_EQ(utc.FindKey(KeyA(), "git", k2024 - 1), nullptr);
  EXPECT_EQ(utc.FindKey(KeyA(), "git", k2024), &e);  // bounds are inclusive
  EXPECT_EQ(utc.FindKey(KeyA(), "git", k2025), &e);
  EXPECT_EQ(utc.FindKey(KeyA(), "git", k2025 + 1), nullptr);
  EXPECT_TRUE(utc.IsAllowed("alice", KeyA(), "git", k2024 + 100));
  EXPECT_FALSE(utc.IsAllowed("alice", KeyA(), "git", k2025 + 100));

  AllowedSigners leap = MustParse("a valid-after=\"20240229235960Z\" " + std::string(kKeyA));
  EXPECT_EQ(*leap.entries()[0].valid_after, 1709251200);  // 2024-03-01T00:00:00Z
}

TEST(AllowedSignersTest, CertAuthorityNeverMatchesPlainKeys) {
  AllowedSigners s = MustParse("*@example.com cert-authority " + std::string(kKeyA));
  ASSERT_EQ(s.entries().size(), 1u);
  EXPECT_TRUE(s.entries()[0].cert_authority);
  EXPECT_EQ(s.FindKey(KeyA(), "git", 0), nullptr);
  EXPECT_FALSE(s.IsAllowed("a@example.com", KeyA(), "git", 0));
}

TEST(AllowedSignersTest, FirstMatchingEntryWins) {
  AllowedSigners s = MustParse("old namespaces=\"file\" " + std::string(kKeyA) + "\n" + "new " +
                               std::string(kKeyA) + "\n");
  ASSERT_EQ(s.entries().size(), 2u);
  EXPECT_EQ(s.FindKey(KeyA(), "file", 0), &s.entries()[0]);
  EXPECT_EQ(s.FindKey(KeyA(), "git", 0), &s.entries()[1]);
  EXPECT_TRUE(s.IsAllowed("new", KeyA(), "file", 0));
}

TEST(AllowedSignersTest, OtherKeyTypesAreSkipped) {
  AllowedSigners s =
      MustParse("bob " + std::string(kRsa) + " rsa key\r\nalice " + std::string(kKeyA) + "\r\n");
  ASSERT_EQ(s.entries().size(), 1u);
  EXPECT_EQ(s.entries()[0].line, 2);
  EXPECT_EQ(s.entries()[0].key.comment, "");
  ASSERT_EQ(s.skipped().size(), 1u);
  EXPECT_EQ(s.skipped()[0].line, 1);
  EXPECT_EQ(s.skipped()[0].key_type, "ssh-rsa");
}

TEST(AllowedSignersTest, ErrorsNameTheLine) {
  std::string k(kKeyA);
  ExpectError("# c\nalice\n", "signers:2: missing key after the principals");
  ExpectError("\n\nalice bogus=\"x\" " + k, "signers:3: unknown option \"bogus=\\x22x\\x22\"");
  ExpectError("alice " + k + "\nbob AAAAC3NzaC1lZDI1NTE5AAAAIMV2Yk37L5C0lNUKlR4QnoSOQW05Va\n",
              "signers:2: unknown option");
  ExpectError("alice namespaces=\"git " + k, "signers:1: unterminated quote in options");
  ExpectError("alice namespaces=git " + k,
              "signers:1: option namespaces needs a double-quoted value");
  ExpectError("\"alice " + k, "signers:1: unterminated quote in principals");
  ExpectError("al\"ice\" " + k, "signers:1: quote inside the principals field");
  ExpectError("alice,,bob " + k, "signers:1: empty principal in \"alice,,bob\"");
  ExpectError("alice namespaces=\"\" " + k, "signers:1: empty namespace");
  ExpectError("alice valid-after=\"2024\" " + k,
              "signers:1: valid-after: invalid time \"2024\": wrong length");
  ExpectError("alice valid-after=\"20241301Z\" " + k, "month out of range");
  ExpectError("alice valid-after=\"20230229Z\" " + k, "day out of range");
  ExpectError("alice valid-after=\"19691231Z\" " + k, "before 1970");
  ExpectError("alice valid-after=\"20250101Z\",valid-before=\"20240101Z\" " + k,
              "signers:1: valid-before is not after valid-after");
  ExpectError("alice namespaces=\"a\",namespaces=\"b\" " + k, "multiple \"namespaces\" options");
  ExpectError("alice cert-authority, " + k, "options end with a comma");
  ExpectError("alice ssh-ed25519\n", "signers:1: missing base64 key data after \"ssh-ed25519\"");
  ExpectError("alice ssh-ed25519 !!!!\n", "signers:1: invalid base64 key data");
  ExpectError("alice ssh-rsa !!!!\n", "signers:1: invalid base64 key data");
  ExpectError("alice cert-authority nonsense AAAA\n",
              "signers:1: expected a key type such as ssh-ed25519, got \"nonsense\"");
  ExpectError("alice ssh-ed25519 " + std::string(kRsa.substr(8)),
              "signers:1: ssh-ed25519 key blob: unsupported key type \"ssh-rsa\"");
}

TEST(AllowedSignersTest, FormatRoundTrips) {
  std::string text =
      "\"Alice Smith,bob,!eve*\" cert-authority,namespaces=\"git,fi\\\"le\","
      "valid-after=\"20240101000000Z\",valid-before=\"20250101Z\" " +
      std::string(kKeyA) + " alice's key\n" + "carol " + KeyB().ToOpenSsh() +
      "\n#principal\n\"#hash\" " + std::string(kKeyA) + "\n";
  AllowedSigners s = MustParse(text);
  ASSERT_EQ(s.entries().size(), 3u);
  EXPECT_EQ(s.entries()[0].namespaces, (std::vector<std::string>{"git", "fi\"le"}));
  std::string formatted = s.Format();
  EXPECT_EQ(formatted,
            "\"Alice Smith,bob,!eve*\" cert-authority,namespaces=\"git,fi\\\"le\","
            "valid-after=\"20240101000000Z\",valid-before=\"20250101000000Z\" " +
                std::string(kKeyA) + " alice's key\ncarol " + KeyB().ToOpenSsh() + "\n\"#hash\" " +
                std::string(kKeyA) + "\n");
  AllowedSigners again = MustParse(formatted);
  ASSERT_EQ(again.entries().size(), s.entries().size());
  for (size_t i = 0; i < s.entries().size(); ++i) {
    const AllowedSigner& a = s.entries()[i];
    const AllowedSigner& b = again.entries()[i];
    EXPECT_EQ(a.principals, b.principals);
    EXPECT_EQ(a.cert_authority, b.cert_authority);
    EXPECT_EQ(a.namespaces, b.namespaces);
    EXPECT_EQ(a.valid_after, b.valid_after);
    EXPECT_EQ(a.valid_before, b.valid_before);
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.key.comment, b.key.comment);
  }
  EXPECT_EQ(again.Format(), formatted);
}

TEST(AllowedSignersTest, EmptyInputIsEmptyList) {
  AllowedSigners s = MustParse("");
  EXPECT_TRUE(s.entries().empty());
  EXPECT_EQ(s.FindKey(KeyA(), "git", 0), nullptr);
  EXPECT_EQ(s.Format(), "");
}

}  // namespace
}  // namespace gatos
