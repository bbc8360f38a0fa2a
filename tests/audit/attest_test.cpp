// Standard attestations: the PoE's DSSE envelope rebuilt from the ledger, and
// the worker's in-toto / SLSA provenance envelope.
#include "gatos/audit/attest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "audit_fixture.h"
#include "gatos/crypto/sha256.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/trailers.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

TEST(AttestTest, PoeEnvelopeIsRebuiltFromTheLedgerAndVerifies) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun r = RunJob(f, f.w1, {.yaml = Yaml(1)});
  auto env_json = PoeDsseEnvelope(LedgerLookup(l.get()), r.built.commit_id);
  ASSERT_TRUE(env_json.ok()) << env_json.status().ToString();
  json j = json::parse(*env_json);
  EXPECT_EQ(j["payloadType"], kPoePayloadType);
  EXPECT_EQ(j["signatures"].size(), 1u);
  EXPECT_EQ(j["signatures"][0]["keyid"], f.w1.public_key().WorkerId());

  auto env = ParseDsseEnvelope(*env_json);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->payload, r.built.poe_json);
  // The signature is the commit's Attest-Sig, byte for byte.
  auto msg = ParseCommitMessage(CommitMessageOf(r.built.objects[0]));
  std::string attest = FindTrailer(msg->trailers, "Attest-Sig")->substr(8);
  EXPECT_EQ(HexEncode(env->signatures[0].sig), attest);
  EXPECT_TRUE(VerifyDsse(*env, f.w1.public_key()).ok());
  Status other = VerifyDsse(*env, f.w2.public_key());
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  // Serializing the parsed envelope gives the same bytes (canonical JSON).
  EXPECT_EQ(SerializeDsseEnvelope(*env), *env_json);
}

TEST(AttestTest, PoeEnvelopeIsRefusedForATamperedOrMissingResult) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun r = RunJob(f, f.w1, {.yaml = Yaml(1)});
  std::string data = r.built.objects[0].data;
  data.replace(data.find("Status: succeeded"), 17, "Status: failed");
  GitObject bad = Commit(data);
  std::vector<GitObject> objs = r.built.objects;
  objs[0] = bad;
  auto env = PoeDsseEnvelope(BatchLookup(&objs, nullptr), bad.id);
  EXPECT_EQ(env.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(env.status().message().find("fails poe_matches_trailers"), std::string::npos)
      << env.status().message();
  auto missing = PoeDsseEnvelope(LedgerLookup(l.get()), std::string(40, 'a'));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
}

