// The JSON Schemas in schemas/v1/job against the examples and the parser's
// normalized output, checked with python3-jsonschema (draft 2020-12). The
// setup installs it; this test fails, never skips, when it is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gatos/model/canonical_json.h"
#include "gatos/model/manifest.h"
#include "gatos/model/poe.h"
#include "gatos/sys/manifest_file.h"
#include "test_util.h"

namespace gatos {
namespace {

// Validates each instance file against the schema; prints one line per
// instance: "valid" or "invalid: <errors>". Exit 2 if jsonschema is missing.
constexpr char kValidator[] = R"PY(
import json, sys
try:
    import jsonschema
except ImportError as e:
    print("python3-jsonschema is not installed: %s" % e, file=sys.stderr)
    sys.exit(2)
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    errors = list(validator.iter_errors(json.load(open(path))))
    print("invalid: " + " | ".join(
        "%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message) for e in errors)
          if errors else "valid")
)PY";

class SchemaTest : public ::testing::Test {
 protected:
  // One python3 run for all instances: "valid" or "invalid: ..." for each.
  std::vector<std::string> ValidateAll(const std::string& schema,
                                       const std::vector<nlohmann::json>& instances) {
    std::vector<std::string> argv = {"python3", "-c", kValidator,
                                     testing::SourcePath("schemas/v1/job/" + schema)};
    for (const auto& instance : instances) {
      const std::string file = dir_.Join("instance" + std::to_string(counter_++) + ".json");
      testing::WriteFile(file, instance.dump());
      argv.push_back(file);
    }
    testing::RunResult r = testing::Run(argv);
    EXPECT_EQ(r.exit_code, 0) << "validator did not run: " << r.err;
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t nl; (nl = r.out.find('\n', start)) != std::string::npos; start = nl + 1) {
      lines.push_back(r.out.substr(start, nl - start));
    }
    EXPECT_EQ(lines.size(), instances.size()) << r.out << r.err;
    lines.resize(instances.size(), "validator gave no answer");
    return lines;
  }

  testing::TempDir dir_;
  int counter_ = 0;
};

nlohmann::json SamplePoe() {
  return nlohmann::json::parse(R"({
    "job_id": "blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc",
    "runner": {"program": "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
               "version": "0.1.0", "platform": "linux-x86_64"},
    "outputs": [
      {"path": "outputs/done.txt", "size": 0, "hash": "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
      {"path": "stdout", "size": 6, "hash": "blake3:0000000000000000000000000000000000000000000000000000000000000000"}
    ],
    "exit": {"code": 0, "signal": null, "timed_out": false},
    "status": "succeeded",
    "worker_id": "ed25519:1111111111111111111111111111111111111111111111111111111111111111",
    "lease_epoch": 1,
    "started_at": "2025-11-08T12:00:00Z",
    "finished_at": "2025-11-08T12:00:01.250Z",
    "stdout_cap": 1048576,
    "reason": "",
    "truncated": {"stdout": false, "stderr": false}
  })");
}

TEST_F(SchemaTest, EveryExampleManifestValidates) {
  std::vector<std::string> names;
  std::vector<nlohmann::json> docs;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourcePath("examples"))) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".yaml" && ext != ".json") continue;
    Result<Manifest> m = LoadManifestFile(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    names.push_back(entry.path().string());
    docs.push_back(ManifestJson(*m));
  }
  ASSERT_GE(docs.size(), 4u);
  std::vector<std::string> results = ValidateAll("job_manifest.schema.json", docs);
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(results[i], "valid") << names[i];
}

TEST_F(SchemaTest, ParserAndSchemaAgreeOnRejections) {
  Result<Manifest> m = LoadManifestFile(testing::SourcePath("examples/hello.yaml"));
  ASSERT_TRUE(m.ok());
  const nlohmann::json good = ManifestJson(*m);

  nlohmann::json unknown = good;
  unknown["priority"] = 1;
  EXPECT_EQ(ParseManifest(unknown.dump(), "job.json").status().code(),
            StatusCode::kInvalidArgument);

  const std::vector<std::pair<std::string, nlohmann::json>> bad_fields = {
      {"timeout", -1},        {"timeout", "PT30S"},   {"command", nlohmann::json::array()},
      {"cwd", "/abs"},        {"cwd", "a/../b"},      {"policy_root", "sha256:00"},
      {"ulid", "not-a-ulid"}, {"env", {{"1X", "v"}}}, {"env", {{"GATOS_INPUT_7", "v"}}}, {"env", {{"gatos_state_dir", "v"}}}, {"args", {1}},
  };
  std::vector<nlohmann::json> docs = {good, unknown};
  for (const auto& [field, value] : bad_fields) {
    nlohmann::json doc = good;
    doc[field] = value;
    docs.push_back(doc);
  }
  nlohmann::json no_args = good;
  no_args.erase("args");  // the normalized form always has args
  docs.push_back(no_args);

  std::vector<std::string> results = ValidateAll("job_manifest.schema.json", docs);
  EXPECT_EQ(results[0], "valid");
  EXPECT_NE(results[1].find("invalid: "), std::string::npos) << results[1];
  EXPECT_NE(results[1].find("priority"), std::string::npos) << results[1];
  for (size_t i = 2; i < docs.size(); ++i) {
    EXPECT_EQ(results[i].rfind("invalid: ", 0), 0u) << docs[i].dump() << " -> " << results[i];
  }
}

