#include "gatos/sys/manifest_file.h"
#include "gatos/model/manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "gatos/model/canonical_json.h"
#include "test_util.h"

namespace gatos {
namespace {

// Substring check without gmock (the test targets link gtest only).
#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "in: " << (text)

constexpr char kAdrYaml[] =
    "command: [\"/usr/bin/env\", \"bash\", \"-lc\"]\n"
    "args: [\"echo\", \"hello\"]\n"
    "timeout: 30\n"
    "env: { GREETING: \"hello\" }\n";
constexpr char kAdrJobId[] =
    "blake3:298aaf4ca1e68cb951a3fae38e69dba73ce6a24d138f773601ff7d264e0d5fdc";
constexpr char kAdrCanonical[] =
    R"({"args":["echo","hello"],"command":["/usr/bin/env","bash","-lc"],)"
    R"("env":{"GREETING":"hello"},"timeout":30})";

Manifest MustParse(std::string_view text, std::string_view name = "job.yaml") {
  Result<Manifest> r = ParseManifest(text, name);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Manifest{};
}

// The InvalidArgument message for `text` (fails the test on any other code).
std::string ErrorOf(std::string_view text, std::string_view name = "job.yaml",
                    const ManifestLimits& limits = {}) {
  Result<Manifest> r = ParseManifest(text, name, ManifestFormat::kAuto, limits);
  EXPECT_FALSE(r.ok()) << "accepted: " << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

std::string WithBase(const std::string& extra) {
  return "command: [\"/bin/true\"]\ntimeout: 5\n" + extra;
}

TEST(ManifestTest, AdrExampleVector) {
  Manifest m = MustParse(kAdrYaml);
  EXPECT_EQ(m.command, (std::vector<std::string>{"/usr/bin/env", "bash", "-lc"}));
  EXPECT_EQ(m.args, (std::vector<std::string>{"echo", "hello"}));
  EXPECT_EQ(m.timeout_seconds, 30);
  ASSERT_TRUE(m.env.has_value());
  EXPECT_EQ(m.env->at("GREETING"), "hello");
  EXPECT_EQ(CanonicalManifest(m), kAdrCanonical);
  EXPECT_EQ(JobId(m), kAdrJobId);
  EXPECT_EQ(JobIdHex(m), std::string(kAdrJobId).substr(7));
  EXPECT_TRUE(IsJobIdHex(JobIdHex(m)));
}

TEST(ManifestTest, SameJobIdAcrossAuthoringStyles) {
  const char* variants[] = {
      // key order and comments
      "# a job\nenv: {GREETING: hello}  # greeting\ntimeout: 30\n"
      "args: [echo, hello]\ncommand: [/usr/bin/env, bash, -lc]\n",
      // block style
      "command:\n  - /usr/bin/env\n  - bash\n  - -lc\nargs:\n  - echo\n  - 'hello'\n"
      "timeout: 30\nenv:\n  GREETING: hello\n",
      // ISO duration instead of seconds
      "command: [/usr/bin/env, bash, -lc]\nargs: [echo, hello]\ntimeout: \"PT30S\"\n"
      "env: {GREETING: hello}\n",
      // ulid is not hashed
      "ulid: 01ARZ3NDEKTSV4RRFFQ69G5FAV\ncommand: [/usr/bin/env, bash, -lc]\n"
      "args: [echo, hello]\ntimeout: 30\nenv: {GREETING: hello}\n",
      // explicit document markers
      "---\ncommand: [/usr/bin/env, bash, -lc]\nargs: [echo, hello]\ntimeout: 30\n"
      "env: {GREETING: hello}\n...\n",
  };
  for (const char* v : variants) {
    EXPECT_EQ(JobId(MustParse(v)), kAdrJobId) << v;
  }
  const std::string json =
      R"({"timeout": 30, "env": {"GREETING": "hello"}, "args": ["echo", "hello"],
          "command": ["/usr/bin/env", "bash", "-lc"]})";
  EXPECT_EQ(JobId(MustParse(json, "job.json")), kAdrJobId);
  Result<Manifest> forced = ParseManifest(json, "stdin", ManifestFormat::kJson);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(JobId(*forced), kAdrJobId);
}

TEST(ManifestTest, ArgsOmittedEqualsEmptyAndIsAlwaysCanonical) {
  Manifest a = MustParse("command: [/bin/true]\ntimeout: 0\n");
  Manifest b = MustParse("command: [/bin/true]\nargs: []\ntimeout: 0\n");
  EXPECT_EQ(CanonicalManifest(a), R"({"args":[],"command":["/bin/true"],"timeout":0})");
  EXPECT_EQ(JobId(a), JobId(b));
  EXPECT_EQ(ManifestCoreJson(a).count("args"), 1u);
}

TEST(ManifestTest, UlidRecordedButNotHashed) {
  Manifest m = MustParse(WithBase("ulid: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n"));
  ASSERT_TRUE(m.ulid.has_value());
  EXPECT_EQ(*m.ulid, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(ManifestCoreJson(m).count("ulid"), 0u);
  EXPECT_EQ(ManifestJson(m)["ulid"], "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(JobId(m), JobId(MustParse(WithBase(""))));
}

TEST(ManifestTest, PlainScalarsInStringPositionsStayStrings) {
  Manifest m = MustParse(
      "command: [/bin/echo]\nargs: [1, true, 0x1F, 1.5, null-ish, '~', yes]\ntimeout: 1\n"
      "env: {A: true, B: 007, C: 1e3}\ncwd: 123\n");
  EXPECT_EQ(m.args, (std::vector<std::string>{"1", "true", "0x1F", "1.5", "null-ish", "~", "yes"}));
  EXPECT_EQ(m.env->at("A"), "true");
  EXPECT_EQ(m.env->at("B"), "007");
  EXPECT_EQ(m.env->at("C"), "1e3");
  EXPECT_EQ(*m.cwd, "123");
  EXPECT_EQ(CanonicalManifest(m).find("\"args\":[\"1\",\"true\""), 1u);
}

TEST(ManifestTest, NullWhereAStringIsRequired) {
  std::string e = ErrorOf("command: [/bin/echo, ~]\ntimeout: 1\nenv: {A: }\n");
  EXPECT_HAS(e, "job.yaml:1:22: command[1]: is null; expected a string");
  EXPECT_HAS(e, "job.yaml:3:10: env.A: is null; expected a string");
}

TEST(ManifestTest, TimeoutForms) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 0},        {"\"PT90S\"", 90},      {"\"P2W\"", 1209600},
      {"'PT2M'", 120}, {"\"PT1H1M1S\"", 3661}, {"\"P1D\"", 86400},
      {"PT30S", 30},   {"31536000", 31536000}, {"\"P1DT2H\"", 93600},
  };
  for (const auto& [text, seconds] : cases) {
    std::string doc = "command: [x]\ntimeout: " + std::string(text) + "\n";
    EXPECT_EQ(MustParse(doc).timeout_seconds, seconds) << text;
  }
}

