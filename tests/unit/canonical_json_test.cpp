#include "gatos/model/canonical_json.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

// Substring check without gmock (the test targets link gtest only).
#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)
using json = nlohmann::json;

std::string Canon(const json& j) {
  Result<std::string> r = CanonicalJson(j);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

TEST(CanonicalJsonTest, AdrExample) {
  json j = json::parse(R"({"timeout":30,"env":{"GREETING":"hello"},
      "command":["/usr/bin/env","bash","-lc"], "args":["echo","hello"]})");
  EXPECT_EQ(Canon(j), R"({"args":["echo","hello"],"command":["/usr/bin/env","bash","-lc"],)"
                      R"("env":{"GREETING":"hello"},"timeout":30})");
}

// RFC 8785 section 3.2.3: keys sorted by UTF-16 code units. U+1F600 (UTF-16
// D83D DE00) sorts before U+FB33 although its UTF-8 bytes (F0 ...) sort after
// (EF AC B3).
TEST(CanonicalJsonTest, Rfc8785KeyOrderingUsesUtf16CodeUnits) {
  json j = json::object();
  j["\u20ac"] = "Euro Sign";
  j["\r"] = "Carriage Return";
  j["\xef\xac\xb3"] = "Hebrew Letter Dalet With Dagesh";
  j["1"] = "One";
  j["\xf0\x9f\x98\x80"] = "Emoji: Grinning Face";
  j["\u0080"] = "Control";
  j["\u00f6"] = "Latin Small Letter O With Diaeresis";
  EXPECT_EQ(Canon(j),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
            "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
            "\"\xe2\x82\xac\":\"Euro Sign\",\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
            "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}");
}

TEST(CanonicalJsonTest, EscapesControlCharactersLikeJcs) {
  std::string s = "\"\\/\b\f\n\r\t";
  s.push_back('\x00');
  s += "\x01\x1f\x7f\xe2\x80\xa8";
  EXPECT_EQ(Canon(json(s)), "\"\\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f\xe2\x80\xa8\"");
}

TEST(CanonicalJsonTest, NoWhitespaceAndNestedValues) {
  json j = json::parse(R"( { "b" : [ 1 , true , null , { "z" : -5 , "a" : "" } ] , "a" : [] } )");
  EXPECT_EQ(Canon(j), R"({"a":[],"b":[1,true,null,{"a":"","z":-5}]})");
  EXPECT_EQ(Canon(json::object()), "{}");
}

TEST(CanonicalJsonTest, IntegerRange) {
  EXPECT_EQ(Canon(json(int64_t{9007199254740991})), "9007199254740991");
  EXPECT_EQ(Canon(json(int64_t{-9007199254740991})), "-9007199254740991");
  EXPECT_EQ(Canon(json(uint64_t{0})), "0");

  Result<std::string> r = CanonicalJson(json{{"n", int64_t{9007199254740992}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "$.n: integer 9007199254740992 is outside");

  r = CanonicalJson(json(uint64_t{18446744073709551615u}));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = CanonicalJson(json(int64_t{-9007199254740992}));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CanonicalJsonTest, RejectsFloatsNamingThePath) {
  json j = json::parse(R"({"inputs":[{"size":1.5}]})");
  Result<std::string> r = CanonicalJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "$.inputs[0].size: floating-point");
  // Even an integral float is refused: its spelling is not canonical across
  // implementations.
  EXPECT_EQ(CanonicalJson(json(1.0)).status().code(), StatusCode::kInvalidArgument);
}

TEST(CanonicalJsonTest, RejectsInvalidUtf8) {
  Result<std::string> r = CanonicalJson(json{{"k", std::string("a\xff")}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "$.k: string is not valid UTF-8");

  json bad_key = json::object();
  bad_key[std::string("\xc0\xaf")] = 1;  // overlong '/'
  r = CanonicalJson(bad_key);
  EXPECT_HAS(r.status().message(), "key is not valid UTF-8");
  // A UTF-8-encoded surrogate (CESU-8) is not UTF-8.
  EXPECT_FALSE(CanonicalJson(json(std::string("\xed\xa0\x80"))).ok());
}

TEST(CanonicalJsonTest, RejectsBinaryAndTooDeep) {
  EXPECT_EQ(CanonicalJson(json::binary({1, 2})).status().code(), StatusCode::kInvalidArgument);
  json deep = json::array();
  for (size_t i = 0; i < kMaxCanonicalJsonDepth + 5; ++i) deep = json::array({deep});
  Result<std::string> r = CanonicalJson(deep);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "nesting deeper than");
}

TEST(CanonicalJsonTest, Utf8Validator) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xf4\x8f\xbf\xbf"));
  size_t bad = 0;
  EXPECT_FALSE(IsValidUtf8("ab\xf4\x90\x80\x80", &bad));  // > U+10FFFF
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));  // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

}  // namespace
}  // namespace gatos
