// One test per allow-list decision the default rules make for precision on
// real code (issue 40): each shape seen as a false positive in libgit2's,
// curl's or git's history is silent, and the same place holding a generated
// value is still reported. Values that look like credentials are built from
// fragments at run time, so scanners do not flag this file.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "detector_findings.h"
#include "gatos/model/encoding.h"
#include "gatos/scan/detector.h"
#include "gatos/scan/rules.h"
#include "gatos/scan/value_decode.h"
#include "secrets_for_tests.h"

namespace gatos::scan {
namespace {

using testing::SecretMaker;

class DefaultRulesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<RuleSet> rules = DefaultRules();
    ASSERT_TRUE(rules.ok()) << rules.status().ToString();
    Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    detector_ = std::move(*d).release();
  }
  static void TearDownTestSuite() {
    delete detector_;
    detector_ = nullptr;
  }
  void SetUp() override { scratch_ = std::move(*detector_->NewScratch()); }

  // "rule-id:secret" for each finding in `text`.
  std::vector<std::string> Find(const std::string& text, const std::string& path = "") {
    return DetectorFindings(*detector_, scratch_.get(), text, path);
  }
  std::vector<std::string> One(const std::string& rule, const std::string& secret) {
    return {rule + ":" + secret};
  }

  static Detector* detector_;
  std::unique_ptr<Detector::Scratch> scratch_;
};
Detector* DefaultRulesTest::detector_ = nullptr;

// A password that looks generated: what the placeholders are compared with.
const std::string kPass = std::string("Zx8Kq2") + "mW7tN4";

TEST_F(DefaultRulesTest, UrlCredentialWithARealPasswordIsFound) {
  EXPECT_EQ(Find("git clone https://deploy:" + kPass + "@git.internal.corp/\n"),
            One("url-embedded-password", kPass));
  // Percent-encoded, with digits: generated, so reported.
  const std::string encoded = "Zx8%40Kq2mW7tN4";
  EXPECT_EQ(Find("https://ci:" + encoded + "@git.internal.corp/\n"),
            One("url-embedded-password", encoded));
  // A reserved name inside another domain is not reserved.
  EXPECT_EQ(Find("https://u:" + kPass + "@example.com.acme.dev/\n"),
            One("url-embedded-password", kPass));
}

TEST_F(DefaultRulesTest, UrlPlaceholderPasswordsAreNotFindings) {
  for (const std::string pw : {"pass",
                               "password",
                               "passwd",
                               "secret",
                               "xxx",
                               "xxxxxxxx",
                               "***",
                               "********",
                               "${VAR}",
                               "${DB_PASSWORD}",
                               "%s",
                               "%(password)s",
                               "<password>",
                               "<...>",
                               "{{ password }}",
                               "p4ssw0rd",
                               "password123",
                               "pass;auth=NTLM",
                               "p4ssw0rd;updated",
                               "pass;w%6frd",
                               "changeme",
                               "%HTTPPORT?email=name"}) {
    EXPECT_TRUE(Find("url = \"https://user:" + pw + "@git.acme.dev/\"\n").empty()) << pw;
  }
}

TEST_F(DefaultRulesTest, UrlPercentEncodedWordsAreNotFindings) {
  // libgit2's URL-parser vectors: placeholder words, percent-encoded.
  for (const std::string url :
       {"https://user:pass%2fis%40bad@hostname.com:1234/",
        "https://user%2fname:pass%40word%zyx%v@hostname.com/foo/bar/baz",
        "https://user%2fname:pass%40word@hostname.com/foo/bar/baz",
        "http://user:pass%3Bword@host/file", "https://user%40host:user%40host@127.0.0.1:5550"}) {
    EXPECT_TRUE(Find("\"" + url + "\",\n").empty()) << url;
  }
}

TEST_F(DefaultRulesTest, UrlReservedHostsAreNotFindings) {
  for (const std::string host :
       {"example.com", "example.net", "example.org", "www.example.com", "acme.example",
        "build.test", "nowhere.invalid", "localhost", "LOCALHOST"}) {
    EXPECT_TRUE(Find("https://deploy:" + kPass + "@" + host + ":8443/x\n").empty()) << host;
  }
}