TEST(ManifestTest, TimeoutRejections) {
  const std::pair<const char*, const char*> cases[] = {
      {"-5", "job.yaml:2:10: timeout: -5 is negative; expected seconds >= 0"},
      {"1.5", "timeout: 1.5 is not a whole number; floats are not allowed"},
      {"\"P1Y\"", "timeout: \"P1Y\" uses years, which have no fixed length in seconds"},
      {"\"P1M\"", "timeout: \"P1M\" uses months, which have no fixed length in seconds"},
      {"\"PT1.5S\"",
       "job.yaml:2:10: timeout: \"PT1.5S\" has fractional seconds; use whole seconds"},
      {"\"PT1,5S\"", "has fractional seconds"},
      {"\"P1.5D\"", "has a fractional value; use whole units"},
      {"\"30\"", "timeout: \"30\" is quoted; write 30 without quotes"},
      {"\"P\"", "is not an ISO-8601 duration"},
      {"\"P1DT\"", "is not an ISO-8601 duration"},
      {"\"PT1S2M\"", "is not an ISO-8601 duration"},
      {"\"pt1s\"", "is not an ISO-8601 duration"},
      {"\"-PT1S\"", "is negative"},
      {"0x10", "is not a decimal integer"},
      {"+5", "is not a decimal integer"},
      {"010", "has a leading zero"},
      {"~", "timeout: is null; expected integer seconds"},
      {"[1]", "timeout: is a list; expected integer seconds"},
      {"31536001", "exceeds the maximum of 31536000 seconds (max_timeout_seconds)"},
      {"99999999999999999999999", "exceeds the maximum"},
      {"\"P99999999999999999999999W\"", "exceeds the maximum"},
  };
  for (const auto& [text, want] : cases) {
    EXPECT_HAS(ErrorOf("command: [x]\ntimeout: " + std::string(text) + "\n"), want);
  }
}

