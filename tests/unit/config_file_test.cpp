// Service configuration files (config_file.h): YAML keys are flag names,
// the command line wins, and anything else is refused with the key named.
#include "gatos/sys/config_file.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gatos {
namespace {

const std::vector<FlagSpec> kSpecs = {{"ledger"}, {"nats"}, {"stream-replicas"}, {"no-fsync", 0, false},
                                      {"ro-bind", 0, true, true}, {"config"}};

using Args = std::vector<std::string>;

TEST(ConfigFileTest, KeysBecomeFlags) {
  auto a = ConfigArgs("ledger: /srv/ledger.git\nnats: nats://a:4222,nats://b:4222\nstream-replicas: 3\n"
                      "no-fsync: true\nro-bind: [/a, /b]\n",
                      "gatosd.yaml", kSpecs, {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Args{"--ledger", "/srv/ledger.git", "--nats", "nats://a:4222,nats://b:4222", "--stream-replicas",
                      "3", "--no-fsync", "--ro-bind", "/a", "--ro-bind", "/b"}));
  auto off = ConfigArgs("no-fsync: false\nro-bind: /one\n", "f", kSpecs, {});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, (Args{"--ro-bind", "/one"}));
  EXPECT_TRUE(ConfigArgs("", "f", kSpecs, {})->empty());
  EXPECT_TRUE(ConfigArgs("# only a comment\n", "f", kSpecs, {})->empty());
}

TEST(ConfigFileTest, CommandLineWins) {
  auto a = ConfigArgs("ledger: /x\nnats: nats://a:1\nro-bind: [/a]\n", "f", kSpecs,
                      {"--nats=nats://b:2", "--ro-bind", "/c"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Args{"--ledger", "/x"}));
}

TEST(ConfigFileTest, RefusesWhatIsNotASetting) {
  struct Case {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"bogus: 1\n", "'bogus' is not a setting here"},
      {"config: /etc/x\n", "'config' is not a setting"},
      {"- a\n- b\n", "must be a mapping"},
      {"just text\n", "must be a mapping"},
      {"ledger: [a, b]\n", "takes one value"},
      {"ledger: {a: 1}\n", "not a mapping"},
      {"ledger:\n", "expected one value"},
      {"ledger: ''\n", "empty value"},
      {"no-fsync: maybe\n", "true or false"},
      {"ledger: [\n", "not valid YAML"},
      {"ledger: a\nledger: b\n", "twice"},
  };
  for (const auto& c : cases) {
    auto a = ConfigArgs(c.yaml, "gatosd.yaml", kSpecs, {});
    ASSERT_FALSE(a.ok()) << c.yaml;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(a.status().message().find(c.says), std::string::npos) << c.yaml << ": " << a.status().message();
    EXPECT_NE(a.status().message().find("gatosd.yaml"), std::string::npos) << a.status().message();
  }
}

TEST(ConfigFileTest, WithConfigFileReadsTheNamedFile) {
  testing::TempDir dir;
  testing::WriteFile(dir.Join("w.yaml"), "nats: nats://a:4222\n");
  auto a = WithConfigFile({"--config", dir.Join("w.yaml"), "--ledger", "/l"}, kSpecs);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Args{"--config", dir.Join("w.yaml"), "--ledger", "/l", "--nats", "nats://a:4222"}));
  EXPECT_EQ(*WithConfigFile({"--ledger", "/l"}, kSpecs), (Args{"--ledger", "/l"}));
  auto missing = WithConfigFile({"--config=" + dir.Join("nope.yaml")}, kSpecs);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gatos