TEST_F(DefaultRulesTest, GenericRuleIgnoresIdentifierShapedValues) {
  for (const std::string line :
       {"\tgit_oid key = GIT_OID_SHA1_ZERO;", "      data->set.httpauth = CURLAUTH_AWS_SIGV4;",
        "      sasl->authused = SASL_MECH_XOAUTH2;", "    authstate = POP3_AUTH_CRAMMD5;",
        "    authstate = IMAP_AUTHENTICATE_CRAMMD5;",
        "  (data->state.authhost.want==CURLAUTH_NTLM_WB) ? TRUE : FALSE;",
        "api_key = settings.auth.api_key_v2;", "ntlm_auth=\"/usr/bin/ntlm_auth\"",
        "cl.exe -D_WINSOCKAPI_= /showIncludes /FoCMakeFiles"}) {
    EXPECT_TRUE(Find(line + "\n").empty()) << line;
  }
  // The same assignments holding a generated value are reported.
  SecretMaker mk(40);
  const std::string value = mk.Alnum(10) + "7Qz" + mk.Alnum(10);
  EXPECT_EQ(Find("\tgit_oid key = " + value + ";\n"), One("generic-api-key", value));
  EXPECT_EQ(Find("  data->set.httpauth = " + value + ";\n"), One("generic-api-key", value));
}