TEST(ManifestTest, IsoDurationParser) {
  EXPECT_EQ(*ParseIsoDuration("P1W2DT3H4M5S", 1 << 30), 604800 + 2 * 86400 + 3 * 3600 + 245);
  EXPECT_EQ(ParseIsoDuration("PT61S", 60).status().code(), StatusCode::kInvalidArgument);
}

TEST(ManifestTest, UnknownAndMissingFields) {
  std::string e = ErrorOf("command: [x]\ntimeout: 1\ncomand: [y]\n");
  EXPECT_HAS(e, "job.yaml:3:1: comand: unknown field; expected one of command, args, timeout");
  e = ErrorOf("timeout: 1\nargs: [a]\n");
  EXPECT_HAS(e, "job.yaml:1:1: command: missing; expected a non-empty list of strings");
  e = ErrorOf("command: [x]\n");
  EXPECT_HAS(e, "timeout: missing");
  e = ErrorOf("- a\n- b\n");
  EXPECT_HAS(e, "job.yaml:1:1: manifest: is a list; expected a mapping of fields");
  e = ErrorOf("");
  EXPECT_HAS(e, "job.yaml:1:1: manifest: document is empty");
}

TEST(ManifestTest, CommandRules) {
  EXPECT_HAS(ErrorOf("command: []\ntimeout: 1\n"), "job.yaml:1:10: command: is an empty list");
  EXPECT_HAS(ErrorOf("command: [\"\"]\ntimeout: 1\n"), "command[0]: is an empty string");
  EXPECT_HAS(ErrorOf("command: /bin/true\ntimeout: 1\n"),
             "command: is a string; expected a list of strings");
  EXPECT_HAS(ErrorOf("command: [[a]]\ntimeout: 1\n"), "command[0]: is a list; expected a string");
}

TEST(ManifestTest, CollectsAllProblemsOnePerLine) {
  std::string e = ErrorOf(
      "command: []\ntimeout: \"PT1.5S\"\nenv: {1BAD: x}\ncwd: /abs\nextra: 1\n"
      "policy_root: sha256:ABC\nulid: nope\n");
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 6) << e;
  EXPECT_HAS(e, "job.yaml:1:10: command: is an empty list");
  EXPECT_HAS(e, "job.yaml:2:10: timeout: \"PT1.5S\" has fractional seconds; use whole seconds");
  EXPECT_HAS(e, "job.yaml:3:7: env.1BAD: \"1BAD\" is not a valid environment variable name");
  EXPECT_HAS(e, "job.yaml:4:6: cwd: \"/abs\" is absolute");
  EXPECT_HAS(e, "job.yaml:5:1: extra: unknown field");
  EXPECT_HAS(e, "job.yaml:6:14: policy_root: \"sha256:ABC\" is not a policy digest");
  EXPECT_HAS(e, "job.yaml:7:7: ulid: \"nope\" is not a ULID");
}

