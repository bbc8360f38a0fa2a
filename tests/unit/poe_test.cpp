#include "gatos/model/poe.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "sample_poe.h"
#include "test_util.h"

namespace gatos {
namespace {

TEST(PoeTest, DssePaeMatchesTheSpecLayout) {
  // DSSE v1: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
  EXPECT_EQ(DssePae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  EXPECT_EQ(DssePae(kPoePayloadType, ""), "DSSEv1 33 application/vnd.gatos.poe.v1+json 0 ");
}

TEST(PoeTest, SerializeIsCanonicalAndRoundTrips) {
  auto bytes = SerializePoe(SamplePoe());
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_EQ(bytes->find(' '), std::string::npos);
  EXPECT_EQ(bytes->rfind("{\"exit\":{\"code\":0,\"signal\":null,\"timed_out\":false},", 0), 0u)
      << *bytes;
  auto back = ParsePoe(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->outputs, SamplePoe().outputs);
  EXPECT_EQ(back->lease_epoch, 2);
  EXPECT_EQ(*SerializePoe(*back), *bytes);
}

// The document SerializePoe writes directly, as a tree for CanonicalJson
// (how it was serialized before): the two must agree byte for byte, and on
// every error.
Result<std::string> ThroughTheGenericSerializer(const Poe& p) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const auto& o : p.outputs)
    outputs.push_back({{"path", o.path}, {"size", o.size}, {"hash", o.hash}});
  nlohmann::json j = {
      {"job_id", p.job_id},
      {"worker_id", p.worker_id},
      {"lease_epoch", p.lease_epoch},
      {"status", p.status},
      {"runner",
       {{"program", p.runner_program},
        {"version", p.runner_version},
        {"platform", p.runner_platform}}},
      {"exit",
       {{"code", p.exit_code ? nlohmann::json(*p.exit_code) : nlohmann::json(nullptr)},
        {"signal", p.signal ? nlohmann::json(*p.signal) : nlohmann::json(nullptr)},
        {"timed_out", p.timed_out}}},
      {"reason", p.reason},
      {"stdout_cap", p.stdout_cap},
      {"truncated", {{"stdout", p.stdout_truncated}, {"stderr", p.stderr_truncated}}},
      {"started_at", p.started_at},
      {"finished_at", p.finished_at},
      {"outputs", outputs},
  };
  if (p.transient) j["transient"] = true;
  if (!p.inputs.empty()) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& in : p.inputs) {
      nlohmann::json e = {{"index", in.index}, {"url", in.url}, {"commit", in.commit}};
      if (!in.ref.empty()) e["ref"] = in.ref;
      inputs.push_back(std::move(e));
    }
    j["inputs"] = std::move(inputs);
  }
  if (p.limits.Any()) {
    j["limits"] = {{"memory_mb", p.limits.memory_mb},
                   {"pids", p.limits.pids},
                   {"cpu_millis", p.limits.cpu_millis},
                   {"disk_mb", p.limits.disk_mb}};
    if (!p.unenforced.empty()) j["limits"]["unenforced"] = p.unenforced;
  }
  if (p.usage.Any()) {
    nlohmann::json u = nlohmann::json::object();
    if (p.usage.peak_memory_bytes >= 0) u["peak_memory_bytes"] = p.usage.peak_memory_bytes;
    if (p.usage.cpu_ms >= 0) u["cpu_ms"] = p.usage.cpu_ms;
    if (p.usage.peak_processes >= 0) u["peak_processes"] = p.usage.peak_processes;
    if (p.usage.disk_bytes >= 0) u["disk_bytes"] = p.usage.disk_bytes;
    j["usage"] = std::move(u);
  }
  return CanonicalJson(j);
}