TEST_F(DefaultRulesTest, GenericRuleIgnoresBase64OfNamesAndPlaceholderCredentials) {
  auto b64 = [](const std::string& s) {
    return Base64Encode(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  // git's t5563: base64 of "a-git-token" and of "alice:secret-passwd".
  for (const std::string text : {"a-git-token", "another-token", "alice:secret-passwd"}) {
    EXPECT_TRUE(Find("\tcredential=" + b64(text) + "\n").empty()) << text;
  }
  // base64 of a real user:password, and of key material, are reported.
  const std::string real = b64("alice:" + kPass);
  EXPECT_EQ(Find("\tcredential=" + real + "\n"), One("generic-api-key", real));
  SecretMaker mk(41);
  const std::string raw = mk.Alnum(24);
  const std::string key = b64(std::string("\x9c\x01\xfe", 3) + raw);
  EXPECT_EQ(Find("\tcredential=" + key + "\n"), One("generic-api-key", key));
}

TEST_F(DefaultRulesTest, GenericRuleIgnoresProtocolNonces) {
  SecretMaker mk(42);
  const std::string nonce = mk.Alnum(22) + "==";
  const std::string hex = "C43E8C7B11DE0B47" + mk.Hex(48);
  EXPECT_TRUE(Find("  -H 'Sec-WebSocket-Key: " + nonce + "'\n").empty());
  EXPECT_TRUE(Find("    Master-Key: " + hex + "\n").empty());
  EXPECT_TRUE(Find("%b64[rspauth=" + mk.Hex(32) + "]b64%\n").empty());
  EXPECT_EQ(Find("  -H 'X-Api-Key: " + nonce + "'\n"), One("generic-api-key", nonce));
}

TEST_F(DefaultRulesTest, CurlUserPlaceholderPasswordsAreNotFindings) {
  for (const std::string cred :
       {"user:passwd", "name:passwd", "username:fakepwd", "ftpuser:ftppass", "testuser:testpass",
        "admin:password123", "john:secret123", "myuser:mypass", "keyId:secretKey",
        "\"keyId:secretKey:sessionToken\"", "\"domain\\username:passwd\""}) {
    EXPECT_TRUE(Find("curl -u " + cred + " https://api.acme.dev/\n").empty()) << cred;
  }
  EXPECT_EQ(Find("curl -u deploy:" + kPass + " https://api.acme.dev/\n"),
            One("curl-auth-user", "deploy:" + kPass));
}

TEST_F(DefaultRulesTest, CurlHeaderPlaceholdersAreNotFindings) {
  const std::string jwt_header = std::string("eyJhbGciOiJIUzI1") + "NiIsInR5cCI6IkpXVCJ9";
  for (const std::string header : std::vector<std::string>{
           "Authorization: Bearer token123", "Authorization: token OAUTH-TOKEN",
           "Authorization: Bearer test-token-123", "X-API-Key: your-api-key-here",
           "Authorization: Bearer " + jwt_header, "Authorization: Bearer " + jwt_header + "...",
           "X-Auth-Key: c2547eb745079dac9320b638f5e225cf483cc5cfdda41"}) {
    EXPECT_TRUE(Find("curl -H '" + header + "' https://api.acme.dev/\n").empty()) << header;
  }
  SecretMaker mk(43);
  const std::string token = mk.Alnum(40);
  EXPECT_EQ(Find("curl -H 'Authorization: Bearer " + token + "' https://api.acme.dev/\n"),
            One("curl-auth-header", token));
}

TEST_F(DefaultRulesTest, PrivateKeyWithAPlaceholderBodyIsNotAFinding) {
  const std::string dashes = "-----";
  const std::string x64(64, 'X');
  const std::string in_c = "static const char *key = \"" + dashes + "BEGIN RSA PRIVATE KEY" +
                           dashes + "\\n\"\\\n    \"" + x64 + "\\n\"\\\n    \"" + x64 +
                           "\\n\"\\\n    \"" + dashes + "END RSA PRIVATE KEY" + dashes + "\\n\";\n";
  EXPECT_TRUE(Find(in_c).empty());
  const std::string plain = dashes + "BEGIN PRIVATE KEY" + dashes + "\n" + x64 + "\n" + x64 + "\n" +
                            dashes + "END PRIVATE KEY" + dashes + "\n";
  EXPECT_TRUE(Find(plain).empty());
  const std::string key = SecretMaker(44).PrivateKey();
  EXPECT_EQ(Find(key + "\n"), One("private-key", key));
}

TEST_F(DefaultRulesTest, StripeDocumentedTestKeyIsNotAFinding) {
  EXPECT_TRUE(Find(std::string("  -u sk_") + "test_4eC39HqLyjWDarjtT1zdp7dc: \\\n").empty());
  const std::string key = std::string("sk_") + "test_" + SecretMaker(45).Alnum(24);
  EXPECT_EQ(Find("  -u " + key + ": \\\n"), One("stripe-access-token", key));
}

TEST(ScanGenericSuppression, ASpecificRulesAllowlistAlsoSilencesGenericRules) {
  Result<RuleSet> rules = ParseRules(R"(rules:
  - id: acme-key
    regex: 'acme_key: (\w{12})'
    allowlist: {regexes: ['^EXAMPLE']}
  - id: generic-kv
    regex: '_key: (\w{12})'
)",
                                     "g.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto scratch = std::move(*(*d)->NewScratch());
  auto find = [&](const std::string& text) {
    std::vector<Match> m;
    EXPECT_TRUE((*d)->Scan(text, scratch.get(), &m).ok());
    std::vector<std::string> out;
    for (const Match& x : m) out.push_back((*d)->rules().rules[x.rule].id);
    return out;
  };
  // The vendor rule knows its documented example: no rule reports it.
  EXPECT_TRUE(find("acme_key: EXAMPLEabcde\n").empty());
  EXPECT_EQ(find("acme_key: Q7x9K2m4P8zA\n"), std::vector<std::string>{"acme-key"});
  // Where the vendor rule does not match, the generic rule decides alone.
  EXPECT_EQ(find("other_key: EXAMPLEabcde\n"), std::vector<std::string>{"generic-kv"});
}

TEST(ScanValueDecode, PercentDecoding) {
  EXPECT_EQ(PercentDecoded("pass%2fis%40bad"), "pass/is@bad");
  EXPECT_EQ(PercentDecoded("pass%40word%zyx%v"), "pass@word%zyx%v");  // invalid escapes kept
  EXPECT_EQ(PercentDecoded("%41%4a%4A"), "AJJ");
  EXPECT_EQ(PercentDecoded("100%"), std::nullopt);
  EXPECT_EQ(PercentDecoded("%4"), std::nullopt);
  EXPECT_EQ(PercentDecoded("plain"), std::nullopt);
  EXPECT_EQ(PercentDecoded(""), std::nullopt);
  EXPECT_EQ(PercentDecoded("%00"), std::string(1, '\0'));
}

TEST(ScanValueDecode, Base64OfTextOnly) {
  EXPECT_EQ(Base64Text("YS1naXQtdG9rZW4="), "a-git-token");
  EXPECT_EQ(Base64Text("YS1naXQtdG9rZW4"), "a-git-token");  // unpadded
  EXPECT_EQ(Base64Text("YWxpY2U6c2VjcmV0LXBhc3N3ZA=="), "alice:secret-passwd");
  EXPECT_EQ(Base64Text("PDw_Pz4-Pj4-"), "<<??>>>>>");         // URL-safe alphabet
  EXPECT_EQ(Base64Text("YWJj"), std::nullopt);                // shorter than 8
  EXPECT_EQ(Base64Text("YS1naXQtdG9rZW4=="), std::nullopt);   // padding in the wrong place
  EXPECT_EQ(Base64Text("YS1n=XQtdG9rZW4="), std::nullopt);    // '=' inside
  EXPECT_EQ(Base64Text("YS1naXQtdG9rZW4==="), std::nullopt);  // three '='
  EXPECT_EQ(Base64Text("nAH+nAH+nAH+"), std::nullopt);        // not printable
  EXPECT_EQ(Base64Text("YS1n+XQt_G9rZW4="), std::nullopt);    // mixed alphabets
  EXPECT_EQ(Base64Text("YS1naXQtd"), std::nullopt);           // 9 characters: not base64
  EXPECT_EQ(Base64Text(std::string(100000, '=')), std::nullopt);
  EXPECT_EQ(DecodedValue("pass%40word"), "pass@word");
  EXPECT_EQ(DecodedValue("YS1naXQtdG9rZW4="), "a-git-token");
  EXPECT_EQ(DecodedValue("Zx8Kq2mW7tN4"), std::nullopt);  // decodes to binary
}

TEST(ScanValueDecode, DecodedRegexesParseMergeAndEnterThePolicy) {
  const std::string yaml = R"(rules:
  - id: kv
    regex: 'kv=(\S{6,})'
    allowlist:
      decoded_regexes: ['^name$']
)";
  Result<RuleSet> rules = ParseRules(yaml, "d.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  ASSERT_EQ(rules->rules[0].allowlist.decoded_regexes, std::vector<std::string>{"^name$"});
  EXPECT_NE(CanonicalRuleSet(*rules).find("decoded_regexes"), std::string::npos);
  Result<std::unique_ptr<Detector>> d = Detector::Create(*rules);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto scratch = std::move(*(*d)->NewScratch());
  std::vector<Match> m;
  ASSERT_TRUE((*d)->Scan("kv=bmFtZQ==\nkv=bmFtZXM=\nkv=na%6De\n", scratch.get(), &m).ok());
  // "name" (base64 and percent-encoded) is allowed; "names" is not.
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].line, 2u);
  Result<RuleSet> bad = ParseRules(
      "rules:\n  - id: a\n    regex: 'x+'\n    allowlist:\n      decoded_regexes: ['(']\n",
      "e.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message().rfind("e.yaml:5: allowlist decoded_regexes entry does not compile", 0),
      0u)
      << bad.status().message();
  Allowlist base;
  Allowlist more;
  more.decoded_regexes = {"^x$"};
  MergeAllowlist(&base, more);
  EXPECT_EQ(base.decoded_regexes, std::vector<std::string>{"^x$"});
}

}  // namespace
}  // namespace gatos::scan