TEST(ManifestTest, EnvRules) {
  EXPECT_HAS(ErrorOf(WithBase("env: {\"A-B\": x}\n")), "env.A-B: \"A-B\" is not a valid");
  EXPECT_HAS(ErrorOf(WithBase("env: {A: x, A: y}\n")), "job.yaml:3:13: env.A: duplicate key 'A'");
  EXPECT_HAS(ErrorOf(WithBase("env: [A]\n")), "env: is a list; expected a mapping");
  EXPECT_HAS(ErrorOf(WithBase("env: {A: [x]}\n")), "env.A: is a list; expected a string");
  // The worker's own variables (inputs, output and state directories).
  EXPECT_HAS(ErrorOf(WithBase("env: {GATOS_INPUT_7: /gatos/inputs/0}\n")),
             "env.GATOS_INPUT_7: \"GATOS_INPUT_7\" is reserved for the worker");
  EXPECT_HAS(ErrorOf(WithBase("env: {Gatos_State_Dir: /x}\n")), "is reserved for the worker");
  EXPECT_TRUE(ParseManifest(WithBase("env: {GATOSX: a, MY_GATOS_X: b}\n"), "job.yaml").ok());
  Manifest m = MustParse(WithBase("env: {_x9: \"\", PATH: /bin}\n"));
  EXPECT_EQ(m.env->size(), 2u);
  EXPECT_EQ(m.env->at("_x9"), "");
}

TEST(ManifestTest, CwdRules) {
  EXPECT_EQ(*MustParse(WithBase("cwd: build/out\n")).cwd, "build/out");
  EXPECT_HAS(ErrorOf(WithBase("cwd: /tmp\n")), "cwd: \"/tmp\" is absolute");
  EXPECT_HAS(ErrorOf(WithBase("cwd: a/../../etc\n")), "cwd: \"a/../../etc\" has a '..' component");
  EXPECT_HAS(ErrorOf(WithBase("cwd: ..\n")), "has a '..' component");
  EXPECT_HAS(ErrorOf(WithBase("cwd: a//b\n")), "is not a clean relative path");
  EXPECT_HAS(ErrorOf(WithBase("cwd: ./a\n")), "is not a clean relative path");
  EXPECT_HAS(ErrorOf(WithBase("cwd: \"\"\n")), "cwd: is empty");
}

TEST(ManifestTest, PolicyRootAndUlid) {
  const std::string digest(64, 'a');
  EXPECT_EQ(*MustParse(WithBase("policy_root: sha256:" + digest + "\n")).policy_root,
            "sha256:" + digest);
  EXPECT_HAS(ErrorOf(WithBase("policy_root: sha256:" + std::string(64, 'A') + "\n")),
             "is not a policy digest; expected \"sha256:\" followed by 64 lowercase hex");
  EXPECT_HAS(ErrorOf(WithBase("policy_root: blake3:" + digest + "\n")), "is not a policy digest");
  EXPECT_HAS(ErrorOf(WithBase("ulid: 01ARZ3NDEKTSV4RRFFQ69G5FAU\n")), "is not a ULID");  // U
  EXPECT_HAS(ErrorOf(WithBase("ulid: 81ARZ3NDEKTSV4RRFFQ69G5FAV\n")), "is not a ULID");  // > 7
  EXPECT_HAS(ErrorOf(WithBase("ulid: 01arz3ndektsv4rrffq69g5fav\n")), "is not a ULID");
}