TEST(AttestTest, ProvenanceStatementHasTheInTotoAndSlsaFields) {
  LedgerFixture f;
  auto l = f.Open();
  JobRun r = RunJob(f, f.w1, {.yaml = Yaml(1)});
  std::string env_json =
      *l->ReadFileAtCommit(r.built.commit_id, kProvenanceFileName, kMaxEnvelopeBytes);
  auto env = ParseDsseEnvelope(env_json);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->payload_type, kInTotoPayloadType);
  EXPECT_TRUE(VerifyDsse(*env, f.w1.public_key()).ok());
  json st = json::parse(env->payload);
  EXPECT_EQ(st["_type"], "https://in-toto.io/Statement/v1");
  EXPECT_EQ(st["predicateType"], "https://slsa.dev/provenance/v1");
  // Subjects: every result file but poe.json and the envelope, sorted.
  std::vector<std::string> names;
  for (const auto& s : st["subject"]) names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"outputs/deep/a.bin", "outputs/report.txt", "stderr",
                                             "stdout"}));
  EXPECT_EQ(st["subject"][1]["digest"]["sha256"], Sha256Hex("42\n"));
  EXPECT_EQ(st["subject"][1]["digest"]["blake3"], DigestHex(Blake3("42\n")));
  const json& bd = st["predicate"]["buildDefinition"];
  EXPECT_EQ(bd["buildType"], "https://gatos.dev/job/v1");
  EXPECT_EQ(bd["externalParameters"]["job_id"], "blake3:" + r.job_hex);
  EXPECT_EQ(bd["externalParameters"]["manifest"]["command"][1], "job-1");
  EXPECT_EQ(bd["internalParameters"]["runner"]["program"], TestProgram());
  EXPECT_EQ(bd["internalParameters"]["lease_epoch"], 1);
  EXPECT_EQ(bd["resolvedDependencies"][0]["uri"], "gatos:refs/gatos/jobs/" + r.job_hex + "/job");
  EXPECT_EQ(bd["resolvedDependencies"][0]["digest"]["gitCommit"], r.job_commit);
  const json& rd = st["predicate"]["runDetails"];
  EXPECT_EQ(rd["builder"]["id"], f.w1.public_key().WorkerId());
  EXPECT_EQ(rd["builder"]["builderDependencies"][0]["digest"]["blake3"], TestProgram().substr(7));
  EXPECT_EQ(rd["metadata"]["invocationId"], "blake3:" + r.job_hex);
  EXPECT_EQ(rd["metadata"]["startedOn"], r.input.poe.started_at);
  EXPECT_EQ(rd["metadata"]["finishedOn"], r.input.poe.finished_at);

  auto verified = VerifyProvenanceEnvelope(env_json, f.w1.public_key());
  ASSERT_TRUE(verified.ok()) << verified.status().message();
  EXPECT_EQ(verified->job_id, "blake3:" + r.job_hex);
  EXPECT_EQ(verified->job_commit, r.job_commit);
  EXPECT_EQ(verified->subjects.size(), 4u);
  EXPECT_EQ(verified->subjects[3], SubjectForFile("stdout", r.input.files[0].data));
}

ProvenanceInput GoodInput(const Ed25519PrivateKey& w) {
  auto m = ParseManifest(Yaml(1), "job.yaml");
  ProvenanceInput p;
  p.manifest_json = CanonicalManifest(*m);
  p.job_id = JobId(*m);
  p.worker_id = w.public_key().WorkerId();
  p.lease_epoch = 1;
  p.runner_program = TestProgram();
  p.started_at = "2027-01-15T08:00:00.000Z";
  p.finished_at = "2027-01-15T08:00:01.500Z";
  p.subjects = SubjectsForFiles({{"stdout", "x"}, {"poe.json", "{}"}, {kProvenanceFileName, "{}"}});
  return p;
}

TEST(AttestTest, ProvenanceInputIsCheckedWithTheFieldNamed) {
  Ed25519PrivateKey w = *GenerateEd25519Key("w");
  ProvenanceInput p = GoodInput(w);
  ASSERT_EQ(p.subjects.size(), 1u);  // poe.json and the envelope are never subjects
  EXPECT_TRUE(BuildProvenanceEnvelope(p, w).ok());
  auto expect = [&](ProvenanceInput in, const Ed25519PrivateKey& key, const std::string& needle) {
    auto r = BuildProvenanceEnvelope(in, key);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  Ed25519PrivateKey other = *GenerateEd25519Key("other");
  expect(p, other, "is not the signing key");
  ProvenanceInput q = p;
  q.job_id = Blake3Tagged("another manifest");
  expect(q, w, "provenance: manifest_json: hashes to");
  q = p;
  q.manifest_json = " " + p.manifest_json;
  expect(q, w, "provenance: manifest_json: not canonical JSON");
  q = p;
  q.started_at = "yesterday";
  expect(q, w, "provenance: started_at");
  q = p;
  q.subjects.push_back(q.subjects[0]);
  expect(q, w, "subjects must be sorted by path, no duplicates");
}

TEST(AttestTest, TamperedProvenanceEnvelopeIsRefused) {
  Ed25519PrivateKey w = *GenerateEd25519Key("w");
  std::string good = *BuildProvenanceEnvelope(GoodInput(w), w);
  auto env = ParseDsseEnvelope(good);
  ASSERT_TRUE(env.ok());
  // Change one subject digest in the payload, keep the signature.
  DsseEnvelope bad = *env;
  size_t pos = bad.payload.find("\"sha256\":\"") + 10;
  bad.payload[pos] = bad.payload[pos] == '0' ? '1' : '0';
  auto r = VerifyProvenanceEnvelope(SerializeDsseEnvelope(bad), w.public_key());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("does not verify"), std::string::npos);
  // A validly signed envelope of another payload type.
  DsseEnvelope wrong_type = SignDsse("application/json", env->payload, w);
  auto t = VerifyProvenanceEnvelope(SerializeDsseEnvelope(wrong_type), w.public_key());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("payloadType is \"application/json\""), std::string::npos);
  // A validly signed statement whose manifest does not hash to its job id.
  json st = json::parse(env->payload);
  st["predicate"]["buildDefinition"]["externalParameters"]["manifest"]["timeout"] = 31;
  auto forged = VerifyProvenanceEnvelope(
      SerializeDsseEnvelope(SignDsse(kInTotoPayloadType, st.dump(), w)), w.public_key());
  EXPECT_EQ(forged.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(forged.status().message().find("externalParameters.manifest hashes to"),
            std::string::npos)
      << forged.status().message();
}

