// The one rule for the names a result tree may hold (gatos/model/result_path.h),
// with its exact reasons, and the ledger's check of a result's poe.json
// (ParsePoe, which CheckResultCommit applies for the ledger and the auditor)
// refusing each name with the same words. tests/worker/output_rules_test.cpp
// holds the worker's side of the same rule.
#include "gatos/model/result_path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/poe.h"
#include "sample_poe.h"

namespace gatos {
namespace {

constexpr char kComponent[] =
    "\" has an empty, '.', '..' or '.git' component, which a result tree may not hold";

struct Row {
  std::string path;
  std::string message;  // "" = accepted
};

std::string Refused(const std::string& shown, const char* why) {
  return "result file path \"" + shown + why;
}

const std::vector<Row>& Table() {
  static const std::vector<Row> rows = {
      {"stdout", ""},
      {"outputs/a/b.txt", ""},
      {"outputs/.gitignore", ""},
      {"outputs/.github/workflow.yml", ""},
      {"outputs/a.git/x", ""},
      {"outputs/..x", ""},
      {"outputs/...", ""},
      {"outputs/caf\xC3\xA9", ""},
      {".git", Refused(".git", kComponent)},
      {"outputs/.git", Refused("outputs/.git", kComponent)},
      {"outputs/.git/config", Refused("outputs/.git/config", kComponent)},
      {"outputs/a/.git/hooks/post-checkout",
       Refused("outputs/a/.git/hooks/post-checkout", kComponent)},
      {"outputs/./a", Refused("outputs/./a", kComponent)},
      {"outputs/../a", Refused("outputs/../a", kComponent)},
      {"outputs/a/..", Refused("outputs/a/..", kComponent)},
      {"..", Refused("..", kComponent)},
      {".", Refused(".", kComponent)},
      {"", Refused("", kComponent)},
      {"/etc/passwd", Refused("/etc/passwd", kComponent)},
      {"outputs//a", Refused("outputs//a", kComponent)},
      {"outputs/a/", Refused("outputs/a/", kComponent)},
      {"outputs/bad\xFFname", Refused("outputs/bad\xEF\xBF\xBDname", "\" is not valid UTF-8")},
      {"outputs/\xC0\xAF",
       Refused("outputs/\xEF\xBF\xBD\xEF\xBF\xBD", "\" is not valid UTF-8")},  // overlong '/'
      {"outputs/\xED\xA0\x80",
       Refused("outputs/\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", "\" is not valid UTF-8")},
      {std::string("outputs/a\0b", 11),
       Refused(std::string("outputs/a\0b", 11), "\" holds a NUL byte")},
  };
  return rows;
}

TEST(ResultPath, AcceptsAndRefusesEveryRowWithItsReason) {
  for (const Row& row : Table()) {
    Status s = CheckResultPath(row.path);
    if (row.message.empty()) {
      EXPECT_TRUE(s.ok()) << row.path << ": " << s.message();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << row.path;
      EXPECT_EQ(s.message(), row.message);
    }
  }
}

TEST(ResultPath, ALongPathIsQuotedInPart) {
  Status s = CheckResultPath("outputs/" + std::string(300, 'a') + "/.git");
  EXPECT_EQ(s.message(), "result file path \"outputs/" + std::string(192, 'a') + kComponent);
}

TEST(ResultPath, TheLedgersCheckOfPoeJsonRefusesTheSameNamesWithTheSameReason) {
  for (const Row& row : Table()) {
    // What a worker signs: SerializePoe applies the ledger's field checks.
    Result<std::string> signed_poe = SerializePoe(SamplePoeListing(row.path));
    if (row.message.empty()) {
      ASSERT_TRUE(signed_poe.ok()) << row.path << ": " << signed_poe.status().message();
      Result<Poe> parsed = ParsePoe(*signed_poe);
      EXPECT_TRUE(parsed.ok()) << row.path << ": " << parsed.status().message();
      continue;
    }
    EXPECT_EQ(signed_poe.status().code(), StatusCode::kInvalidArgument) << row.path;
    EXPECT_EQ(signed_poe.status().message(), "poe.json: outputs[0].path: " + row.message);
    // What the ledger reads of a result someone else built: the canonical
    // bytes of a poe.json listing the name. A name that is not UTF-8 cannot
    // be in a JSON document at all.
    Result<std::string> written = poe_internal::CanonicalPoe(SamplePoeListing(row.path));
    if (!IsValidUtf8(row.path)) {
      EXPECT_FALSE(written.ok()) << row.path;
      continue;
    }
    ASSERT_TRUE(written.ok()) << row.path << ": " << written.status().message();
    Result<Poe> parsed = ParsePoe(*written);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << row.path;
    EXPECT_EQ(parsed.status().message(), "poe.json: outputs[0].path: " + row.message);
  }
}

TEST(ResultPath, PoeJsonNeverListsItself) {
  Result<std::string> s = SerializePoe(SamplePoeListing("poe.json"));
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.status().message(),
      "poe.json: outputs[0].path: \"poe.json\" is not a relative file path of the result tree");
  EXPECT_TRUE(SerializePoe(SamplePoeListing("outputs/poe.json")).ok());
}

}  // namespace
}  // namespace gatos