TEST(ManifestTest, InputsAreTypedByYamlCoreRules) {
  Manifest m = MustParse(
      WithBase("inputs:\n"
               "  - {kind: blobptr, algo: blake3, hash: \"ab\", size: 123, exec: true, note: ~,\n"
               "     quoted: \"123\", neg: -7, empty: , tags: [a, 1], yes: yes}\n"));
  ASSERT_TRUE(m.inputs.has_value());
  const nlohmann::json& in = (*m.inputs)[0];
  EXPECT_EQ(in["size"], 123);
  EXPECT_TRUE(in["size"].is_number_integer());
  EXPECT_EQ(in["exec"], true);
  EXPECT_TRUE(in["note"].is_null());
  EXPECT_TRUE(in["empty"].is_null());
  EXPECT_EQ(in["quoted"], "123");
  EXPECT_EQ(in["neg"], -7);
  EXPECT_EQ(in["tags"], nlohmann::json::array({"a", 1}));
  EXPECT_EQ(in["yes"], "yes");  // YAML 1.2: not a boolean
  EXPECT_HAS(CanonicalManifest(m), R"("inputs":[{"algo":"blake3","empty":null,"exec":true,)");
}

TEST(ManifestTest, InputsRejections) {
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{size: 1.5}]\n")),
             "job.yaml:3:17: inputs[0].size: 1.5 is a float; floats are not allowed");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{a: [.inf]}]\n")), "inputs[0].a[0]: .inf is a float");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{a: 1e3}]\n")), "1e3 is a float");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{a: 9007199254740992}]\n")),
             "inputs[0].a: 9007199254740992 is outside +-(2^53-1)");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{a: 0x1F}]\n")), "is a hexadecimal or octal number");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [{a: 012}]\n")), "has a leading zero");
  EXPECT_HAS(ErrorOf(WithBase("inputs: [x]\n")), "inputs[0]: is a string; expected an object");
  EXPECT_HAS(ErrorOf(WithBase("inputs: {a: 1}\n")), "inputs: is a mapping; expected a list");
  EXPECT_HAS(ErrorOf(R"({"command":["x"],"timeout":1,"inputs":[{"size":1.0}]})", "j.json"),
             "j.json:1:48: inputs[0].size: 1.0 is a float");
}

TEST(ManifestTest, JsonTyping) {
  std::string e = ErrorOf(R"({"command": ["x", 1], "args": [true], "timeout": 30})", "job.json");
  EXPECT_HAS(e, "job.json:1:19: command[1]: is a number (1); expected a string (put it in quotes)");
  EXPECT_HAS(e, "args[0]: is a boolean (true); expected a string");
  EXPECT_HAS(ErrorOf(R"({"command": ["x"], "timeout": "30"})", "job.json"), "is quoted");
  EXPECT_HAS(ErrorOf(R"({"command": ["x"], "timeout": 1.0})", "job.json"),
             "timeout: 1.0 is not a whole number");
  EXPECT_HAS(ErrorOf(R"({"command": ["x"], "timeout": -1})", "job.json"), "-1 is negative");
  EXPECT_HAS(ErrorOf(R"({"command": ["x"], "timeout": 1, "timeout": 2})", "job.json"),
             "duplicate key 'timeout'");
  EXPECT_HAS(ErrorOf(R"({"command": ["x"], "timeout": 1,})", "job.json"),
             "job.json:1:33: manifest: invalid JSON");
  // JSON escapes, including a surrogate pair, decode to the same strings.
  Manifest m = MustParse(
      R"({"command":["\u0041\/\ud83d\ude00\t"],"timeout":"PT1M","inputs":[{"n":-0}]})", "job.json");
  EXPECT_EQ(m.command[0], "A/\xf0\x9f\x98\x80\t");
  EXPECT_EQ(m.timeout_seconds, 60);
  EXPECT_EQ((*m.inputs)[0]["n"], 0);
  EXPECT_HAS(ErrorOf(R"({"command":["a\u0000b"],"timeout":1})", "job.json"), "NUL byte");
}