TEST(AttestTest, MalformedEnvelopesNameTheField) {
  auto expect = [](const std::string& text, const std::string& needle) {
    auto r = ParseDsseEnvelope(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect("[]", "not a JSON object");
  expect(R"({"payloadType":"t","payload":"e30=","signatures":[],"x":1})", "unknown field \"x\"");
  expect(R"({"payloadType":"t","payload":"e30=","signatures":[]})", "$.signatures: empty");
  expect(R"({"payloadType":"t","payload":"***","signatures":[{"sig":"AA=="}]})",
         "$.payload: not standard base64");
  expect(R"({"payloadType":"t","payload":"e30=","signatures":[{"keyid":1,"sig":"AA=="}]})",
         "$.signatures[0].keyid: expected a string");
  expect(R"({"payload":"e30=","signatures":[{"sig":"AA=="}]})", "$.payloadType: missing");
}

// An envelope in the canonical form the worker writes is read without the
// JSON parser: the same envelope, and the same errors, as the parser gives
// (a leading space sends the same text to the parser).
TEST(AttestTest, CanonicalEnvelopesReadWithoutTheParserGiveTheSameResult) {
  Ed25519PrivateKey w = *GenerateEd25519Key("w");
  std::string good = *BuildProvenanceEnvelope(GoodInput(w), w);
  auto fast = ParseDsseEnvelope(good);
  auto parsed = ParseDsseEnvelope(" " + good);
  ASSERT_TRUE(fast.ok() && parsed.ok());
  EXPECT_EQ(fast->payload, parsed->payload);
  EXPECT_EQ(fast->payload_type, parsed->payload_type);
  ASSERT_EQ(fast->signatures.size(), 1u);
  ASSERT_EQ(parsed->signatures.size(), 1u);
  EXPECT_EQ(fast->signatures[0].keyid, parsed->signatures[0].keyid);
  EXPECT_EQ(fast->signatures[0].sig, parsed->signatures[0].sig);
  EXPECT_TRUE(VerifyProvenanceEnvelope(good, w.public_key()).ok());
  for (const std::string& text :
       {std::string(R"({"payload":"***","payloadType":"t","signatures":[{"keyid":"k","sig":"AA=="}]})"),
        std::string(R"({"payload":"e30=","payloadType":"t","signatures":[{"keyid":"k","sig":"*"}]})")}) {
    auto a = ParseDsseEnvelope(text);
    auto b = ParseDsseEnvelope(" " + text);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().ToString(), b.status().ToString());
  }
  // A payload with an escape is base64 only once unescaped: the parser reads it.
  auto escaped_payload = ParseDsseEnvelope(
      R"({"payload":"e3\u0030=","payloadType":"t","signatures":[{"keyid":"k","sig":"AA=="}]})");
  ASSERT_TRUE(escaped_payload.ok()) << escaped_payload.status().message();
  EXPECT_EQ(escaped_payload->payload, "{}");
  // Not the canonical form (an escape, a second signature): the parser reads it.
  auto escaped = ParseDsseEnvelope(R"({"payload":"e30=","payloadType":"a\/b","signatures":[{"keyid":"k","sig":"AA=="}]})");
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(escaped->payload_type, "a/b");
  auto two = ParseDsseEnvelope(
      R"({"payload":"e30=","payloadType":"t","signatures":[{"keyid":"k","sig":"AA=="},{"sig":"AA=="}]})");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->signatures.size(), 2u);
}


