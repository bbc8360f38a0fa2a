#include "gatos/poe.h"

#include <gtest/gtest.h>

#include "gatos/blake3.h"

namespace gatos {
namespace {

Poe Sample() {
  Poe p;
  p.job_id = "blake3:" + std::string(64, 'a');
  p.worker_id = "ed25519:" + std::string(64, 'b');
  p.lease_epoch = 2;
  p.status = "succeeded";
  p.runner_program = "blake3:" + std::string(64, 'c');
  p.runner_version = "0.1.0";
  p.runner_platform = "linux-x86_64";
  p.exit_code = 0;
  p.stdout_cap = 1 << 20;
  p.started_at = "2026-11-22T02:00:00.000Z";
  p.finished_at = "2026-11-22T02:00:01.500Z";
  p.outputs = {{"outputs/report.txt", 3, Blake3Tagged("abc")},
               {"stderr", 0, Blake3Tagged("")},
               {"stdout", 6, Blake3Tagged("hello\n")}};
  return p;
}

TEST(PoeTest, DssePaeMatchesTheSpecLayout) {
  // DSSE v1: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
  EXPECT_EQ(DssePae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  EXPECT_EQ(DssePae(kPoePayloadType, ""), "DSSEv1 33 application/vnd.gatos.poe.v1+json 0 ");
}

TEST(PoeTest, SerializeIsCanonicalAndRoundTrips) {
  auto bytes = SerializePoe(Sample());
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_EQ(bytes->find(' '), std::string::npos);
  EXPECT_EQ(bytes->rfind("{\"exit\":{\"code\":0,\"signal\":null,\"timed_out\":false},", 0), 0u) << *bytes;
  auto back = ParsePoe(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->outputs, Sample().outputs);
  EXPECT_EQ(back->lease_epoch, 2);
  EXPECT_EQ(*SerializePoe(*back), *bytes);
}

TEST(PoeTest, ParseRejectsNonCanonicalAndUnknownFields) {
  std::string bytes = *SerializePoe(Sample());
  std::string spaced = bytes;
  spaced.insert(1, " ");
  EXPECT_NE(ParsePoe(spaced).status().message().find("not in canonical form"), std::string::npos);
  std::string extra = bytes;
  extra.insert(1, "\"aaa\":1,");
  EXPECT_NE(ParsePoe(extra).status().message().find("unknown field \"aaa\""), std::string::npos);
  EXPECT_EQ(ParsePoe("[]").status().code(), StatusCode::kInvalidArgument);
}

TEST(PoeTest, FieldChecksNameTheField) {
  Poe p = Sample();
  p.status = "done";
  EXPECT_NE(SerializePoe(p).status().message().find("status"), std::string::npos);
  p = Sample();
  p.outputs.push_back({"../escape", 1, Blake3Tagged("x")});
  EXPECT_NE(SerializePoe(p).status().message().find("outputs[3].path"), std::string::npos);
  p = Sample();
  std::swap(p.outputs[0], p.outputs[1]);
  EXPECT_NE(SerializePoe(p).status().message().find("sorted"), std::string::npos);
  p = Sample();
  p.outputs[0].path = "poe.json";
  EXPECT_EQ(SerializePoe(p).status().code(), StatusCode::kInvalidArgument);
}

TEST(PoeTest, TransientIsOnlyOnAFailureWithAReasonAndOnlyWhenTrue) {
  EXPECT_EQ(SerializePoe(Sample())->find("\"transient\""), std::string::npos);
  Poe p = Sample();
  p.status = "failed";
  p.reason = "fetching input 0: connection refused [transient: may succeed when retried]";
  p.transient = true;
  auto bytes = SerializePoe(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_NE(bytes->find("\"transient\":true"), std::string::npos);
  auto back = ParsePoe(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->transient);
  // "transient": false is not canonical (absent is), and a success or a
  // failure without a reason cannot be transient.
  std::string with_false = *bytes;
  with_false.replace(with_false.find("\"transient\":true"), 16, "\"transient\":false");
  EXPECT_FALSE(ParsePoe(with_false).ok());
  p.reason = "";
  EXPECT_FALSE(SerializePoe(p).ok());
  p = Sample();
  p.transient = true;
  EXPECT_FALSE(SerializePoe(p).ok());
}

TEST(PoeTest, ResolvedInputsAreSignedAndOptional) {
  // Without inputs poe.json has no "inputs" key: earlier envelopes are unchanged.
  EXPECT_EQ(SerializePoe(Sample())->find("\"inputs\""), std::string::npos);
  Poe p = Sample();
  p.inputs = {{0, "https://git.example.com/app", "main", std::string(40, 'e')},
              {2, "/srv/r", "", std::string(64, 'f')}};
  auto bytes = SerializePoe(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_NE(bytes->find(R"("inputs":[{"commit":")" + std::string(40, 'e') +
                        R"(","index":0,"ref":"main","url":"https://git.example.com/app"},{"commit":")"),
            std::string::npos)
      << *bytes;
  auto back = ParsePoe(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->inputs, p.inputs);

  p.inputs[1].commit = "HEAD";
  EXPECT_NE(SerializePoe(p).status().message().find("inputs[1].commit"), std::string::npos);
  p.inputs[1].commit = std::string(40, 'a');
  p.inputs[1].index = 0;
  EXPECT_NE(SerializePoe(p).status().message().find("inputs[1].index"), std::string::npos);
  // An empty ref is written by leaving the key out; "ref":"" is not canonical.
  std::string with_empty_ref = *bytes;
  const std::string tail = R"("url":"/srv/r"})";
  with_empty_ref.insert(with_empty_ref.find(tail), R"("ref":"",)");
  EXPECT_EQ(ParsePoe(with_empty_ref).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