TEST(ManifestTest, EncodingRejections) {
  EXPECT_HAS(ErrorOf("command: [\"caf\xe9\"]\ntimeout: 1\n"),
             "job.yaml:1:15: manifest: is not valid UTF-8 (bad byte at offset 14)");
  EXPECT_HAS(ErrorOf(std::string("command: [\"a\0b\"]\ntimeout: 1\n", 29)),
             "job.yaml:1:13: manifest: contains a NUL byte");
  EXPECT_HAS(ErrorOf("command: [\"a\\0b\"]\ntimeout: 1\n"),
             "job.yaml:1:11: command[0]: string contains a NUL byte");
  EXPECT_HAS(ErrorOf("\xff\xfe"
                     "c\0o\0"),
             "not valid UTF-8");  // UTF-16 BOM
}

TEST(ManifestTest, YamlStructureRejections) {
  EXPECT_HAS(ErrorOf("command: [x]\ntimeout: 1\ncommand: [y]\n"),
             "job.yaml:3:1: command: duplicate key 'command'; each key may appear only once");
  EXPECT_HAS(ErrorOf("command: [x]\ntimeout: 1\n---\ncommand: [y]\ntimeout: 1\n"),
             "job.yaml:3:1: manifest: a second YAML document starts here");
  EXPECT_HAS(ErrorOf("base: &b {A: x}\nenv:\n  <<: *b\ncommand: [x]\ntimeout: 1\n"),
             "job.yaml:3:3: env: merge keys ('<<') are not supported");
  EXPECT_HAS(ErrorOf("command: !!str [x]\ntimeout: 1\n"), "explicit tag");
  EXPECT_HAS(ErrorOf("command: [x\ntimeout: 1\n"), "syntax error");
  EXPECT_HAS(ErrorOf("command: &a [*a]\ntimeout: 1\n"), "alias");
  EXPECT_HAS(ErrorOf("? [a]\n: b\n"), "mapping key is a collection");
}

// Every accepted manifest's canonical form parses back to the same job
// (fuzzing found a key of control characters that YAML took as raw bytes
// but could not read back once escaped: 6 bytes each). A key is at most
// 1,024 bytes as a JSON string, quotes included: YAML's longest key.
TEST(ManifestTest, KeysAreBoundedByTheirCanonicalJsonSize) {
  const std::string controls = "k" + std::string(200, '\x1e');  // 1 + 200 * 6 + 2 bytes as JSON
  EXPECT_HAS(ErrorOf(WithBase("inputs:\n  - {" + controls + ": git}\n")),
             "mapping key takes 1203 bytes as a JSON string, more than 1024");
  const std::string backslashes(520, '\\');  // 520 * 2 + 2 bytes as JSON
  EXPECT_HAS(ErrorOf(WithBase("inputs:\n  - {k" + backslashes + ": v}\n")),
             "mapping key takes 1043 bytes as a JSON string, more than 1024");
  // At the bound: accepted, and the canonical form reads back as the same job.
  for (const std::string& key : {"k" + std::string(510, '\\'), std::string(1022, 'k')}) {
    Manifest m = MustParse(WithBase("inputs:\n  - {" + key + ": v}\n"));
    Result<Manifest> again = ParseManifest(CanonicalManifest(m), "canonical.json", ManifestFormat::kJson);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(JobIdHex(*again), JobIdHex(m));
  }
}

TEST(ManifestTest, AliasesWithinBudgetAreExpanded) {
  Manifest m = MustParse("command: &c [/bin/sh, -c]\nargs: *c\ntimeout: 1\n");
  EXPECT_EQ(m.args, m.command);
}

TEST(ManifestTest, AliasBombIsRefusedByNodeBudget) {
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  bomb += "command: [x]\ntimeout: 1\n";
  std::string e = ErrorOf(bomb);
  EXPECT_HAS(e, "nodes after alias expansion (max_nodes)");
  EXPECT_HAS(e, "more than 10000");
}