// Mostly valid documents with one or two odd values: strings that exercise
// escaping and UTF-8 checks, integers at the edges.
Poe VariedPoe(std::mt19937_64& rng) {
  const std::vector<std::string> strings = {"",
                                            "plain",
                                            "quote\" back\\slash /",
                                            std::string("nul\0x", 5),
                                            "\x01\x1f\x7f",
                                            "\b\f\n\r\t",
                                            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                            "\xef\xbf\xbf\xee\x80\x80",
                                            "bad \xc3",
                                            "bad \xed\xa0\x80",
                                            "bad \xf5\x80\x80\x80",
                                            "overlong \xc0\xaf"};
  const std::vector<int64_t> ints = {0,
                                     -1,
                                     7,
                                     kMaxSafeInteger,
                                     -kMaxSafeInteger,
                                     kMaxSafeInteger + 1,
                                     -kMaxSafeInteger - 1,
                                     INT64_MAX,
                                     INT64_MIN};
  const std::vector<uint64_t> sizes = {0, 3, static_cast<uint64_t>(kMaxSafeInteger),
                                       static_cast<uint64_t>(kMaxSafeInteger) + 1, UINT64_MAX};
  auto str = [&] { return strings[rng() % strings.size()]; };
  auto num = [&] { return ints[rng() % ints.size()]; };
  Poe p = SamplePoe();
  switch (rng() % 12) {
    case 0:
      p.reason = str();
      break;
    case 1:
      p.runner_version = str();
      p.runner_platform = str();
      break;
    case 2:
      p.lease_epoch = num();
      break;
    case 3:
      p.exit_code = rng() % 2 ? std::optional<int64_t>(num()) : std::nullopt;
      p.signal = num();
      break;
    case 4:
      p.stdout_cap = num();
      break;
    case 5:
      p.outputs.push_back({str(), sizes[rng() % sizes.size()], str()});
      break;
    case 6:
      p.inputs.push_back({num(), str(), rng() % 2 ? str() : "", str()});
      break;
    case 7:
      p.inputs.push_back({1, "https://example.org/r.git", "", std::string(40, 'a')});
      break;
    case 8:
      p.transient = rng() % 2;
      p.timed_out = rng() % 2;
      break;
    case 9:
      p.stderr_truncated = rng() % 2;
      p.stdout_truncated = rng() % 2;
      p.limits = {static_cast<int64_t>(rng() % 3) * 256, static_cast<int64_t>(rng() % 2) * 64, 0,
                  static_cast<int64_t>(rng() % 2) * 64};
      if (rng() % 2) p.unenforced = {"cpu"};
      p.usage.peak_memory_bytes = rng() % 2 ? 104857600 : -1;
      p.usage.cpu_ms = rng() % 2 ? 1000 : -1;
      p.usage.peak_processes = rng() % 2 ? 64 : -1;
      p.usage.disk_bytes = rng() % 2 ? 67108864 : -1;
      break;
    case 10:
      p.job_id = str();
      p.worker_id = str();
      break;
    default:
      p.started_at = str();
      p.finished_at = str();
      p.status = str();
      break;
  }
  return p;
}

TEST(PoeTest, TheDirectSerializerAgreesWithTheGenericOne) {
  std::mt19937_64 rng(20261127);
  int compared_ok = 0, compared_errors = 0;
  for (int round = 0; round < 4000; ++round) {
    // Both the bytes and the first error's path are compared.
    Poe p = VariedPoe(rng);
    auto direct = poe_internal::CanonicalPoe(p);
    auto generic = ThroughTheGenericSerializer(p);
    ASSERT_EQ(direct.ok(), generic.ok())
        << "round " << round << ": "
        << (direct.ok() ? generic.status().message() : direct.status().message());
    if (direct.ok()) {
      ASSERT_EQ(*direct, *generic) << "round " << round;
      ++compared_ok;
    } else {
      ASSERT_EQ(direct.status().message(), generic.status().message()) << "round " << round;
      ++compared_errors;
    }
  }
  EXPECT_GT(compared_ok, 1000);
  EXPECT_GT(compared_errors, 300);
}