std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The in-toto statement as BuildProvenanceStatement writes it is read without
// the JSON parser: on statements with varied fields, manifests and
// dependencies, on hand-made alterations, and on each with one byte changed,
// added or removed, ParseProvenanceStatement accepts what the parser accepts,
// with the same fields, and refuses with the same error.
TEST(AttestTest, TheParserlessStatementReaderAgreesWithTheJsonParser) {
  Ed25519PrivateKey w = *GenerateEd25519Key("w");
  const std::vector<std::string> strings = {"", "plain", "quote\" back\\slash /", "tab\t nl\n cr\r",
                                            "ctl\x01\x1f bs\b ff\f", "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80",
                                            "del\x7f", "inputs[3]", "bad\xc3"};
  std::vector<std::string> manifests;
  for (const json& m :
       {json::parse(R"({"args":[],"command":["/usr/bin/make","-C","src","t"],"timeout":600})"),
        json{{"a", strings[2] + strings[3] + strings[4] + strings[6]},
             {"b", {nullptr, true, false, 0, -1, kMaxSafeInteger, -kMaxSafeInteger}},
             {"c", json::object()},
             {"d", {{"e", json::array()}, {"f", {{{"g", "h"}}}}}}},
        json{{"\xc3\xa9", 1}, {"z", strings[5]}}, json{{"a\nb", 1}, {"a", 2}}, json::object()}) {
    manifests.push_back(*CanonicalJson(m));
  }
  json deep = "x";
  for (int i = 0; i < 70; ++i) deep = json::array({deep});
  manifests.push_back(*CanonicalJson(json{{"deep", deep}}));
  // Texts of values that are not canonical (the parser reads them; the
  // reader leaves them to it): each replaces the manifest's "timeout" value.
  const std::vector<std::string> odd_values = {
      "-0", "1.0", "1e2", "0600", "9007199254740992", "-9007199254740992", "\"\\u000a\"", "\"\\u0041\"",
      "\"\\u001F\"", "\"\\/\"", "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":2}", "[1 ]", "\"\\ud83d\\ude00\"",
      "99999999999999999999", "\"\xff\""};
  std::mt19937_64 rng(20261129);
  auto str = [&] { return strings[rng() % strings.size()]; };
  int accepted = 0, refused = 0, read_without_parser = 0;
  for (int round = 0; round < 3000; ++round) {
    ProvenanceInput p = GoodInput(w);
    p.manifest_json = manifests[rng() % manifests.size()];
    p.job_id = Blake3Tagged(p.manifest_json);
    if (rng() % 2) p.job_commit = std::string(40, "0af"[rng() % 3]);
    if (rng() % 3 == 0) p.lease_epoch = rng() % 2 ? kMaxSafeInteger : 7;
    if (rng() % 3 == 0) p.runner_version = str(), p.runner_platform = str();
    if (rng() % 3 == 0) p.subjects.clear();
    if (rng() % 3 == 0) p.subjects.push_back(SubjectForFile("z/" + str(), str()));
    for (int64_t i = 0, n = rng() % 3; i < n; ++i) {
      p.inputs.push_back({i * 2 + static_cast<int64_t>(rng() % 2), "https://example.org/" + str(),
                          rng() % 2 ? "refs/heads/" + str() : "", std::string(rng() % 2 ? 40 : 64, 'c')});
    }
    auto built = BuildProvenanceStatement(p);
    if (!built.ok()) continue;
    const std::string good = *built;
    for (int variant = 0; variant < 5; ++variant) {
      std::string text = good;
      if (variant == 1) {
        MutateOneByte(&text, rng, "\"{}[],:0-9a\\u \x01\xc3]");
      } else if (variant == 2) {
        // One field the checks are about, altered on purpose.
        const std::string job_uri = "gatos:refs/gatos/jobs/" + p.job_id.substr(7) + "/job";
        const std::vector<std::pair<std::string, std::string>> edits = {
            {"\"name\":\"inputs[", "\"name\":\"inputs[x"},
            {"\"name\":\"inputs[", "\"name\":\"inputs[1234567"},
            {"\"name\":\"inputs[", "\"name\":\"other["},
            {"\"uri\":\"git+", "\"uri\":\"" + job_uri + "\",\"x\":\""},
            {"\"uri\":\"git+", "\"uri\":\"" + job_uri.substr(0, 10)},
            {"\"invocationId\":\"blake3:", "\"invocationId\":\"blake3:0"},
            {"\"_type\":\"", "\"_type\":\"x"},
            {"\"lease_epoch\":", "\"lease_epoch\":-"},
            {"\"lease_epoch\":", "\"lease_epoch\":\"1\",\"x\":"},
            {"\"gatos-worker\":", "\"gatos-worker\":1,\"y\":"},
            {"\"subject\":[", "\"subject\":[1,"},
            {"\"sha256\":\"", "\"sha256\":\"\\u00e9"},
            {"\"platform\":\"", "\"platform\":\"\\u00"},
        };
        const auto& [from, to] = edits[rng() % edits.size()];
        size_t at = text.find(from);
        if (at == std::string::npos) continue;
        text.replace(at, from.size(), to);
      } else if (variant == 3) {
        text.insert(0, " ");  // the same statement, left to the parser
      } else if (variant == 4) {
        // A manifest that is not canonical, under the job id of its own
        // text: the parser's canonical form of it hashes to another id.
        const std::string from = "\"timeout\":600";
        size_t at = p.manifest_json.find(from);
        if (at == std::string::npos) continue;
        std::string odd = p.manifest_json;
        odd.replace(at, from.size(), "\"timeout\":" + odd_values[rng() % odd_values.size()]);
        text = ReplaceAll(ReplaceAll(text, p.manifest_json, odd), p.job_id.substr(7),
                          Blake3Tagged(odd).substr(7));
      }
      auto fast = ParseProvenanceStatement(text);
      auto full = provenance_internal::ParseStatementJson(text);
      ASSERT_EQ(fast.ok(), full.ok()) << "round " << round << ": " << text << "\n"
                                      << (fast.ok() ? full.status() : fast.status()).message();
      if (fast.ok()) {
        ASSERT_TRUE(*fast == *full) << "round " << round << ": " << text;
        ++accepted;
      } else {
        ASSERT_EQ(fast.status().ToString(), full.status().ToString()) << "round " << round << ": " << text;
        ++refused;
      }
      if (provenance_internal::ReadCanonicalStatement(text)) ++read_without_parser;
      // The writer's own output, with a manifest of plain keys, never needs the parser.
      if (variant == 0 && p.manifest_json.find_first_of("\\\x80\xc3") == std::string::npos &&
          p.manifest_json.find("deep") == std::string::npos) {
        ASSERT_TRUE(provenance_internal::ReadCanonicalStatement(text).has_value()) << text;
      }
    }
  }
  EXPECT_GT(accepted, 2000);
  EXPECT_GT(refused, 1000);
  EXPECT_GT(read_without_parser, 1500);
}

}  // namespace
}  // namespace gatos::testing