TEST(ManifestTest, AliasOfLargeStringIsRefusedByByteBudget) {
  std::string doc = "s: &s \"" + std::string(60000, 'x') + "\"\nl: [";
  for (int i = 0; i < 40; ++i) doc += "*s, ";
  doc += "*s]\n";
  EXPECT_HAS(ErrorOf(doc), "bytes of strings after alias expansion (max_bytes)");
}

TEST(ManifestTest, DeepNestingIsRefused) {
  std::string doc = "command: [x]\ntimeout: 1\ninputs: [{a: ";
  for (int i = 0; i < 100000; ++i) doc += "[";
  EXPECT_HAS(ErrorOf(doc), "nesting deeper than 32 levels (max_depth)");
  std::string json = R"({"command":["x"],"timeout":1,"inputs":[{"a":)" + std::string(100000, '[') +
                     std::string(100000, ']') + "}]}";
  EXPECT_HAS(ErrorOf(json, "job.json"), "nesting deeper than 32 levels (max_depth)");
}

TEST(ManifestTest, SizeLimits) {
  ManifestLimits limits;
  limits.max_bytes = 64;
  EXPECT_HAS(ErrorOf(WithBase("args: [" + std::string(100, 'a') + "]\n"), "job.yaml", limits),
             "job.yaml:1:1: manifest: is 143 bytes, over the limit of 64 bytes (max_bytes)");
  limits = ManifestLimits();
  limits.max_string_bytes = 10;
  EXPECT_HAS(ErrorOf(WithBase("args: [12345678901]\n"), "job.yaml", limits),
             "job.yaml:3:8: args[0]: string of 11 bytes exceeds the limit of 10 bytes");
  limits = ManifestLimits();
  limits.max_nodes = 5;
  EXPECT_HAS(ErrorOf(WithBase("args: [a, b, c]\n"), "job.yaml", limits), "(max_nodes)");
}

TEST(ManifestTest, LoadManifestFile) {
  testing::TempDir dir;
  testing::WriteFile(dir.Join("job.yaml"), kAdrYaml);
  Result<Manifest> m = LoadManifestFile(dir.Join("job.yaml"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(JobId(*m), kAdrJobId);

  testing::WriteFile(dir.Join("job.json"), R"({"command":["x"],"timeout":"x"})");
  Result<Manifest> bad = LoadManifestFile(dir.Join("job.json"));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(bad.status().message(), dir.Join("job.json") + ":1:28: timeout:");

  EXPECT_EQ(LoadManifestFile(dir.Join("missing.yaml")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadManifestFile(dir.path()).status().code(), StatusCode::kInvalidArgument);

  // A sparse 100 MB file: refused from its size alone, without reading it.
  const std::string big = dir.Join("big.yaml");
  testing::WriteFile(big, "");
  ASSERT_EQ(truncate(big.c_str(), 100 << 20), 0);
  Result<Manifest> huge = LoadManifestFile(big);
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(huge.status().message(), "is 104857600 bytes, over the limit of 1048576 bytes");
}

TEST(ManifestTest, ValidateManifestInCode) {
  Manifest m;
  m.command = {"/bin/true"};
  m.timeout_seconds = 10;
  EXPECT_TRUE(ValidateManifest(m).ok());
  m.inputs = nlohmann::json::array({{{"size", 1.5}}});
  m.cwd = "../x";
  m.env = std::map<std::string, std::string>{{"BAD NAME", "v"}};
  m.timeout_seconds = -1;
  Status s = ValidateManifest(m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(s.message(), "inputs: $[0].size: floating-point");
  EXPECT_HAS(s.message(), "cwd: \"../x\" has a '..' component");
  EXPECT_HAS(s.message(), "env.BAD NAME:");
  EXPECT_HAS(s.message(), "timeout: -1 is negative");
  EXPECT_EQ(CanonicalManifest(m), "");
}

}  // namespace
}  // namespace gatos