// ParsePoe reads the canonical layout without the JSON parser: on valid
// documents, odd ones, and each with one byte changed, added or removed, it
// accepts what the parser accepts, with the same fields, and refuses with
// the same error.
TEST(PoeTest, TheParserlessReaderAgreesWithTheJsonParser) {
  std::mt19937_64 rng(20261129);
  int accepted = 0, refused = 0;
  for (int round = 0; round < 4000; ++round) {
    Poe p = VariedPoe(rng);
    if (rng() % 2) {
      p.inputs.push_back({0, "https://example.org/a.git", "refs/heads/main", std::string(40, 'b')});
      p.limits = {512, 64, 1000, 128};
      p.unenforced = {"disk", "pids"};
      p.usage.cpu_ms = rng() % 2 ? 5 : -1;
      p.usage.peak_processes = 3;
    }
    auto bytes = poe_internal::CanonicalPoe(p);
    if (!bytes.ok()) continue;
    std::string text = *bytes;
    for (int variant = 0; variant < 2; ++variant) {
      if (variant == 1) gatos::testing::MutateOneByte(&text, rng, "\"{}[],:0-9a\\u \x01\xc3");
      auto fast = ParsePoe(text);
      auto full = poe_internal::ParsePoeJson(text);
      ASSERT_EQ(fast.ok(), full.ok()) << "round " << round << ": " << text;
      if (fast.ok()) {
        ASSERT_TRUE(*fast == *full) << "round " << round << ": " << text;
        // Every document ParsePoe accepts is one the reader reads itself.
        ASSERT_TRUE(poe_internal::ReadCanonicalPoe(text).has_value()) << "round " << round << ": " << text;
        ++accepted;
      } else {
        ASSERT_EQ(fast.status().message(), full.status().message()) << "round " << round << ": " << text;
        ++refused;
      }
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
  // Integers longer than any canonical one (no overflow on the way).
  std::string text = *SerializePoe(SamplePoe());
  for (const char* n : {"33333333333333333333", "-99999999999999999999", "12345678901234567"}) {
    std::string long_int = text;
    const std::string epoch = "\"lease_epoch\":2,";
    long_int.replace(long_int.find(epoch), epoch.size(), "\"lease_epoch\":" + std::string(n) + ",");
    EXPECT_FALSE(poe_internal::ReadCanonicalPoe(long_int).has_value()) << n;
    EXPECT_EQ(ParsePoe(long_int).status().message(), poe_internal::ParsePoeJson(long_int).status().message()) << n;
  }
}

// What CanonicalPoe never writes is left to the JSON parser, so ParsePoe
// takes no document it could not write back: a text the writer would spell
// otherwise (an escape, -0, an integer beyond 2^53-1, an empty ref, limits
// all zero) is not read without the parser, and both paths give the same
// error.
TEST(PoeTest, TheParserlessReaderTakesOnlyWhatTheWriterWrites) {
  Poe p = SamplePoe();
  p.reason = "nl\n tab\t ctl\x01";
  p.inputs.push_back({0, "https://example.org/a.git", "refs/heads/main", std::string(40, 'b')});
  p.limits = {512, 64, 1000, 128};
  p.usage.cpu_ms = 5;
  const std::string good = *SerializePoe(p);
  ASSERT_TRUE(poe_internal::ReadCanonicalPoe(good).has_value());
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"nl\\n", "nl\\u000a"},
      {"ctl\\u0001", "ctl\\u0041"},
      {"\"code\":0", "\"code\":-0"},
      {"\"lease_epoch\":2", "\"lease_epoch\":9007199254740992"},
      {"\"ref\":\"refs/heads/main\"", "\"ref\":\"\""},
      {"\"cpu_millis\":1000,\"disk_mb\":128,\"memory_mb\":512,\"pids\":64",
       "\"cpu_millis\":0,\"disk_mb\":0,\"memory_mb\":0,\"pids\":0"},
  };
  for (const auto& [from, to] : edits) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    EXPECT_FALSE(poe_internal::ReadCanonicalPoe(text).has_value()) << text;
    auto fast = ParsePoe(text);
    auto full = poe_internal::ParsePoeJson(text);
    ASSERT_FALSE(full.ok()) << text;
    ASSERT_FALSE(fast.ok()) << text;
    EXPECT_EQ(fast.status().message(), full.status().message()) << text;
  }
}

