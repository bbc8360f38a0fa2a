#include "gatos/model/blake3.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

TEST(Blake3Test, MatchesPublishedVectors) {
  // Official BLAKE3 test vector for the empty input.
  EXPECT_EQ(DigestHex(Blake3("")),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
  // ADR-0002 example canonical JSON (cross-checked with b3sum).
  EXPECT_EQ(Blake3Tagged(R"({"args":["echo","hello"],"command":["/usr/bin/env","bash","-lc"],"env":{"GREETING":"hello"},"timeout":30})"),
            "blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc");
}

TEST(Blake3Test, StreamingEqualsOneShotAcrossChunkBoundaries) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  Blake3Hasher h;
  for (size_t off = 0; off < data.size(); off += 777) h.Update(data.substr(off, 777));
  EXPECT_EQ(h.Finalize(), Blake3(data));
}

TEST(Blake3Test, KeyedDiffersFromUnkeyedAndByKey) {
  Digest32 k1{}, k2{};
  k2[0] = 1;
  Blake3Hasher a(k1), b(k2);
  a.Update("secret");
  b.Update("secret");
  EXPECT_NE(a.Finalize(), b.Finalize());
  EXPECT_NE(a.Finalize(), Blake3("secret"));
}

TEST(Blake3Test, ParseTaggedRejectsWrongForms) {
  EXPECT_TRUE(ParseTaggedBlake3(Blake3Tagged("x")).ok());
  EXPECT_EQ(ParseTaggedBlake3("sha256:00").status().code(), StatusCode::kInvalidArgument);
  std::string upper = "blake3:" + std::string(64, 'A');
  EXPECT_EQ(ParseTaggedBlake3(upper).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