TEST_F(SchemaTest, GitInputsAgreeWithTheParser) {
  const std::string sha(40, 'a');
  const std::vector<nlohmann::json> good = {
      {{"kind", "git"}, {"url", "https://git.example.com/team/app"}, {"ref", "main"}},
      {{"kind", "git"}, {"url", "/srv/r"}, {"commit", sha}},
      {{"kind", "git"}, {"url", "git@host:team/r.git"}, {"ref", "HEAD"}, {"commit", sha}, {"nonce", "n"}},
      {{"kind", "blobptr"}, {"anything", 1}},
  };
  const std::vector<nlohmann::json> bad = {
      {{"kind", "git"}, {"url", "/srv/r"}},
      {{"kind", "git"}, {"url", "https://u:p@h/r"}, {"ref", "main"}},
      {{"kind", "git"}, {"url", "ext::sh -c x"}, {"ref", "main"}},
      {{"kind", "git"}, {"url", "-oProxyCommand=x"}, {"ref", "main"}},
      {{"kind", "git"}, {"url", "https://h/r?token=x"}, {"ref", "main"}},
      {{"kind", "git"}, {"url", "/r"}, {"ref", "a..b"}},
      {{"kind", "git"}, {"url", "/r"}, {"ref", "refs/heads/*"}},
      {{"kind", "git"}, {"url", "/r"}, {"commit", "ABC"}},
      {{"kind", "git"}, {"url", "/r"}, {"ref", "main"}, {"branch", "x"}},
  };
  std::vector<nlohmann::json> docs;
  for (const auto* set : {&good, &bad}) {
    for (const auto& input : *set) {
      nlohmann::json doc = {{"command", {"x"}}, {"args", nlohmann::json::array()}, {"timeout", 1},
                            {"inputs", {input}}};
      // The parser decides the same way as the schema.
      EXPECT_EQ(ParseManifest(doc.dump(), "job.json").ok(), set == &good) << doc.dump();
      docs.push_back(doc);
    }
  }
  std::vector<std::string> results = ValidateAll("job_manifest.schema.json", docs);
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i < good.size()) {
      EXPECT_EQ(results[i], "valid") << docs[i].dump();
    } else {
      EXPECT_EQ(results[i].rfind("invalid: ", 0), 0u) << docs[i].dump() << " -> " << results[i];
    }
  }
}

TEST_F(SchemaTest, ProofOfExecutionEnvelopeWithInputs) {
  nlohmann::json poe = SamplePoe();
  poe["inputs"] = {{{"index", 0}, {"url", "/srv/r"}, {"ref", "main"}, {"commit", std::string(40, 'a')}},
                   {{"index", 1}, {"url", "https://h/r"}, {"commit", std::string(64, 'b')}}};
  Result<Poe> parsed = ParsePoe(*CanonicalJson(poe));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->inputs.size(), 2u);
  nlohmann::json bad_commit = poe;
  bad_commit["inputs"][0]["commit"] = "main";
  nlohmann::json extra = poe;
  extra["inputs"][0]["secret"] = "x";
  std::vector<std::string> results = ValidateAll("proof_of_execution_envelope.schema.json", {poe, bad_commit, extra});
  EXPECT_EQ(results[0], "valid");
  EXPECT_EQ(results[1].rfind("invalid: ", 0), 0u) << results[1];
  EXPECT_EQ(results[2].rfind("invalid: ", 0), 0u) << results[2];
  EXPECT_FALSE(ParsePoe(*CanonicalJson(bad_commit)).ok());
  EXPECT_FALSE(ParsePoe(*CanonicalJson(extra)).ok());
}

TEST_F(SchemaTest, ProofOfExecutionEnvelope) {
  const nlohmann::json poe = SamplePoe();
  ASSERT_TRUE(CanonicalJson(poe).ok());
  // The code that writes and reads poe.json agrees with the schema.
  Result<Poe> parsed = ParsePoe(*CanonicalJson(poe));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  nlohmann::json killed = poe;
  killed["exit"] = {{"code", nullptr}, {"signal", 9}, {"timed_out", true}};
  killed["status"] = "timed-out";
  std::vector<nlohmann::json> docs = {poe, killed};

  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"extra", 1},
      {"status", "done"},
      {"job_id", "blake3:ABC"},
      {"worker_id", "ed25519:zz"},
      {"started_at", "2025-11-08 12:00:00"},
      {"lease_epoch", -1},
      {"exit", {{"code", 0}, {"timed_out", false}}},
  };
  for (const auto& [field, value] : bad) {
    nlohmann::json doc = poe;
    doc[field] = value;
    docs.push_back(doc);
  }
  nlohmann::json missing = poe;
  missing.erase("finished_at");
  docs.push_back(missing);

  std::vector<std::string> results = ValidateAll("proof_of_execution_envelope.schema.json", docs);
  EXPECT_EQ(results[0], "valid");
  EXPECT_EQ(results[1], "valid");
  for (size_t i = 2; i < docs.size(); ++i) {
    EXPECT_EQ(results[i].rfind("invalid: ", 0), 0u) << docs[i].dump() << " -> " << results[i];
  }
}

}  // namespace
}  // namespace gatos