TEST(PoeTest, ParseRejectsNonCanonicalAndUnknownFields) {
  std::string bytes = *SerializePoe(SamplePoe());
  std::string spaced = bytes;
  spaced.insert(1, " ");
  EXPECT_NE(ParsePoe(spaced).status().message().find("not in canonical form"), std::string::npos);
  std::string extra = bytes;
  extra.insert(1, "\"aaa\":1,");
  EXPECT_NE(ParsePoe(extra).status().message().find("unknown field \"aaa\""), std::string::npos);
  EXPECT_EQ(ParsePoe("[]").status().code(), StatusCode::kInvalidArgument);
}

TEST(PoeTest, FieldChecksNameTheField) {
  Poe p = SamplePoe();
  p.status = "done";
  EXPECT_NE(SerializePoe(p).status().message().find("status"), std::string::npos);
  p = SamplePoe();
  p.outputs.push_back({"../escape", 1, Blake3Tagged("x")});
  EXPECT_NE(SerializePoe(p).status().message().find("outputs[3].path"), std::string::npos);
  p = SamplePoe();
  std::swap(p.outputs[0], p.outputs[1]);
  EXPECT_NE(SerializePoe(p).status().message().find("sorted"), std::string::npos);
  p = SamplePoe();
  p.outputs[0].path = "poe.json";
  EXPECT_EQ(SerializePoe(p).status().code(), StatusCode::kInvalidArgument);
}

TEST(PoeTest, TransientIsOnlyOnAFailureWithAReasonAndOnlyWhenTrue) {
  EXPECT_EQ(SerializePoe(SamplePoe())->find("\"transient\""), std::string::npos);
  Poe p = SamplePoe();
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
  p = SamplePoe();
  p.transient = true;
  EXPECT_FALSE(SerializePoe(p).ok());
}

TEST(PoeTest, ResolvedInputsAreSignedAndOptional) {
  // Without inputs poe.json has no "inputs" key: earlier envelopes are unchanged.
  EXPECT_EQ(SerializePoe(SamplePoe())->find("\"inputs\""), std::string::npos);
  Poe p = SamplePoe();
  p.inputs = {{0, "https://git.example.com/app", "main", std::string(40, 'e')},
              {2, "/srv/r", "", std::string(64, 'f')}};
  auto bytes = SerializePoe(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_NE(
      bytes->find(R"("inputs":[{"commit":")" + std::string(40, 'e') +
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

namespace gatos {
namespace {

// Limits and usage are signed with the rest, and absent when not set, so
// envelopes of jobs without limits are unchanged.
TEST(PoeTest, LimitsAndUsageAreSignedAndOptional) {
  Poe p = SamplePoe();
  auto plain = SerializePoe(p);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("limits"), std::string::npos);
  EXPECT_EQ(plain->find("usage"), std::string::npos);
  p.limits = {256, 64, 0, 64};
  p.unenforced = {"cpu"};
  p.usage = {104857600, 1003, 64, 67108864};
  auto bytes = SerializePoe(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_NE(bytes->find("\"limits\":{\"cpu_millis\":0,\"disk_mb\":64,\"memory_mb\":256,\"pids\":64,"
                        "\"unenforced\":[\"cpu\"]}"),
            std::string::npos)
      << *bytes;
  EXPECT_NE(bytes->find("\"usage\":{\"cpu_ms\":1003,\"disk_bytes\":67108864,\"peak_memory_bytes\":"
                        "104857600,\"peak_processes\":64}"),
            std::string::npos)
      << *bytes;
  auto back = ParsePoe(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->limits, p.limits);
  EXPECT_EQ(back->unenforced, p.unenforced);
  EXPECT_EQ(back->usage, p.usage);
  // Field checks.
  Poe bad = p;
  bad.unenforced = {"network"};
  EXPECT_EQ(SerializePoe(bad).status().code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.limits.memory_mb = -1;
  EXPECT_EQ(SerializePoe(bad).status().code(), StatusCode::kInvalidArgument);
  std::string unknown = *bytes;
  unknown.replace(unknown.find("\"cpu_ms\""), 8, "\"cpu_xx\"");
  EXPECT_EQ(ParsePoe(unknown).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
