#include "gatos/model/encoding.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

TEST(EncodingTest, HexRoundTripIsLowercase) {
  Bytes b = {0x00, 0xab, 0xff, 0x10};
  EXPECT_EQ(HexEncode(b), "00abff10");
  auto d = HexDecode("00abff10");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, b);
}

TEST(EncodingTest, HexRejectsUppercaseAndOddLength) {
  EXPECT_EQ(HexDecode("AB").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HexDecode("abc").status().message(), "hex string has odd length 3");
  EXPECT_TRUE(IsLowerHex("00ff", 4));
  EXPECT_FALSE(IsLowerHex("00FF", 4));
  EXPECT_FALSE(IsLowerHex("00ff", 6));
}

TEST(EncodingTest, Base64MatchesRfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, enc] : vectors) {
    Bytes b(plain.begin(), plain.end());
    EXPECT_EQ(Base64Encode(b), enc);
    auto d = Base64Decode(enc);
    ASSERT_TRUE(d.ok()) << enc;
    EXPECT_EQ(*d, b);
  }
}

TEST(EncodingTest, Base64RejectsMalformed) {
  EXPECT_EQ(Base64Decode("Zg=").status().message(), "base64 length 3 is not a multiple of 4");
  EXPECT_EQ(Base64Decode("Z!==").status().message(), "invalid base64 character at offset 1");
  EXPECT_EQ(Base64Decode("Zh==").status().message(), "non-canonical base64 padding bits");
  EXPECT_EQ(Base64Decode("Zg==Zg==").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
